/* graph_build: the op-graph builder's internals, shared by the files that build a graph's blocks
 * (graph.c: the builder, the products, the transformer layer, the heads and the optimizer; graph_moe.c:
 * the mixture of experts; graph_mla.c: multi-head latent attention). Not a public header: only graph*.c
 * include it, and its functions carry the gb_ prefix.
 *
 * Contract: the builder adds ops and parameters to b->g (with b->params_only, parameters only); once
 * b->failed is set (out of memory, the error in b->err) gb_add_op returns NULL, the functions built on it
 * add nothing and those returning an op return NULL, which gb_special passes through. Ids are written with
 * gb_id_printf (empty when et_graph_set_ids(false)). */
#ifndef ET_GRAPH_BUILD_H
#define ET_GRAPH_BUILD_H

#include <stddef.h>

#include "graph.h"

/* Shorthands for linear forms in the batch letters (see graph.h). */
#define FIX(x) ((et_linear){.fixed = (x)})
#define TOK(x) ((et_linear){.per_token = (x)})
#define SEQ(x) ((et_linear){.per_sequence = (x)})
#define PRED(x) ((et_linear){.per_prediction = (x)})
#define SQ(x) ((et_linear){.per_token_sq = (x)})

static inline et_linear lin_scale(et_linear a, double s)
{
    return (et_linear){a.fixed * s, a.per_sequence * s, a.per_token * s, a.per_token_sq * s,
                       a.per_prediction * s};
}

static inline int lin_is_fixed(et_linear a)
{
    return !a.per_sequence && !a.per_token && !a.per_token_sq && !a.per_prediction;
}

/* Product of two dimensions of which at most one depends on the batch. */
static inline et_linear lin_mul(et_linear a, et_linear b)
{
    return lin_is_fixed(a) ? lin_scale(b, a.fixed) : lin_scale(a, b.fixed);
}

static inline et_linear lin_add(et_linear a, et_linear b)
{
    return (et_linear){a.fixed + b.fixed, a.per_sequence + b.per_sequence, a.per_token + b.per_token,
                       a.per_token_sq + b.per_token_sq, a.per_prediction + b.per_prediction};
}

/* Builder state: the graph plus the error slot and the element size e. */
typedef struct builder {
    et_graph *g;
    et_error *err;
    double e; /* bytes per activation/weight element */
    int failed;
    const et_method *method; /* never NULL inside the builder */
    double tokens;           /* tokens per micro-batch the TT orders are chosen for */
    int tt_rank;
    int t;               /* tensor-parallel degree */
    int x;               /* expert-parallel degree */
    double quant_bytes;  /* fp8 and fp4 products: bytes to quantize an operand's element (0: none) */
    int unquantized;     /* the products added now stay in 16 bits (the output layer, the router) */
    int quant_kernels;   /* and the kernels that do it */
    int expert_launches; /* the experts' grouped products: one launch per local expert */
    int bias_kernels;    /* software.bias_kernels (et_bias_kernels): 0 fused, else every bias gradient a
                            column-sum kernel of its own; forward adds: gb_bias_forward */
    /* parameters only (et_graph_params): ops are written into `scratch`, not kept */
    int params_only;
    int lora;    /* method LoRA: the model's parameters frozen, adapters beside its targets */
    int adapter; /* the parameter being added is an adapter's (trainable under LoRA) */
    et_op *last; /* the op added last: the one a parameter added after it belongs to */
    et_op scratch;
} builder;

/* The dimensions a graph's blocks are built from (letters of graph.h), per rank. */
typedef struct dims {
    double H, A, D, F, V, t, Ht, Ft, At, e;
    int flash;         /* attention as one fused kernel */
    double flash_rate; /* its share of the profile's fused-attention rate (software.attention_kernel) */
    int unpad;         /* gather and scatter copies around it (software.attention_unpad) */
    int cudnn;         /* it is cuDNN's (software.attention_kernel) */
    int tp_async;      /* backward tensor-parallel collectives beside their products (software.tp_comm) */
    int residual; /* residual adds and backward sums as kernels of their own (software.residual_kernels) */
    double KVt;   /* key/value width per tensor rank: kv_heads x D / t (grouped-query attention); under MLA
                     the mean of a key's and a value's (Qt + Vt) / 2 */
    double Qt;    /* query (and key) width per tensor rank: heads x D / t, Ht unless head_dim is set; under
                     multi-head latent attention heads x (D + R) / t */
    double Vt;    /* value (and context) width per tensor rank: Qt, or heads x Dv / t under MLA */
    /* multi-head latent attention: latents of the queries Lq (0: none) and of the keys and values Lkv, the
     * rotary key R shared by the heads, the no-position part of a head D and its value Dv */
    int mla;
    double Lq, Lkv, R, Dv;
    double Fst;     /* shared experts' hidden width per tensor rank (0: none) */
    int early_stop; /* full recomputation stops after the MLP's activation (software.recompute_early_stop) */
    unsigned rm;    /* selective recomputation's modules (schedule.h), 0 unless recompute is "selective" */
    int qk_norm;    /* RMSNorm of each head's query and key */
    int sinks;      /* a learned sink logit per head (its parameter; its arithmetic is the softmax's) */
    int bias;       /* linear layers carry biases */
    int swiglu;     /* gated MLP: gate and up in one product of 2 Ft outputs, SiLU(gate) x up */
    int rms;        /* RMSNorm: a weight, no bias */
    int rope;       /* rotary positions: q and k rotated after their projection, no position table */
    int alibi; /* ALiBi: a per-head bias on the scores (materialised scores: through the score product) */
    double
        causal_share; /* of the l x l products a fused causal kernel computes: 1/2 (decoder, flash), else 1 */
    double St;        /* token share of the sequence-parallel region (layer norms, dropouts): 1/t or 1 */
    int causal;       /* a decoder's causal attention: row i of a sequence's scores has i + 1 live values */
    /* mixture of experts: E experts, k per token, rows per token after routing k x c (c the capacity factor,
     * 1 dropless), experts on this rank El = E / x, each expert's hidden width per expert tensor rank Fet;
     * Mt the token share of the routed part (1, or St when the experts are folded over the tensor ranks:
     * each rank routes its sequence-parallel tokens, its experts whole) */
    double E, k, kc, El, Fet, Mt;
    bool sort_chunks; /* the dispatcher copies received rows into local-expert order and back */
    int folded;
    double dropout; /* dropout probability (0: no dropout kernels) */
    int sp;         /* sequence parallelism */
} dims;

/* Ops and parameters (graph.c). */
et_op *gb_elementwise(builder *b, et_phase phase, int layer, et_linear flops, et_linear bytes,
                      const char *id);
void gb_weight_forward(builder *b, et_phase phase, int layer, et_layer_group group, et_linear rows,
                       double n_in, double n_out, int copies, const char *id);
void gb_weight_backward(builder *b, int layer, et_layer_group group, et_linear rows, double n_in,
                        double n_out, int copies, const char *name, int bias, int weight_grad);
void gb_id_printf(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
et_op *gb_activation(builder *b, const dims *d, et_phase phase, int layer, double width, int backward,
                     const char *id);
void gb_copies(builder *b, et_phase phase, int layer, et_linear bytes, int kernels, const char *id);
/* A product's forward bias add as a pass of its own (read and write its output) when the stack runs it
 * apart: the q, k, v product's (`qkv`) under `megatron` and `eager`, the others' under `eager`; not called
 * for the product feeding a fused bias-activation, whose add is that kernel's. */
void gb_bias_forward(builder *b, et_phase phase, int layer, et_linear rows, double n_out, int qkv,
                     const char *id);
void gb_add_grad(builder *b, int layer, double count, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
et_op *gb_add_op(builder *b, et_op_kind kind, et_phase phase, int layer, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
et_op *gb_special(et_op *op, et_linear evaluations);
void gb_plain_forward(builder *b, et_phase phase, int layer, et_layer_group group, et_linear rows,
                      double n_in, double n_out, const char *id);
void gb_plain_backward(builder *b, int layer, et_layer_group group, et_linear rows, double n_in, double n_out,
                       const char *name, int bias, int weight_grad);
void gb_mark_quantized(builder *b);
void gb_fp8_cast(const builder *b, et_op *op, et_linear rows, double n_in);
void gb_add_param(builder *b, int layer, double count, double dense, double grad_elems, double meta,
                  const char *name);

/* Blocks built in files of their own. */
void gb_moe_forward(builder *b, const dims *d, int i, et_phase phase, const char *suffix);
void gb_moe_backward(builder *b, const dims *d, int i);
int gb_mlp_tp_boundary(const builder *b, const dims *d, int i);
void gb_mla_forward(builder *b, const dims *d, int i, et_phase phase, const char *suffix);
void gb_mla_backward(builder *b, const dims *d, int i);

#endif

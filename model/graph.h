/* graph: the op graph of one training step on one GPU, the single source of truth for shapes, FLOPs,
 * bytes moved and the order in which parameter gradients become final.
 *
 * Shape letters (defined once, used in every formula of graph.c and docs/cost-model.md):
 *   B  sequences in the micro-batch        T  tokens (sum of lengths; B*S when padded)
 *   Q  sum of squared lengths (attention)  P  positions scored by the loss (masked or all tokens)
 *   H  hidden   A  heads   D = H/A  head dim   F  ffn   V  vocab   L  layers   t  tensor-parallel degree
 *   E  experts of an MoE layer   k  experts per token (top-k)   c  capacity factor (1 when dropless)
 *   Fe expert hidden width   x  expert-parallel degree   cp  context-parallel degree (shapes are per rank)
 * Every op's FLOPs and bytes are linear in (B, T, Q, P), so one graph serves every rank's batch: the cost
 * of an op for a batch is et_linear_eval(&op->flops, &shape). Ops carry stable ids such as
 * `layer.3.attn.qkv.bwd_weight`; the runtime times ops under the same ids.
 *
 * Parameters are listed in the order backward finalises their gradients; op->grad_first/grad_count name
 * the parameters whose gradients are complete when that op ends (gradient buckets are cut from this).
 * The graph owns its arrays; release with et_graph_free(). Errors: out of memory only. */
#ifndef ET_GRAPH_H
#define ET_GRAPH_H

#include <stdbool.h>

#include "batch_shape.h"
#include "device_profile.h"
#include "et_error.h"
#include "method.h"
#include "model_config.h"
#include "op_scales.h"
#include "optimizer.h"
#include "quantization.h"
#include "schedule.h"

typedef enum {
    ET_OP_GEMM,         /* dense matrix product M x N x K */
    ET_OP_ATTENTION,    /* per-sequence batched products (scores, context): l x l x D per head */
    ET_OP_ELEMENTWISE,  /* memory-bound: layer norm, GELU, softmax, residual, gather */
    ET_OP_EMBEDDING,    /* table lookups and their scatter-add backward */
    ET_OP_LOSS,         /* softmax cross-entropy over the vocabulary */
    ET_OP_OPTIMIZER,    /* per-parameter update kernels (fp32 math) */
    ET_OP_TP_ALLREDUCE, /* tensor-parallel activation all-reduce (bytes = message size) */
    ET_OP_TT,           /* tensor-train contraction sequence (m, n, k: its most expensive step) */
    ET_OP_TP_ALLGATHER, /* sequence parallelism: all-gather of the T/t-token shards (bytes = gathered size) */
    ET_OP_TP_REDUCE_SCATTER, /* sequence parallelism: reduce-scatter to T/t tokens (bytes = input size) */
    ET_OP_CP_RING,     /* context parallelism: one step of ring attention's key/value exchange with the ring's
                          neighbours (bytes = one chunk's keys and values, or with their gradients in backward);
                          context - 1 steps, each overlapped with a chunk's attention */
    ET_OP_EP_ALLTOALL, /* mixture of experts: the tokens' all-to-all over the expert-parallel group (bytes =
                          this rank's send buffer, its own share included) */
} et_op_kind;
extern const char *const et_op_kind_names[];

/* True for the collectives that block compute: tensor-parallel all-reduce, all-gather and reduce-scatter,
 * ring attention's exchange and the experts' all-to-all: communication, costed by the collectives model,
 * 0 s of compute. */
bool et_op_is_comm(et_op_kind kind);

typedef enum { ET_PHASE_FORWARD, ET_PHASE_BACKWARD, ET_PHASE_OPTIMIZER } et_phase;
extern const char *const et_phase_names[];

/* value = fixed + per_sequence*B + per_token*T + per_token_sq*Q + per_prediction*P */
typedef struct et_linear {
    double fixed, per_sequence, per_token, per_token_sq, per_prediction;
} et_linear;

typedef struct et_op {
    char id[80];
    et_op_kind kind;
    et_phase phase;
    int layer;         /* transformer layer index, -1 for embeddings, head and optimizer */
    et_linear m, n, k; /* GEMM dimensions; ATTENTION uses k = D (m, n = rms sequence length) */
    et_linear flops;
    et_linear bytes;       /* device-memory traffic, bytes */
    et_linear special;     /* special-function evaluations (exp, tanh, sigmoid) */
    et_linear cold_bytes;  /* the part of `bytes` that nothing else touches between two runs of the op (the
                              optimizer's moments, once a step): streamed from the level holding `footprint` */
    et_linear footprint;   /* bytes the device holds between two runs of an op with cold bytes: the update's
                              own state (et_adam_step_costs) plus, in a graph, one micro-batch's activations
                              (et_graph_activation_terms); 0: unknown, cold bytes come from memory */
    et_linear copy_bytes;  /* layout copies run as passes of their own (tensor-train permutations), bytes:
                              charged where the profile's implementation makes them */
    double weight_bytes;   /* the part of `bytes` that is weights (what a dataflow device still streams) */
    int kernels;           /* kernel launches (TT: one per contraction step) */
    et_layer_group group;  /* weight group, ET_GROUP_COUNT for ops without weights */
    et_sparse_spec sparse; /* pattern ET_PATTERN_DENSE unless a sparse weight product */
    int grad_first;        /* index into graph->params */
    int grad_count;
    double time_scale;  /* measured / modelled time of this op on this device (etsim --op-times), else 1 */
    bool expert;        /* an expert's op (mixture of experts): its time follows the rank's routed tokens */
    bool fused;         /* attention as one fused (flash-style) kernel */
    double tile_keys;   /* a fused kernel's keys computed beyond the live ones, a query row on average (a
                           causal kernel's diagonal blocks: half its query block; a windowed layer's: the
                           block's diagonal half and its window's leading half, a whole block; 0: none) */
    double window_keys; /* a windowed layer's keys a query row attends (the window; 0: every earlier key) */
    bool async_comm;    /* a tensor-parallel collective the stack issues beside its neighbouring product (the
                           one it feeds: an all-gather's next op; or drains: the previous op), not blocking
                           (software.tp_comm async) */
    bool regather;      /* sequence parallelism's all-gather of a column-parallel layer's input again in
                           backward, for its weight gradient (beside the input-gradient product) */
    bool unquantized;   /* a product that stays in 16 bits under FP8 and FP4 recipes (Megatron-Core's output
                           layer and router run outside Transformer Engine's FP8 autocast) */
    double fused_rate;  /* that kernel's share of the profile's fused-attention rate
                           (software.attention_kernel; 0: the profile's kernel, 1) */
    bool cudnn_kernel;  /* the fused attention is cuDNN's: the profile's efficiency.cudnn_attention where it
                           has one (software.attention_kernel cudnn) */
    /* optimizer over sparse weights on a device that keeps them dense with a mask (sparse.masked_dense):
     * its work times masked_scale (dense elements over kept ones; 0: no sparse weights), plus the masks read
     */
    double masked_scale, mask_bytes;
    /* TT: its contractions, each run `step_repeats` times (layers sharing the op, and backward's two
     * products per forward one); costed one by one at their own shapes */
    int n_steps, step_repeats;
    et_tt_step steps[ET_TT_MAX_CORES]; /* a d-core train contracts in d steps; the last field: entries
                                          past n_steps are left unset */
} et_op;

typedef struct et_param {
    char id[80];
    double count;      /* trainable values held by this GPU (tensor-parallel shard; kept values if sparse) */
    double dense;      /* dense-equivalent elements (count / density) */
    double grad_elems; /* gradient elements reduced (count, or dense with dense gradients) */
    double rows, cols; /* a dense linear weight's n_out x n_in on this GPU (0 for other parameters) */
    bool expert;       /* an MoE layer's experts (this rank's experts / expert of them): reduced over the
                          ranks holding the same experts */
    bool quantized;    /* the weight of an FP8 or FP4 product (what FP8 parameter gathers move at a byte) */
    double meta_bytes; /* sparse index / mask bytes */
    int layer;
} et_param;

typedef struct et_graph_options {
    int tensor;        /* tensor-parallel degree t */
    int expert;        /* expert-parallel degree: each rank holds experts / expert of an MoE layer */
    int expert_tensor; /* each expert's hidden width split over this many ranks (0 or above: tensor). Below
                          tensor (1, Megatron's MoE parallel folding) an MoE layer's routed part runs on the
                          rank's sequence-parallel share of the tokens, no tensor-parallel collective around
                          it */
    int context;       /* context-parallel degree (ring attention); the batch shapes are a rank's share */
    int pipeline;      /* pipeline stages */
    int stage;         /* which stage this graph is for, 0-based */
    const int *layers_per_stage; /* layers of each stage (NULL: layers / pipeline each) */
    et_precision precision;
    et_scaling scaling;          /* fp8 and fp4: how products' operands are quantized (quantization.h) */
    int bf16_first, bf16_last;   /* fp8 and fp4: the model's first and last layers whose products stay in
                                    16 bits (Megatron-Core's --first-last-layers-bf16) */
    et_recompute recompute;      /* none, full (every layer's forward again) or selective (attention core) */
    unsigned recompute_modules;  /* selective's modules (schedule.h; 0: the attention core) */
    bool recompute_early_stop;   /* full: a dense decoder layer's recomputation stops after its MLP's
                                    activation (software.recompute_early_stop) */
    int recompute_layers;        /* full: the first this many layers of each of the stage's virtual_pipeline
                                    chunks (Megatron's block method; 0: every layer) */
    int virtual_pipeline;        /* model chunks of the stage (0 or 1: one) */
    et_attention_kind attention; /* standard (materialised scores) or flash (one fused kernel) */
    bool sequence_parallel; /* tensor-parallel all-reduces become all-gather + reduce-scatter; layer norms
                               and dropouts run on T/t tokens */
    bool tp_async;          /* the backward tensor-parallel collectives beside their products
                               (software.tp_comm async) */
    int bias_kernels;       /* biases' adds and gradient sums as kernels of their own (et_bias_kernels,
                               software.bias_kernels; 0: fused) */
    bool expert_launches;   /* the experts' grouped products launched once per local expert
                               (software.grouped_gemm per_expert) */
    bool moe_sort_chunks;   /* received rows copied into local-expert order and back (software.moe_dispatch
                               sort_chunks) */
    et_optimizer optimizer;
    int optimizer_shards;        /* ZeRO: optimizer states split over this many ranks (1 = none) */
    int expert_optimizer_shards; /* the experts' states, over the ranks holding the same experts (d / x;
                                    0: as optimizer_shards) */
    bool clip_global;            /* clip after the all-reduce: a global-norm op before the update */
    bool loss_fp32;              /* the loss over fp32 logits in separate passes (software.cross_entropy) */
    double flash_rate;           /* the fused attention kernel's share of the profile's rate (0 or 1: the
                                    profile's; software.attention_kernel) */
    bool attention_unpad;        /* gather and scatter copies around the fused attention (software) */
    bool attention_cudnn;        /* the fused attention is cuDNN's (software.attention_kernel) */
    bool residual_kernels;       /* residual adds and backward sums as kernels of their own (software) */
    et_galore galore;            /* GaLore's low-rank projected optimizer states (rank 0: off) */
    const et_method *method;     /* NULL = dense */
    double tokens_hint; /* tokens per micro-batch the tensor-train contraction orders are chosen for */
    int tt_rank;        /* tensor-train rank of this phase (0 = the method's) */
    const et_op_scales *op_scales; /* NULL: every op at the cost model's time */
} et_graph_options;

typedef struct et_graph {
    et_model_config model;
    et_graph_options options;
    et_op *ops;
    int n_ops, cap_ops;
    et_param *params;
    int n_params, cap_params;
    double param_count;          /* trainable values on this GPU */
    double param_dense;          /* dense-equivalent parameters */
    double weight_bytes;         /* stored weights including sparse indices, at the training precision */
    double grad_elems;           /* gradient elements to reduce */
    double galore_projected;     /* GaLore: parameters whose optimizer states are projected */
    double galore_state_elems;   /* their states: Adam's m and v at r x max(m, n), P at min(m, n) x r */
    double frozen_count;         /* LoRA: the model's own parameters on this GPU, frozen: weights only, in
                                    weight_bytes, not in params (no gradients, no optimizer states) */
    int first_layer, last_layer; /* layers of this stage, inclusive */
} et_graph;

/* Per thread: whether the graphs this thread builds carry op and parameter ids (on by default). The plan
 * search turns them off around its estimates, which never read an id (formatting them was two thirds of
 * its time); ops keep their ids when op scales are given, since those are looked up by id. */
void et_graph_set_ids(bool on);
bool et_graph_ids_on(void);

int et_graph_build(const et_model_config *model, const et_graph_options *options, et_graph *out,
                   et_error *err);
void et_graph_free(et_graph *g);
/* The graph's parameters and their counts alone (no ops: n_ops 0), at a fraction of a build's cost: what
 * et_model_param_count needs. Free with et_graph_free. */
int et_graph_params(const et_model_config *model, const et_graph_options *options, et_graph *g,
                    et_error *err);
/* et_graph_build into a graph built before (or zeroed), reusing its buffers: what a cache of graphs does
 * when it replaces one. On failure g is freed. */
int et_graph_rebuild(const et_model_config *model, const et_graph_options *options, et_graph *g,
                     et_error *err);

/* The first stage whose graph costs what `options.stage`'s does, op for op (the stage itself when none
 * does): an interior stage of an even split is its first interior stage's twin, differing only in layer
 * numbers, unless op scales name layers, or mixture-of-experts layers, dense first layers or windowed
 * layers fall at other places in it. */
int et_graph_stage_twin(const et_model_config *model, const et_graph_options *options);

double et_linear_eval(const et_linear *l, const et_batch_shape *b);
/* Kernels the host launches for an op at shape b: none for communication and for an op that moves and
 * computes nothing. */
double et_op_launches(const et_op *op, const et_batch_shape *b);

/* One micro-batch's activations on graph g's stage, linear in its shape (et_linear_eval): `per_micro` what
 * each micro-batch in flight keeps for backward (its layers' saved tensors and input), `once` what exists
 * once however many are in flight (the layer rebuilt under full recomputation, the loss head's logits).
 * model/activations.c; the memory model (memory.h) and the ops' footprints both use it. */
void et_graph_activation_terms(const et_graph *g, et_linear *per_micro, et_linear *once);

/* The parameters of this GPU's optimizer shard: the model's over optimizer_shards, the experts' over
 * expert_optimizer_shards (memory.c shards the states alike). */
double et_graph_optimizer_params(const et_graph *g);

/* Index of the op with this id, -1 if none. */
int et_graph_find(const et_graph *g, const char *id);

/* One step's cost on a device as etrun runs it: op_time[i] (seconds) is op i summed over the step's
 * n_micro micro-batches, an optimizer op once (with the last micro-batch's shape); returns the step's
 * model FLOPs counted the same way. The rule etrun's predictions, etcalib and their tests share. */
double et_step_op_times(const et_graph *g, const et_batch_shape *micro, int n_micro,
                        const et_device_profile *d, et_precision p, double *op_time);

/* The share of op's FLOPs that are model FLOPs (what MFU counts: no recomputation): a fused attention
 * kernel's backward recomputes the scores (2 l^2 Dqk of its 6 l^2 Dqk + 4 l^2 Dv a head), 1 for every other
 * op. */
double et_op_model_share(const et_graph *g, const et_op *op);

/* Whether layer i of graph g is recomputed whole in backward: under full recomputation every layer, or with
 * recompute_layers N the first N layers of each of the stage's chunks (its layers taken in order, chunks of
 * ceil(layers / virtual_pipeline)); multi-token prediction's layers always. */
bool et_graph_layer_recomputed(const et_graph *g, int i);

/* This GPU's parameters that are quantized products' weights (et_param.quantized). */
double et_graph_quantized_params(const et_graph *g);

/* Bytes of this GPU's parameters a gather moves: e a value, or with FP8 parameter gathers
 * (software.fp8_param_gather) one byte for the quantized products' weights (et_param.quantized). */
double et_graph_param_gather_bytes(const et_graph *g, bool fp8);

/* Whether transformer layer `layer` of the model keeps its products in 16 bits under an fp8 or fp4 recipe
 * (one of the options' bf16_first first or bf16_last last layers; multi-token prediction's layers past the
 * model's are not among them). */
bool et_graph_layer_bf16(const et_model_config *model, const et_graph_options *o, int layer);

/* Total parameters of the full model (t = 1, one stage), and those one token uses: a mixture of experts'
 * top_k experts of each MoE layer instead of all of them (equal to the total for dense models). */
double et_model_param_count(const et_model_config *model);
double et_model_active_param_count(const et_model_config *model);

/* Cost of one op for a batch on a device: FLOPs, bytes and roofline seconds, times the op's time_scale
 * (TP all-reduce: 0 s, it is communication and is costed by the collectives model). */
double et_op_time(const et_op *op, const et_batch_shape *b, const et_device_profile *d, et_precision p);
/* The costs of one fused Adam/AdamW update (op "optimizer.step") of `values` fp32 parameters whose gradients
 * are grad_bytes each: its flops, bytes, cold bytes (the moments) and footprint (its own state: gradients,
 * fp32 weights, moments and a 16-bit copy) set on *op (the graph's update, and etcalib's optimizer
 * microbenchmarks costed through et_op_time, whose footprint is exactly that state). */
void et_adam_step_costs(et_op *op, double values, double grad_bytes);
/* Adam's and LAMB's moments, m and v in fp32, read and written once a step: bytes a parameter. The graph's
 * update ops mark them cold (et_op.cold_bytes): between two steps the step's other traffic touches the
 * step's whole working set (et_op.footprint), so they come back from the level that holds it. */
#define ET_ADAM_MOMENT_BYTES 16

#endif

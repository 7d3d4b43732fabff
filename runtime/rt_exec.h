/* rt_exec: what etrun's executors share (private to runtime/): the activation layout, the bound op and
 * the executors of each block. An executor runs one graph op for one micro-batch through the model's
 * backend (rt_backend.h) only: it never touches device memory itself, so the same executors run on every
 * backend.
 *
 * Activations of one layer (T_cap rows each); names follow the encoder, the decoder reuses them:
 *   encoder: qkv ctx y | res1 = x + y, ln1 = LN(res1) | u = fc1, g = GELU(u), v = fc2 | res2 = ln1 + v,
 *            out = LN(res2)
 *   decoder: ln1 = LN(x) | qkv ctx y | res1 = x + y, ln2 = LN(res1) | u g v | out = res1 + v
 * Backward keeps the running gradients in the shared d_* buffers: d_out holds dL/d(layer output) when a
 * layer's backward starts. */
#ifndef ET_RT_EXEC_H
#define ET_RT_EXEC_H

#include "rt_backend.h"
#include "rt_model.h"

typedef struct rt_layer_acts {
    float *qkv, *probs, *ctx, *y, *res1, *ln1, *ln2, *u, *g, *v, *res2, *out;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
    /* an MoE layer's (NULL otherwise): router logits [T, E], routing weights w [T, k]; this rank's R = T k
     * routed rows in expert order, their input xm [R, H] and their experts' output eym [R, H]; the rows this
     * rank's experts process (R_loc of them, local expert by local expert: every row without expert
     * parallelism, where x and xm, ey and eym are the same buffers): input x, fc1 output eu [R_loc, Fe1],
     * activation eg [R_loc, Fe], fc2 output ey [R_loc, H]; device ints idx [T, k] (chosen experts), order
     * [R] (each row's token), pos [T, k] (each choice's row), loc_from [R_loc] (each local row's place in
     * the dispatch's receive buffer); host: counts [E] (this rank's rows per expert), counts_local [E / x]
     * (rows per local expert), sent and received rows per group member [x], received rows per member and
     * local expert [x][E / x], rows_local (R_loc) */
    float *logits, *w, *x, *eu, *eg, *ey, *xm, *eym;
    float *su, *sg, *sy; /* shared experts (NULL without): fc1's output [T, Fs1], the activation [T, Fs], the
                            output [T, H] the combine adds to the routed one */
    int *idx, *order, *pos, *counts, *loc_from, *counts_local, *sent, *received, *received_by;
    int *counts_dev; /* the routing's counts [E] on the device (moe_group), read back into counts */
    int rows_local;
    float *lora_u[ET_LORA_TARGETS]; /* LoRA: each target's (alpha / r) x A^T [T, r] (NULL: not a target) */
    /* latent attention (NULL otherwise): the query latent cq = x Wq_down^T [T, Lq] and its norm cqn, the
     * key-value latent ckv [T, Lkv] (kv_down's first Lkv outputs) and its norm ckvn, each norm's rstd [T] */
    float *cq, *cqn, *q_rstd, *ckv, *ckvn, *kv_rstd;
    /* attention sinks: this layer's logits [A] and their gradient (parameter slices; NULL: none) */
    float *sinks, *dsinks;
    /* fused attention (NULL without): each row's log-sum-exp [T A], kept for the backward; probs is then
     * empty */
    float *lse;
    /* query and key norms (Qwen3; NULL without): q and k before them, [T A D] and [T KV D] as rows of D, each
     * row's rstd, and the norms' gains [D] with their gradients (parameter slices) */
    float *q_pre, *k_pre, *q_rstd_h, *k_rstd_h, *qn_g, *qn_dg, *kn_g, *kn_dg;
} rt_layer_acts;

/* A multi-token prediction module's own activations (rt_exec_mtp.c): the embedding of the tokens ahead, its
 * and the previous depth's hidden state's RMSNorms (rstd each), their concatenation [T, 2H] (embedding
 * first), the projection's output (its transformer layer's input), the head's final norm and the loss's
 * logit gradients [P, V] (kept until the module's backward, which runs after the main head's forward). */
typedef struct rt_mtp_acts {
    float *emb, *e_rstd, *h_rstd, *cat, *x0, *fin, *fin_mean, *fin_rstd, *dlogits;
} rt_mtp_acts;

/* Every activation and gradient buffer of one rank (device memory, one allocation: rt_acts_alloc). */
struct rt_acts {
    int H, F, A, V;
    int L;            /* layers, the prediction modules' included (theirs numbered from L_main on) */
    int L_main;       /* the model's own layers */
    int D;            /* multi-token prediction depth (0: none) */
    rt_mtp_acts *mtp; /* D of them */
    float *d_cat, *d_mtp_h, *d_emb, *tmp_h; /* their backward's scratch: [T, 2H], the gradient of the hidden
                                             state a module read (added by the head that produced it), [T, H]
                                             twice */
    bool mtp_pending;                       /* d_mtp_h holds a gradient not yet added */
    int F1;                                 /* fc1's outputs: F, or 2 F with SwiGLU (gate | up) */
    rt_attn_shape attn; /* every layer's attention shape (rt_attn.h); a windowed layer's adds model.window */
    int window;         /* model.window (0: none); which layers: et_model_layer_windowed */
    int KV, QKV, CW;    /* key/value heads, a qkv row's width (rt_attn_ld) and a context row's (A Dv) */
    /* latent attention (Lkv > 0): the query latent (0: queries straight from the hidden state), the
     * key-value latent, the rotary part of each query and of the shared key, the part without positions;
     * shared scratch of the layer being run: q [T, A Dqk], kv_up's output [T, A (Dn + Dv)], the rotary key
     * [T, R] (forward: values; backward: their gradients), and two latent gradients [T, max(Lq, Lkv)] */
    int Lq, Lkv, R, Dn;
    float *mla_q, *mla_kvu, *mla_kpe, *d_lat1, *d_lat2;
    bool qk_norm;            /* each head's query and key RMS-normed (model.qk_norm) */
    float *qk_tmp, *qk_tmp2; /* its scratch, [T, A D] each (A >= KV) */
    bool decoder;
    bool rms, swiglu;   /* RMSNorm instead of layer norm; SwiGLU instead of GELU */
    double rope_base;   /* rotary positions' base, 0 without them */
    int E, k, Fe, Fe1;  /* mixture of experts: experts, top-k, expert width, its fc1 outputs (0: dense) */
    int Fs, Fs1;        /* shared experts' width (shared_experts x Fe; 0: none) and their fc1 outputs */
    float *d_sg, *d_su; /* their backward's activation gradients [T, Fs] and [T, Fs1] */
    int *host_idx;      /* host scratch of the experts' dispatch: 3 T_cap k x + E + 1 ints (rt_exec_moe.c) */
    bool *moe_layer;    /* [L]: the layer's MLP is a mixture of experts */
    size_t probs_cap;   /* attention probabilities: A * local * seq_len^2 (0 with fused attention) */
    bool flash;         /* fused attention (parallelism.attention "flash"): lse kept, no probabilities */
    float *d_lse;       /* its backward's scratch: each row's delta = dctx . ctx [T A] */
    rt_layer_acts *layers;                        /* L of them */
    float *emb, *x0, *emb_mean, *emb_rstd;        /* embeddings output and (encoder) its layer norm */
    float *hs, *t1, *t2, *t3, *t3_mean, *t3_rstd; /* masked-LM head, P_cap rows */
    float *fin, *fin_mean, *fin_rstd;             /* causal head: final layer norm */
    float *logits, *dlogits;                      /* P_cap x V */
    float *d_out, *d_res, *d_mid, *d_ctx, *d_qkv, *d_ff, *d_ff2, *d_probs, *d_head, *d_head2;
    float *d_x, *d_eu, *d_eg, *d_ey, *d_logits, *d_w; /* mixture of experts' backward (local rows) */
    float *d_xm, *d_eym;                              /* ... this rank's rows (d_x, d_ey without experts
                                                         parallelism) */
    float *rbuf;                                      /* the all-to-alls' staging rows [R_loc cap, H] */
    int ep;                                           /* expert-parallel degree (1: every expert here) */
    /* parameters the executors of the embeddings and heads reach by name (slices of rt_model::params) */
    float *word, *dword, *pos, *dpos, *type, *dtype, *dec_W, *dec_dW, *dec_b, *dec_db;
    float *emb_g, *emb_b, *emb_dg, *emb_db;
    /* LoRA (rank lora_r > 0): the adapters' scale alpha / r, the targets, the gradient of u [T, r], the
     * adapter's output before it is added [T, max n_out], and where frozen norms' gains and biases put the
     * gradients no one reads [2 H] */
    int lora_r;
    float lora_scale;
    unsigned lora_targets;
    float *d_lora, *lora_tmp, *frozen_grad;
    double norm;   /* loss normaliser of the current micro-batch */
    float *block;  /* the one device allocation */
    size_t floats; /* its size in floats */
};

/* Sizes the layout for (T_cap, P_cap), allocates it on the backend and hands out every pointer from the
 * same table; fails (out of memory, or a layout that does not add up) with *err. */
int rt_acts_alloc(rt_model *m, et_error *err);
void rt_acts_free(rt_model *m);

typedef void (*rt_exec_fn)(rt_model *m, const rt_op *op, const rt_dev_batch *b);

/* Linear layers that are tensor trains: q, k, v (3 copies), out, fc1, fc2. */
typedef enum { RT_ROLE_QKV, RT_ROLE_OUT, RT_ROLE_FC1, RT_ROLE_FC2 } rt_tt_role;

/* The tensor-train record of (layer, role), shared by its forward and backward ops. */
typedef struct rt_tt_record {
    rt_tt_layer tt;
    int copies, n_in, n_out, ready;
    float *cores[3], *dcores[3], *work[3], *tmp; /* cores: slices of the parameters; work, tmp: device (tmp
                                                    only for shared ops, T x n_out) */
} rt_tt_record;

/* One graph op bound to its executor: the layer it belongs to and the parameters it touches. */
struct rt_op {
    rt_exec_fn exec;
    int layer;
    int mtp;                      /* a prediction module's op: its depth (else -1) */
    float *W, *bias, *dW, *dbias; /* weight and bias of this op's layer (or LN gamma/beta) */
    rt_tt_role role;              /* tensor-train ops */
    rt_tt_record *tt;
};

/* Layer i's attention: the model's shape, with model.window on a windowed layer. */
static inline rt_attn_shape rt_layer_attn(const rt_model *m, int i)
{
    rt_attn_shape sh = m->acts->attn;
    sh.window = et_model_layer_windowed(&m->s->model, i) ? m->acts->window : 0;
    return sh;
}

/* Binds every graph op to its executor and parameters; refuses ops without an executor and ops whose
 * executor needs a kernel family the backend does not support (rt_bind.c). */
int rt_bind_ops(rt_model *m, et_error *err);
/* Parameter slice by graph id (NULL if none); *grad (if not NULL) gets its gradient. */
float *rt_param(rt_model *m, const char *id, float **grad);
int rt_param_index(const et_graph *g, const char *id);

/* Initial weights and sparse masks, drawn on the host from the seed and uploaded (rt_init.c). */
int rt_init_params(rt_model *m, et_error *err);
int rt_init_masks(rt_model *m, et_error *err);
int rt_init_tt_cores(rt_model *m, rt_tt_record *rec, int layer, int role, et_error *err);

/* The executors, by block. */
#define RT_EXEC(name) void name(rt_model *m, const rt_op *op, const rt_dev_batch *b)
/* rt_exec_embed.c */
RT_EXEC(rt_ex_embed);
RT_EXEC(rt_ex_embed_ln);
RT_EXEC(rt_ex_embed_ln_bwd);
RT_EXEC(rt_ex_embed_bwd);
/* rt_exec_layer.c */
RT_EXEC(rt_ex_qkv);
RT_EXEC(rt_ex_scores);
RT_EXEC(rt_ex_flash);
RT_EXEC(rt_ex_softmax);
RT_EXEC(rt_ex_context);
RT_EXEC(rt_ex_attn_out);
RT_EXEC(rt_ex_attn_ln);
RT_EXEC(rt_ex_mlp_ln);
RT_EXEC(rt_ex_fc1);
RT_EXEC(rt_ex_gelu);
RT_EXEC(rt_ex_swiglu);
RT_EXEC(rt_ex_swiglu_bwd);
RT_EXEC(rt_ex_rope);
RT_EXEC(rt_ex_qk_norm);
RT_EXEC(rt_ex_qk_norm_bwd);
RT_EXEC(rt_ex_rope_bwd);
/* rt_exec_mla.c: latent attention's projections, norms, rotary parts and the heads' assembly */
RT_EXEC(rt_ex_mla_q_down);
RT_EXEC(rt_ex_mla_q_norm);
RT_EXEC(rt_ex_mla_q_up);
RT_EXEC(rt_ex_mla_q);
RT_EXEC(rt_ex_mla_kv_down);
RT_EXEC(rt_ex_mla_kv_norm);
RT_EXEC(rt_ex_mla_kv_up);
RT_EXEC(rt_ex_mla_concat);
RT_EXEC(rt_ex_mla_concat_bwd);
RT_EXEC(rt_ex_mla_kv_up_bwd_data);
RT_EXEC(rt_ex_mla_kv_up_bwd_weight);
RT_EXEC(rt_ex_mla_kv_norm_bwd);
RT_EXEC(rt_ex_mla_kv_down_bwd_data);
RT_EXEC(rt_ex_mla_kv_down_bwd_weight);
RT_EXEC(rt_ex_mla_q_up_bwd_data);
RT_EXEC(rt_ex_mla_q_up_bwd_weight);
RT_EXEC(rt_ex_mla_q_norm_bwd);
RT_EXEC(rt_ex_mla_q_down_bwd_data);
RT_EXEC(rt_ex_mla_q_down_bwd_weight);
RT_EXEC(rt_ex_mla_q_bwd_data);
RT_EXEC(rt_ex_mla_q_bwd_weight);
/* rt_exec_mtp.c: multi-token prediction modules (DeepSeek-V3) */
RT_EXEC(rt_ex_mtp_embed);
RT_EXEC(rt_ex_mtp_norms);
RT_EXEC(rt_ex_mtp_eh_proj);
RT_EXEC(rt_ex_mtp_final_ln);
RT_EXEC(rt_ex_mtp_decoder);
RT_EXEC(rt_ex_mtp_loss);
RT_EXEC(rt_ex_mtp_decoder_bwd_data);
RT_EXEC(rt_ex_mtp_decoder_bwd_weight);
RT_EXEC(rt_ex_mtp_final_ln_bwd);
RT_EXEC(rt_ex_mtp_eh_proj_bwd_data);
RT_EXEC(rt_ex_mtp_eh_proj_bwd_weight);
RT_EXEC(rt_ex_mtp_norms_bwd);
RT_EXEC(rt_ex_mtp_embed_bwd);
/* adds a module's pending hidden-state gradient into d_out (the heads' final norms' backward) */
void rt_mtp_add_pending(rt_model *m, const rt_dev_batch *b);
/* rt_exec_moe.c */
RT_EXEC(rt_ex_moe_router);
RT_EXEC(rt_ex_moe_route);
RT_EXEC(rt_ex_moe_permute);
RT_EXEC(rt_ex_moe_fc1);
RT_EXEC(rt_ex_moe_act);
RT_EXEC(rt_ex_moe_fc2);
RT_EXEC(rt_ex_moe_unpermute);
RT_EXEC(rt_ex_moe_dispatch);
RT_EXEC(rt_ex_moe_combine);
RT_EXEC(rt_ex_moe_combine_bwd);
RT_EXEC(rt_ex_moe_dispatch_bwd);
RT_EXEC(rt_ex_moe_unpermute_bwd);
RT_EXEC(rt_ex_moe_fc2_bwd_data);
RT_EXEC(rt_ex_moe_fc2_bwd_weight);
RT_EXEC(rt_ex_moe_act_bwd);
RT_EXEC(rt_ex_moe_fc1_bwd_data);
RT_EXEC(rt_ex_moe_fc1_bwd_weight);
RT_EXEC(rt_ex_moe_permute_bwd);
RT_EXEC(rt_ex_moe_route_bwd);
RT_EXEC(rt_ex_moe_shared_fc1);
RT_EXEC(rt_ex_moe_shared_act);
RT_EXEC(rt_ex_moe_shared_fc2);
RT_EXEC(rt_ex_moe_shared_fc2_bwd_data);
RT_EXEC(rt_ex_moe_shared_fc2_bwd_weight);
RT_EXEC(rt_ex_moe_shared_act_bwd);
RT_EXEC(rt_ex_moe_shared_fc1_bwd_data);
RT_EXEC(rt_ex_moe_shared_fc1_bwd_weight);
RT_EXEC(rt_ex_moe_router_bwd_data);
RT_EXEC(rt_ex_moe_router_bwd_weight);
RT_EXEC(rt_ex_fc2);
RT_EXEC(rt_ex_mlp_ln_bwd);
RT_EXEC(rt_ex_fc2_bwd_data);
RT_EXEC(rt_ex_fc2_bwd_weight);
RT_EXEC(rt_ex_gelu_bwd);
RT_EXEC(rt_ex_fc1_bwd_data);
RT_EXEC(rt_ex_fc1_bwd_weight);
RT_EXEC(rt_ex_attn_ln_bwd);
RT_EXEC(rt_ex_attn_out_bwd_data);
RT_EXEC(rt_ex_attn_out_bwd_weight);
RT_EXEC(rt_ex_context_bwd);
RT_EXEC(rt_ex_softmax_bwd);
RT_EXEC(rt_ex_scores_bwd);
RT_EXEC(rt_ex_flash_bwd);
RT_EXEC(rt_ex_qkv_bwd_data);
RT_EXEC(rt_ex_qkv_bwd_weight);
/* rt_exec_tt.c */
RT_EXEC(rt_ex_tt_fwd);
RT_EXEC(rt_ex_tt_bwd_data);
RT_EXEC(rt_ex_tt_bwd_weight);
/* rt_exec_head.c */
RT_EXEC(rt_ex_gather);
RT_EXEC(rt_ex_transform);
RT_EXEC(rt_ex_head_gelu);
RT_EXEC(rt_ex_head_ln);
RT_EXEC(rt_ex_final_ln);
RT_EXEC(rt_ex_decoder);
RT_EXEC(rt_ex_loss);
RT_EXEC(rt_ex_decoder_bwd_data);
RT_EXEC(rt_ex_decoder_bwd_weight);
RT_EXEC(rt_ex_head_ln_bwd);
RT_EXEC(rt_ex_head_gelu_bwd);
RT_EXEC(rt_ex_transform_bwd_data);
RT_EXEC(rt_ex_transform_bwd_weight);
RT_EXEC(rt_ex_gather_bwd);
RT_EXEC(rt_ex_final_ln_bwd);
RT_EXEC(rt_ex_nothing); /* optimizer ops: run by rt_model_update */
/* LoRA's adapters of each target (rt_exec_lora.c) */
#define RT_LORA_DECLARE(name)                                                                                \
    RT_EXEC(rt_ex_lora_a_##name);                                                                            \
    RT_EXEC(rt_ex_lora_b_##name);                                                                            \
    RT_EXEC(rt_ex_lora_b_bwd_data_##name);                                                                   \
    RT_EXEC(rt_ex_lora_b_bwd_weight_##name);                                                                 \
    RT_EXEC(rt_ex_lora_a_bwd_data_##name);                                                                   \
    RT_EXEC(rt_ex_lora_a_bwd_weight_##name)
RT_LORA_DECLARE(qkv);
RT_LORA_DECLARE(proj);
RT_LORA_DECLARE(fc1);
RT_LORA_DECLARE(fc2);

/* The model's normalisation (layer norm, or RMSNorm whose mean and bias are unused) forward and backward:
 * the one place the executors choose between them. */
static inline void rt_norm_fwd(const rt_model *m, const float *x, const float *g, const float *bias, float *y,
                               float *mean, float *rstd, int T, int n)
{
    if (m->acts->rms)
        m->be->rmsnorm_fwd(m->be, x, g, y, rstd, T, n);
    else
        m->be->layernorm_fwd(m->be, x, g, bias, y, mean, rstd, T, n);
}

/* sum = x + r, then the model's norm of sum into y: one fused pass for a layer norm */
static inline void rt_add_norm_fwd(const rt_model *m, const float *x, const float *r, float *sum,
                                   const float *g, const float *bias, float *y, float *mean, float *rstd,
                                   int T, int n)
{
    if (m->acts->rms) {
        m->be->add(m->be, sum, x, r, (size_t)T * n);
        m->be->rmsnorm_fwd(m->be, sum, g, y, rstd, T, n);
    } else {
        m->be->add_layernorm_fwd(m->be, x, r, sum, g, bias, y, mean, rstd, T, n);
    }
}

static inline void rt_norm_bwd(const rt_model *m, const float *x, const float *g, const float *mean,
                               const float *rstd, const float *dy, float *dx, float *dg, float *db, int T,
                               int n)
{
    if (!dg) /* a frozen norm (LoRA): its gain's and bias's gradients go to scratch */
        dg = m->acts->frozen_grad, db = m->acts->frozen_grad + n;
    if (m->acts->rms)
        m->be->rmsnorm_bwd(m->be, x, g, rstd, dy, dx, dg, T, n);
    else
        m->be->layernorm_bwd(m->be, x, g, mean, rstd, dy, dx, dg, db, T, n);
}

/* RMSNorm's backward where the model's norm may be a layer norm (latent attention's norms are RMSNorms) */
static inline void rt_norm_bwd_rms(const rt_model *m, const float *x, const float *g, const float *rstd,
                                   const float *dy, float *dx, float *dg, int T, int n)
{
    if (!dg) dg = m->acts->frozen_grad; /* frozen (LoRA) */
    m->be->rmsnorm_bwd(m->be, x, g, rstd, dy, dx, dg, T, n);
}

/* Layer i's input: x0 for the first layer, the previous layer's output after; a prediction module's layer
 * reads its projection's output. */
static inline const float *rt_layer_input(const rt_acts *a, int i)
{
    return i == 0 ? a->x0 : i >= a->L_main ? a->mtp[i - a->L_main].x0 : a->layers[i - 1].out;
}

#endif

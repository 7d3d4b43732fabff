/* model_config: the transformer being trained: dimensions, architecture and loss head.
 *
 * Contract: presets are looked up by name (et_model_preset_names); explicit
 * dimensions may override a preset field by field. All sizes are element counts (no units).
 * et_model_config_check() returns -1 and fills *err (JSON path under `path`) when the dimensions are
 * inconsistent, e.g. heads not dividing hidden. The struct owns no memory. */
#ifndef ET_MODEL_CONFIG_H
#define ET_MODEL_CONFIG_H

#include <stdbool.h>

#include "et_error.h"

typedef enum { ET_ARCH_ENCODER, ET_ARCH_DECODER } et_arch;
typedef enum { ET_HEAD_MLM_NSP, ET_HEAD_MLM, ET_HEAD_CAUSAL_LM } et_loss_head;

typedef enum { ET_MLP_GELU, ET_MLP_SWIGLU } et_mlp_kind;
typedef enum { ET_NORM_LAYERNORM, ET_NORM_RMSNORM } et_norm_kind;
/* ALiBi (Press et al. 2022, BLOOM): no position table, a per-head linear bias added to the scores */
typedef enum { ET_POSITION_LEARNED, ET_POSITION_ROPE, ET_POSITION_NONE, ET_POSITION_ALIBI } et_position_kind;
extern const char *const et_mlp_names[];      /* "gelu", "swiglu", NULL */
extern const char *const et_norm_names[];     /* "layernorm", "rmsnorm", NULL */
extern const char *const et_position_names[]; /* "learned", "rope", "none", "alibi", NULL */

/* Mixture-of-experts MLPs (Shazeer et al. 2017; GShard, Lepikhin et al. 2020; Switch, Fedus et al. 2022):
 * `experts` expert MLPs per MoE layer, each token routed to `top_k` of them by a learned router. With
 * `capacity_factor` c > 0 every expert processes a buffer of c x tokens x top_k / experts rows (padded,
 * tokens beyond it dropped: GShard's fixed capacity); with 0 (dropless, as MegaBlocks and Mixtral train) each
 * expert processes what it is routed, so an uneven routing makes its expert ranks stragglers. The routing
 * distribution says which experts tokens favour: uniform, or Zipf-like with exponent `skew` (expert j gets
 * a share proportional to 1 / (j + 1)^skew). Layer i is an MoE layer when i % every == every - 1. */
typedef enum { ET_ROUTING_UNIFORM, ET_ROUTING_ZIPF } et_routing_kind;
extern const char *const et_routing_names[]; /* "uniform", "zipf", NULL */
typedef struct et_moe {
    int experts; /* 0: dense MLPs */
    int top_k;
    double capacity_factor; /* 0: dropless */
    int every;              /* an MoE layer every `every` layers (1: all) */
    int ffn;                /* each expert's hidden width (the model's ffn when 0) */
    et_routing_kind routing;
    double skew;        /* zipf exponent */
    int shared_experts; /* experts every token uses besides its top_k (DeepSeekMoE, Dai et al. 2024): one
                         * dense MLP of shared_experts x ffn hidden width beside the router (Megatron's
                         * moe_shared_expert_intermediate_size) */
    int first_dense;    /* the first `first_dense` layers keep dense MLPs of the model's ffn (DeepSeek-V3's
                         * first_k_dense_replace) */
} et_moe;

/* Multi-head latent attention (DeepSeek-V2, DeepSeek-AI 2024; DeepSeek-V3 2024): queries projected down to
 * a latent of q_lora values (0: projected directly from the hidden state), keys and values from one shared
 * latent of kv_lora values plus a rotary key of rope_dim values shared by every head; a head's query and key
 * are head_dim (no position) + rope_dim wide, its value v_dim. kv_lora 0: standard attention. */
typedef struct et_mla {
    int q_lora, kv_lora, rope_dim, v_dim;
} et_mla;

extern const char *const et_arch_names[];      /* "encoder", "decoder", NULL */
extern const char *const et_loss_head_names[]; /* "mlm_nsp", "mlm", "causal_lm", NULL */

typedef struct et_model_config {
    char name[64];
    int layers;
    int hidden;
    int heads;
    int ffn;
    int vocab;
    int max_positions;
    int type_vocab; /* token-type (segment) embeddings; 2 for BERT, 0 for GPT */
    et_arch arch;   /* encoder: bidirectional attention, post-LN; decoder: causal, pre-LN */
    et_loss_head head;
    int max_predictions;       /* masked-LM: at most this many predictions per sequence */
    double mask_fraction;      /* masked-LM: fraction of tokens predicted (0.15) */
    bool tie_embeddings;       /* output projection shares the word embedding */
    int kv_heads;              /* key/value heads (grouped-query attention); 0 = heads */
    et_mlp_kind mlp;           /* gelu: two matrices; swiglu: gate, up (one fused product) and down */
    et_norm_kind norm;         /* layer norm (weight and bias) or RMSNorm (weight only) */
    et_position_kind position; /* learned table, rotary (no table, a rotation of q and k), or none */
    bool no_bias;              /* linear layers without biases (Llama) */
    double dropout;            /* dropout probability on attention probabilities and on each block's output
                                * (Megatron's attention_dropout = hidden_dropout); 0 = no dropout kernels */
    et_moe moe;
    double rope_base; /* rotary positions' base (theta): 10000 (Llama 2), 500000 (Llama 3); 0 = 10000 */
    int head_dim;     /* each attention head's width; 0 = hidden / heads (Qwen3: 128 whatever the hidden) */
    bool qk_norm;     /* RMSNorm of each head's query and key before attention (Qwen3) */
    et_mla mla;
    /* sliding-window attention (Mistral 7B, Gemma, GPT-OSS): a windowed layer's query attends to the
     * `window` tokens ending at it; every `full_every`-th layer (i % full_every == full_every - 1) attends
     * to the whole causal prefix (0: every layer windowed). window 0: no windows. */
    int window, full_every;
    bool sinks;     /* attention sinks (GPT-OSS): a learned logit per head in each softmax's denominator */
    int mtp_layers; /* multi-token prediction depth (DeepSeek-V3): each module an embedding of the next
                     * token, two RMSNorms, a 2H x H projection, one transformer layer and the shared output
                     * head with its loss, on the last pipeline stage */
    double mtp_loss_scale; /* the modules' losses averaged over the depth and scaled by this in training
                            * (etrun's gradients; no cost); 0: the default, et_model_mtp_loss_scale */
} et_model_config;

/* Each attention head's width: head_dim, or hidden / heads (MLA: the part without positions). A head's
 * query and key width (head_dim + the rotary part under MLA) and its value width (v_dim under MLA). */
int et_model_head_dim(const et_model_config *m);
int et_model_qk_dim(const et_model_config *m);
int et_model_v_dim(const et_model_config *m);
/* The prediction modules' loss weight: mtp_loss_scale, or 0.1 where it is 0 (Megatron-Core's
 * mtp_loss_scaling_factor default). */
double et_model_mtp_loss_scale(const et_model_config *m);
/* Whether layer i attends through a sliding window (model.window). */
bool et_model_layer_windowed(const et_model_config *m, int layer);

/* Whether layer i's MLP is a mixture of experts, how many of layers first..last (inclusive) are, and each
 * expert's hidden width. Multi-token prediction's layers are numbered from `layers` on. */
bool et_model_layer_is_moe(const et_model_config *m, int layer);
int et_model_moe_layers(const et_model_config *m, int first, int last);
int et_model_expert_ffn(const et_model_config *m);

/* Fills *out with the named preset; returns -1 when the name is unknown. */
int et_model_preset(const char *name, et_model_config *out);

/* NULL-terminated list of preset names, for messages and docs. */
extern const char *const et_model_preset_names[];

/* Checks consistency; `source`/`path` locate the model object in the scenario for messages. */
int et_model_config_check(const et_model_config *m, const char *source, const char *path, et_error *err);

/* Predictions (positions scored by the loss) for one sequence of `length` tokens. */
double et_model_predictions_for_length(const et_model_config *m, int length);

#endif

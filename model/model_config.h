/* model_config: the transformer being trained: dimensions, architecture and loss head.
 *
 * Contract: presets are looked up by name (bert-base, bert-large, gpt3-13b, encoder-6x768); explicit
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
typedef enum { ET_POSITION_LEARNED, ET_POSITION_ROPE, ET_POSITION_NONE } et_position_kind;
extern const char *const et_mlp_names[];      /* "gelu", "swiglu", NULL */
extern const char *const et_norm_names[];     /* "layernorm", "rmsnorm", NULL */
extern const char *const et_position_names[]; /* "learned", "rope", "none", NULL */

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
} et_model_config;

/* Fills *out with the named preset; returns -1 when the name is unknown. */
int et_model_preset(const char *name, et_model_config *out);

/* NULL-terminated list of preset names, for messages and docs. */
extern const char *const et_model_preset_names[];

/* Checks consistency; `source`/`path` locate the model object in the scenario for messages. */
int et_model_config_check(const et_model_config *m, const char *source, const char *path, et_error *err);

/* Predictions (positions scored by the loss) for one sequence of `length` tokens. */
double et_model_predictions_for_length(const et_model_config *m, int length);

#endif

/* method: how the weights are trained: dense, sparse (fixed masks per layer group), tensor-train
 * compressed (CoMERA-style cores with a rank schedule), or LoRA (Hu et al. 2021: the model frozen, low-rank
 * adapters beside chosen linear layers trained).
 *
 * Contract: plain data filled by the scenario loader (docs/scenario.md, "method"); the graph builder reads
 * it. Sparse costs: FLOPs at the density; bytes for values plus indices; a kernel efficiency from the
 * device profile's sparse parameters (et_sparse_rate_factor); density 1 is exactly dense. */
#ifndef ET_METHOD_H
#define ET_METHOD_H

#include <stdbool.h>

#include "device_profile.h"
#include "et_error.h"
#include "tensor_train.h"

typedef enum { ET_METHOD_DENSE, ET_METHOD_SPARSE, ET_METHOD_TENSOR_TRAIN, ET_METHOD_LORA } et_method_kind;
extern const char *const et_method_kind_names[]; /* "dense", "sparse", "tensor_train", "lora", NULL */

/* LoRA's targets, Megatron-core's module names (Megatron-Bridge's and NeMo's LoRA target_modules): the
 * attention's q, k, v product and its output product, the MLP's first and second products. */
typedef enum { ET_LORA_QKV, ET_LORA_PROJ, ET_LORA_FC1, ET_LORA_FC2, ET_LORA_TARGETS } et_lora_target;
extern const char *const et_lora_target_names[]; /* "linear_qkv", "linear_proj", "linear_fc1", "linear_fc2" */

typedef enum {
    ET_GROUP_ATTENTION,
    ET_GROUP_MLP,
    ET_GROUP_EMBEDDINGS,
    ET_GROUP_HEAD,
    ET_GROUP_COUNT
} et_layer_group;
extern const char *const et_layer_group_names[]; /* "attention", "mlp", "embeddings", "head", NULL */

typedef enum {
    ET_PATTERN_DENSE,
    ET_PATTERN_UNSTRUCTURED,
    ET_PATTERN_BLOCK,
    ET_PATTERN_2_4
} et_sparse_pattern;
extern const char *const et_sparse_pattern_names[]; /* "dense", "unstructured", "block", "2:4", NULL */

typedef struct et_sparse_spec {
    double density; /* kept fraction of weights, (0, 1] */
    et_sparse_pattern pattern;
    int block; /* block edge for ET_PATTERN_BLOCK */
} et_sparse_spec;

#define ET_MAX_TT_SHAPES 8
#define ET_MAX_RANK_PHASES 8

typedef struct et_tt_factors {
    int n_in, n_out;
    int d_in, d_out;
    int in[ET_TT_MAX_CORES], out[ET_TT_MAX_CORES];
} et_tt_factors;

typedef struct et_rank_phase {
    double from; /* fraction of training where this rank starts */
    int rank;
} et_rank_phase;

typedef struct et_method {
    et_method_kind kind;
    et_sparse_spec sparse[ET_GROUP_COUNT];
    bool dense_gradients; /* sparse: gradients kept (and reduced) at dense size */
    /* tensor train */
    int tt_rank;
    bool tt_group[ET_GROUP_COUNT]; /* which linear layer groups are TT (attention, mlp) */
    int n_factors;
    et_tt_factors factors[ET_MAX_TT_SHAPES];
    bool tt_embedding;
    int emb_d, emb_rank;
    int emb_rows[ET_TT_MAX_CORES], emb_cols[ET_TT_MAX_CORES];
    int n_phases;
    et_rank_phase phases[ET_MAX_RANK_PHASES];
    /* LoRA: each target W (n_out x n_in) gains B A, A r x n_in and B n_out x r, scaled by alpha / r; the
     * model's own parameters frozen (no gradients, no optimizer states) */
    int lora_rank;
    double lora_alpha;
    unsigned lora_targets; /* a bit per et_lora_target */
} et_method;

/* Stored bytes per dense weight element (values plus index metadata) at precision size e. */
double et_sparse_bytes_per_weight(const et_sparse_spec *s, double e);
/* Index/mask metadata bytes per dense element. */
double et_sparse_meta_bytes_per_weight(const et_sparse_spec *s);
/* Multiplier on the dense matrix rate for the kept FLOPs of a sparse product on device d; -1 when the
 * device cannot run the pattern (2:4 without sparse tensor cores). */
double et_sparse_rate_factor(const et_device_profile *d, const et_sparse_spec *s);
/* The factors for an n_in x n_out linear layer, or NULL if the method has none. */
const et_tt_factors *et_method_factors(const et_method *m, int n_in, int n_out);

#endif

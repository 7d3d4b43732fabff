/* scenario: one capacity-planning question: model, data, batch, optimizer, precision, parallelism, cluster,
 * training target and simulation settings (format: docs/scenario.md).
 *
 * Contract: et_scenario_load() reads and validates a scenario JSON file strictly: unknown keys, wrong
 * types, out-of-range values and inconsistent combinations (batch not matching the GPU count, heads not
 * dividing hidden, a missing histogram or profile file) fail with *err filled (file, JSON path or
 * line:column, what was expected). Relative file names inside a scenario resolve against the scenario's
 * directory; a device given by name (no '/' and no ".json") resolves in the profile directory
 * (ET_PROFILE_DIR in the environment, else the one compiled in). Units in the struct are SI: bytes,
 * bytes/s, seconds. The scenario owns its length distribution; release with et_scenario_free(). */
#ifndef ET_SCENARIO_H
#define ET_SCENARIO_H

#include <jansson.h>
#include <stdbool.h>

#include "cluster.h"
#include "device_profile.h"
#include "et_error.h"
#include "length_dist.h"
#include "method.h"
#include "model_config.h"
#include "op_scales.h"
#include "optimizer.h"
#include "quantization.h"
#include "resilience.h"
#include "sampling.h"
#include "schedule.h"
#include "software.h"

#define ET_MAX_PIPELINE 4096
#define ET_MAX_LAYERS 10000            /* transformer layers of a model */
#define ET_MAX_LOCAL_BATCH (1 << 20)   /* sequences per GPU micro-batch */
#define ET_MAX_SAMPLED_BATCH (1 << 24) /* sequences per step when lengths are sampled */
#define ET_MAX_SIMULATED_GPUS 262144   /* GPUs the SimGrid engine plays (the analytic engine has no bound) */
#define ET_MAX_GPUS_PER_NODE 576 /* one NVLink domain (GB200 NVL72 is 72; NVL576 the largest announced) */

typedef enum { ET_CLIP_NONE, ET_CLIP_AFTER_ALLREDUCE, ET_CLIP_PER_BUCKET } et_clip_mode;
extern const char *const et_clip_mode_names[]; /* "none", "after_allreduce", "per_bucket", NULL */

/* What a time-to-train counts (run_timing.h): the target's steps, or MLPerf's timed region. */
typedef enum { ET_TIMING_STEPS, ET_TIMING_MLPERF } et_timing_rule;
extern const char *const et_timing_rule_names[]; /* "steps", "mlperf", NULL */

typedef enum { ET_COLL_AUTO, ET_COLL_RING, ET_COLL_TREE, ET_COLL_HIERARCHICAL, ET_COLL_FASTEST } et_coll_algo;
extern const char *const et_coll_algo_names[]; /* "auto", "ring", "tree", "hierarchical", "fastest", NULL */

typedef struct et_scenario {
    char source[512];
    char dir[512];
    char name[128];
    et_model_config model;
    et_method method;
    struct {
        int seq_len;
        et_length_dist lengths;
        bool unpadded;
        et_sampling sampling;
        /* supervised fine-tuning: the share of each sequence's tokens the loss scores, its last ones (the
         * answer; the prompt's predictions masked). No cost: the output layer and the loss run over every
         * position (Megatron's loss mask multiplies the per-token losses); etrun masks them. 1: every token
         */
        double answer_fraction;
    } data;
    struct {
        long long global;
        long long local;
        long long grad_accum;
    } batch;
    struct {
        et_optimizer name;
        et_clip_mode clip;
        double max_grad_norm;
        et_galore galore;
    } optimizer;
    et_precision precision;
    et_scaling scaling; /* fp8 and fp4: the quantization recipe (quantization.h; "scaling") */
    struct {
        int first, last; /* fp8 and fp4: the first and last layers kept in 16 bits (Megatron-Core's
                            --first-last-layers-bf16 with --num-layers-at-start/end-in-bf16); 0: none */
    } bf16_layers;
    struct {
        int tensor;
        int pipeline;
        int data;   /* derived: gpus / (tensor * pipeline * context), the batch's replicas */
        int expert; /* expert parallelism: each MoE layer's experts split over this many ranks: data ranks,
                       or with expert_tensor 1 and tensor > 1 the tensor and data ranks together (Megatron's
                       MoE parallel folding) */
        int expert_tensor; /* each expert's hidden width split over this many ranks: the tensor degree
                              (Megatron's default) or 1 (folded: experts whole); et_scenario_expert_tensor */
        int context; /* context parallelism: each sequence split over this many ranks (ring attention) */
        int virtual_pipeline; /* interleaved 1F1B: model chunks per pipeline stage (1 = plain 1F1B) */
        int layers_per_stage[ET_MAX_PIPELINE]; /* uneven partition, or all 0 (layers / pipeline each) */
        bool uneven;
        int zero_stage;
        bool distributed_optimizer; /* Megatron's: states sharded over data ranks, gradients reduce-scattered
                                     */
        et_recompute recompute;
        unsigned recompute_modules; /* selective's modules, a bit each (schedule.h); 0: core_attn */
        int recompute_layers;       /* full: the first this many layers of each model chunk of a stage
                                       (Megatron's --recompute-method block); 0: every layer */
        bool sequence_parallel;     /* Megatron sequence parallelism inside the tensor-parallel group */
        bool
            tp_overlap; /* tensor-parallel collectives pipelined with their GEMMs (needs sequence_parallel) */
        et_attention_kind attention;
        double bucket_bytes;
        et_coll_algo allreduce;
        bool overlap;
    } parallel;
    et_cluster cluster;
    struct {
        double samples;
        long long steps; /* derived from samples when not given */
        bool
            steps_given; /* steps were given (samples follow from the global batch), else samples or tokens */
        bool tokens_given; /* samples came from a token budget (named in errors) */
        double eval_interval_samples;
        double eval_samples;
        et_timing_rule timing;  /* run_timing.h */
        bool initial_eval;      /* an evaluation before the first step */
        long long warmup_steps; /* the first steps that take warmup_extra_s more than the steady step */
        double warmup_extra_s;
    } target;
    struct {
        int steps;
        unsigned long long seed;
        double straggler_sigma; /* lognormal sigma of per-rank compute noise, 0 = none */
    } simulation;
    struct {
        et_launch_mode mode;
        double per_kernel; /* host seconds per launched kernel (0 on CPU devices: no separate host) */
    } host;
    et_software software;     /* the training stack's terms (model/software.h) */
    et_op_scales op_scales;   /* etsim --op-times: measured / modelled per op id (owned; n = 0: none) */
    et_resilience resilience; /* failures and checkpoints (model/resilience.h), defaults when absent */
    struct {
        double pue;              /* facility power over IT power (default 1.2) */
        double carbon_g_per_kwh; /* grid intensity, g CO2e a kWh (0: emissions not reported) */
    } energy;
} et_scenario;

int et_scenario_load(const char *path, et_scenario *out, et_error *err);
/* Parses an already loaded document (`source` names it in messages and anchors relative file names);
 * `extra_keys` (NULL-terminated, may be NULL) are further top-level keys the caller reads itself, such as
 * a plan's "run". The caller keeps ownership of root. */
int et_scenario_parse(json_t *root, const char *source, const char *const *extra_keys, et_scenario *out,
                      et_error *err);
void et_scenario_free(et_scenario *s);

/* et_scenario_parse in its two halves. et_scenario_read reads every section as given: the plan's parallel
 * fields, batch.local and batch.global or grad_accum (0 when not given) and the target are read, not derived
 * or checked. et_scenario_check_plan derives what the plan decides (the data-parallel degree, the global
 * batch and gradient accumulation, the steps) and checks the plan against the model, the cluster and the
 * data, its errors naming the scenario's JSON paths; the plan search calls it on a read scenario whose
 * parallel fields and batch it set, instead of parsing a document per candidate. */
int et_scenario_read(json_t *root, const char *source, const char *const *extra_keys, et_scenario *out,
                     et_error *err);
int et_scenario_check_plan(et_scenario *s, et_error *err);

/* The file a scenario's data file name (data.lengths.file) stands for: relative to the scenario's folder
 * `dir`, else, when that does not exist, relative to ET's scenarios folder (the shipped scenarios name
 * ./data/...: a copy elsewhere still finds them); absolute names are kept. */
void et_data_file_path(const char *name, const char *dir, char *out, size_t size);

/* The file a device name stands for, as cluster.device reads it: a name with a '/' or ending in .json is a
 * file relative to `dir`; another is NAME.json in ET_PROFILE_DIR (else the profiles compiled in), which must
 * exist. On failure *err names `source` and `where` (a JSON path or a flag) and lists the profiles there. */
int et_device_profile_path(const char *name, const char *dir, const char *source, const char *where,
                           char *path, size_t size, et_error *err);

/* Total GPUs in the cluster. */
int et_scenario_gpus(const et_scenario *s);

/* The expert tensor degree (parallelism.expert_tensor, else the tensor degree), and whether the experts are
 * folded over the tensor ranks (an expert tensor degree below the tensor degree: each MoE layer runs on the
 * sequence-parallel share of the tokens, its all-to-all spanning tensor and data ranks). */
int et_scenario_expert_tensor(const et_scenario *s);
bool et_scenario_experts_folded(const et_scenario *s);

/* Data ranks an expert group spans: the expert degree x (1 without expert parallelism), or x / t when the
 * experts are folded (an expert group is then x / t whole tensor groups). Every such-th data rank holds the
 * same experts. */
int et_scenario_expert_data_span(const et_scenario *s);

/* Ranks that hold the same weights and reduce gradients together: data x context (Megatron folds the
 * context-parallel ranks into the data-parallel gradient reduction and optimizer sharding). */
int et_scenario_grad_ranks(const et_scenario *s);

/* The data-parallel communication pattern, one rule for the analytic model and the simulator: gradients
 * reduce-scattered instead of all-reduced (ZeRO-2/3, Megatron's distributed optimizer), and updated
 * parameters all-gathered after the optimizer (ZeRO-1 and up, the distributed optimizer). */
bool et_scenario_reduce_scatters_gradients(const et_scenario *s);
bool et_scenario_gathers_parameters(const et_scenario *s);

#endif

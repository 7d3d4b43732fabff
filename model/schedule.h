/* schedule: how a step's work is ordered on the GPUs: activation recomputation and the 1F1B pipeline
 * (plain or interleaved), the rules the analytic model, the simulator and the memory model share.
 *
 * Contract: pure functions of their arguments, no allocation, no errors. Counts are in micro-batches
 * of one (whole) pipeline stage; formulas and sources are in docs/cost-model.md ("Pipeline schedules"). */
#ifndef ET_SCHEDULE_H
#define ET_SCHEDULE_H

typedef enum { ET_RECOMPUTE_NONE, ET_RECOMPUTE_FULL, ET_RECOMPUTE_SELECTIVE } et_recompute;
extern const char *const et_recompute_names[]; /* "none", "full", "selective", NULL */

/* Selective recomputation's modules (Megatron-Core's recompute_modules, recompute_granularity "selective"):
 * each one's forward runs again in backward instead of keeping its outputs. core_attn the attention core
 * (the default, Korthikanti et al.'s selective recomputation), layernorm the norms before attention and
 * MLP, mla_up_proj latent attention's up projections (queries, keys and values), mlp a dense MLP's first
 * product and activation, moe_act the experts' activation, shared_experts the shared experts' first
 * product and activation. A bit each in et_graph_options.recompute_modules. */
typedef enum {
    ET_RECOMPUTE_CORE_ATTN,
    ET_RECOMPUTE_LAYERNORM,
    ET_RECOMPUTE_MLA_UP_PROJ,
    ET_RECOMPUTE_MLP,
    ET_RECOMPUTE_MOE_ACT,
    ET_RECOMPUTE_SHARED_EXPERTS,
    ET_RECOMPUTE_MODULES
} et_recompute_module;
extern const char *const et_recompute_module_names[]; /* Megatron's names, NULL-terminated */
/* The modules a step recomputes: under "selective" the given ones (none given: core_attn), else none. */
unsigned et_recompute_modules_of(et_recompute recompute, unsigned modules);
#define ET_RECOMPUTES(modules, m) (((modules) >> (m)) & 1u)

/* How attention runs: the scores materialised per head (scores, softmax, dropout, context kernels) or one
 * fused flash-style kernel that keeps them on chip (Dao 2023, FlashAttention-2). */
typedef enum { ET_ATTENTION_STANDARD, ET_ATTENTION_FLASH } et_attention_kind;
extern const char *const et_attention_names[]; /* "standard", "flash", NULL */

/* How kernels are launched, which sets the host's cost per kernel (docs/cost-model.md, "Host overhead"). */
typedef enum { ET_LAUNCH_FRAMEWORK_EAGER, ET_LAUNCH_C_RUNTIME, ET_LAUNCH_CUDA_GRAPHS } et_launch_mode;
extern const char *const et_launch_mode_names[]; /* "framework_eager", "c_runtime", "cuda_graphs", NULL */

/* Default host seconds per launched kernel of a mode: PyTorch eager dispatch with autograd (6.8 us) plus a
 * CUDA launch (3 us); a C runtime's launch alone (3 us); a CUDA graph's marginal cost per node (0.58 us).
 * Rows overheads-001, -033 and -032 of scenarios/data/calibration/overheads.csv. */
double et_launch_default_seconds(et_launch_mode mode);

/* A phase's wall time when the host issues `kernels` kernels at `host_per_kernel` seconds each while the
 * device needs `device` seconds: the slower of the two (the host runs ahead asynchronously otherwise). */
double et_host_bound(double device, double kernels, double host_per_kernel);

/* Idle time of a 1F1B pipeline of `stages` stages with `virtual_stages` model chunks per stage, in
 * whole-stage micro-batch times (forward + backward): (p - 1) / v (Narayanan et al. 2021, sec. 2.2). */
double et_pipeline_bubble_micro_batches(int stages, int virtual_stages);

/* Layers in each model chunk of a stage of `stage_layers` layers under interleaving (`virtual_stages`
 * chunks; 0 or 1: one): ceil(stage_layers / virtual_stages), the last chunk the rest. */
int et_pipeline_chunk_layers(int stage_layers, int virtual_stages);

/* Activation sends (and receives) between stages per micro-batch, each way: v chunk boundaries. */
int et_pipeline_sends_per_micro_batch(int stages, int virtual_stages);

/* Micro-batches whose activations stage `stage` holds at its peak under 1F1B: min(m, p - stage), times
 * 1 + (p - 1) / (p v) with interleaving (Korthikanti et al. 2022, sec. 4.2.3). */
double et_pipeline_in_flight(int stages, int virtual_stages, int stage, long long micro_batches);

#endif

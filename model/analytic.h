/* analytic: the closed-form estimate of one training step and of time-to-train.
 *
 * The busiest pipeline stage's step schedule (step_schedule.h: the step's events on the compute and
 * communication streams, in order, with what waits for what) is evaluated with the closed forms of
 * phase_time.h and collectives.h at the expected batch shape: compute-stream events add up; each
 * communication-stream event starts at the later of what it waits for and the previous one's end; exposed
 * communication is what the communication stream runs past the end of backward (with overlap off, all of
 * it). The SimGrid simulator (sim/) plays the same schedule as actors and flows and is checked against this
 * function (tests/sim/analytic_vs_sim.sh).
 *
 * Contract: et_analytic_estimate() fills *out (times in seconds, FLOPs, bytes); it fails only when the graph
 * cannot be built (out of memory). The scenario's `parallel.overlap` selects overlap. */
#ifndef ET_ANALYTIC_H
#define ET_ANALYTIC_H

#include "buckets.h"
#include "collectives.h"
#include "graph.h"
#include "memory.h"
#include "op_classes.h"
#include "phase_time.h"
#include "scenario.h"
#include "scenario_graph.h"

/* One phase of a tensor-train rank schedule. */
typedef struct et_phase_estimate {
    double from; /* fraction of training where it starts */
    int rank;
    double step_time;
    long long steps;
    double params;
} et_phase_estimate;

typedef struct et_estimate {
    double params_total;         /* whole model: trainable values (kept weights, TT cores) */
    double params_dense;         /* the dense model of the same shape */
    double params_frozen;        /* LoRA: the model's own parameters, frozen (params_total: the adapters) */
    double params_active;        /* used by one token: a mixture of experts' top_k experts per MoE layer */
    double moe_imbalance;        /* E[max/mean] of expert ranks' rows (moe.h; 1 when balanced or dense) */
    double moe_dropped;          /* fraction of routed rows a fixed capacity drops */
    double params_per_gpu;       /* this GPU's shard of weights (tensor/pipeline split, before ZeRO) */
    double galore_projected;     /* of them, those whose optimizer states GaLore projects */
    double model_flops_per_step; /* all GPUs, forward + backward, no recomputation */
    double flops_per_token;      /* model FLOPs / tokens trained */
    double tokens_per_step;
    et_memory memory; /* of the stage with the largest total */
    int busiest_stage;

    /* per step, seconds, on the busiest stage */
    double forward;       /* all micro-batches */
    double backward;      /* includes recomputation */
    double clip;          /* per-bucket clipping kernels */
    double accumulate;    /* the stack's gradient accumulation passes (software.grad_accumulation) */
    double host_sync;     /* the stack's host synchronisations: the device idles while the host re-issues */
    double tp_comm;       /* tensor-parallel all-reduces (blocking) */
    double ep_comm;       /* experts' all-to-alls (blocking; mixture of experts with expert parallelism) */
    double ep_comm_alone; /* the same all-to-alls blocking, without software.ep_overlap */
    double ep_comm_overlapped; /* and beside a partner micro-batch, with it (what the overlap leaves) */
    double
        cp_comm; /* ring attention's key/value exchanges not hidden behind attention (context parallelism) */
    double pp_comm; /* pipeline activation sends (blocking) */
    double bubble;  /* 1F1B fill and drain */
    double compute; /* forward + backward + clip + accumulate + host_sync + tp_comm + ep_comm + cp_comm +
                       pp_comm + bubble */
    double dp_comm; /* sum of bucket collectives */
    double dp_comm_exposed;
    double zero_gather;    /* ZeRO parameter all-gather after the update (exposed) */
    double clip_allreduce; /* global-norm all-reduce when clipping after the all-reduce */
    double optimizer;
    double step_time;

    double straggler_factor;   /* E over sampled steps of max/mean per-rank compute (1 = balanced) */
    double step_time_balanced; /* the step with every rank at the mean compute (the parts above add to it) */
    double straggler_delay;    /* (factor - 1) x (forward + backward): a first-order estimate, in step_time */
    et_batch_shape largest_batch; /* largest sampled micro-batch, used to size activations */

    double mfu;
    double samples_per_second;
    double tokens_per_second;
    long long steps;        /* inside the timed region (run_timing.h) */
    double evals;           /* evaluations inside it, the initial one included */
    long long warmup_steps; /* the first steps that take longer (target.warmup, at most steps) */
    double warmup_time;     /* their extra time */
    double train_time;      /* steps * step_time + warmup_time */
    double eval_time;       /* all evaluations */
    double time_to_train;
    et_goodput goodput;                 /* failures and checkpoints (model/resilience.h) */
    double time_to_train_with_failures; /* time_to_train x goodput.factor: what the run is expected to take */
    double energy_step_j;               /* the GPUs' energy a step, J (0 when the profile gives no power) */
    double energy_run_kwh;              /* the run's with failures and the facility's PUE, kWh */
    double co2_kg; /* energy_run_kwh x the scenario's carbon intensity (0 when it gives none) */

    int n_phases; /* tensor-train rank schedule phases (1 otherwise); train_time adds them up */
    et_phase_estimate phases[ET_MAX_RANK_PHASES];

    int n_buckets;
    double bucket_bytes_max;
    et_coll_algo algo; /* algorithm used for the largest bucket */
} et_estimate;

/* GPU-hours of `seconds` on the scenario's GPUs, and model TFLOP/s per GPU at `step_s` a step (0 when
 * step_s is not positive): the rules every report and the search use. */
double et_gpu_hours(const et_scenario *s, double seconds);
double et_tflops_per_gpu(const et_scenario *s, double flops_per_step, double step_s);

/* Frees this thread's cache of graphs (kept while graph ids are off, for the plan search: see analytic.c). */
void et_analytic_release_cache(void);

int et_analytic_estimate(const et_scenario *s, et_estimate *out, et_error *err);

/* Straggler factor E[max/mean] over `steps` sampled steps of per-rank compute (forward + backward of a
 * step's micro-batches on graph g; 1 when every rank's batch costs the same). If `largest` is not NULL it is
 * raised to the largest micro-batch sampled (component-wise). Returns -1 on out of memory. */
int et_straggler_factor(const et_scenario *s, const et_graph *g, int steps, double *factor,
                        et_batch_shape *largest);

#endif

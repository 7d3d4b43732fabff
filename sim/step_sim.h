/* step_sim: one or more training steps of a scenario played out on a SimGrid platform.
 *
 * Each GPU runs one actor playing two streams: compute (forward, backward, per-bucket clipping, optimizer,
 * as executions) and communication, one collective per gradient bucket in backward order, as flows between
 * the hosts (ring, double binary tree or hierarchical, as NCCL would pick or as the scenario forces),
 * started when the bucket is ready and the previous collective has ended. A collective starts when the last
 * rank of its communicator arrives, so slow ranks delay everyone. Compute durations come from the cost model
 * (graph.h) for each rank's own batch of the step.
 *
 * Contract: sim_run() runs the simulation in a child process (SimGrid keeps global state and may abort on
 * platform errors; the child isolates both) and fills *out with what it measured (sim_result.h; the caller
 * frees it with sim_result_free). It fails with *err filled when the child fails. Output is
 * deterministic for a scenario, options and seed. */
#ifndef ET_STEP_SIM_H
#define ET_STEP_SIM_H

#include <jansson.h>
#include <stdbool.h>

#include "et_error.h"
#include "scenario.h"
#include "sim_result.h"

#define SIM_MAX_SIMGRID_ARGS 32

typedef struct sim_options {
    int steps;             /* simulated steps (scenario's simulation.steps when 0) */
    bool detailed;         /* collectives step by step (2(N-1) messages per ring) instead of fluid flows */
    bool force_no_overlap; /* start bucket collectives only after backward */
    bool all_flows;  /* play every flow, also those mirrored from an identical flow alone on its links */
    bool all_groups; /* one communicator actor per data-parallel group, never merging identical ones */
    const char *trace_path;   /* Chrome trace of the last simulated step, NULL for none */
    int trace_ranks;          /* ranks kept in the trace (sampled evenly), 0 = all up to 64 */
    bool progress;            /* progress line on stderr */
    bool stats;               /* simulator cost on stderr: wall times, flows modelled and played */
    const char *platform_out; /* also write the generated platform here */
    /* collective benchmark (nccl-tests style) instead of training steps: one collective per size on the
     * data-parallel communicator, no compute */
    int bench_sizes; /* number of sizes, 0 = train */
    const double *bench_bytes;
    et_coll_algo bench_algo; /* AUTO picks as NCCL would */
    int bench_op;            /* 0 all-reduce, 1 reduce-scatter, 2 all-gather */
    /* SimGrid's own options, passed to simgrid_init after etsim's defaults (so they win), each as
     * "--cfg=name:value" or "--log=spec" (etsim --cfg, --log); not owned */
    const char *simgrid_args[SIM_MAX_SIMGRID_ARGS];
    int n_simgrid_args;
} sim_options;

extern const char *const sim_bench_op_names[]; /* "allreduce", "reduce_scatter", "allgather", NULL */

int sim_run(const et_scenario *s, const sim_options *o, sim_result *out, et_error *err);

/* sim_run in two halves, so the caller can work while the child simulates: sim_start forks the child,
 * sim_finish waits for it and returns its result as sim_run does. Every started child must be finished. */
typedef struct sim_child {
    int pid, fd;
} sim_child;
int sim_start(const et_scenario *s, const sim_options *o, sim_child *child, et_error *err);

/* Refuses (-1, *err) a scenario with more GPUs than the simulator plays (ET_MAX_SIMULATED_GPUS); sim_start
 * checks it too, before anything is written. */
int sim_check_size(const et_scenario *s, et_error *err);
int sim_finish(sim_child *child, const et_scenario *s, sim_result *out, et_error *err);

/* Whether sim_run_phases runs the simulation once (everything but tensor-train rank schedules). */
int sim_runs_once(const et_scenario *s, const sim_options *o);

/* Like sim_run, once per phase of a tensor-train rank schedule: the result is the first phase's simulation
 * with every phase's step times in `phases`. Other scenarios: exactly sim_run. */
int sim_run_phases(const et_scenario *s, const sim_options *o, sim_result *out, et_error *err);

/* The child side, run inside the forked process: simulate and send the results to fd. Returns 0 on success.
 */
int sim_child_main(const et_scenario *s, const sim_options *o, int fd);

#endif

/* sim_result: what one simulation measured, as a typed struct.
 *
 * The simulation child (step_sim.c) fills it and sends it to etsim over the pipe as raw fields and arrays
 * (the same binary on both ends: sim_result_send, sim_result_receive); every report reads the struct; the
 * JSON report's "simulation" section is written from it in one place, sim_result_json, which is the only
 * place its keys are spelled (docs/report-format.md).
 *
 * Contract: a received or built result owns its arrays; sim_result_free releases them (safe on a zeroed
 * struct). The child sends either its results or its failure (an error code and text); sim_result_receive
 * returns 0 with *r filled, -1 with *err (the child's failure as it sent it, or out of memory receiving), or
 * -2 when the pipe ended early (the child died: its exit status says why). Sends return 0, or -1 when the
 * pipe fails. */
#ifndef ET_SIM_RESULT_H
#define ET_SIM_RESULT_H

#include <jansson.h>
#include <stdbool.h>

#include "et_error.h"
#include "fabric.h"
#include "scenario.h"

/* Step times over the simulated steps, seconds. */
typedef struct sim_step_stats {
    double mean, p50, p99, min, max;
} sim_step_stats;

/* One simulated step, averaged over the ranks (straggler_factor: the busiest rank's compute over the mean).
 */
typedef struct sim_step_record {
    double time, compute, exposed_comm, idle, straggler_factor;
} sim_step_record;

/* One rank, averaged over the steps. */
typedef struct sim_rank_record {
    int rank, stage;
    double compute, idle, exposed_comm;
} sim_rank_record;

/* One bucket's collective in the last step on stage 0's first communicator, or one size of a collective
 * benchmark: its simulated and closed-form times, algorithm and bandwidths (nccl-tests' algbw and busbw). */
typedef struct sim_collective_record {
    double bytes;
    char algorithm[24];
    double time, closed_form, algbw_GBps, busbw_GBps;
    double error; /* time / closed_form - 1 */
} sim_collective_record;

/* The experts' all-to-alls, per rank and step. */
typedef struct sim_alltoall_stats {
    double per_step, time, wait, closed_form;
} sim_alltoall_stats;

/* One phase of a tensor-train rank schedule, simulated on its own. */
typedef struct sim_phase_record {
    double from;
    int rank;
    sim_step_stats step;
} sim_phase_record;

/* The faults' cost (faults_report.h): every part's effect, the step as given and healthy, the slowest part
 * alone. */
typedef struct sim_fault_part {
    int part; /* et_fault_part */
    char where[96];
    double factor, fraction_left;
    char effect[200];
} sim_fault_part;

typedef struct sim_faults {
    int count; /* parts (0: no faults section) */
    sim_fault_part *parts;
    double step, healthy_step, cost;
    bool has_slowest;
    sim_fault_part slowest;
    double slowest_step_alone, slowest_cost_alone;
} sim_faults;

typedef struct sim_result {
    bool bench; /* a collective benchmark (the fields below `collective`), else training steps */
    int simulated_steps;
    bool detailed; /* collectives played message by message */
    sim_step_stats step;
    double compute, exposed_comm, idle, straggler_factor; /* per step, mean over ranks and steps */
    int n_steps, n_ranks;
    sim_step_record *steps; /* [n_steps] */
    double *rank_compute;   /* [step * n_ranks + rank] */
    sim_rank_record *ranks; /* [n_ranks] */
    int n_collectives;
    sim_collective_record *collectives; /* the buckets of the last step, or the benchmark's sizes */
    bool has_alltoall;
    sim_alltoall_stats alltoall;
    int n_phases;
    sim_phase_record *phases; /* tensor-train rank schedules (sim_run_phases) */
    sim_faults faults;
    /* a collective benchmark */
    char collective[24]; /* "allreduce", "reduce_scatter" or "allgather" */
    int bench_ranks, bench_nodes, bench_ranks_per_node;
} sim_result;

void sim_result_free(sim_result *r);

int sim_result_send(int fd, const sim_result *r);
int sim_result_send_failure(int fd, et_error_code code, const char *text);
int sim_result_receive(int fd, sim_result *r, et_error *err);

/* The report's "simulation" section (a new object), or NULL when out of memory. */
json_t *sim_result_json(const et_scenario *s, const sim_result *r);

#endif

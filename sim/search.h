/* search: the plans of a scenario's cluster and global batch, each estimated by the analytic model and
 * ranked by step time (etsim --search).
 *
 * Contract: search_run() reads the scenario file, varies its parallelism and micro-batch over the space
 * below, validates every candidate with the scenario parser itself (so a plan the parser would refuse is
 * never ranked), estimates the valid ones and fills *out with the `keep` fastest that fit in memory,
 * fastest first, plus counts of what was tried. The space: tensor degree over the divisors of
 * gpus_per_node, pipeline over the divisors of the layers (with 1, 2 or 4 interleaved chunks when more than
 * one stage), micro-batch 1..64 in powers of two and the scenario's own, recomputation none / selective /
 * full, ZeRO 0 or 1, sequence parallelism off or on (with tensor parallelism); with `space`, over several GPU
 * counts too, dropping plans past a deadline and ranking by GPU-hours when one is given. Errors: the scenario
 * cannot be read, a GPU count is not a multiple of gpus_per_node (*err). */
#ifndef ET_SEARCH_H
#define ET_SEARCH_H

#include <jansson.h>

#include "analytic.h"

/* What the search may vary beyond the plan, and how it ranks. */
typedef struct search_space {
    int n_gpus;
    int gpus[32];      /* GPU counts to try (multiples of gpus_per_node); none: the scenario's */
    double price;      /* per GPU-hour (0: rank by time) */
    double deadline_s; /* time-to-train limit (0: none); with one, plans rank by GPU-hours */
    int n_devices;
    const char *devices[8]; /* device profiles to try (names or files); none: the scenario's */
    int threads;            /* evaluation threads (0: every core of the machine) */
} search_space;

typedef struct search_plan {
    int gpus;
    int device; /* index into search_space.devices, -1 for the scenario's */
    int tensor, pipeline, virtual_pipeline, data, zero_stage;
    long long local, grad_accum;
    et_recompute recompute;
    bool sequence_parallel;
    double step_s, mfu, memory_gib, time_to_train_s, gpu_hours;
    json_t *scenario; /* the candidate's scenario document (owned) */
} search_plan;

typedef struct search_result {
    search_plan *best; /* fastest first */
    int n_best;
    search_plan *front; /* the Pareto front of time-to-train against GPU-hours, fastest first */
    int n_front, cap_front;
    int tried, invalid, too_big, too_slow, ranked;
    double seconds; /* wall time of the search */
    int threads;    /* threads that evaluated it */
} search_result;

/* `sets` (n_sets "key.path=value", as etsim --set) are applied to the scenario first. */
int search_run(const char *scenario_path, const char *const *sets, int n_sets, const search_space *space,
               int keep, search_result *out, et_error *err);
void search_result_free(search_result *r);

#endif

/* search: the plans of a scenario's cluster and global batch, each estimated by the analytic model and
 * ranked by step time (etsim --search).
 *
 * Contract: search_run() reads the scenario file, varies its parallelism and micro-batch over the space
 * below, checks every candidate by the scenario parser's own plan rules (et_scenario_check_plan: a plan
 * the parser would refuse is never ranked), estimates the valid ones and fills *out with the `keep` fastest
 * that fit in memory, fastest first, plus counts of what was tried. The space: tensor degree over the
 * divisors of gpus_per_node, pipeline over the divisors of the layers (with 1, 2 or 4 interleaved chunks when
 * more than one stage), micro-batch 1..64 in powers of two and the scenario's own, recomputation none /
 * selective / full, ZeRO 0 or 1, sequence parallelism off or on (with tensor parallelism); with `space`, over
 * several GPU counts too, dropping plans past a deadline and ranking by GPU-hours when one is given. Errors:
 * the scenario cannot be read, a GPU count is not a multiple of gpus_per_node (*err). */
#ifndef ET_SEARCH_H
#define ET_SEARCH_H

#include <jansson.h>

#include "analytic.h"

/* What the search may vary beyond the plan, and how it ranks. */
#define SEARCH_MAX_PRICES 16
typedef struct search_space {
    int n_gpus;
    int gpus[32]; /* GPU counts to try (multiples of gpus_per_node); none: the scenario's */
    double price; /* per GPU-hour for devices without their own price (0: none) */
    int n_prices; /* per-device prices (--price-per-gpu-hour name=P, --prices FILE) */
    char price_device[SEARCH_MAX_PRICES][64]; /* the device as the scenario or --search-devices names it */
    double device_price[SEARCH_MAX_PRICES];
    double deadline_s;       /* time-to-train limit (0: none) */
    double budget_gpu_hours; /* GPU-hours limit (0: none) */
    double budget_cost;      /* money limit (0: none; needs prices) */
    int max_gpus;            /* --max-gpus: no plan on more GPUs (0: none) */
    double memory_headroom;  /* --memory-headroom: the share of each GPU's memory a plan leaves free */
    bool deadline_at_band;   /* --deadline-at-band-edge: the deadline holds at the error band's p90 */
    int n_batches;
    long long batches[16]; /* global batches to try (sequences); none: the scenario's */
    int n_buckets;
    double bucket_mib[8]; /* gradient bucket sizes to try, MiB; none: the scenario's */
    int n_algos;
    int algos[4]; /* all-reduce algorithms to try (et_coll_algo); none: the scenario's */
    /* the fixed dimensions narrowed (--search-tensor, --search-pipeline, --search-micro, --search-zero,
     * --search-recompute): only these values when given */
    int n_tensor, tensor[16], n_pipeline, pipeline[16], n_micro, micro[8], n_zero, zero[4], n_recompute,
        recompute[3];
    /* expert and context parallelism to try (--search-expert, --search-context); none: every power of two
     * dividing a mixture of experts' experts (1 for dense models), and the scenario's context degree */
    int n_expert, expert[16], n_context, context[16];
    int n_vary;
    char vary[16][160]; /* --search-vary key.path=a,b,c as assignments "key.path=a", ...: any scenario key
                           (a method's knobs: sparsity, tensor-train rank) */
    int n_devices;
    const char *devices[8]; /* device profiles to try (names or files); none: the scenario's */
    int threads;            /* evaluation threads (0: every core of the machine) */
    bool progress;          /* a progress line on stderr */
    int rank, ranks;        /* under MPI: this process's share of the candidates (ranks <= 1: all) */
    int rank_by;            /* --rank-by: 1 + a search_order; 0 (a zeroed space): search_ranking's rule */
} search_space;

/* The price per GPU-hour of a device as a scenario or its profile names it, ignoring case (0: none known). */
double search_price(const search_space *space, const char *device);
/* Plans rank as --rank-by asks (time, GPU-hours, cost, energy; the deadline and budgets then only filter);
 * without it, by money with a budget or deadline and prices, by GPU-hours with a deadline or budget alone,
 * else by time-to-train. */
typedef enum { SEARCH_BY_TIME, SEARCH_BY_GPU_HOURS, SEARCH_BY_COST, SEARCH_BY_ENERGY } search_order;
extern const char *const search_order_names[]; /* "time", "gpu-hours", "cost", "energy" (--rank-by) */
typedef struct search_plan search_plan;
/* What ranks a plan in that order: its cost, GPU-hours, energy or time-to-train (all with failures). */
double search_rank_key(const search_plan *p, search_order by);
/* What became of an estimated plan. */
enum { SEARCH_RANKED, SEARCH_TOO_BIG, SEARCH_TOO_SLOW, SEARCH_OVER_BUDGET };
extern const char
    *const search_status_names[]; /* "ranked", "does_not_fit", "misses_deadline", "over_budget" */
search_order search_ranking(const search_space *space);

/* Checks the space against its scenario before any plan is tried, so that a mistyped flag is an input
 * error naming the flag, not "no plan": every --search-devices entry names a readable profile, every
 * tensor degree divides the scenario's GPUs a node (search_run checks the GPU counts), and every price
 * names a device the search uses (`scenario_device` as the scenario writes it, or a --search-devices
 * entry, or a profile's own name, ignoring case). */
int search_space_check(const search_space *space, const et_scenario *s, const char *scenario_device,
                       et_error *err);

struct search_plan {
    int gpus;
    long long global; /* sequences per step */
    int device;       /* index into search_space.devices, -1 for the scenario's */
    int tensor, pipeline, virtual_pipeline, data, zero_stage;
    int expert, context; /* expert- and context-parallel degrees */
    long long local, grad_accum;
    et_recompute recompute;
    bool sequence_parallel;
    double bucket_mib; /* 0: the scenario's */
    int vary;          /* index into search_space.vary, -1: none */
    int allreduce;     /* et_coll_algo, -1: the scenario's */
    double step_s, mfu, memory_gib, time_to_train_s, gpu_hours;
    double energy_kwh;  /* the run's, with failures and the facility's PUE (0: the profile gives no power) */
    double price, cost; /* per GPU-hour of its device and GPU-hours x price (0 without prices) */
    double tflops_per_gpu; /* model TFLOP/s per GPU at step_s */
    int status;            /* SEARCH_RANKED, or the constraint that refused it */
    json_t *scenario;      /* the candidate's scenario document (owned) */
};

typedef struct search_result {
    search_plan *best; /* fastest first */
    int n_best;
    search_plan *front; /* the Pareto front of time-to-train against GPU-hours, fastest first */
    int n_front, cap_front;
    int tried, invalid, too_big, too_slow, over_budget, ranked;
    search_plan *all; /* every estimated plan (ranked or refused by a constraint), without documents, in
                         candidate order (--search-csv) */
    int n_all, cap_all;
    /* the nearest plans each constraint refused (valid when the count is non-zero): the smallest memory
     * need, the shortest time-to-train past the deadline, the cheapest over the budget */
    search_plan nearest_too_big, nearest_too_slow, nearest_over_budget;
    double seconds;    /* wall time of the search */
    int threads;       /* threads that evaluated it */
    char refusal[400]; /* one reason the scenario's rules gave ("$.path: text"; of all the reasons, the first
                          in byte order, so that the thread count does not change it); "" when none */
} search_result;

/* `sets` (n_sets "key.path=value", as etsim --set) are applied to the scenario first. The front is of
 * time-to-train against cost (with prices) or GPU-hours. */
int search_run(const char *scenario_path, const char *const *sets, int n_sets, const search_space *space,
               int keep, search_result *out, et_error *err);
void search_result_free(search_result *r);

/* Adds `part` (emptied and freed) into `out`: counts, nearest refused plans, every ranked plan, the front
 * and the `keep` best in `order`; what the threads of one search and the ranks of an MPI one share. */
void search_result_merge(search_result *out, search_result *part, int keep, search_order order);

/* A result as JSON (every field, the best plans' documents included) and back, for the ranks of an MPI
 * search; from_json returns -1 on a malformed document or out of memory. */
json_t *search_result_to_json(const search_result *r);
int search_result_from_json(const json_t *j, int keep, search_result *out);

#endif

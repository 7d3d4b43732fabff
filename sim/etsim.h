/* etsim: the command-line tool's private header: its options and the parts of the tool in their own files
 * (etsim_args.c: the command line; etsim_search.c: the plan search's presentation; etsim_compare.c,
 * etsim_sweep.c; etsim.c: loading, the output checks, main). Only these files print and exit. */
#ifndef ET_ETSIM_H
#define ET_ETSIM_H

#include <stdio.h>

#include "compare.h"
#include "scenario.h"
#include "search.h"
#include "step_sim.h"

#define EXIT_INPUT 2
#define EXIT_DOES_NOT_FIT 3

typedef struct options {
    const char *scenario;
    const char *json_out;
    const char *csv_prefix;  /* --csv PREFIX */
    int search;              /* --search: rank the plans of the scenario's cluster */
    long long search_top;    /* --search-top N */
    long long search_sim;    /* --search-simulate K: the K best simulated too */
    const char *search_out;  /* --search-out FILE: the best plan's scenario */
    const char *search_csv;  /* --search-csv FILE: every ranked plan */
    const char *prices_file; /* --prices FILE */
    const char *plot;        /* --plot FILE.png: time-to-train against GPUs, and the front */
    search_space space;      /* --search-gpus, --price-per-gpu-hour, --deadline-days */
    const char *sets[32];    /* --set key.path=value, in order */
    int n_sets;
    const char *sweep; /* --sweep key.path=a,b,c */
    int analytic;
    int quiet;
    long long seed;       /* -1: scenario's */
    long long plan_steps; /* --plan-steps: the plan's run.steps (0: 20) */
    sim_options sim;
    const char *platform_out;
    const char *plan_out;
    const char *op_times;             /* --op-times measured.json */
    const char *compare_with;         /* --compare: the second scenario */
    const char *compare[COMPARE_MAX]; /* --compare A B C ...: every scenario, A first */
    int n_compare;
    const char *compare_sets[COMPARE_MAX][16]; /* key.path=value after a --compare file: for it alone */
    int n_compare_sets[COMPARE_MAX];
    long long top_ops;
    int top_ops_by_layer; /* --top-ops-by-layer: each op summed over the layers */
    int band_held_out;    /* --band-held-out: error bands without the scenario's own model's runs */
    int collective;       /* -1: train */
    long long min_bytes, max_bytes, step_factor;
} options;

/* The command line into *o (defaults first); -1 after printing what was wrong. --help prints and exits. */
int etsim_parse_args(int argc, char **argv, options *o);
void etsim_usage(FILE *out);

/* An error on stderr as etsim prints every error. */
void etsim_print_error(const et_error *err);

/* The scenario at `path` with --set, then the n_extra `extra` overrides applied (its document kept in *doc
 * when doc is not NULL; the caller's); errors printed, an exit status returned. */
int etsim_load_doc(const options *o, const char *path, const char *const *extra, int n_extra, et_scenario *s,
                   json_t **doc);
/* The scenario with --set applied (and one more override when `extra` is not NULL). */
int etsim_load_with(const options *o, const char *path, const char *extra, et_scenario *s);
/* etsim_load_with, then etsim_prepare. */
int etsim_load(const options *o, const char *path, et_scenario *s);
/* The checks and options every loaded scenario gets (fabric warnings, --seed, --no-overlap, --op-times). */
int etsim_prepare(const options *o, const char *path, et_scenario *s);
/* Every output is checked before any work: none may be an input, each must be writable. */
int etsim_check_outputs(const options *o, const et_scenario *s);

/* The modes other than one scenario's report, each returning the exit status. */
int etsim_search_main(options *o);
int etsim_sweep_main(const options *o);
int etsim_compare_main(options *o);

#endif

/* etsim: capacity planning for one training scenario (see docs/). Only this file prints and exits. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analytic.h"
#include "atomic_file.h"
#include "calib_run.h"
#include "collective_bench.h"
#include "compare.h"
#include "fabric.h"
#include "faults_report.h"
#include "json_reader.h"
#include "plan.h"
#include "platform.h"
#include "quantile.h"
#include "report.h"
#include "report_csv.h"
#include "scenario.h"
#include "scenario_override.h"
#include "search.h"
#include "search_mpi.h"
#include "step_sim.h"
#include <unistd.h>

#define EXIT_INPUT 2
#define EXIT_DOES_NOT_FIT 3

static void usage(FILE *out)
{
    fputs(
        "usage: etsim [options] scenario.json\n"
        "  --analytic        closed-form estimate only (fast); default: simulate with SimGrid\n"
        "  --json FILE       write the report as JSON (atomically)\n"
        "  --steps N         simulated steps (default: the scenario's simulation.steps)\n"
        "  --seed N          random seed (default: the scenario's simulation.seed)\n"
        "  --trace FILE      Chrome trace-event JSON of the last simulated step (opens in Perfetto)\n"
        "  --trace-ranks K   ranks kept in the trace, sampled evenly (default 64)\n"
        "  --platform-out FILE  write the generated SimGrid platform XML\n"
        "  --set key.path=value  override a scenario key (repeatable; JSON values, else strings)\n"
        "  --sweep key.path=a,b,c  the analytic estimate for each value, one row each\n"
        "  --search          rank the plans of the scenario's cluster and global batch by step time:\n"
        "                    tensor, pipeline (interleaved), micro-batch, recomputation, ZeRO 0-3,\n"
        "                    sequence parallelism; analytic estimates, plans that fit only; time-to-train,\n"
        "                    GPU-hours and cost count failures and checkpoints (the scenario's resilience)\n"
        "  --search-tensor 1,2,.. --search-pipeline 1,2,.. --search-micro 1,2,.. --search-zero 0,1,..\n"
        "  --search-recompute none,selective,full  only these values of a dimension\n"
        "  --search-vary key.path=a,b,c  any scenario key as one more dimension (sparsity, a TT rank)\n"
        "  --search-top N    plans listed (default 10); --search-out FILE writes the best as a scenario\n"
        "  --rank-by time|gpu-hours|cost|energy  what ranks the plans (the deadline and budgets then only\n"
        "                    filter); default: cost or GPU-hours under a deadline or budget, else time\n"
        "  --search-threads N  evaluation threads (default: every core)\n"
        "  --search-simulate K  also simulate the K best with SimGrid and show both figures\n"
        "  --search-gpus 256,512,...  GPU counts to try (default: the scenario's)\n"
        "  --search-expert 1,2,...  expert parallelism to try (default: every power of two dividing the\n"
        "                    experts of a mixture of experts); --search-context 1,2,... context parallelism\n"
        "                    (default: the scenario's)\n"
        "  --search-devices a100-sxm4-80gb,h100-sxm  device profiles to try (default: the scenario's)\n"
        "  --deadline-days D   only plans that train within D days\n"
        "  --budget-gpu-hours H, --budget C   only plans within H GPU-hours or C in money (needs prices)\n"
        "  --max-gpus N      only plans on at most N GPUs (of the counts searched)\n"
        "  --memory-headroom F  only plans leaving this share of each GPU's memory free (0.1: 10%%)\n"
        "                    (a deadline or budget ranks by cost with prices, else by GPU-hours)\n"
        "  --price-per-gpu-hour P | name=P,name=P  a price for every device, or per device profile\n"
        "  --prices FILE     per-device prices: {\"a100-sxm4-80gb\": 1.8, ...}\n"
        "  --search-batch 512,1024,...  global batches to try (default: the scenario's)\n"
        "  --search-buckets 25,100  gradient bucket sizes to try, MiB; --search-allreduce ring,tree  "
        "algorithms\n"
        "  --search-csv FILE  every ranked plan as CSV; with --json, the best and the front as JSON\n"
        "  --plot FILE.png   time-to-train against GPUs and the Pareto front (gnuplot)\n"
        "  --csv PREFIX      write the tables as CSV: PREFIX-ops.csv, and with the simulation "
        "PREFIX-buckets,\n"
        "                    -ranks and -steps.csv\n"
        "  --plan-out FILE   write a plan etrun can execute (the scenario plus a \"run\" section)\n"
        "  --plan-steps N    the plan's training steps (run.steps, default 20; --steps is the simulation's)\n"
        "  --op-times FILE   scale each op's modelled time by measured/modelled from etrun's measured.json\n"
        "                    (a step measured on one device of the scenario's kind predicts the cluster)\n"
        "  --detailed-collectives  play rings step by step (slow; for validating the fluid form)\n"
        "  --all-flows       play every flow (no mirroring of identical flows alone on their links)\n"
        "  --all-groups      one actor per data-parallel communicator (identical ones are merged by "
        "default)\n"
        "  --no-overlap      start gradient collectives only after backward\n"
        "  --quiet           no progress output\n"
        "  --stats           the simulator's own cost on stderr: wall times, flows modelled and played\n"
        "  --cfg name:value  a SimGrid configuration option (repeatable), e.g. contexts/factory:thread\n"
        "  --log spec        a SimGrid log setting (repeatable), e.g. et_actors.thresh:debug\n"
        "  --top-ops N       also list the N most expensive ops of one micro-batch\n"
        "  --top-ops-by-layer  the same with each op summed over the layers (20 rows unless --top-ops says)\n"
        "  --compare A.json B.json [C.json ...]  scenarios side by side, each against A, part by part;\n"
        "                    key.path=value after a file applies to that one alone (a variant of it,\n"
        "                    named by what it sets: --compare a.json a.json parallelism.tensor=4)\n"
        "  --collective OP   benchmark one collective (allreduce, reduce_scatter, allgather) on the\n"
        "                    data-parallel GPUs instead of training, nccl-tests style\n"
        "  --algo A          with --collective: auto, ring, tree or hierarchical (default auto)\n"
        "  --min-bytes N, --max-bytes N, --step-factor F   sizes for --collective (1M, 1G, 4)\n"
        "  --help            this text\n"
        "exit status: 0 ok, 2 bad input, 3 the plan does not fit in device memory (--search: no plan left),\n"
        "4 a collective benchmark deviates from its closed form, 1 other errors\n",
        out);
}

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
    int collective;       /* -1: train */
    long long min_bytes, max_bytes, step_factor;
} options;

/* The integer after a flag, in [min, max]; with `sizes`, a K, M or G suffix multiplies it by 2^10, 2^20 or
 * 2^30 (byte sizes, as the help shows). */
static int integer_arg(int argc, char **argv, int *i, long long min, long long max, int sizes, long long *out)
{
    const char *flag = argv[*i];
    if (++*i >= argc) {
        fprintf(stderr, "etsim: %s needs %s\n", flag, sizes ? "a size" : "a number");
        return -1;
    }
    char *end;
    errno = 0;
    long long v = strtoll(argv[*i], &end, 10), unit = 1;
    const int overflow = errno == ERANGE; /* strtoll clamps: never a silently different number */
    if (sizes && end != argv[*i] && *end && !end[1]) {
        unit = *end == 'K' ? 1LL << 10 : *end == 'M' ? 1LL << 20 : *end == 'G' ? 1LL << 30 : 0;
        if (unit) end++;
    }
    if (overflow || *end || end == argv[*i] || !unit || v > max / unit || v * unit < min) {
        fprintf(stderr, "etsim: %s expects %s in [%lld, %lld]%s, got \"%s\"\n", flag,
                sizes ? "a size in bytes" : "an integer", min, max,
                sizes ? ", optionally with K, M or G" : "", argv[*i]);
        return -1;
    }
    *out = v * unit;
    return 0;
}

static int number_arg(int argc, char **argv, int *i, long long min, long long max, long long *out)
{
    return integer_arg(argc, argv, i, min, max, 0, out);
}

static int bytes_arg(int argc, char **argv, int *i, long long min, long long max, long long *out)
{
    return integer_arg(argc, argv, i, min, max, 1, out);
}

static int file_arg(int argc, char **argv, int *i, const char **out)
{
    if (++*i >= argc) {
        fprintf(stderr, "etsim: %s needs a file name\n", argv[*i - 1]);
        return -1;
    }
    *out = argv[*i];
    return 0;
}

static int positive(const char *flag, const char *text, double *x)
{
    char *end;
    *x = strtod(text, &end);
    if (*end || end == text || !(*x > 0) || !isfinite(*x)) {
        fprintf(stderr, "etsim: %s expects a positive number, got \"%s\"\n", flag, text);
        return -1;
    }
    return 0;
}

/* --price-per-gpu-hour P (every device) or name=P,name=P (per device, as the scenario or --search-devices
 * names it). */
static int price_list(const char *text, search_space *space)
{
    if (!strchr(text, '=')) return positive("--price-per-gpu-hour", text, &space->price);
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", text);
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || space->n_prices == SEARCH_MAX_PRICES || eq - tok >= 64) {
            fprintf(
                stderr,
                "etsim: --price-per-gpu-hour expects a price or up to %d device=price pairs, got \"%s\"\n",
                SEARCH_MAX_PRICES, text);
            return -1;
        }
        *eq = 0;
        double x;
        if (positive("--price-per-gpu-hour", eq + 1, &x)) return -1;
        snprintf(space->price_device[space->n_prices], sizeof space->price_device[0], "%s", tok);
        space->device_price[space->n_prices++] = x;
    }
    return 0;
}

/* --prices FILE: {"device": price per GPU-hour, ...}, checked like a scenario. */
static int read_prices(const char *path, search_space *space, et_error *err)
{
    json_t *root;
    if (et_json_load_file(path, &root, err)) return -1;
    int rc = 0;
    if (!json_is_object(root)) rc = et_error_set(err, path, 0, 0, "$", "expected an object of device: price");
    const char *key;
    json_t *v;
    et_json_reader r = {path, err};
    json_object_foreach(root, key, v)
    {
        char at[ET_JSON_PATH_MAX];
        et_json_path(at, "$", key);
        double price;
        if (rc) break;
        if (!json_is_number(v) || !(json_number_value(v) > 0))
            rc = et_error_set(err, path, 0, 0, at, "expected a positive price per GPU-hour");
        else if (et_json_get_positive(&r, root, "$", key, true, 0, &price)) /* at most ET_JSON_NUMBER_MAX */
            rc = -1;
        else if (space->n_prices == SEARCH_MAX_PRICES || strlen(key) >= 64)
            rc = et_error_set(err, path, 0, 0, at, "at most %d devices of 63 characters", SEARCH_MAX_PRICES);
        else {
            snprintf(space->price_device[space->n_prices], sizeof space->price_device[0], "%s", key);
            space->device_price[space->n_prices++] = price;
        }
    }
    json_decref(root);
    return rc;
}

/* The context options SimGrid reads while it starts (so they go to simgrid_init, where a bad one aborts):
 * checked here. */
static int contexts_option_bad(const char *value)
{
    static const char *const integers[] = {
        "contexts/stack-size:", "contexts/guard-size:", "contexts/nthreads:"};
    static const char *const factories[] = {"raw", "thread", "boost", "ucontext", NULL};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(integers[i]);
        if (strncmp(value, integers[i], n)) continue;
        char *end;
        long v = strtol(value + n, &end, 10);
        if (end == value + n || *end || v < 0) {
            fprintf(stderr, "etsim: --cfg %s: expected a whole number\n", value);
            return 1;
        }
        return 0;
    }
    if (!strncmp(value, "contexts/factory:", 17)) {
        for (int i = 0; factories[i]; i++)
            if (!strcmp(value + 17, factories[i])) return 0;
        fprintf(stderr, "etsim: --cfg %s: expected raw, thread, boost or ucontext\n", value);
        return 1;
    }
    if (!strncmp(value, "contexts/synchro:", 17)) return 0;
    fprintf(stderr,
            "etsim: --cfg %s: etsim passes contexts/factory, stack-size, guard-size, nthreads and synchro\n",
            value);
    return 1;
}

/* --cfg name:value, --cfg=name:value, --log spec, --log=spec: kept as SimGrid reads them ("--cfg=..."). */
static int simgrid_arg(int argc, char **argv, int *i, sim_options *sim)
{
    const char *a = argv[*i];
    static char joined[SIM_MAX_SIMGRID_ARGS][600];
    if (a[5] != '\0' && a[5] != '=') {
        fprintf(stderr, "etsim: unknown option %s\n", a);
        return -1;
    }
    const char *value = a[5] == '=' ? a + 6 : (++*i < argc ? argv[*i] : NULL);
    if (!value || !*value) {
        fprintf(stderr, "etsim: %.5s needs a value (%s)\n", a,
                a[2] == 'c' ? "name:value, as in --cfg contexts/factory:thread" : "a SimGrid log setting");
        return -1;
    }
    if (a[2] == 'c' && !strchr(value, ':')) {
        fprintf(stderr, "etsim: --cfg expects name:value, got \"%s\"\n", value);
        return -1;
    }
    if (a[2] == 'c' && !strncmp(value, "contexts/", 9) && contexts_option_bad(value)) return -1;
    if (sim->n_simgrid_args == SIM_MAX_SIMGRID_ARGS || strlen(value) > 580) {
        fprintf(stderr, "etsim: at most %d --cfg and --log options of 580 characters each\n",
                SIM_MAX_SIMGRID_ARGS);
        return -1;
    }
    char *out = joined[sim->n_simgrid_args];
    snprintf(out, sizeof joined[0], "%.5s=%s", a, value);
    sim->simgrid_args[sim->n_simgrid_args++] = out;
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->seed = -1;
    o->collective = -1;
    o->min_bytes = 1 << 20;
    o->max_bytes = 1 << 30;
    o->step_factor = 4;
    long long v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--analytic") == 0) {
            o->analytic = 1;
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
        } else if (strcmp(a, "--all-flows") == 0) {
            o->sim.all_flows = true;
        } else if (strcmp(a, "--all-groups") == 0) {
            o->sim.all_groups = true;
        } else if (strcmp(a, "--detailed-collectives") == 0) {
            o->sim.detailed = true;
        } else if (strcmp(a, "--stats") == 0) {
            o->sim.stats = true;
        } else if (strcmp(a, "--no-overlap") == 0) {
            o->sim.force_no_overlap = true;
        } else if (strcmp(a, "--json") == 0) {
            if (file_arg(argc, argv, &i, &o->json_out)) return -1;
        } else if (strcmp(a, "--trace") == 0) {
            if (file_arg(argc, argv, &i, &o->sim.trace_path)) return -1;
        } else if (strcmp(a, "--platform-out") == 0) {
            if (file_arg(argc, argv, &i, &o->platform_out)) return -1;
        } else if (strcmp(a, "--set") == 0) {
            if (o->n_sets == 32) {
                fprintf(stderr, "etsim: at most 32 --set options\n");
                return -1;
            }
            if (file_arg(argc, argv, &i, &o->sets[o->n_sets])) return -1;
            o->n_sets++;
        } else if (strcmp(a, "--sweep") == 0) {
            if (file_arg(argc, argv, &i, &o->sweep)) return -1;
        } else if (strcmp(a, "--search") == 0) {
            o->search = 1;
        } else if (strcmp(a, "--search-top") == 0) {
            if (number_arg(argc, argv, &i, 1, 1000, &o->search_top)) return -1;
        } else if (strcmp(a, "--search-threads") == 0) {
            long long v2;
            if (number_arg(argc, argv, &i, 1, 64, &v2)) return -1;
            o->space.threads = (int)v2;
        } else if (strcmp(a, "--search-simulate") == 0) {
            if (number_arg(argc, argv, &i, 1, 100, &o->search_sim)) return -1;
        } else if (strcmp(a, "--rank-by") == 0) {
            const char *by;
            if (file_arg(argc, argv, &i, &by)) return -1;
            int k = 0;
            while (search_order_names[k] && strcmp(search_order_names[k], by))
                k++;
            if (!search_order_names[k]) {
                fprintf(stderr, "etsim: --rank-by expects time, gpu-hours, cost or energy, got \"%s\"\n", by);
                return -1;
            }
            o->space.rank_by = k + 1;
        } else if (strcmp(a, "--search-out") == 0) {
            if (file_arg(argc, argv, &i, &o->search_out)) return -1;
        } else if (strcmp(a, "--search-gpus") == 0) {
            const char *list;
            if (file_arg(argc, argv, &i, &list)) return -1;
            for (const char *c = list; *c && o->space.n_gpus < 32;) {
                char *end;
                long v = strtol(c, &end, 10);
                if (end == c || v < 1 || v > ET_MAX_SIMULATED_GPUS * 16 || (*end && *end != ',')) {
                    fprintf(stderr,
                            "etsim: --search-gpus expects GPU counts separated by commas, got \"%s\"\n",
                            list);
                    return -1;
                }
                o->space.gpus[o->space.n_gpus++] = (int)v;
                c = *end ? end + 1 : end;
            }
        } else if (strcmp(a, "--search-devices") == 0) {
            const char *list;
            if (file_arg(argc, argv, &i, &list)) return -1;
            static char names[1024];
            snprintf(names, sizeof names, "%s", list);
            for (char *tok = strtok(names, ","); tok && o->space.n_devices < 8; tok = strtok(NULL, ","))
                o->space.devices[o->space.n_devices++] = tok;
        } else if (strcmp(a, "--price-per-gpu-hour") == 0) {
            const char *text;
            if (file_arg(argc, argv, &i, &text) || price_list(text, &o->space)) return -1;
        } else if (strcmp(a, "--prices") == 0) {
            if (file_arg(argc, argv, &i, &o->prices_file)) return -1;
        } else if (strcmp(a, "--deadline-days") == 0 || strcmp(a, "--budget-gpu-hours") == 0 ||
                   strcmp(a, "--budget") == 0) {
            const char *flag = a, *text;
            if (file_arg(argc, argv, &i, &text)) return -1;
            double x;
            if (positive(flag, text, &x)) return -1;
            if (strcmp(flag, "--deadline-days") == 0)
                o->space.deadline_s = x * 86400;
            else if (strcmp(flag, "--budget") == 0)
                o->space.budget_cost = x;
            else
                o->space.budget_gpu_hours = x;
        } else if (strcmp(a, "--max-gpus") == 0) {
            long long v;
            if (number_arg(argc, argv, &i, 1, 1 << 30, &v)) return -1;
            o->space.max_gpus = (int)v;
        } else if (strcmp(a, "--memory-headroom") == 0) {
            const char *text;
            char *end;
            if (file_arg(argc, argv, &i, &text)) return -1;
            errno = 0;
            const double x = strtod(text, &end);
            if (end == text || *end || errno || !(x >= 0 && x <= 0.9)) {
                fprintf(stderr,
                        "etsim: --memory-headroom expects a share of memory from 0 to 0.9 (0.1: 10%%), "
                        "got \"%s\"\n",
                        text);
                return -1;
            }
            o->space.memory_headroom = x;
        } else if (strcmp(a, "--search-batch") == 0) {
            const char *list;
            if (file_arg(argc, argv, &i, &list)) return -1;
            for (const char *c = list; *c;) {
                char *end;
                errno = 0;
                long long v = strtoll(c, &end, 10);
                if (end == c || v < 1 || errno || (*end && *end != ',') || o->space.n_batches == 16) {
                    fprintf(stderr,
                            "etsim: --search-batch expects up to 16 global batches (sequences) separated by "
                            "commas, got \"%s\"\n",
                            list);
                    return -1;
                }
                o->space.batches[o->space.n_batches++] = v;
                c = *end ? end + 1 : end;
            }
        } else if (strcmp(a, "--search-buckets") == 0 || strcmp(a, "--search-allreduce") == 0) {
            const char *flag = a, *list;
            if (file_arg(argc, argv, &i, &list)) return -1;
            char copy[512];
            snprintf(copy, sizeof copy, "%s", list);
            for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save)) {
                if (flag[9] == 'b') {
                    double x;
                    if (o->space.n_buckets == 8) {
                        fprintf(stderr, "etsim: --search-buckets takes at most 8 sizes\n");
                        return -1;
                    }
                    if (positive(flag, tok, &x)) return -1;
                    o->space.bucket_mib[o->space.n_buckets++] = x;
                } else {
                    int found = -1;
                    for (int k = 0; et_coll_algo_names[k]; k++)
                        if (!strcmp(et_coll_algo_names[k], tok)) found = k;
                    if (found < 0 || o->space.n_algos == 5) {
                        fprintf(stderr,
                                "etsim: --search-allreduce expects up to 5 of auto, ring, tree, "
                                "hierarchical, fastest, got "
                                "\"%s\"\n",
                                list);
                        return -1;
                    }
                    o->space.algos[o->space.n_algos++] = found;
                }
            }
        } else if (!strcmp(a, "--search-tensor") || !strcmp(a, "--search-pipeline") ||
                   !strcmp(a, "--search-micro") || !strcmp(a, "--search-zero") ||
                   !strcmp(a, "--search-recompute") || !strcmp(a, "--search-expert") ||
                   !strcmp(a, "--search-context")) {
            const char *flag = a, *list;
            if (file_arg(argc, argv, &i, &list)) return -1;
            search_space *sp = &o->space;
            int *values = !strcmp(flag, "--search-tensor")     ? sp->tensor
                          : !strcmp(flag, "--search-pipeline") ? sp->pipeline
                          : !strcmp(flag, "--search-micro")    ? sp->micro
                          : !strcmp(flag, "--search-zero")     ? sp->zero
                          : !strcmp(flag, "--search-expert")   ? sp->expert
                          : !strcmp(flag, "--search-context")  ? sp->context
                                                               : sp->recompute;
            int *n = !strcmp(flag, "--search-tensor")     ? &sp->n_tensor
                     : !strcmp(flag, "--search-pipeline") ? &sp->n_pipeline
                     : !strcmp(flag, "--search-micro")    ? &sp->n_micro
                     : !strcmp(flag, "--search-zero")     ? &sp->n_zero
                     : !strcmp(flag, "--search-expert")   ? &sp->n_expert
                     : !strcmp(flag, "--search-context")  ? &sp->n_context
                                                          : &sp->n_recompute;
            const int cap = !strcmp(flag, "--search-zero")        ? 4
                            : !strcmp(flag, "--search-recompute") ? 3
                            : !strcmp(flag, "--search-micro")     ? 8
                                                                  : 16;
            char copy[512];
            snprintf(copy, sizeof copy, "%s", list);
            for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save)) {
                long v = -1;
                if (!strcmp(flag, "--search-recompute")) {
                    for (int k = 0; et_recompute_names[k]; k++)
                        if (!strcmp(et_recompute_names[k], tok)) v = k;
                } else {
                    char *end;
                    v = strtol(tok, &end, 10);
                    if (*end || end == tok || v < 0 || v > 1 << 20 ||
                        (strcmp(flag, "--search-zero") && v < 1) || (!strcmp(flag, "--search-zero") && v > 3))
                        v = -1;
                }
                if (v < 0 || *n == cap) {
                    fprintf(stderr, "etsim: %s expects up to %d %s separated by commas, got \"%s\"\n", flag,
                            cap,
                            !strcmp(flag, "--search-recompute") ? "of none, full, selective"
                            : !strcmp(flag, "--search-zero")    ? "ZeRO stages 0-3"
                                                                : "positive whole numbers",
                            list);
                    return -1;
                }
                values[(*n)++] = (int)v;
            }
        } else if (strcmp(a, "--search-vary") == 0) {
            const char *spec;
            if (file_arg(argc, argv, &i, &spec)) return -1;
            const char *eq = strchr(spec, '=');
            if (!eq || eq == spec || !eq[1] || o->space.n_vary) {
                fprintf(stderr,
                        "etsim: --search-vary expects one key.path=a,b,c (up to 16 values), got \"%s\"\n",
                        spec);
                return -1;
            }
            char values[1024];
            snprintf(values, sizeof values, "%s", eq + 1);
            for (char *save = NULL, *tok = strtok_r(values, ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save)) {
                if (o->space.n_vary == 16 ||
                    (size_t)(eq - spec) + strlen(tok) + 2 > sizeof o->space.vary[0]) {
                    fprintf(stderr, "etsim: --search-vary takes up to 16 values of one key\n");
                    return -1;
                }
                snprintf(o->space.vary[o->space.n_vary++], sizeof o->space.vary[0], "%.*s=%s",
                         (int)(eq - spec), spec, tok);
            }
        } else if (strcmp(a, "--search-csv") == 0) {
            if (file_arg(argc, argv, &i, &o->search_csv)) return -1;
        } else if (strcmp(a, "--plot") == 0) {
            if (file_arg(argc, argv, &i, &o->plot)) return -1;
        } else if (strcmp(a, "--csv") == 0) {
            if (file_arg(argc, argv, &i, &o->csv_prefix)) return -1;
        } else if (strcmp(a, "--plan-out") == 0) {
            if (file_arg(argc, argv, &i, &o->plan_out)) return -1;
        } else if (strcmp(a, "--op-times") == 0) {
            if (file_arg(argc, argv, &i, &o->op_times)) return -1;
        } else if (strcmp(a, "--steps") == 0) {
            if (number_arg(argc, argv, &i, 1, 10000, &v)) return -1;
            o->sim.steps = (int)v;
        } else if (strcmp(a, "--plan-steps") == 0) {
            if (number_arg(argc, argv, &i, 1, 10000000, &o->plan_steps)) return -1;
        } else if (strcmp(a, "--trace-ranks") == 0) {
            if (number_arg(argc, argv, &i, 1, 1 << 20, &v)) return -1;
            o->sim.trace_ranks = (int)v;
        } else if (strcmp(a, "--collective") == 0 || strcmp(a, "--algo") == 0) {
            const char *const *names = a[2] == 'c' ? sim_bench_op_names : et_coll_algo_names;
            if (++i >= argc) {
                fprintf(stderr, "etsim: %s needs a value\n", a);
                return -1;
            }
            int found = -1;
            for (int k = 0; names[k]; k++)
                if (strcmp(names[k], argv[i]) == 0) found = k;
            if (found < 0) {
                fprintf(stderr, "etsim: %s: unknown value \"%s\"\n", a, argv[i]);
                return -1;
            }
            if (a[2] == 'c')
                o->collective = found;
            else
                o->sim.bench_algo = (et_coll_algo)found;
        } else if (strcmp(a, "--compare") == 0) {
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
                const char *next = argv[++i];
                struct stat st;
                if (strchr(next, '=') && stat(next, &st) != 0) { /* not a file: an override of the last */
                    const int k = o->n_compare - 1;
                    if (k < 0) {
                        fprintf(stderr,
                                "etsim: --compare: \"%s\" sets a key of no scenario (name a file "
                                "first)\n",
                                next);
                        return -1;
                    }
                    if (o->n_compare_sets[k] == 16) {
                        fprintf(stderr, "etsim: --compare: at most 16 key.path=value for one scenario\n");
                        return -1;
                    }
                    o->compare_sets[k][o->n_compare_sets[k]++] = next;
                    continue;
                }
                if (o->n_compare == COMPARE_MAX) {
                    fprintf(stderr, "etsim: --compare takes at most %d scenarios\n", COMPARE_MAX);
                    return -1;
                }
                o->compare[o->n_compare++] = next;
            }
            if (o->n_compare < 2) {
                fprintf(stderr, "etsim: --compare needs two or more scenario files\n");
                return -1;
            }
            o->scenario = o->compare[0];
            o->compare_with = o->compare[1];
        } else if (strcmp(a, "--top-ops") == 0) {
            if (number_arg(argc, argv, &i, 1, 100000, &o->top_ops)) return -1;
        } else if (strcmp(a, "--top-ops-by-layer") == 0) {
            o->top_ops_by_layer = 1;
            if (o->top_ops <= 0) o->top_ops = 20;
        } else if (strcmp(a, "--min-bytes") == 0) {
            if (bytes_arg(argc, argv, &i, 1, 1LL << 40, &o->min_bytes)) return -1;
        } else if (strcmp(a, "--max-bytes") == 0) {
            if (bytes_arg(argc, argv, &i, 1, 1LL << 40, &o->max_bytes)) return -1;
        } else if (strcmp(a, "--step-factor") == 0) {
            if (number_arg(argc, argv, &i, 2, 1024, &o->step_factor)) return -1;
        } else if (strcmp(a, "--seed") == 0) {
            if (number_arg(argc, argv, &i, 0, 0x7fffffffffffffffLL, &o->seed)) return -1;
        } else if (!strncmp(a, "--cfg", 5) || !strncmp(a, "--log", 5)) {
            if (simgrid_arg(argc, argv, &i, &o->sim)) return -1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (a[0] == '-') {
            fprintf(stderr, "etsim: unknown option %s\n", a);
            usage(stderr);
            return -1;
        } else if (o->scenario) {
            fprintf(stderr, "etsim: more than one scenario given (%s and %s)\n", o->scenario, a);
            return -1;
        } else {
            o->scenario = a;
        }
    }
    if (o->min_bytes > o->max_bytes) {
        fprintf(stderr, "etsim: --min-bytes %lld is larger than --max-bytes %lld\n", o->min_bytes,
                o->max_bytes);
        return -1;
    }
    if (!o->scenario) {
        usage(stderr);
        return -1;
    }
    return 0;
}

static void print_error(const et_error *err)
{
    fputs("etsim: error: ", stderr);
    et_error_print(stderr, err);
}

/* Loads a scenario and applies the command line's overrides; returns an exit status. */
/* --op-times: the measured run's factors (measured / modelled on its own device) on the scenario's ops. */
static int apply_op_times(const options *o, et_scenario *s)
{
    et_error err;
    calib_run run;
    if (calib_run_load(o->op_times, NULL, &run, &err)) {
        print_error(&err);
        et_scenario_free(s);
        return et_error_exit_status(&err);
    }
    int rc = 0;
    if (strcmp(run.plan.s.cluster.device.name, s->cluster.device.name) != 0) {
        et_error_set(
            &err, o->op_times, 0, 0, "$.plan_file",
            "measured on device %s, but the scenario runs on %s: op times carry over only to the same "
            "device",
            run.plan.s.cluster.device.name, s->cluster.device.name);
        rc = EXIT_INPUT;
    } else if (calib_run_op_scales(&run, &s->op_scales, &err)) {
        rc = 1;
    }
    if (rc) {
        print_error(&err);
        et_scenario_free(s);
    } else if (!o->quiet) {
        double *f = malloc((size_t)(s->op_scales.n ? s->op_scales.n : 1) * sizeof *f);
        if (f) memcpy(f, s->op_scales.factor, (size_t)s->op_scales.n * sizeof *f);
        fprintf(stderr,
                "etsim: --op-times: %d ops of %s scaled by measured/modelled (median %.3f, from %s)\n",
                s->op_scales.n, run.plan.s.name, f ? et_quantile(f, s->op_scales.n, 0.5) : NAN, o->op_times);
        free(f);
    }
    calib_run_free(&run);
    return rc;
}

/* The scenario with --set applied, then the `n_extra` overrides `extra`; with `doc`, its document as
 * loaded (the caller's). */
static int load_doc(const options *o, const char *path, const char *const *extra, int n_extra, et_scenario *s,
                    json_t **doc)
{
    et_error err;
    const char *sets[64];
    int n = 0;
    for (int i = 0; i < o->n_sets; i++)
        sets[n++] = o->sets[i];
    for (int i = 0; i < n_extra && n < 64; i++)
        sets[n++] = extra[i];
    json_t *root;
    int bad = et_scenario_json_load(path, sets, n, &root, &err);
    if (!bad) {
        bad = et_scenario_parse(root, path, NULL, s, &err);
        if (!bad && doc)
            *doc = root;
        else
            json_decref(root);
    }
    if (bad) {
        print_error(&err);
        return et_error_exit_status(&err);
    }
    return 0;
}

/* The scenario with --set applied (and one more override when `extra` is not NULL). */
static int load_with(const options *o, const char *path, const char *extra, et_scenario *s)
{
    return load_doc(o, path, &extra, extra ? 1 : 0, s, NULL);
}

/* The checks and options every loaded scenario gets (fabric warnings, --seed, --no-overlap, --op-times). */
static int prepare(const options *o, const char *path, et_scenario *s);

static int load(const options *o, const char *path, et_scenario *s)
{
    if (load_with(o, path, NULL, s)) return EXIT_INPUT;
    return prepare(o, path, s);
}

static int prepare(const options *o, const char *path, et_scenario *s)
{
    const char *warnings[8];
    for (int i = 0, n = et_fabric_warnings(&s->cluster, warnings, 8); i < n; i++)
        fprintf(stderr, "etsim: warning: %s: %s\n", path, warnings[i]);
    if (o->seed >= 0) s->simulation.seed = (unsigned long long)o->seed;
    if (o->sim.force_no_overlap) s->parallel.overlap = false;
    return o->op_times ? apply_op_times(o, s) : 0;
}

/* Loads, estimates and (unless analytic) simulates one scenario; returns an exit status. */
static int check_outputs(const options *o, const et_scenario *s);

/* A --compare variant (a file with overrides of its own) is named by them, unless one sets its name: two
 * variants of one file are told apart in the table and in the JSON. */
static void name_variant(et_scenario *s, const json_t *doc, const char *const *sets, int n)
{
    for (int i = 0; i < n; i++)
        if (!strncmp(sets[i], "name=", 5)) return;
    char name[sizeof s->name];
    size_t used = (size_t)snprintf(name, sizeof name, "%s", json_string_value(json_object_get(doc, "name")));
    for (int i = 0; i < n && used < sizeof name; i++)
        used += (size_t)snprintf(name + used, sizeof name - used, "%s%s", i ? ", " : " [", sets[i]);
    if (n && used < sizeof name) snprintf(name + used, sizeof name - used, "]");
    if (n) snprintf(s->name, sizeof s->name, "%s", name);
}

static int compare_main(options *o)
{
    const int n = o->n_compare;
    et_scenario sc[COMPARE_MAX];
    et_estimate est[COMPARE_MAX];
    json_t *sims[COMPARE_MAX] = {NULL};
    json_t *docs[COMPARE_MAX] = {NULL};
    int loaded = 0, rc = 0;
    /* every scenario loaded before the outputs are checked: their files are inputs too (input_files.h) */
    for (; loaded < n && !rc; loaded++) {
        if ((rc = load_doc(o, o->compare[loaded], o->compare_sets[loaded], o->n_compare_sets[loaded],
                           &sc[loaded], &docs[loaded])))
            break;
        if ((rc = prepare(o, o->compare[loaded], &sc[loaded]))) {
            json_decref(docs[loaded]);
            break;
        }
        name_variant(&sc[loaded], docs[loaded], o->compare_sets[loaded], o->n_compare_sets[loaded]);
    }
    if (!rc) rc = check_outputs(o, &sc[0]);
    o->sim.progress = !o->quiet && isatty(2);
    for (int i = 0; i < loaded && !rc; i++) {
        et_error err;
        if (et_analytic_estimate(&sc[i], &est[i], &err) ||
            (!o->analytic && sim_run_phases(&sc[i], &o->sim, &sims[i], &err))) {
            print_error(&err);
            rc = et_error_exit_status(&err);
        }
    }
    if (!rc) {
        const et_scenario *ps[COMPARE_MAX];
        const et_estimate *pe[COMPARE_MAX];
        const json_t *pj[COMPARE_MAX], *pd[COMPARE_MAX];
        for (int i = 0; i < n; i++)
            ps[i] = &sc[i], pe[i] = &est[i], pj[i] = sims[i], pd[i] = docs[i];
        compare_print_many(stdout, n, ps, pe, pj, pd);
    }
    if (!rc && o->json_out) {
        et_error err;
        json_t *list = json_array();
        for (int i = 0; i < n && list; i++) {
            json_t *j = report_json_analytic(&sc[i], &est[i]);
            if (j && sims[i]) {
                json_object_set(j, "simulation", sims[i]);
                json_object_set_new(sims[i], "headline", report_sim_headline(&sc[i], &est[i], sims[i]));
            }
            json_array_append_new(list, j);
        }
        json_t *j = json_pack("{s:s, s:i, s:o}", "tool", "etsim", "format_version", REPORT_FORMAT_VERSION,
                              "compare", list);
        if (!j || et_atomic_write_json(o->json_out, j, &err)) {
            if (j) print_error(&err);
            rc = j ? et_error_exit_status(&err) : 1;
        }
        json_decref(j);
    }
    for (int i = 0; i < loaded; i++) {
        json_decref(sims[i]);
        json_decref(docs[i]);
        et_scenario_free(&sc[i]);
    }
    return rc;
}

/* Every output is checked before any work: none may be an input, each must be writable. */
static int check_outputs(const options *o, const et_scenario *s)
{
    if (o->analytic && o->sim.trace_path) {
        fprintf(stderr, "etsim: error: --trace writes the simulated step's events: it needs the simulation "
                        "(drop --analytic)\n");
        return EXIT_INPUT;
    }
    et_error size_err;
    if (!o->analytic && sim_check_size(s, &size_err)) {
        print_error(&size_err);
        return EXIT_INPUT;
    }
    const char *inputs[] = {o->scenario, o->compare_with, o->op_times,
                            s->cluster.platform_file[0] ? s->cluster.platform_file : NULL,
                            s->data.lengths.file[0] ? s->data.lengths.file : NULL};
    const struct {
        const char *path, *flag;
    } outs[] = {{o->json_out, "--json"},
                {o->plan_out, "--plan-out"},
                {o->platform_out, "--platform-out"},
                {o->sim.trace_path, "--trace"}};
    et_error err;
    char csv[REPORT_CSV_FILES][1024];
    const int n_csv = o->csv_prefix ? report_csv_paths(o->csv_prefix, !o->analytic, csv) : 0;
    for (int i = 0; i < n_csv; i++)
        if (et_output_check(csv[i], "--csv", inputs, 5, &err)) {
            print_error(&err);
            return et_error_exit_status(&err);
        }
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        if (!outs[i].path) continue;
        if (et_output_check(outs[i].path, outs[i].flag, inputs, 5, &err)) {
            print_error(&err);
            return et_error_exit_status(&err);
        }
        for (size_t j = 0; j < i; j++)
            if (outs[j].path && strcmp(outs[j].path, outs[i].path) == 0) {
                fprintf(stderr, "etsim: error: %s and %s name the same file %s\n", outs[j].flag, outs[i].flag,
                        outs[i].path);
                return EXIT_INPUT;
            }
    }
    return 0;
}

static const char *plan_device(const options *o, const et_scenario *s, const search_plan *p)
{
    return p->device >= 0 ? o->space.devices[p->device] : s->cluster.device.name;
}

static double plan_bucket_mib(const et_scenario *s, const search_plan *p)
{
    return p->bucket_mib > 0 ? p->bucket_mib : s->parallel.bucket_bytes / 1048576.0;
}

static const char *plan_allreduce(const et_scenario *s, const search_plan *p)
{
    return et_coll_algo_names[p->allreduce >= 0 ? p->allreduce : (int)s->parallel.allreduce];
}

static void print_plan(const options *o, const et_scenario *s, int rank, const search_plan *p)
{
    char ttt[32], cost[32] = "-";
    report_format_duration(ttt, sizeof ttt, p->time_to_train_s);
    if (p->price > 0) snprintf(cost, sizeof cost, p->cost < 1e12 ? "%.0f" : "%.3g", p->cost); /* fits 32 */
    printf("%4d %-16.16s %6d %7lld %10.4f %7.1f %9.2f %6d %6d %6d %6d %6lld %6lld %10s %5s %5d %12s %10.0f "
           "%10s %7.0f %-12s %7.1f %9.4g\n",
           rank, plan_device(o, s, p), p->gpus, p->global, p->step_s, 100 * p->mfu, p->memory_gib, p->tensor,
           p->pipeline, p->virtual_pipeline, p->data, p->local, p->grad_accum,
           et_recompute_names[p->recompute], p->sequence_parallel ? "on" : "off", p->zero_stage, ttt,
           p->gpu_hours, cost, plan_bucket_mib(s, p), plan_allreduce(s, p), p->tflops_per_gpu,
           p->energy_kwh / 1e3);
    if (p->vary >= 0) printf("     %s\n", o->space.vary[p->vary]);
    if (p->expert > 1 || p->context > 1)
        printf("     expert parallelism %d, context parallelism %d\n", p->expert, p->context);
}

/* Whether two plans are one plan but for ZeRO stage and recomputation (which change only memory and, when
 * they change the time, their ranks): the same time-to-train to 1e-9, every other knob equal. */
static int same_but_memory(const search_plan *a, const search_plan *b)
{
    return fabs(a->time_to_train_s - b->time_to_train_s) <= 1e-9 * a->time_to_train_s && a->gpus == b->gpus &&
           a->global == b->global && a->device == b->device && a->tensor == b->tensor &&
           a->pipeline == b->pipeline && a->virtual_pipeline == b->virtual_pipeline && a->data == b->data &&
           a->expert == b->expert && a->context == b->context && a->local == b->local &&
           a->grad_accum == b->grad_accum && a->sequence_parallel == b->sequence_parallel &&
           a->bucket_mib == b->bucket_mib && a->vary == b->vary && a->allreduce == b->allreduce;
}

static void print_plan_header(void)
{
    printf("%4s %-16s %6s %7s %10s %7s %9s %6s %6s %6s %6s %6s %6s %10s %5s %5s %12s %10s %10s %7s %-12s %7s "
           "%9s\n",
           "rank", "device", "GPUs", "batch", "step[s]", "MFU[%]", "mem[GiB]", "tensor", "pipe", "chunks",
           "data", "micro", "accum", "recompute", "seq", "zero", "train", "GPU-hours", "cost", "bucket",
           "allreduce", "TFLOP/s", "MWh");
}

/* Why the best plan wins: its step against the runner-up's, part by part (analytic). */
static void print_why_best(const search_result *r, const char *path)
{
    if (r->n_best < 2) return;
    et_scenario a, b;
    et_estimate x, y;
    et_error err;
    if (et_scenario_parse(r->best[0].scenario, path, NULL, &a, &err)) return;
    if (et_scenario_parse(r->best[1].scenario, path, NULL, &b, &err)) {
        et_scenario_free(&a);
        return;
    }
    const int ok = !et_analytic_estimate(&a, &x, &err) && !et_analytic_estimate(&b, &y, &err);
    const int same_step = ok && fabs(x.step_time - y.step_time) < 5e-6 &&
                          fabs(x.forward - y.forward) < 5e-6 && fabs(x.backward - y.backward) < 5e-6;
    if (same_step) { /* a table of +0.00: say what differs instead */
        const search_plan *p = &r->best[0], *q = &r->best[1];
        char t1[32], t2[32];
        report_format_duration(t1, sizeof t1, p->time_to_train_s);
        report_format_duration(t2, sizeof t2, q->time_to_train_s);
        printf(
            "\nwhy rank 1 wins   the same step (%.2f ms); rank 1 on %d GPUs, ZeRO %d, recomputation %s, %.2f "
            "GiB a GPU, %s, %.0f GPU-hours; rank 2 on %d GPUs, ZeRO %d, recomputation %s, %.2f GiB, %s, %.0f "
            "GPU-hours\n",
            x.step_time * 1e3, p->gpus, p->zero_stage, et_recompute_names[p->recompute], p->memory_gib, t1,
            p->gpu_hours, q->gpus, q->zero_stage, et_recompute_names[q->recompute], q->memory_gib, t2,
            q->gpu_hours);
    } else if (ok) {
        printf("\nwhy rank 1 wins   %14s %14s %14s   (per step, the busiest stage)\n", "rank 1[ms]",
               "rank 2[ms]", "difference");
        const struct {
            const char *name;
            double a, b;
        } rows[] = {
            {"forward", x.forward, y.forward},
            {"backward", x.backward, y.backward},
            {"tensor comm", x.tp_comm, y.tp_comm},
            {"expert all-to-all", x.ep_comm, y.ep_comm},
            {"context exchange", x.cp_comm, y.cp_comm},
            {"pipeline comm", x.pp_comm, y.pp_comm},
            {"bubble", x.bubble, y.bubble},
            {"data comm exposed", x.dp_comm_exposed + x.zero_gather + x.clip_allreduce,
             y.dp_comm_exposed + y.zero_gather + y.clip_allreduce},
            {"optimizer", x.optimizer, y.optimizer},
            {"stragglers", x.straggler_delay, y.straggler_delay},
            {"step", x.step_time, y.step_time},
        };
        for (size_t k = 0; k < sizeof rows / sizeof *rows; k++)
            printf("  %-17s %14.2f %14.2f %+14.2f\n", rows[k].name, rows[k].a * 1e3, rows[k].b * 1e3,
                   (rows[k].a - rows[k].b) * 1e3);
        printf("  %-17s %14.2f %14.2f %+14.2f   (GiB per GPU)\n", "memory", x.memory.total / 1073741824.0,
               y.memory.total / 1073741824.0, (x.memory.total - y.memory.total) / 1073741824.0);
    }
    et_scenario_free(&a);
    et_scenario_free(&b);
}

/* No plan: which constraint refused the nearest ones, and by how much. */
static void print_no_plan(const options *o, const et_scenario *s, const search_result *r)
{
    printf(
        "no plan: %d candidates refused by the scenario's rules, %d do not fit, %d miss the deadline, %d are "
        "over the budget\n",
        r->invalid, r->too_big, r->too_slow, r->over_budget);
    if (r->too_big && !r->too_slow && !r->over_budget) { /* else some plans fit: memory does not bind */
        printf("  memory binds: the smallest plan needs %.2f GiB per GPU, %s has %.2f GiB",
               r->nearest_too_big.memory_gib, plan_device(o, s, &r->nearest_too_big),
               s->cluster.device.memory_bytes / 1073741824.0);
        if (o->space.memory_headroom > 0)
            printf(", %.2f GiB with %.0f%% of it kept free",
                   s->cluster.device.memory_bytes * (1 - o->space.memory_headroom) / 1073741824.0,
                   100 * o->space.memory_headroom);
        printf(":\n");
        print_plan(o, s, 0, &r->nearest_too_big);
    }
    if (!r->too_big && !r->too_slow && !r->over_budget)
        printf("  the scenario's rules refuse every plan of the space, for example: %s\n",
               r->refusal[0] ? r->refusal : "(no reason kept)");
    if (r->too_slow) {
        char have[32], want[32];
        report_format_duration(have, sizeof have, r->nearest_too_slow.time_to_train_s);
        report_format_duration(want, sizeof want, o->space.deadline_s);
        printf("  the deadline binds: the fastest plan that fits trains in %s, the deadline is %s:\n", have,
               want);
        print_plan(o, s, 0, &r->nearest_too_slow);
    }
    if (r->over_budget) {
        const search_plan *p = &r->nearest_over_budget;
        if (p->price > 0 && o->space.budget_cost > 0)
            printf("  the budget binds: the cheapest plan costs %.0f, the budget is %.0f:\n", p->cost,
                   o->space.budget_cost);
        else
            printf("  the budget binds: the cheapest plan takes %.0f GPU-hours, the budget is %.0f:\n",
                   p->gpu_hours, o->space.budget_gpu_hours);
        print_plan(o, s, 0, p);
    }
}

static json_t *plan_json(const options *o, const et_scenario *s, const search_plan *p)
{
    json_t *j = json_pack(
        "{s:s, s:i, s:I, s:i, s:i, s:i, s:i, s:I, s:I, s:s, s:b, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
        "device", plan_device(o, s, p), "gpus", p->gpus, "global_batch", (json_int_t)p->global, "tensor",
        p->tensor, "pipeline", p->pipeline, "virtual_pipeline", p->virtual_pipeline, "data", p->data,
        "micro_batch", (json_int_t)p->local, "grad_accum", (json_int_t)p->grad_accum, "recompute",
        et_recompute_names[p->recompute], "sequence_parallel", p->sequence_parallel, "zero_stage",
        p->zero_stage, "step_s", p->step_s, "mfu", p->mfu, "memory_GiB", p->memory_gib, "time_to_train_s",
        p->time_to_train_s, "gpu_hours", p->gpu_hours, "price_per_gpu_hour", p->price, "cost", p->cost);
    json_object_set_new(j, "bucket_MiB", json_real(plan_bucket_mib(s, p)));
    json_object_set_new(j, "allreduce", json_string(plan_allreduce(s, p)));
    json_object_set_new(j, "tflops_per_gpu", json_real(p->tflops_per_gpu));
    if (p->vary >= 0) json_object_set_new(j, "varied", json_string(o->space.vary[p->vary]));
    json_object_set_new(j, "expert", json_integer(p->expert));
    json_object_set_new(j, "context", json_integer(p->context));
    json_object_set_new(j, "energy_kWh", json_real(p->energy_kwh));
    return j;
}

static int csv_writer(FILE *f, void *ctx)
{
    const void *const *x = ctx;
    const options *o = x[0];
    const et_scenario *s = x[1];
    const search_result *r = x[2];
    fprintf(f,
            "device,gpus,global_batch,tensor,pipeline,virtual_pipeline,data,micro_batch,grad_accum,recompute,"
            "sequence_parallel,zero_stage,step_s,mfu,memory_GiB,time_to_train_s,gpu_hours,price_per_gpu_hour,"
            "cost,bucket_MiB,allreduce,tflops_per_gpu,status,varied,expert,context,energy_kWh\n");
    for (int i = 0; i < r->n_all; i++) {
        const search_plan *p = &r->all[i];
        fprintf(f,
                "%s,%d,%lld,%d,%d,%d,%d,%lld,%lld,%s,%d,%d,%.9g,%.6g,%.6g,%.9g,%.9g,%.6g,%.9g,%.6g,%s,%.6g,%"
                "s,%s,%d,%d,%.6g\n",
                plan_device(o, s, p), p->gpus, p->global, p->tensor, p->pipeline, p->virtual_pipeline,
                p->data, p->local, p->grad_accum, et_recompute_names[p->recompute], p->sequence_parallel,
                p->zero_stage, p->step_s, p->mfu, p->memory_gib, p->time_to_train_s, p->gpu_hours, p->price,
                p->cost, plan_bucket_mib(s, p), plan_allreduce(s, p), p->tflops_per_gpu,
                search_status_names[p->status], p->vary >= 0 ? o->space.vary[p->vary] : "", p->expert,
                p->context, p->energy_kwh);
    }
    return ferror(f) ? -1 : 0;
}

/* --plot FILE: gnuplot draws time-to-train against GPU count for every ranked plan, the front in a second
 * panel; the data and the script are written beside the image and kept. */
static int plot_search(const options *o, const et_scenario *s, const search_result *r, et_error *err)
{
    char data[4096], script[4096], title[sizeof s->name];
    if (strchr(o->plot, '\''))
        return et_error_set(err, o->plot, 0, 0, NULL,
                            "--plot: a file name with a quote cannot go to gnuplot");
    for (size_t i = 0; i < sizeof title; i++) /* the scenario's name inside gnuplot's quotes */
        if ((title[i] = s->name[i] == '\'' ? ' ' : s->name[i]) == 0) break;
    snprintf(data, sizeof data, "%s.dat", o->plot);
    snprintf(script, sizeof script, "%s.gp", o->plot);
    FILE *f = fopen(data, "w");
    if (!f) return et_error_set_code(err, ET_ERROR_IO, data, 0, 0, NULL, "cannot write the plot's data");
    fprintf(f, "# gpus time_to_train_days spend front\n");
    for (int i = 0; i < r->n_all; i++)
        if (r->all[i].status == SEARCH_RANKED)
            fprintf(f, "%d %.6g %.6g 0\n", r->all[i].gpus, r->all[i].time_to_train_s / 86400,
                    r->all[i].price > 0 ? r->all[i].cost : r->all[i].gpu_hours);
    fprintf(f, "\n\n");
    for (int i = 0; i < r->n_front; i++)
        fprintf(f, "%d %.6g %.6g 1\n", r->front[i].gpus, r->front[i].time_to_train_s / 86400,
                r->front[i].price > 0 ? r->front[i].cost : r->front[i].gpu_hours);
    if (fclose(f))
        return et_error_set_code(err, ET_ERROR_IO, data, 0, 0, NULL, "cannot write the plot's data");
    f = fopen(script, "w");
    if (!f) return et_error_set_code(err, ET_ERROR_IO, script, 0, 0, NULL, "cannot write the plot's script");
    const int money = r->n_front && r->front[0].price > 0;
    fprintf(
        f,
        "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 1400,600 } else { set "
        "terminal png size 1400,600 }\nset output '%s'\nset multiplot layout 1,2 title '%s: %d plans "
        "ranked'\nset logscale x 2\nset xlabel 'GPUs'\nset ylabel 'time-to-train [days]'\nset grid\n"
        "plot '%s' index 0 using 1:2 with points pt 7 ps 0.4 title 'every plan that fits'\n"
        "unset logscale x\nset xlabel '%s'\nset ylabel 'time-to-train [days]'\n"
        "plot '%s' index 0 using 3:2 with points pt 7 ps 0.3 lc rgb '#bbbbbb' title 'plans', '%s' index 1 "
        "using 3:2 with linespoints pt 7 title 'Pareto front'\nunset multiplot\n",
        o->plot, title, r->ranked, data, money ? "cost" : "GPU-hours", data, data);
    if (fclose(f))
        return et_error_set_code(err, ET_ERROR_IO, script, 0, 0, NULL, "cannot write the plot's script");
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>&1", script);
    int rc = system(cmd);
    if (rc != 0)
        return et_error_set_code(
            err, ET_ERROR_INTERNAL, script, 0, 0, NULL,
            "gnuplot failed (status %d): is gnuplot installed (scripts/setup.sh installs gnuplot-nox)?", rc);
    return 0;
}

/* --sweep key=a,b,c: one analytic estimate per value. */
static int sweep_main(const options *o)
{
    const char *eq = strchr(o->sweep, '=');
    if (!eq || eq == o->sweep || !eq[1]) {
        fprintf(stderr, "etsim: --sweep expects key.path=a,b,c, got \"%s\"\n", o->sweep);
        return EXIT_INPUT;
    }
    printf("sweep        %.*s over %s (analytic estimates)\n\n", (int)(eq - o->sweep), o->sweep, eq + 1);
    printf("%-16s %10s %7s %9s %5s %14s %12s\n", "value", "step[s]", "MFU[%]", "mem[GiB]", "fits",
           "time-to-train", "GPU-hours");
    char values[1024];
    snprintf(values, sizeof values, "%s", eq + 1);
    char *save = NULL;
    for (char *v = strtok_r(values, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
        char set[1200];
        snprintf(set, sizeof set, "%.*s=%s", (int)(eq - o->sweep), o->sweep, v);
        et_scenario s;
        et_estimate e;
        et_error err;
        if (load_with(o, o->scenario, set, &s)) return EXIT_INPUT;
        if (et_analytic_estimate(&s, &e, &err)) {
            print_error(&err);
            et_scenario_free(&s);
            return et_error_exit_status(&err);
        }
        char ttt[32];
        report_format_duration(ttt, sizeof ttt, e.time_to_train_with_failures);
        printf("%-16s %10.4f %7.1f %9.2f %5s %14s %12.0f\n", v, e.step_time, 100 * e.mfu,
               e.memory.total / 1073741824.0, e.memory.fits ? "yes" : "no", ttt,
               et_gpu_hours(&s, e.time_to_train_with_failures));
        et_scenario_free(&s);
    }
    return 0;
}

static int search_main(options *o)
{
    et_scenario s;
    int bad = load(o, o->scenario, &s);
    if (bad) return bad;
    const char *inputs[] = {o->scenario, o->prices_file};
    et_error err;
    /* the space's flags and prices against the scenario, before the outputs are checked (the devices'
     * profiles are inputs too) */
    json_t *doc = NULL;
    char device[128] = "";
    if (et_json_load_file(o->scenario, &doc, &err) == 0) {
        const char *name = json_string_value(json_object_get(json_object_get(doc, "cluster"), "device"));
        snprintf(device, sizeof device, "%s", name ? name : "");
    }
    json_decref(doc);
    if ((o->prices_file && read_prices(o->prices_file, &o->space, &err)) ||
        search_space_check(&o->space, &s, device, &err)) {
        if (!strcmp(err.path, "prices")) /* a key of --prices FILE, or a pair of --price-per-gpu-hour */
            snprintf(err.path, sizeof err.path, "%s", o->prices_file ? "--prices" : "--price-per-gpu-hour");
        print_error(&err);
        et_scenario_free(&s);
        return et_error_exit_status(&err);
    }
    const struct {
        const char *path, *flag;
    } outs[] = {{o->search_out, "--search-out"},
                {o->search_csv, "--search-csv"},
                {o->json_out, "--json"},
                {o->plot, "--plot"},
                {o->plan_out, "--plan-out"}};
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++)
        if (outs[i].path && et_output_check(outs[i].path, outs[i].flag, inputs, 2, &err)) {
            print_error(&err);
            et_scenario_free(&s);
            return et_error_exit_status(&err);
        }
    /* --csv PREFIX under --search: PREFIX-plans.csv, as --search-csv */
    static char csv_path[4096];
    if (o->csv_prefix && !o->search_csv) {
        snprintf(csv_path, sizeof csv_path, "%s-plans.csv", o->csv_prefix);
        o->search_csv = csv_path;
    }
    if (search_ranking(&o->space) == SEARCH_BY_COST && o->space.price <= 0 && o->space.n_prices == 0) {
        fprintf(stderr, "etsim: --rank-by cost needs prices (--price-per-gpu-hour or --prices)\n");
        et_scenario_free(&s);
        return EXIT_INPUT;
    }
    if (o->space.budget_cost > 0 && o->space.price <= 0 && o->space.n_prices == 0) {
        fprintf(stderr, "etsim: --budget is money: give prices (--price-per-gpu-hour or --prices), or use "
                        "--budget-gpu-hours\n");
        et_scenario_free(&s);
        return EXIT_INPUT;
    }
    o->space.progress = !o->quiet && isatty(2);
    search_result r;
    const int keep = o->search_top > 0 ? (int)o->search_top : 10;
    if (o->space.rank > 0) o->space.progress = false;
    if (search_run(o->scenario, o->sets, o->n_sets, &o->space, keep, &r, &err) ||
        search_mpi_gather(&r, keep, search_ranking(&o->space), o->space.rank, o->space.ranks, &err)) {
        print_error(&err);
        et_scenario_free(&s);
        search_mpi_finish();
        return et_error_exit_status(&err);
    }
    search_mpi_finish();     /* before any simulation forks a child */
    if (o->space.rank > 0) { /* rank 0 reports for all */
        search_result_free(&r);
        et_scenario_free(&s);
        return 0;
    }
    et_estimate own; /* the scenario's own plan, beside the best */
    const int own_ok = et_analytic_estimate(&s, &own, &err) == 0;
    const search_order order = search_ranking(&o->space);
    const char *by = order == SEARCH_BY_COST        ? "cost"
                     : order == SEARCH_BY_GPU_HOURS ? "GPU-hours"
                     : order == SEARCH_BY_ENERGY    ? "energy"
                                                    : "time-to-train";
    printf("search       %s on %s, global batch %lld; %d plans tried in %.1f s: %d refused by the scenario's "
           "rules, %d do not fit, %d miss the deadline, %d over the budget, %d ranked by %s (analytic "
           "estimates; "
           "%d threads, %.0f plans/s)\n",
           s.name, s.cluster.device.name, s.batch.global, r.tried, r.seconds, r.invalid, r.too_big,
           r.too_slow, r.over_budget, r.ranked, by, r.threads, r.seconds > 0 ? r.tried / r.seconds : 0);
    printf("             time-to-train, GPU-hours and cost with failures and checkpoints (the scenario's "
           "resilience: %.3g interruptions a GPU-hour)\n",
           s.resilience.interruptions_per_gpu_hour);
    printf("\n");
    print_plan_header();
    /* plans that differ only in ZeRO stage or recomputation at one time-to-train are one row, the least
     * memory first (the ranking's tie rule), the others named under it */
    for (int i = 0, row = 1; i < r.n_best; row++) {
        print_plan(o, &s, row, &r.best[i]);
        int j = i + 1;
        for (; j < r.n_best && same_but_memory(&r.best[i], &r.best[j]); j++)
            printf("%s ZeRO %d, recomputation %s: %.2f GiB", j == i + 1 ? "     the same time with" : ";",
                   r.best[j].zero_stage, et_recompute_names[r.best[j].recompute], r.best[j].memory_gib);
        if (j > i + 1) printf("\n");
        i = j;
    }
    if (r.n_front > 1) {
        printf("\nPareto front of time-to-train against %s (%d plans no other beats on both):\n",
               r.front[0].price > 0 ? "cost" : "GPU-hours", r.n_front);
        for (int i = 0; i < r.n_front; i++)
            print_plan(o, &s, i + 1, &r.front[i]);
    }
    print_why_best(&r, o->scenario);
    int rc = 0;
    /* the best plans played by the simulator, beside their analytic estimate */
    const int k = o->search_sim < r.n_best ? (int)o->search_sim : r.n_best;
    double *simulated = k > 0 ? calloc((size_t)k, sizeof *simulated) : NULL;
    if (k > 0) printf("\nsimulated (SimGrid)   rank    analytic[s]   simulated[s]   simulated/analytic\n");
    /* up to one simulation per core at a time, each in its own child process */
    const long cores = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    const int batch = o->space.threads > 0 ? o->space.threads : (int)(cores < 64 ? cores : 64);
    for (int first = 0; first < k && !rc; first += batch) {
        const int n = first + batch < k ? batch : k - first;
        et_scenario c[64];
        sim_child child[64];
        int started[64] = {0}, parsed[64] = {0};
        for (int i = 0; i < n && !rc; i++) {
            if (et_scenario_parse(r.best[first + i].scenario, o->scenario, NULL, &c[i], &err)) {
                print_error(&err);
                rc = et_error_exit_status(&err);
                break;
            }
            parsed[i] = 1;
            if (sim_runs_once(&c[i], &o->sim)) {
                if (sim_start(&c[i], &o->sim, &child[i], &err)) {
                    print_error(&err);
                    rc = et_error_exit_status(&err);
                    break;
                }
                started[i] = 1;
            }
        }
        for (int i = 0; i < n; i++) {
            json_t *sim = NULL;
            int bad = 0;
            if (started[i])
                bad = sim_finish(&child[i], &c[i], &sim, &err);
            else if (parsed[i] && !rc)
                bad = sim_run_phases(&c[i], &o->sim, &sim, &err);
            if (bad && !rc) {
                print_error(&err);
                rc = et_error_exit_status(&err);
            }
            if (sim && !rc) {
                const double sim_step = report_num(json_object_get(sim, "step_time_s"), "mean");
                const int at = first + i;
                if (simulated) simulated[at] = sim_step;
                printf("%-21s %4d %14.4f %14.4f %20.3f\n", "", at + 1, r.best[at].step_s, sim_step,
                       r.best[at].step_s > 0 ? sim_step / r.best[at].step_s : 0);
            }
            json_decref(sim);
            if (parsed[i]) et_scenario_free(&c[i]);
        }
    }
    if (r.n_best == 0) {
        print_no_plan(o, &s, &r);
        rc = EXIT_DOES_NOT_FIT;
    } else if (own_ok && order != SEARCH_BY_TIME) {
        search_plan mine = {.gpu_hours = et_gpu_hours(&s, own.time_to_train_with_failures),
                            .energy_kwh = own.energy_run_kwh,
                            .time_to_train_s = own.time_to_train_with_failures};
        mine.cost = mine.gpu_hours * search_price(&o->space, s.cluster.device.name);
        const double own_spend = search_rank_key(&mine, order),
                     best_spend = search_rank_key(&r.best[0], order);
        if (!(own_spend > 0))
            printf("\nthe scenario's own plan: no %s for its device %s, so nothing to compare\n",
                   order == SEARCH_BY_ENERGY ? "power" : "price", s.cluster.device.name);
        else
            printf("\nthe scenario's own plan: %.0f %s%s; the best: %.0f (%.1f%% %s)\n", own_spend,
                   order == SEARCH_BY_COST     ? "in cost"
                   : order == SEARCH_BY_ENERGY ? "kWh"
                                               : "GPU-hours",
                   own.memory.fits ? "" : " (does not fit)", best_spend,
                   100 * fabs(1 - best_spend / own_spend),
                   best_spend <= own_spend ? "less" : "more: the own plan is outside the space searched");
    } else if (own_ok) {
        const double ratio = own.step_time / r.best[0].step_s;
        printf("\nthe scenario's own plan: %.4f s a step%s; the best is %.2fx %s%s\n", own.step_time,
               own.memory.fits ? "" : " (does not fit)", ratio > 1 ? ratio : 1 / ratio,
               ratio > 1 ? "faster" : "slower (the own plan is outside the space searched)",
               o->space.n_gpus || o->space.n_devices || o->space.n_batches
                   ? " (on the GPUs and batch it names)"
                   : "");
    }
    /* written elsewhere, the best plan's file names must still resolve */
    if (r.n_best > 0) et_scenario_json_absolute(r.best[0].scenario, s.dir);
    if (r.n_best > 0 && o->search_out && et_atomic_write_json(o->search_out, r.best[0].scenario, &err)) {
        print_error(&err);
        rc = et_error_exit_status(&err);
    }
    if (r.n_best > 0 && o->plan_out &&
        et_plan_write_for_document(r.best[0].scenario, o->scenario, o->plan_out,
                                   o->plan_steps > 0 ? (int)o->plan_steps : 20, &err)) {
        print_error(&err);
        rc = et_error_exit_status(&err);
    }
    if (o->search_csv) {
        const void *ctx[] = {o, &s, &r};
        if (et_atomic_write(o->search_csv, csv_writer, (void *)ctx, &err)) {
            print_error(&err);
            rc = et_error_exit_status(&err);
        }
    }
    if (o->json_out) {
        json_t *best = json_array(), *front = json_array();
        for (int i = 0; i < r.n_best; i++) {
            json_t *p = plan_json(o, &s, &r.best[i]);
            if (i < k && simulated) json_object_set_new(p, "simulated_step_s", json_real(simulated[i]));
            json_array_append_new(best, p);
        }
        for (int i = 0; i < r.n_front; i++)
            json_array_append_new(front, plan_json(o, &s, &r.front[i]));
        json_t *plans = json_array();
        for (int i = 0; i < r.n_all; i++) {
            json_t *p = plan_json(o, &s, &r.all[i]);
            json_object_set_new(p, "status", json_string(search_status_names[r.all[i].status]));
            json_array_append_new(plans, p);
        }
        json_t *j =
            json_pack("{s:s, s:i, s:{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:o, s:o, s:o}}",
                      "tool", "etsim", "format_version", REPORT_FORMAT_VERSION, "search", "scenario", s.name,
                      "ranked_by", by, "tried", r.tried, "invalid", r.invalid, "too_big", r.too_big,
                      "too_slow", r.too_slow, "over_budget", r.over_budget, "ranked", r.ranked, "seconds",
                      r.seconds, "threads", r.threads, "best", best, "front", front, "plans", plans);
        if (!j || et_atomic_write_json(o->json_out, j, &err)) {
            if (j) print_error(&err);
            rc = j ? et_error_exit_status(&err) : 1;
        }
        json_decref(j);
    }
    if (o->plot && r.n_all > 0 && plot_search(o, &s, &r, &err)) {
        print_error(&err);
        rc = et_error_exit_status(&err);
    }
    free(simulated);
    search_result_free(&r);
    et_scenario_free(&s);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o)) return EXIT_INPUT;
    if (o.search) {
        if (search_mpi_init(&argc, &argv, &o.space.rank, &o.space.ranks)) {
            fputs("etsim: error: cannot start MPI for the search under mpirun\n", stderr);
            return 1;
        }
        int rc = search_main(&o);
        search_mpi_finish();
        return rc;
    }
    if (o.sweep) return sweep_main(&o);
    if (o.compare_with) return compare_main(&o);
    et_error err;
    et_scenario s;
    int loaded = load(&o, o.scenario, &s);
    if (loaded) return loaded;
    if (check_outputs(&o, &s)) {
        et_scenario_free(&s);
        return EXIT_INPUT;
    }
    if (o.plan_out &&
        et_plan_write_for_scenario(o.scenario, o.plan_out, o.plan_steps > 0 ? (int)o.plan_steps : 20, &err)) {
        print_error(&err);
        et_scenario_free(&s);
        return et_error_exit_status(&err);
    }
    if (o.platform_out && platform_write_file(o.platform_out, &s, &err)) {
        print_error(&err);
        et_scenario_free(&s);
        return et_error_exit_status(&err);
    }
    json_t *sim = NULL;
    if (o.collective >= 0) { /* no training step: the analytic estimate is not needed */
        double sizes[64];
        int n = 0;
        for (double b = (double)o.min_bytes; b <= (double)o.max_bytes && n < 64; b *= (double)o.step_factor)
            sizes[n++] = b;
        o.sim.bench_sizes = n;
        o.sim.bench_bytes = sizes;
        o.sim.bench_op = o.collective;
        int rc = sim_run(&s, &o.sim, &sim, &err);
        if (rc) print_error(&err);
        /* the JSON holds the measurements whatever the verdict */
        if (sim) json_object_set_new(sim, "format_version", json_integer(REPORT_FORMAT_VERSION));
        if (!rc && o.json_out && et_atomic_write_json(o.json_out, sim, &err)) {
            print_error(&err);
            rc = et_error_exit_status(&err);
        }
        if (!rc) rc = collective_bench_print(stdout, sim, 0.02) ? 4 : 0;
        json_decref(sim);
        et_scenario_free(&s);
        return rc;
    }
    /* the simulation runs in a child process: start it first and compute the analytic estimate meanwhile */
    o.sim.progress = !o.analytic && !o.quiet && isatty(2);
    sim_child child;
    const int early = !o.analytic && sim_runs_once(&s, &o.sim);
    if (early && sim_start(&s, &o.sim, &child, &err)) {
        print_error(&err);
        et_scenario_free(&s);
        return et_error_exit_status(&err);
    }
    faults_runs faults = {0};
    if (early && faults_runs_start(&s, &o.sim, &faults, &err)) {
        print_error(&err);
        if (!sim_finish(&child, &s, &sim, &err)) json_decref(sim);
        et_scenario_free(&s);
        return et_error_exit_status(&err);
    }
    et_estimate e;
    if (et_analytic_estimate(&s, &e, &err)) {
        print_error(&err);
        if (early && !sim_finish(&child, &s, &sim, &err)) json_decref(sim);
        faults_runs_finish(&faults, NULL, &err);
        et_scenario_free(&s);
        return et_error_exit_status(&err);
    }
    if (!o.analytic) {
        if (early ? sim_finish(&child, &s, &sim, &err) : sim_run_phases(&s, &o.sim, &sim, &err)) {
            print_error(&err);
            faults_runs_finish(&faults, NULL, &err);
            et_scenario_free(&s);
            return et_error_exit_status(&err);
        }
        if (faults_runs_finish(&faults, sim, &err)) {
            print_error(&err);
            json_decref(sim);
            et_scenario_free(&s);
            return et_error_exit_status(&err);
        }
        report_print_simulated(stdout, &s, &e, sim);
        faults_report_print(stdout, sim);
    } else {
        report_print_analytic(stdout, &s, &e);
    }
    json_decref(report_tensor_train(stdout, &s));
    if (o.top_ops > 0) report_print_top_ops(stdout, &s, (int)o.top_ops, o.top_ops_by_layer);
    int rc = 0;
    if (o.json_out) {
        json_t *j = report_json_analytic(&s, &e);
        if (j && sim) {
            json_object_set_new(j, "engine", json_string("simgrid"));
            json_object_set(j, "simulation", sim);
            json_object_set_new(sim, "headline", report_sim_headline(&s, &e, sim));
        }
        if (!j || et_atomic_write_json(o.json_out, j, &err)) {
            if (j)
                print_error(&err);
            else
                fputs("etsim: error: out of memory building the JSON report\n", stderr);
            rc = 1;
        }
        json_decref(j);
    }
    if (o.csv_prefix && report_csv_write(o.csv_prefix, &s, sim, &err)) {
        print_error(&err);
        rc = et_error_exit_status(&err);
    }
    json_decref(sim);
    if (!rc && !e.memory.fits) {
        fprintf(stderr,
                "etsim: error: the plan does not fit: %.2f GiB per GPU needed, %s has %.2f GiB (try ZeRO, "
                "recomputation, tensor or pipeline parallelism, or a smaller local batch)\n",
                e.memory.total / 1073741824.0, s.cluster.device.name, e.memory.capacity / 1073741824.0);
        rc = EXIT_DOES_NOT_FIT;
    }
    et_scenario_free(&s);
    return rc;
}

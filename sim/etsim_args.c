/* etsim's command line: every flag into the options (etsim.h), with what each expects said on error. */
#define _POSIX_C_SOURCE 200809L
#include "etsim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "collective_bench.h"

void etsim_usage(FILE *out)
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
        "  --deadline-at-band-edge  a plan meets the deadline at its error band's slow edge (p90 of how "
        "much\n"
        "                    slower the published runs of its family ran than ET predicted), not at ET's "
        "figure\n"
        "  --max-gpus N      only plans on at most N GPUs (of the counts searched)\n"
        "  --memory-headroom F  only plans leaving this share of each GPU's memory free (0.1: 10%)\n"
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
        "  --band-held-out   the error band from other models' published runs only (the scenario's own\n"
        "                    model left out: what a model ET was never checked on gets)\n"
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

/* A flag of the plan search (the search itself, its threads and outputs, prices and the constraints) at
 * argv[*i], its value read and *i moved past it: 1 when it is one, 0 when it is not, -1 when its value is
 * wrong (said on stderr). The other *_flag readers below answer the same way. */
static int search_limit_flag(int argc, char **argv, int *i, options *o)
{
    const char *a = argv[*i];
    int at = *i;
    if (strcmp(a, "--search") == 0) {
        o->search = 1;
    } else if (strcmp(a, "--search-top") == 0) {
        if (number_arg(argc, argv, &at, 1, 1000, &o->search_top)) return -1;
    } else if (strcmp(a, "--search-threads") == 0) {
        long long v2;
        if (number_arg(argc, argv, &at, 1, 64, &v2)) return -1;
        o->space.threads = (int)v2;
    } else if (strcmp(a, "--search-simulate") == 0) {
        if (number_arg(argc, argv, &at, 1, 100, &o->search_sim)) return -1;
    } else if (strcmp(a, "--rank-by") == 0) {
        const char *by;
        if (file_arg(argc, argv, &at, &by)) return -1;
        int k = 0;
        while (search_order_names[k] && strcmp(search_order_names[k], by))
            k++;
        if (!search_order_names[k]) {
            fprintf(stderr, "etsim: --rank-by expects time, gpu-hours, cost or energy, got \"%s\"\n", by);
            return -1;
        }
        o->space.rank_by = k + 1;
    } else if (strcmp(a, "--search-out") == 0) {
        if (file_arg(argc, argv, &at, &o->search_out)) return -1;
    } else if (strcmp(a, "--search-gpus") == 0) {
        const char *list;
        if (file_arg(argc, argv, &at, &list)) return -1;
        for (const char *c = list; *c && o->space.n_gpus < 32;) {
            char *end;
            long v = strtol(c, &end, 10);
            if (end == c || v < 1 || v > ET_MAX_SIMULATED_GPUS * 16 || (*end && *end != ',')) {
                fprintf(stderr, "etsim: --search-gpus expects GPU counts separated by commas, got \"%s\"\n",
                        list);
                return -1;
            }
            o->space.gpus[o->space.n_gpus++] = (int)v;
            c = *end ? end + 1 : end;
        }
    } else if (strcmp(a, "--search-devices") == 0) {
        const char *list;
        if (file_arg(argc, argv, &at, &list)) return -1;
        static char names[1024];
        snprintf(names, sizeof names, "%s", list);
        for (char *tok = strtok(names, ","); tok && o->space.n_devices < 8; tok = strtok(NULL, ","))
            o->space.devices[o->space.n_devices++] = tok;
    } else if (strcmp(a, "--price-per-gpu-hour") == 0) {
        const char *text;
        if (file_arg(argc, argv, &at, &text) || price_list(text, &o->space)) return -1;
    } else if (strcmp(a, "--prices") == 0) {
        if (file_arg(argc, argv, &at, &o->prices_file)) return -1;
    } else if (strcmp(a, "--deadline-days") == 0 || strcmp(a, "--budget-gpu-hours") == 0 ||
               strcmp(a, "--budget") == 0) {
        const char *flag = a, *text;
        if (file_arg(argc, argv, &at, &text)) return -1;
        double x;
        if (positive(flag, text, &x)) return -1;
        if (strcmp(flag, "--deadline-days") == 0)
            o->space.deadline_s = x * 86400;
        else if (strcmp(flag, "--budget") == 0)
            o->space.budget_cost = x;
        else
            o->space.budget_gpu_hours = x;
    } else if (strcmp(a, "--deadline-at-band-edge") == 0) {
        o->space.deadline_at_band = true;
    } else if (strcmp(a, "--max-gpus") == 0) {
        long long v;
        if (number_arg(argc, argv, &at, 1, 1 << 30, &v)) return -1;
        o->space.max_gpus = (int)v;
    } else if (strcmp(a, "--memory-headroom") == 0) {
        const char *text;
        char *end;
        if (file_arg(argc, argv, &at, &text)) return -1;
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
    } else {
        return 0;
    }
    *i = at;
    return 1;
}

/* A flag that widens or narrows the plan space: global batches, buckets and algorithms, a varied key; and the
 * search's CSV and figure. */
static int search_space_flag(int argc, char **argv, int *i, options *o)
{
    const char *a = argv[*i];
    int at = *i;
    if (strcmp(a, "--search-batch") == 0) {
        const char *list;
        if (file_arg(argc, argv, &at, &list)) return -1;
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
        if (file_arg(argc, argv, &at, &list)) return -1;
        char copy[512];
        snprintf(copy, sizeof copy, "%s", list);
        for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
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
    } else if (strcmp(a, "--search-vary") == 0) {
        const char *spec;
        if (file_arg(argc, argv, &at, &spec)) return -1;
        const char *eq = strchr(spec, '=');
        if (!eq || eq == spec || !eq[1] || o->space.n_vary) {
            fprintf(stderr, "etsim: --search-vary expects one key.path=a,b,c (up to 16 values), got \"%s\"\n",
                    spec);
            return -1;
        }
        char values[1024];
        snprintf(values, sizeof values, "%s", eq + 1);
        for (char *save = NULL, *tok = strtok_r(values, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (o->space.n_vary == 16 || (size_t)(eq - spec) + strlen(tok) + 2 > sizeof o->space.vary[0]) {
                fprintf(stderr, "etsim: --search-vary takes up to 16 values of one key\n");
                return -1;
            }
            snprintf(o->space.vary[o->space.n_vary++], sizeof o->space.vary[0], "%.*s=%s", (int)(eq - spec),
                     spec, tok);
        }
    } else if (strcmp(a, "--search-csv") == 0) {
        if (file_arg(argc, argv, &at, &o->search_csv)) return -1;
    } else if (strcmp(a, "--plot") == 0) {
        if (file_arg(argc, argv, &at, &o->plot)) return -1;
    } else {
        return 0;
    }
    *i = at;
    return 1;
}

/* --search-tensor, --search-pipeline, --search-micro, --search-zero, --search-recompute, --search-expert,
 * --search-context: only these values of one dimension. */
static int search_dimension_flag(int argc, char **argv, int *i, options *o)
{
    const char *a = argv[*i];
    int at = *i;
    if (!strcmp(a, "--search-tensor") || !strcmp(a, "--search-pipeline") || !strcmp(a, "--search-micro") ||
        !strcmp(a, "--search-zero") || !strcmp(a, "--search-recompute") || !strcmp(a, "--search-expert") ||
        !strcmp(a, "--search-context")) {
        const char *flag = a, *list;
        if (file_arg(argc, argv, &at, &list)) return -1;
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
        for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            long v = -1;
            if (!strcmp(flag, "--search-recompute")) {
                for (int k = 0; et_recompute_names[k]; k++)
                    if (!strcmp(et_recompute_names[k], tok)) v = k;
            } else {
                char *end;
                v = strtol(tok, &end, 10);
                if (*end || end == tok || v < 0 || v > 1 << 20 || (strcmp(flag, "--search-zero") && v < 1) ||
                    (!strcmp(flag, "--search-zero") && v > 3))
                    v = -1;
            }
            if (v < 0 || *n == cap) {
                fprintf(stderr, "etsim: %s expects up to %d %s separated by commas, got \"%s\"\n", flag, cap,
                        !strcmp(flag, "--search-recompute") ? "of none, full, selective"
                        : !strcmp(flag, "--search-zero")    ? "ZeRO stages 0-3"
                                                            : "positive whole numbers",
                        list);
                return -1;
            }
            values[(*n)++] = (int)v;
        }
    } else {
        return 0;
    }
    *i = at;
    return 1;
}

/* --compare A.json [key.path=value ...] B.json ...: files, each with the overrides that follow it. */
static int compare_flag(int argc, char **argv, int *i, options *o)
{
    const char *a = argv[*i];
    int at = *i;
    if (strcmp(a, "--compare") == 0) {
        while (at + 1 < argc && strncmp(argv[at + 1], "--", 2) != 0) {
            const char *next = argv[++at];
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
    } else {
        return 0;
    }
    *i = at;
    return 1;
}

/* A flag of one scenario's run: the engine, its outputs, overrides, the collective benchmark, SimGrid's own.
 */
static int run_flag(int argc, char **argv, int *i, options *o)
{
    const char *a = argv[*i];
    int at = *i;
    long long v;
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
        if (file_arg(argc, argv, &at, &o->json_out)) return -1;
    } else if (strcmp(a, "--trace") == 0) {
        if (file_arg(argc, argv, &at, &o->sim.trace_path)) return -1;
    } else if (strcmp(a, "--platform-out") == 0) {
        if (file_arg(argc, argv, &at, &o->platform_out)) return -1;
    } else if (strcmp(a, "--set") == 0) {
        if (o->n_sets == 32) {
            fprintf(stderr, "etsim: at most 32 --set options\n");
            return -1;
        }
        if (file_arg(argc, argv, &at, &o->sets[o->n_sets])) return -1;
        o->n_sets++;
    } else if (strcmp(a, "--sweep") == 0) {
        if (file_arg(argc, argv, &at, &o->sweep)) return -1;
    } else if (strcmp(a, "--csv") == 0) {
        if (file_arg(argc, argv, &at, &o->csv_prefix)) return -1;
    } else if (strcmp(a, "--plan-out") == 0) {
        if (file_arg(argc, argv, &at, &o->plan_out)) return -1;
    } else if (strcmp(a, "--op-times") == 0) {
        if (file_arg(argc, argv, &at, &o->op_times)) return -1;
    } else if (strcmp(a, "--steps") == 0) {
        if (number_arg(argc, argv, &at, 1, 10000, &v)) return -1;
        o->sim.steps = (int)v;
    } else if (strcmp(a, "--plan-steps") == 0) {
        if (number_arg(argc, argv, &at, 1, 10000000, &o->plan_steps)) return -1;
    } else if (strcmp(a, "--trace-ranks") == 0) {
        if (number_arg(argc, argv, &at, 1, 1 << 20, &v)) return -1;
        o->sim.trace_ranks = (int)v;
    } else if (strcmp(a, "--collective") == 0 || strcmp(a, "--algo") == 0) {
        const char *const *names = a[2] == 'c' ? sim_bench_op_names : et_coll_algo_names;
        if (++at >= argc) {
            fprintf(stderr, "etsim: %s needs a value\n", a);
            return -1;
        }
        int found = -1;
        for (int k = 0; names[k]; k++)
            if (strcmp(names[k], argv[at]) == 0) found = k;
        if (found < 0) {
            fprintf(stderr, "etsim: %s: unknown value \"%s\"\n", a, argv[at]);
            return -1;
        }
        if (a[2] == 'c')
            o->collective = found;
        else
            o->sim.bench_algo = (et_coll_algo)found;
    } else if (strcmp(a, "--top-ops") == 0) {
        if (number_arg(argc, argv, &at, 1, 100000, &o->top_ops)) return -1;
    } else if (strcmp(a, "--band-held-out") == 0) {
        o->band_held_out = 1;
    } else if (strcmp(a, "--top-ops-by-layer") == 0) {
        o->top_ops_by_layer = 1;
        if (o->top_ops <= 0) o->top_ops = 20;
    } else if (strcmp(a, "--min-bytes") == 0) {
        if (bytes_arg(argc, argv, &at, 1, 1LL << 40, &o->min_bytes)) return -1;
    } else if (strcmp(a, "--max-bytes") == 0) {
        if (bytes_arg(argc, argv, &at, 1, 1LL << 40, &o->max_bytes)) return -1;
    } else if (strcmp(a, "--step-factor") == 0) {
        if (number_arg(argc, argv, &at, 2, 1024, &o->step_factor)) return -1;
    } else if (strcmp(a, "--seed") == 0) {
        if (number_arg(argc, argv, &at, 0, 0x7fffffffffffffffLL, &o->seed)) return -1;
    } else if (!strncmp(a, "--cfg", 5) || !strncmp(a, "--log", 5)) {
        if (simgrid_arg(argc, argv, &at, &o->sim)) return -1;
    } else {
        return 0;
    }
    *i = at;
    return 1;
}

int etsim_parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->seed = -1;
    o->collective = -1;
    o->min_bytes = 1 << 20;
    o->max_bytes = 1 << 30;
    o->step_factor = 4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = search_limit_flag(argc, argv, &i, o);
        if (!r) r = search_space_flag(argc, argv, &i, o);
        if (!r) r = search_dimension_flag(argc, argv, &i, o);
        if (!r) r = compare_flag(argc, argv, &i, o);
        if (!r) r = run_flag(argc, argv, &i, o);
        if (r < 0) return -1;
        if (r > 0) continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            etsim_usage(stdout);
            exit(0);
        } else if (a[0] == '-') {
            fprintf(stderr, "etsim: unknown option %s\n", a);
            etsim_usage(stderr);
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
        etsim_usage(stderr);
        return -1;
    }
    return 0;
}

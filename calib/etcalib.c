/* etcalib: measured runs against the cost model, and device profiles fitted to them. Only this file prints
 * and exits.
 *   etcalib bench [--backend cpu] [--scenario s.json] --out micro.json
 *   etcalib report measured.json [--profile P.json] [--csv F] [--plot F.png] [--top N]
 *   etcalib fit micro.json|measured.json ... --base P.json --out Q.json
 * Exit status: 0 ok, 2 bad input (nothing written), 1 other errors. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "calib_allreduce.h"
#include "calib_fit.h"
#include "calib_network.h"
#include "calib_runs.h"
#include "measured_run.h"
#include "plan.h"
#include "quantile.h"
#include "rt_backend.h"

#define EXIT_INPUT 2
#define MAX_RUNS 16

#include "et_git_commit.h" /* generated at build time: ET_GIT_COMMIT */

static const char usage[] =
    "usage: etcalib bench [--backend cpu] [--scenario s.json] --out micro.json\n"
    "       etcalib report measured.json [--profile P.json] [--csv F] [--plot F.png] [--top N]\n"
    "       etcalib fit micro.json|measured.json|table.csv ... --base P.json --out Q.json "
    "[--only-precision]\n"
    "                   [--gpu NAME[|NAME...] --precision P]   (for calibset .csv tables)\n"
    "       etcalib fit-network nccl.csv --gpu NAME[|NAME...] --scenario s.json --out s-calibrated.json\n"
    "       etcalib fit-network micro.json --scenario s.json --out s-calibrated.json   (all-reduce rows)\n"
    "       etcalib fit-network all_reduce_perf.log [--gpu NAME] --scenario s.json --out s-calibrated.json\n"
    "       etcalib fit-runs published.csv --base P.json --out Q.json [--only PREFIX[,PREFIX...]]\n"
    "                   [--terms gemm,attention,half_dim,cudnn_attention]\n"
    "  bench:  matrix products over a grid of shapes and the scenario's shapes, streaming kernels and the\n"
    "          fused Adam update over sizes, the per-op overhead, on this machine (pin it and set\n"
    "          OPENBLAS_NUM_THREADS); under mpirun with 2 ranks or more, first the all-reduce's bus\n"
    "          bandwidth over message sizes.\n"
    "  report: the cost model's prediction beside each measurement (the plan's profile, or P), the step\n"
    "          first, then per op class and the largest ops; --csv writes every op.\n"
    "  fit:    fits the profile's GEMM rate and half dimension, bandwidth, vector rate, launch overhead and\n"
    "          special-function rate and cache bandwidth (when the base profile has them)\n"
    "          to the runs and writes an ordinary profile file (Q must not be an input).\n"
    "  fit-runs: scales P's large-GEMM efficiency (gemm_max and every precision's), its fused\n"
    "          attention's, its GEMM half dimension and cuDNN's fused attention's (--terms: which of\n"
    "          gemm, attention, half_dim, cudnn_attention; default gemm,attention; cuDNN's from\n"
    "          FlashAttention 2's rate where P has none) to the published training runs\n"
    "          whose scenarios (NAME.json beside the CSV) name P's device (--only: runs whose names start\n"
    "          so), minimising the mean absolute log error of the analytic step; prints each run before\n"
    "          and after and writes P with the fitted efficiencies.";

static void fail(const et_error *err)
{
    fputs("etcalib: error: ", stderr);
    et_error_print(stderr, err);
}

/* An output that is an input, or cannot be written, is refused before any work (model/atomic_file.h). */
static int refuse_output(const char *out, const char *flag, const char *const *inputs, int n)
{
    et_error err;
    if (!out || !et_output_check(out, flag, inputs, n, &err)) return 0;
    fail(&err);
    return et_error_exit_status(&err);
}

typedef struct sums {
    double measured[CALIB_CLASS_COUNT], predicted[CALIB_CLASS_COUNT];
    double measured_total, predicted_total;
} sums;

static sums sum_classes(const et_measured_run *r, const double *pred)
{
    sums s = {0};
    for (int i = 0; i < r->graph.n_ops; i++) {
        const calib_class c = calib_class_of(r->graph.ops[i].kind);
        s.measured[c] += r->measured[i], s.predicted[c] += pred[i];
        s.measured_total += r->measured[i], s.predicted_total += pred[i];
    }
    return s;
}

static double error_pct(double predicted, double measured)
{
    return measured > 0 ? 100 * (predicted - measured) / measured : 0;
}

typedef struct ranked {
    int op;
    double t;
} ranked;

static int by_time(const void *a, const void *b)
{
    double x = ((const ranked *)a)->t, y = ((const ranked *)b)->t;
    return (x < y) - (x > y);
}

/* Measured against predicted per op, one colour per class, log-log with the diagonal, through gnuplot
 * (Debian's gnuplot-nox) when it is on the PATH; without it the report says so and stays complete. */
static int write_plot(const et_measured_run *r, const double *pred, const char *png)
{
    if (system("command -v gnuplot > /dev/null 2>&1") != 0) {
        fprintf(stderr,
                "etcalib report: no gnuplot on the PATH (Debian: apt-get install gnuplot-nox), so no plot; "
                "the report above is complete\n");
        return 0;
    }
    char dat[1024], tmp_png[1024], cmd[4096];
    snprintf(dat, sizeof dat, "%.900s.tmp.%ld.dat", png, (long)getpid());
    snprintf(tmp_png, sizeof tmp_png, "%.900s.tmp.%ld.png", png, (long)getpid());
    FILE *f = fopen(dat, "w");
    if (!f) {
        fprintf(stderr, "etcalib report: cannot write %s\n", dat);
        return 1;
    }
    for (int c = 0; c < CALIB_CLASS_COUNT; c++) { /* one data block per class */
        fprintf(f, "# %s\n", calib_class_names[c]);
        int any = 0;
        for (int i = 0; i < r->graph.n_ops; i++)
            if ((int)calib_class_of(r->graph.ops[i].kind) == c && r->measured[i] > 0 && pred[i] > 0)
                fprintf(f, "%.6g %.6g\n", pred[i] * 1e3, r->measured[i] * 1e3), any = 1;
        if (!any) fprintf(f, "nan nan\n");
        fprintf(f, "\n\n");
    }
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "gnuplot -e \"set terminal pngcairo size 900,700; set output '%s'; set logscale xy; set grid; "
             "set key left top; set xlabel 'predicted [ms per step]'; set ylabel 'measured [ms per step]'; "
             "set title '%s: measured against predicted, per op'; "
             "plot '%s' index 0 title 'matrix products' pt 7, '' index 1 title 'attention' pt 5, "
             "'' index 2 title 'element-wise' pt 9, '' index 3 title 'optimizer' pt 11, x title 'measured = "
             "predicted' lw 2\" "
             "> /dev/null 2>&1",
             tmp_png, r->plan.s.name, dat); /* 2 x 1024 + 128 + ~600: fits */
    int ok = system(cmd) == 0 && rename(tmp_png, png) == 0;
    remove(dat);
    if (!ok) {
        remove(tmp_png);
        fprintf(stderr, "etcalib report: gnuplot could not draw %s\n", png);
        return 1;
    }
    printf("# plot: %s\n", png);
    return 0;
}

static int cmd_report(int argc, char **argv)
{
    const char *file = NULL, *profile_path = NULL, *csv = NULL, *plot = NULL;
    int top = 10;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const int valued = strcmp(a, "--profile") == 0 || strcmp(a, "--csv") == 0 ||
                           strcmp(a, "--top") == 0 || strcmp(a, "--plot") == 0;
        if (valued && i + 1 < argc) {
            if (strcmp(a, "--profile") == 0)
                profile_path = argv[++i];
            else if (strcmp(a, "--csv") == 0)
                csv = argv[++i];
            else if (strcmp(a, "--plot") == 0)
                plot = argv[++i];
            else {
                char *end;
                long v = strtol(argv[++i], &end, 10);
                if (*end || end == argv[i] || v < 1 || v > 1000000) {
                    fprintf(stderr,
                            "etcalib report: --top expects a whole number in [1, 1000000], got \"%s\"\n",
                            argv[i]);
                    return EXIT_INPUT;
                }
                top = (int)v;
            }
        } else if (argv[i][0] == '-' || file) {
            fprintf(stderr, "etcalib report: unexpected argument %s\n%s\n", argv[i], usage);
            return EXIT_INPUT;
        } else {
            file = argv[i];
        }
    }
    if (!file) {
        fprintf(stderr, "%s\n", usage);
        return EXIT_INPUT;
    }
    const char *report_inputs[] = {file, profile_path};
    if (refuse_output(csv, "--csv", report_inputs, 2) || refuse_output(plot, "--plot", report_inputs, 2))
        return EXIT_INPUT;
    et_error err;
    et_device_profile profile;
    if (profile_path && et_device_profile_load(profile_path, &profile, &err)) {
        fail(&err);
        return et_error_exit_status(&err);
    }
    et_measured_run run;
    if (et_measured_run_load(file, profile_path ? &profile : NULL, &run, &err)) {
        fail(&err);
        return et_error_exit_status(&err);
    }
    const et_device_profile *d = profile_path ? &profile : &run.plan.s.cluster.device;
    double *pred = calloc((size_t)run.graph.n_ops, sizeof *pred);
    et_measured_run_predict(&run, d, pred);
    const sums s = sum_classes(&run, pred);
    printf("# %s: plan %s, %s backend, %d measured steps, profile %s\n", file, run.plan.s.name, run.backend,
           run.steps, d->name);
    printf("%-34s %14s %14s %10s\n", "what", "measured [ms]", "predicted [ms]", "error [%]");
    printf("%-34s %14.3f %14.3f %10.1f\n", "step (sum of ops)", s.measured_total * 1e3,
           s.predicted_total * 1e3, error_pct(s.predicted_total, s.measured_total));
    printf("%-34s %14.3f %14s %10s\n", "step (wall clock, median)", run.step_measured * 1e3, "-", "-");
    /* the wall step beyond the ops: what the run waited for and what the host did between ops */
    const double gaps = run.step_measured - s.measured_total - run.comm_wait;
    printf("%-34s %14.3f %14s %10s\n", "  all-reduce wait after backward", run.comm_wait * 1e3, "-", "-");
    printf("%-34s %14.3f %14s %10s\n", "  host gaps, data, other waits", gaps * 1e3, "-", "-");
    printf(
        "# the wall step is rank 0's ops, the wait for the gradient all-reduces still running when backward "
        "ends, and the rest: the host between ops (data, batch upload, timers) and other waits");
    if (run.slowest_rank_extra > 0)
        printf("; the slowest rank's ops take %.3f ms more than rank 0's, a wait inside the all-reduces",
               run.slowest_rank_extra * 1e3);
    printf("\n");
    for (int c = 0; c < CALIB_CLASS_COUNT; c++)
        if (s.measured[c] > 0 || s.predicted[c] > 0)
            printf("%-34s %14.3f %14.3f %10.1f\n", calib_class_names[c], s.measured[c] * 1e3,
                   s.predicted[c] * 1e3, error_pct(s.predicted[c], s.measured[c]));
    ranked *order = malloc((size_t)run.graph.n_ops * sizeof *order);
    for (int i = 0; i < run.graph.n_ops; i++)
        order[i] = (ranked){i, run.measured[i]};
    qsort(order, (size_t)run.graph.n_ops, sizeof *order, by_time);
    printf("\n%-34s %14s %14s %10s\n", "largest ops", "measured [ms]", "predicted [ms]", "error [%]");
    for (int k = 0; k < top && k < run.graph.n_ops; k++) {
        const int i = order[k].op;
        printf("%-34s %14.4f %14.4f %10.1f\n", run.graph.ops[i].id, run.measured[i] * 1e3, pred[i] * 1e3,
               error_pct(pred[i], run.measured[i]));
    }
    int rc = 0;
    if (csv) {
        char tmp[4096]; /* a temporary file renamed over the CSV: never a half-written one */
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", csv, (long)getpid());
        FILE *f = fopen(tmp, "w");
        if (!f) {
            et_error_set_code(&err, ET_ERROR_IO, csv, 0, 0, NULL, "cannot write the CSV file");
            fail(&err);
            rc = et_error_exit_status(&err);
        } else {
            fprintf(f, "op,kind,phase,measured_s,predicted_s,error_pct\n");
            for (int i = 0; i < run.graph.n_ops; i++)
                fprintf(f, "%s,%s,%s,%.9g,%.9g,%.2f\n", run.graph.ops[i].id,
                        et_op_kind_names[run.graph.ops[i].kind], et_phase_names[run.graph.ops[i].phase],
                        run.measured[i], pred[i], error_pct(pred[i], run.measured[i]));
            if (fclose(f) || rename(tmp, csv)) {
                remove(tmp);
                et_error_set_code(&err, ET_ERROR_IO, csv, 0, 0, NULL, "cannot write the CSV file");
                fail(&err);
                rc = et_error_exit_status(&err);
            }
        }
    }
    if (!rc && plot) rc = write_plot(&run, pred, plot);
    free(order), free(pred);
    et_measured_run_free(&run);
    return rc;
}

/* The fused attention's sequence term where it is not the half dimension's default: a fit that moves the
 * half dimension keeps the attention's (its rate was measured at a length); a profile without a fused
 * rate has none to keep. */
static void set_flash_half_len(json_t *eff, const et_device_profile *d)
{
    if (d->flash_attention_efficiency > 0 && d->flash_half_len != d->gemm_half_dim)
        json_object_set_new(eff, "flash_half_len", json_real(d->flash_half_len));
}

/* A profile's large-GEMM efficiencies into its JSON's efficiency section: gemm_max and each precision's own.
 */
static void set_gemm_efficiencies(json_t *eff, const et_device_profile *d)
{
    json_object_set_new(eff, "gemm_max", json_real(d->gemm_max_efficiency));
    json_t *by = json_object();
    for (int p = 0; p < ET_PRECISION_COUNT; p++)
        if (d->gemm_max_by_precision[p] > 0)
            json_object_set_new(by, et_precision_names[p], json_real(d->gemm_max_by_precision[p]));
    if (json_object_size(by))
        json_object_set_new(eff, "gemm_max_by_precision", by);
    else
        json_decref(by);
}

/* The base profile's JSON with the fitted terms and a source saying where they came from. */
static json_t *fitted_json(const char *base_path, const et_device_profile *fit, const char *const *inputs,
                           int n, double objective, unsigned pinned, et_error *err)
{
    json_error_t je;
    json_t *root = json_load_file(base_path, 0, &je);
    if (!root) {
        et_error_set(err, base_path, je.line, je.column, NULL, "%s", je.text);
        return NULL;
    }
    char host[128] = "unknown", date[32], source[2048], name[96];
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%d", &tm);
    int at =
        snprintf(source, sizeof source,
                 "Calibrated by etcalib fit on %s, %s, ET commit %s, from base profile %s and inputs:", host,
                 date, ET_GIT_COMMIT, base_path);
    for (int i = 0; i < n && at < (int)sizeof source - 8; i++)
        at += snprintf(source + at, sizeof source - (size_t)at, " %s", inputs[i]);
    at += snprintf(source + (at < (int)sizeof source ? at : 0),
                   sizeof source - (size_t)(at < (int)sizeof source ? at : 0),
                   " (time-weighted squared log error %.4g).", objective);
    for (int k = 0; calib_term_names[k] && at < (int)sizeof source - 8; k++)
        if (pinned & (1u << k))
            at += snprintf(source + at, sizeof source - (size_t)at,
                           " Not determined by these inputs (at the fit's limit, 1000x from the base): %s.",
                           calib_term_names[k]);
    snprintf(name, sizeof name, "%.80s-calibrated", fit->name);
    json_object_set_new(root, "name", json_string(name));
    json_object_set_new(root, "source", json_string(source));
    json_t *peak = json_object_get(root, "peak_tflops");
    for (int p = 0; p < ET_PRECISION_COUNT && peak;
         p++) /* optional units stay absent when the base has none */
        if (fit->peak_flops[p] > 0 || json_object_get(peak, et_precision_names[p]))
            json_object_set_new(peak, et_precision_names[p], json_real(fit->peak_flops[p] / 1e12));
    json_object_set_new(root, "vector_tflops", json_real(fit->vector_flops / 1e12));
    if (fit->optimizer_flops != fit->vector_flops)
        json_object_set_new(root, "optimizer_tflops", json_real(fit->optimizer_flops / 1e12));
    if (fit->special_rate > 0) json_object_set_new(root, "special_tops", json_real(fit->special_rate / 1e12));
    json_t *cache = json_object_get(root, "cache"); /* one level (an object) or an array of them */
    for (int l = 0; cache && l < fit->cache_levels; l++) {
        json_t *level = json_is_array(cache) ? json_array_get(cache, (size_t)l) : cache;
        if (level && fit->cache_bandwidth[l] > 0)
            json_object_set_new(level, "bandwidth_GBps", json_real(fit->cache_bandwidth[l] / 1e9));
    }
    json_object_set_new(root, "memory_bandwidth_GBps", json_real(fit->memory_bandwidth / 1e9));
    json_t *eff = json_object_get(root, "efficiency");
    set_gemm_efficiencies(eff, fit);
    json_object_set_new(eff, "gemm_half_dim", json_real(fit->gemm_half_dim));
    set_flash_half_len(eff, fit);
    json_object_set_new(eff, "memory", json_real(fit->memory_efficiency));
    json_object_set_new(eff, "kernel_overhead_us", json_real(fit->kernel_overhead_s * 1e6));
    if (fit->attention_products_efficiency != 1)
        json_object_set_new(eff, "attention_products", json_real(fit->attention_products_efficiency));
    return root;
}

static int cmd_fit(int argc, char **argv)
{
    const char *inputs[MAX_RUNS + 1], *base_path = NULL, *out_path = NULL, *gpu = NULL,
                                      *precision_name = NULL;
    int n = 0, only_precision = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--gpu") == 0 && i + 1 < argc) {
            gpu = argv[++i];
        } else if (strcmp(argv[i], "--only-precision") == 0) {
            only_precision = 1;
        } else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc) {
            precision_name = argv[++i];
        } else if (strcmp(argv[i], "--base") == 0 && i + 1 < argc) {
            base_path = argv[++i];
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_path = argv[++i];
        } else if (argv[i][0] == '-' || n == MAX_RUNS) {
            fprintf(stderr, "etcalib fit: unexpected argument %s (at most %d runs)\n%s\n", argv[i], MAX_RUNS,
                    usage);
            return EXIT_INPUT;
        } else {
            inputs[n++] = argv[i];
        }
    }
    if (!n || !base_path || !out_path) {
        fprintf(stderr, "%s\n", usage);
        return EXIT_INPUT;
    }
    et_error err;
    inputs[n] = base_path;
    if (refuse_output(out_path, "--out", inputs, n + 1)) return EXIT_INPUT;
    et_device_profile base, fit;
    if (et_device_profile_load(base_path, &base, &err)) {
        fail(&err);
        return et_error_exit_status(&err);
    }
    int precision = -1;
    for (int p = 0; precision_name && p < ET_PRECISION_COUNT; p++)
        if (strcmp(precision_name, et_precision_names[p]) == 0) precision = p;
    if (precision_name && precision < 0) {
        fprintf(stderr, "etcalib fit: --precision is one of fp32, tf32, fp16, bf16, fp8, fp4, not \"%s\"\n",
                precision_name);
        return EXIT_INPUT;
    }
    if (only_precision && precision < 0) {
        fprintf(stderr, "etcalib fit: --only-precision needs --precision P\n");
        return EXIT_INPUT;
    }
    /* the precision's own large-GEMM term, seeded with the shared one; the other precisions keep theirs */
    if (only_precision && base.gemm_max_by_precision[precision] <= 0)
        base.gemm_max_by_precision[precision] = base.gemm_max_efficiency;
    et_measured_run runs[MAX_RUNS];
    calib_micro micro[MAX_RUNS];
    int n_runs = 0, n_micro = 0, bad = 0;
    for (int i = 0; i < n && !bad; i++) {
        const size_t len = strlen(inputs[i]);
        if (len > 4 && strcmp(inputs[i] + len - 4, ".csv") == 0) { /* a public table */
            if (!gpu || precision < 0) {
                fprintf(stderr, "etcalib fit: a .csv table needs --gpu NAME[|NAME...] and --precision P\n");
                bad = 1;
                err.text[0] = 0;
                break;
            }
            bad = calib_micro_load_csv(inputs[i], gpu, et_precision_names[precision], &micro[n_micro], &err);
            if (!bad && base.kind == ET_DEVICE_CPU)
                bad = et_error_set(&err, inputs[i], 0, 0, NULL,
                                   "public GPU measurements, but the profile \"%s\" "
                                   "describes a cpu device",
                                   base.name);
            n_micro += !bad;
            continue;
        }
        json_t *peek = json_load_file(inputs[i], 0, NULL);
        const char *tool = json_string_value(json_object_get(peek, "tool"));
        const int is_micro = tool && strcmp(tool, "etcalib bench") == 0;
        json_decref(peek);
        if (is_micro) {
            bad = calib_micro_load(inputs[i], &micro[n_micro], &err);
            if (!bad && (strcmp(micro[n_micro].backend, "cpu") == 0) != (base.kind == ET_DEVICE_CPU)) {
                bad = et_error_set(
                    &err, inputs[i], 0, 0, "$.backend",
                    "benchmarked on the %s backend, but the profile \"%s\" describes a %s device",
                    micro[n_micro].backend, base.name, et_device_kind_names[base.kind]);
                calib_micro_free(&micro[n_micro]);
            }
            n_micro += !bad;
        } else {
            bad = et_measured_run_load(inputs[i], &base, &runs[n_runs], &err);
            n_runs += !bad;
        }
    }
    if (bad) {
        if (err.text[0]) fail(&err);
        for (int i = 0; i < n_runs; i++)
            et_measured_run_free(&runs[i]);
        for (int i = 0; i < n_micro; i++)
            calib_micro_free(&micro[i]);
        return EXIT_INPUT;
    }
    const et_precision p = n_runs           ? runs[0].plan.s.precision
                           : precision >= 0 ? (et_precision)precision
                                            : ET_FP32;
    calib_data data = {runs, n_runs, micro, n_micro, p};
    int iterations;
    const double before = calib_objective(&data, &base);
    unsigned pinned = 0;
    const double after = calib_fit(&data, &base, &fit, &iterations, &pinned);
    if (!isfinite(before) || !isfinite(after)) { /* nothing is written from a fit that has no value */
        et_error_set(&err, inputs[0], 0, 0, NULL,
                     "the fit's objective is %g (before: %g): an op or sample with no time the model can "
                     "compare; no profile written",
                     after, before);
        fail(&err);
        for (int i = 0; i < n_runs; i++)
            et_measured_run_free(&runs[i]);
        for (int i = 0; i < n_micro; i++)
            calib_micro_free(&micro[i]);
        return EXIT_INPUT;
    }
    printf(
        "# etcalib fit: %d run(s), %d microbenchmark file(s), base %s, %d Nelder-Mead iterations, objective "
        "%.4g -> %.4g\n",
        n_runs, n_micro, base.name, iterations, before, after);
    printf("%-22s %14s %14s\n", "term", "base", "fitted");
    calib_terms tb = calib_terms_of(&base, p), tf = calib_terms_of(&fit, p);
    printf("%-22s %14.2f %14.2f\n", "GEMM rate [GFLOP/s]", tb.gemm_rate / 1e9, tf.gemm_rate / 1e9);
    printf("%-22s %14.1f %14.1f\n", "GEMM half dimension", tb.gemm_half, tf.gemm_half);
    printf("%-22s %14.2f %14.2f\n", "bandwidth [GB/s]", tb.bandwidth / 1e9, tf.bandwidth / 1e9);
    printf("%-22s %14.2f %14.2f\n", "vector rate [GFLOP/s]", tb.vector_rate / 1e9, tf.vector_rate / 1e9);
    printf("%-22s %14.2f %14.2f\n", "launch overhead [us]", tb.overhead * 1e6, tf.overhead * 1e6);
    if (tb.special_rate > 0)
        printf("%-22s %14.3f %14.3f\n", "special rate [G/s]", tb.special_rate / 1e9, tf.special_rate / 1e9);
    for (int l = 0; l < base.cache_levels; l++) {
        char what[40];
        snprintf(what, sizeof what, "cache %.0f MiB [GB/s]", base.cache_bytes[l] / 1048576.0);
        printf("%-22s %14.2f %14.2f\n", what, tb.cache_bandwidth[l] / 1e9, tf.cache_bandwidth[l] / 1e9);
    }
    printf("%-22s %14.3f %14.3f\n", "attention products", tb.attention, tf.attention);
    printf("%-22s %14.2f %14.2f\n", "optimizer [GFLOP/s]", tb.optimizer_rate / 1e9, tf.optimizer_rate / 1e9);
    for (int k = 0; calib_term_names[k]; k++) /* a value the box, not the data, chose is no fitted term */
        if (pinned & (1u << k))
            printf("# %s: at the fit's limit (1000x from the base): not determined by these inputs\n",
                   calib_term_names[k]);
    printf("\n%-28s %-16s %12s %12s %12s %9s %9s\n", "run", "class", "measured[ms]", "base[ms]", "fitted[ms]",
           "base[%]", "fit[%]");
    for (int u = 0; u < n_micro; u++) { /* fit quality per microbenchmark kind */
        static const char *const kind_names[CALIB_SAMPLE_KINDS] = {"matrix products", "streaming",
                                                                   "optimizer"};
        for (calib_sample_kind kind = 0; kind < CALIB_SAMPLE_KINDS; kind++) {
            double mean = 0, ss_tot = 0, ss_res = 0, worst = 0;
            int k = 0;
            for (int i = 0; i < micro[u].n_samples; i++)
                if (micro[u].samples[i].kind == kind) mean += log(micro[u].samples[i].seconds), k++;
            if (!k) continue;
            mean /= k;
            for (int i = 0; i < micro[u].n_samples; i++) {
                const calib_sample *sm = &micro[u].samples[i];
                if (sm->kind != kind) continue;
                const double y = log(sm->seconds), e = y - log(calib_sample_time(sm, &fit, p));
                ss_tot += (y - mean) * (y - mean), ss_res += e * e;
                worst = fmax(worst, fabs(exp(-e) - 1));
            }
            printf("%-28.28s %-16s %d samples, R^2 (log times) %.3f, largest error %.0f%%\n", micro[u].file,
                   kind_names[kind], k, ss_tot > 0 ? 1 - ss_res / ss_tot : 0, 100 * worst);
        }
    }
    for (int r = 0; r < n_runs; r++) {
        double *pb = calloc((size_t)runs[r].graph.n_ops, sizeof *pb),
               *pf = calloc((size_t)runs[r].graph.n_ops, sizeof *pf);
        et_measured_run_predict(&runs[r], &base, pb);
        et_measured_run_predict(&runs[r], &fit, pf);
        sums sb = sum_classes(&runs[r], pb), sf = sum_classes(&runs[r], pf);
        /* R^2 of log op times, ops the model costs */
        double mean = 0, ss_tot = 0, ss_res = 0;
        int k = 0;
        for (int i = 0; i < runs[r].graph.n_ops; i++)
            if (runs[r].measured[i] > 0 && pf[i] > 0) mean += log(runs[r].measured[i]), k++;
        mean /= k ? k : 1;
        for (int i = 0; i < runs[r].graph.n_ops; i++)
            if (runs[r].measured[i] > 0 && pf[i] > 0) {
                const double y = log(runs[r].measured[i]);
                ss_tot += (y - mean) * (y - mean), ss_res += (y - log(pf[i])) * (y - log(pf[i]));
            }
        printf("%-28.28s %-16s %12.3f %12.3f %12.3f %9.1f %9.1f\n", runs[r].plan.s.name, "step",
               sb.measured_total * 1e3, sb.predicted_total * 1e3, sf.predicted_total * 1e3,
               error_pct(sb.predicted_total, sb.measured_total),
               error_pct(sf.predicted_total, sf.measured_total));
        for (int c = 0; c < CALIB_CLASS_COUNT; c++)
            if (sb.measured[c] > 0)
                printf("%-28s %-16s %12.3f %12.3f %12.3f %9.1f %9.1f\n", "", calib_class_names[c],
                       sb.measured[c] * 1e3, sb.predicted[c] * 1e3, sf.predicted[c] * 1e3,
                       error_pct(sb.predicted[c], sb.measured[c]),
                       error_pct(sf.predicted[c], sf.measured[c]));
        printf("%-28s %-16s %12s %12s %12.3f\n", "", "R^2 (log op times)", "", "",
               ss_tot > 0 ? 1 - ss_res / ss_tot : 0);
        free(pb), free(pf);
    }
    json_t *j = fitted_json(base_path, &fit, inputs, n, after, pinned, &err);
    int rc = j ? et_atomic_write_json(out_path, j, &err) : -1;
    json_decref(j);
    for (int r = 0; r < n_runs; r++)
        et_measured_run_free(&runs[r]);
    for (int u = 0; u < n_micro; u++)
        calib_micro_free(&micro[u]);
    if (rc) {
        fail(&err);
        return et_error_exit_status(&err);
    }
    printf("# wrote %s\n", out_path);
    return 0;
}

/* Whether a run's name starts with one of the comma-separated prefixes (NULL: every run). */
static int run_selected(const char *name, const char *only)
{
    if (!only) return 1;
    for (const char *p = only; *p;) {
        const size_t len = strcspn(p, ",");
        if (len && !strncmp(name, p, len)) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* --terms of fit-runs: a comma-separated subset of gemm, attention, half_dim and cudnn_attention, each
 * once. */
static int parse_terms(const char *list, unsigned *terms)
{
    static const char *names[CALIB_TERMS] = {"gemm", "attention", "half_dim", "cudnn_attention"};
    *terms = 0;
    for (const char *p = list;;) {
        const size_t len = strcspn(p, ",");
        int k = 0;
        while (k < CALIB_TERMS && !(strlen(names[k]) == len && strncmp(p, names[k], len) == 0))
            k++;
        if (k == CALIB_TERMS || (*terms & (1u << k))) {
            fprintf(stderr,
                    "etcalib fit-runs: --terms: expected a comma-separated subset of gemm, attention, "
                    "half_dim and cudnn_attention, each once, got \"%s\"\n",
                    list);
            return -1;
        }
        *terms |= 1u << k;
        if (!p[len]) return 0;
        p += len + 1;
    }
}

/* P's large-GEMM and fused-attention efficiencies (and GEMM half dimension) fitted to published training
 * runs (calib_runs.h). */
static int cmd_fit_runs(int argc, char **argv)
{
    const char *csv = NULL, *base_path = NULL, *out_path = NULL, *only = NULL;
    unsigned terms = CALIB_TERM_GEMM | CALIB_TERM_ATTENTION;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--terms") == 0 && i + 1 < argc) {
            if (parse_terms(argv[++i], &terms)) return EXIT_INPUT;
        } else if (strcmp(argv[i], "--base") == 0 && i + 1 < argc)
            base_path = argv[++i];
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out_path = argv[++i];
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (argv[i][0] != '-' && !csv)
            csv = argv[i];
        else {
            fprintf(stderr, "etcalib fit-runs: unexpected argument %s\n%s\n", argv[i], usage);
            return EXIT_INPUT;
        }
    }
    if (!csv || !base_path || !out_path) {
        fprintf(stderr, "etcalib fit-runs: needs published.csv, --base and --out\n%s\n", usage);
        return EXIT_INPUT;
    }
    const char *inputs[] = {csv, base_path};
    int rc = refuse_output(out_path, "--out", inputs, 2);
    if (rc) return rc;
    et_error err;
    et_device_profile base, fit;
    if (et_device_profile_load(base_path, &base, &err)) {
        fail(&err);
        return et_error_exit_status(&err);
    }
    calib_runs all;
    if (calib_runs_load(csv, base.name, &all, &err)) {
        fail(&err);
        return et_error_exit_status(&err);
    }
    calib_runs runs = {all.runs, 0}; /* the selected runs, moved to the front */
    for (int i = 0; i < all.n; i++)
        if (run_selected(all.runs[i].name, only)) {
            const calib_run t = all.runs[runs.n];
            all.runs[runs.n++] = all.runs[i], all.runs[i] = t;
        }
    if (runs.n == 0) {
        et_error_set(&err, csv, 0, 0, NULL, "no run of the device \"%s\" is selected by --only %s", base.name,
                     only);
        fail(&err);
        calib_runs_free(&all);
        return EXIT_INPUT;
    }
    double factor[CALIB_TERMS];
    const double before = calib_runs_objective(&runs, &base);
    const double after = calib_runs_fit(&runs, &base, terms, &fit, factor);
    if (!isfinite(before) || !isfinite(after)) {
        et_error_set(&err, csv, 0, 0, NULL, "a run has no analytic step on %s: no profile written",
                     base.name);
        fail(&err);
        calib_runs_free(&all);
        return EXIT_INPUT;
    }
    printf("# etcalib fit-runs: %d of %d runs on %s, mean |log error| %.4g -> %.4g\n", runs.n, all.n,
           base.name, before, after);
    printf("%-26s %10s %10s\n", "term", "base", "fitted");
    printf("%-26s %10.4f %10.4f\n", "gemm_max", base.gemm_max_efficiency, fit.gemm_max_efficiency);
    for (int p = 0; p < ET_PRECISION_COUNT; p++)
        if (base.gemm_max_by_precision[p] > 0)
            printf("gemm_max_by_precision.%-4s %10.4f %10.4f\n", et_precision_names[p],
                   base.gemm_max_by_precision[p], fit.gemm_max_by_precision[p]);
    printf("%-26s %10.4f %10.4f\n", "flash_attention", base.flash_attention_efficiency,
           fit.flash_attention_efficiency);
    printf("%-26s %10.4g %10.4g\n", "gemm_half_dim", base.gemm_half_dim, fit.gemm_half_dim);
    if (fit.cudnn_attention_efficiency > 0)
        printf("%-26s %10.4f %10.4f\n", "cudnn_attention", base.cudnn_attention_efficiency,
               fit.cudnn_attention_efficiency);
    printf("\n%-56s %5s %12s %10s %10s %9s %9s\n", "run", "fit", "published[s]", "base[s]", "fitted[s]",
           "base[%]", "fit[%]");
    double sum[2][2] = {{0}};
    int count[2] = {0};
    for (int i = 0; i < all.n; i++) {
        const double pub = all.runs[i].published_s, pb = calib_runs_predict(&all, i, &base),
                     pf = calib_runs_predict(&all, i, &fit);
        const int in = i < runs.n;
        printf("%-56.56s %5s %12.3f %10.3f %10.3f %+9.1f %+9.1f\n", all.runs[i].name, in ? "yes" : "no", pub,
               pb, pf, error_pct(pb, pub), error_pct(pf, pub));
        sum[in][0] += fabs(error_pct(pb, pub)), sum[in][1] += fabs(error_pct(pf, pub)), count[in]++;
    }
    for (int in = 1; in >= 0; in--)
        if (count[in])
            printf("# %s: %d runs, mean |error| %.1f%% -> %.1f%%\n", in ? "fitted on" : "held out", count[in],
                   sum[in][0] / count[in], sum[in][1] / count[in]);
    json_t *root = NULL;
    json_error_t je;
    if (!(root = json_load_file(base_path, 0, &je))) {
        et_error_set(&err, base_path, je.line, je.column, NULL, "%s", je.text);
        fail(&err);
        calib_runs_free(&all);
        return EXIT_INPUT;
    }
    json_t *eff = json_object_get(root, "efficiency");
    set_gemm_efficiencies(eff, &fit);
    if (base.flash_attention_efficiency > 0)
        json_object_set_new(eff, "flash_attention", json_real(fit.flash_attention_efficiency));
    if (terms & CALIB_TERM_HALF_DIM && base.gemm_half_dim > 0)
        json_object_set_new(eff, "gemm_half_dim", json_real(fit.gemm_half_dim));
    if (fit.cudnn_attention_efficiency > 0)
        json_object_set_new(eff, "cudnn_attention", json_real(fit.cudnn_attention_efficiency));
    set_flash_half_len(eff, &fit);
    char cudnn[128] = "";
    if (terms & CALIB_TERM_CUDNN && fit.cudnn_attention_efficiency > 0)
        snprintf(cudnn, sizeof cudnn, ", cuDNN's fused attention's x %.4f (from %s)", factor[3],
                 base.cudnn_attention_efficiency > 0 ? "its own rate" : "FlashAttention 2's rate");
    char note[1024];
    snprintf(
        note, sizeof note,
        " Fitted by etcalib fit-runs (ET commit %s) to %d published training runs of %s%s%s: the large-GEMM "
        "efficiencies x %.4f, the fused attention's x %.4f and the GEMM half dimension x %.4f%s (mean "
        "absolute log error of the analytic step %.4g -> %.4g).",
        ET_GIT_COMMIT, runs.n, csv, only ? " starting " : "", only ? only : "", factor[0], factor[1],
        factor[2], cudnn, before, after);
    const char *old = json_string_value(json_object_get(root, "source"));
    size_t len = (old ? strlen(old) : 0) + strlen(note) + 1;
    char *source = malloc(len);
    if (source) {
        snprintf(source, len, "%s%s", old ? old : "", note);
        json_object_set_new(root, "source", json_string(source));
        free(source);
        rc = et_atomic_write_json(out_path, root, &err);
    } else { /* a profile without the note of its fit is not written */
        rc = -1;
        et_error_set_code(&err, ET_ERROR_MEMORY, out_path, 0, 0, NULL, "out of memory");
    }
    json_decref(root);
    calib_runs_free(&all);
    if (rc) {
        fail(&err);
        return et_error_exit_status(&err);
    }
    printf("# wrote %s\n", out_path);
    return 0;
}

/* The scenario with its cluster's bandwidth_factor and collective_latency_us fitted to nccl-tests rows. */
static int cmd_fit_network(int argc, char **argv)
{
    const char *table = NULL, *gpu = NULL, *scenario_path = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--gpu") == 0 && i + 1 < argc)
            gpu = argv[++i];
        else if (strcmp(argv[i], "--scenario") == 0 && i + 1 < argc)
            scenario_path = argv[++i];
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (argv[i][0] != '-' && !table)
            table = argv[i];
        else {
            fprintf(stderr, "etcalib fit-network: unexpected argument %s\n%s\n", argv[i], usage);
            return EXIT_INPUT;
        }
    }
    const size_t tl = table ? strlen(table) : 0;
    const int from_micro = tl > 5 && !strcmp(table + tl - 5, ".json"); /* etcalib bench's all-reduce rows */
    const int from_log =
        table && !from_micro && calib_nccl_tests_is_log(table); /* all_reduce_perf's output */
    if (from_micro && !gpu) gpu = "MPI ranks";
    if (from_log && !gpu) gpu = "any"; /* the log names its GPUs */
    if (!table || !gpu || !scenario_path || !out) {
        fprintf(stderr, "%s\n", usage);
        return EXIT_INPUT;
    }
    et_error err;
    const char *inputs[] = {scenario_path, table};
    if (refuse_output(out, "--out", inputs, 2)) return EXIT_INPUT;
    et_scenario s;
    if (et_scenario_load(scenario_path, &s, &err)) {
        fail(&err);
        return et_error_exit_status(&err);
    }
    calib_coll_sample *x;
    int n;
    json_t *micro = from_micro ? et_measured_load_json(table, &err) : NULL;
    int loaded = from_micro ? (micro ? calib_allreduce_samples(micro, table, &x, &n, &err) : -1)
                 : from_log ? calib_nccl_tests_load(table, gpu, &x, &n, &err)
                            : calib_nccl_load(table, gpu, &x, &n, &err);
    json_decref(micro);
    if (loaded) {
        fail(&err);
        et_scenario_free(&s);
        return et_error_exit_status(&err);
    }
    const double bf0 = s.cluster.bandwidth_factor, lat0 = s.cluster.collective_step_latency;
    double bf, lat;
    const double after = calib_fit_network(&s, x, n, &bf, &lat);
    printf("# etcalib fit-network: %d all-reduce rows of GPU \"%s\" from %s on %s's cluster\n", n, gpu, table,
           s.name);
    printf("%8s %6s %14s %16s %16s %16s\n", "nodes", "GPUs", "size [B]", "measured busbw", "base busbw",
           "fitted busbw");
    double worst = 0;
    for (int i = 0; i < n; i++) {
        const int ranks = x[i].nodes * x[i].per_node;
        const double f =
            2.0 * (ranks - 1) / ranks * x[i].bytes / 1e9; /* GB moved per rank, busbw convention */
        const double tb = calib_coll_predict(&s, &x[i], bf0, lat0),
                     tf = calib_coll_predict(&s, &x[i], bf, lat);
        worst = fmax(worst, fabs(tf / x[i].seconds - 1));
        printf("%8d %6d %14.0f %16.2f %16.2f %16.2f\n", x[i].nodes, ranks, x[i].bytes, f / x[i].seconds,
               f / tb, f / tf);
    }
    printf("# busbw in GB/s. bandwidth_factor %.4g -> %.4g, collective_latency_us %.3g -> %.3g; mean squared "
           "log "
           "error %.4g, largest time error %.0f%%\n",
           bf0, bf, lat0 * 1e6, lat * 1e6, after, 100 * worst);
    if (bf >= 1)
        printf("# note: the fit wants more than the scenario's nominal link bandwidth (factor capped at 1): "
               "are the "
               "rows from this scenario's GPUs and fabric?\n");
    int rc = 0;
    json_t *root = et_measured_load_json(scenario_path, &err);
    if (!root) {
        rc = 1;
    } else {
        et_scenario_json_absolute(root, s.dir);
        json_t *cluster = json_object_get(root, "cluster");
        json_object_set_new(cluster, "bandwidth_factor", json_real(bf));
        json_object_set_new(cluster, "collective_latency_us", json_real(lat * 1e6));
        char note[1024];
        const char *desc = json_string_value(json_object_get(root, "description"));
        snprintf(note, sizeof note,
                 "%s%sNetwork calibrated by etcalib fit-network: %d nccl-tests all-reduce rows of %s "
                 "in %s (bandwidth_factor %.4g, collective_latency_us %.3g).",
                 desc ? desc : "", desc ? " " : "", n, gpu, table, bf, lat * 1e6);
        json_object_set_new(root, "description", json_string(note));
        rc = et_atomic_write_json(out, root, &err) ? 1 : 0;
        json_decref(root);
    }
    if (rc)
        fail(&err);
    else
        printf("# wrote %s\n", out);
    free(x);
    et_scenario_free(&s);
    return rc;
}

static int cmd_bench(int argc, char **argv)
{
    const char *backend = "cpu", *scenario_path = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
            backend = argv[++i];
        else if (strcmp(argv[i], "--scenario") == 0 && i + 1 < argc)
            scenario_path = argv[++i];
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else {
            fprintf(stderr, "etcalib bench: unexpected argument %s\n%s\n", argv[i], usage);
            return EXIT_INPUT;
        }
    }
    if (!out) {
        fprintf(stderr, "etcalib bench: --out micro.json is required\n");
        return EXIT_INPUT;
    }
    const char *bench_inputs[] = {scenario_path};
    if (refuse_output(out, "--out", bench_inputs, 1)) return EXIT_INPUT;
    et_error err;
    /* under mpirun: the all-reduce over every rank first, then MPI ends and rank 0 alone runs the rest (no
     * rank polling in MPI beside its timings) */
    json_t *allreduce = NULL;
    if (calib_allreduce_active()) {
        allreduce = calib_allreduce_bench(stderr, &err);
        const int rank = calib_allreduce_rank();
        calib_allreduce_finish();
        if (rank != 0) return 0;
        if (!allreduce) {
            fail(&err);
            return et_error_exit_status(&err);
        }
    }
    et_plan plan; /* a scenario or a plan: a plan's "run" is allowed */
    if (scenario_path && et_plan_load(scenario_path, &plan, &err)) {
        et_scenario s;
        if (et_scenario_load(scenario_path, &s, &err)) {
            fail(&err);
            return et_error_exit_status(&err);
        }
        memset(&plan, 0, sizeof plan);
        plan.s = s;
    }
    json_t *j = calib_bench_run(backend, scenario_path ? &plan.s : NULL, stderr, &err);
    if (scenario_path) et_plan_free(&plan);
    if (!j) {
        json_decref(allreduce);
        fail(&err);
        return et_error_exit_status(&err);
    }
    if (allreduce) json_object_set_new(j, "allreduce", allreduce);
    int rc = et_atomic_write_json(out, j, &err);
    json_decref(j);
    if (rc) {
        fail(&err);
        return et_error_exit_status(&err);
    }
    fprintf(stderr, "etcalib bench: wrote %s\n", out);
    return 0;
}

int main(int argc, char **argv)
{
    rt_cpu_blas_select(argv); /* as etrun: OpenBLAS's kernels for this CPU where it chose older ones */
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        puts(usage);
        return argc < 2 ? EXIT_INPUT : 0;
    }
    if (strcmp(argv[1], "bench") == 0) {
        int rank;
        if (calib_allreduce_init(&argc, &argv, &rank)) {
            fputs("etcalib: error: cannot start MPI under mpirun\n", stderr);
            return 1;
        }
        int rc = cmd_bench(argc - 2, argv + 2);
        calib_allreduce_finish();
        return rc;
    }
    if (strcmp(argv[1], "report") == 0) return cmd_report(argc - 2, argv + 2);
    if (strcmp(argv[1], "fit") == 0) return cmd_fit(argc - 2, argv + 2);
    if (strcmp(argv[1], "fit-network") == 0) return cmd_fit_network(argc - 2, argv + 2);
    if (strcmp(argv[1], "fit-runs") == 0) return cmd_fit_runs(argc - 2, argv + 2);
    fprintf(stderr, "etcalib: unknown command %s\n%s\n", argv[1], usage);
    return EXIT_INPUT;
}

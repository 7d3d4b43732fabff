/* etsim --search: the search run, its table, the verdict when nothing is left, why the best wins, the CSV,
 * JSON and the gnuplot figure. */
#define _POSIX_C_SOURCE 200809L
#include "etsim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analytic.h"
#include "atomic_file.h"
#include "json_reader.h"
#include "plan.h"
#include "report.h"
#include "scenario_override.h"
#include "search_mpi.h"

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

/* The space's flags and prices against the scenario, then every output against every input, before any
 * work (the devices' profiles are inputs too); an exit status. */
static int search_checks(options *o, const et_scenario *s)
{
    et_error err;
    const char *inputs[] = {o->scenario, o->prices_file};
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
        search_space_check(&o->space, s, device, &err)) {
        if (!strcmp(err.path, "prices")) /* a key of --prices FILE, or a pair of --price-per-gpu-hour */
            snprintf(err.path, sizeof err.path, "%s", o->prices_file ? "--prices" : "--price-per-gpu-hour");
        etsim_print_error(&err);
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
            etsim_print_error(&err);
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
        return EXIT_INPUT;
    }
    if (o->space.budget_cost > 0 && o->space.price <= 0 && o->space.n_prices == 0) {
        fprintf(stderr, "etsim: --budget is money: give prices (--price-per-gpu-hour or --prices), or use "
                        "--budget-gpu-hours\n");
        return EXIT_INPUT;
    }
    return 0;
}

/* The search's summary line, the ranked table (plans equal but for memory on one row), the front and why
 * the best wins. */
static void print_table(const options *o, const et_scenario *s, const search_result *r, const char *by)
{
    printf("search       %s on %s, global batch %lld; %d plans tried in %.1f s: %d refused by the scenario's "
           "rules, %d do not fit, %d miss the deadline, %d over the budget, %d ranked by %s (analytic "
           "estimates; "
           "%d threads, %.0f plans/s)\n",
           s->name, s->cluster.device.name, s->batch.global, r->tried, r->seconds, r->invalid, r->too_big,
           r->too_slow, r->over_budget, r->ranked, by, r->threads,
           r->seconds > 0 ? r->tried / r->seconds : 0);
    printf("             time-to-train, GPU-hours and cost with failures and checkpoints (the scenario's "
           "resilience: %.3g interruptions a GPU-hour)\n",
           s->resilience.interruptions_per_gpu_hour);
    if (o->space.deadline_at_band && o->space.deadline_s > 0)
        printf("             the deadline holds at each plan's error band's slow edge (p90 of its family's "
               "published runs), not at ET's figure\n");
    printf("\n");
    print_plan_header();
    /* plans that differ only in ZeRO stage or recomputation at one time-to-train are one row, the least
     * memory first (the ranking's tie rule), the others named under it */
    for (int i = 0, row = 1; i < r->n_best; row++) {
        print_plan(o, s, row, &r->best[i]);
        int j = i + 1;
        for (; j < r->n_best && same_but_memory(&r->best[i], &r->best[j]); j++)
            printf("%s ZeRO %d, recomputation %s: %.2f GiB", j == i + 1 ? "     the same time with" : ";",
                   r->best[j].zero_stage, et_recompute_names[r->best[j].recompute], r->best[j].memory_gib);
        if (j > i + 1) printf("\n");
        i = j;
    }
    if (r->n_front > 1) {
        printf("\nPareto front of time-to-train against %s (%d plans no other beats on both):\n",
               r->front[0].price > 0 ? "cost" : "GPU-hours", r->n_front);
        for (int i = 0; i < r->n_front; i++)
            print_plan(o, s, i + 1, &r->front[i]);
    }
    print_why_best(r, o->scenario);
    et_scenario best;
    et_error err;
    if (r->n_best > 0 && !et_scenario_parse(r->best[0].scenario, o->scenario, NULL, &best, &err)) {
        printf("\nrank 1's ");
        report_print_band(stdout, &best, r->best[0].step_s, r->best[0].time_to_train_s);
        et_scenario_free(&best);
    }
}

/* The k best plans played by the simulator beside their analytic step, up to one child process per core
 * at a time; their simulated steps into simulated[] (may be NULL). An exit status. */
static int simulate_best(const options *o, const search_result *r, int k, double *simulated)
{
    if (k > 0) printf("\nsimulated (SimGrid)   rank    analytic[s]   simulated[s]   simulated/analytic\n");
    et_error err;
    int rc = 0;
    /* up to one simulation per core at a time, each in its own child process */
    const long cores = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    const int batch = o->space.threads > 0 ? o->space.threads : (int)(cores < 64 ? cores : 64);
    for (int first = 0; first < k && !rc; first += batch) {
        const int n = first + batch < k ? batch : k - first;
        et_scenario c[64];
        sim_child child[64];
        int started[64] = {0}, parsed[64] = {0};
        for (int i = 0; i < n && !rc; i++) {
            if (et_scenario_parse(r->best[first + i].scenario, o->scenario, NULL, &c[i], &err)) {
                etsim_print_error(&err);
                rc = et_error_exit_status(&err);
                break;
            }
            parsed[i] = 1;
            if (sim_runs_once(&c[i], &o->sim)) {
                if (sim_start(&c[i], &o->sim, &child[i], &err)) {
                    etsim_print_error(&err);
                    rc = et_error_exit_status(&err);
                    break;
                }
                started[i] = 1;
            }
        }
        for (int i = 0; i < n; i++) {
            sim_result sim = {0};
            int bad = 0, ran = 0;
            if (started[i])
                bad = sim_finish(&child[i], &c[i], &sim, &err), ran = 1;
            else if (parsed[i] && !rc)
                bad = sim_run_phases(&c[i], &o->sim, &sim, &err), ran = 1;
            if (bad && !rc) {
                etsim_print_error(&err);
                rc = et_error_exit_status(&err);
            }
            if (ran && !bad && !rc) {
                const double sim_step = sim.step.mean;
                const int at = first + i;
                if (simulated) simulated[at] = sim_step;
                printf("%-21s %4d %14.4f %14.4f %20.3f\n", "", at + 1, r->best[at].step_s, sim_step,
                       r->best[at].step_s > 0 ? sim_step / r->best[at].step_s : 0);
            }
            sim_result_free(&sim);
            if (parsed[i]) et_scenario_free(&c[i]);
        }
    }
    return rc;
}

/* The scenario's own plan beside the best, in the figure the ranking uses. */
static void print_own_plan(const options *o, const et_scenario *s, const search_result *r, search_order order,
                           const et_estimate *own)
{
    if (order != SEARCH_BY_TIME) {
        search_plan mine = {.gpu_hours = et_gpu_hours(s, own->time_to_train_with_failures),
                            .energy_kwh = own->energy_run_kwh,
                            .time_to_train_s = own->time_to_train_with_failures};
        mine.cost = mine.gpu_hours * search_price(&o->space, s->cluster.device.name);
        const double own_spend = search_rank_key(&mine, order),
                     best_spend = search_rank_key(&r->best[0], order);
        if (!(own_spend > 0))
            printf("\nthe scenario's own plan: no %s for its device %s, so nothing to compare\n",
                   order == SEARCH_BY_ENERGY ? "power" : "price", s->cluster.device.name);
        else
            printf("\nthe scenario's own plan: %.0f %s%s; the best: %.0f (%.1f%% %s)\n", own_spend,
                   order == SEARCH_BY_COST     ? "in cost"
                   : order == SEARCH_BY_ENERGY ? "kWh"
                                               : "GPU-hours",
                   own->memory.fits ? "" : " (does not fit)", best_spend,
                   100 * fabs(1 - best_spend / own_spend),
                   best_spend <= own_spend ? "less" : "more: the own plan is outside the space searched");
    } else {
        const double ratio = own->step_time / r->best[0].step_s;
        printf("\nthe scenario's own plan: %.4f s a step%s; the best is %.2fx %s%s\n", own->step_time,
               own->memory.fits ? "" : " (does not fit)", ratio > 1 ? ratio : 1 / ratio,
               ratio > 1 ? "faster" : "slower (the own plan is outside the space searched)",
               o->space.n_gpus || o->space.n_devices || o->space.n_batches
                   ? " (on the GPUs and batch it names)"
                   : "");
    }
}

/* The best plan as a scenario and a plan, every estimated plan as CSV, the result as JSON, the figure; an
 * exit status (the first failure's). */
static int write_outputs(const options *o, const et_scenario *s, search_result *r, const char *by, int k,
                         const double *simulated)
{
    et_error err;
    int rc = 0;
    /* written elsewhere, the best plan's file names must still resolve */
    if (r->n_best > 0) et_scenario_json_absolute(r->best[0].scenario, s->dir);
    if (r->n_best > 0 && o->search_out && et_atomic_write_json(o->search_out, r->best[0].scenario, &err)) {
        etsim_print_error(&err);
        rc = et_error_exit_status(&err);
    }
    if (r->n_best > 0 && o->plan_out &&
        et_plan_write_for_document(r->best[0].scenario, o->scenario, o->plan_out,
                                   o->plan_steps > 0 ? (int)o->plan_steps : 20, &err)) {
        etsim_print_error(&err);
        rc = et_error_exit_status(&err);
    }
    if (o->search_csv) {
        const void *ctx[] = {o, s, r};
        if (et_atomic_write(o->search_csv, csv_writer, (void *)ctx, &err)) {
            etsim_print_error(&err);
            rc = et_error_exit_status(&err);
        }
    }
    if (o->json_out) {
        json_t *best = json_array(), *front = json_array();
        for (int i = 0; i < r->n_best; i++) {
            json_t *p = plan_json(o, s, &r->best[i]);
            if (i < k && simulated) json_object_set_new(p, "simulated_step_s", json_real(simulated[i]));
            json_array_append_new(best, p);
        }
        for (int i = 0; i < r->n_front; i++)
            json_array_append_new(front, plan_json(o, s, &r->front[i]));
        json_t *plans = json_array();
        for (int i = 0; i < r->n_all; i++) {
            json_t *p = plan_json(o, s, &r->all[i]);
            json_object_set_new(p, "status", json_string(search_status_names[r->all[i].status]));
            json_array_append_new(plans, p);
        }
        json_t *j =
            json_pack("{s:s, s:i, s:{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:o, s:o, s:o}}",
                      "tool", "etsim", "format_version", REPORT_FORMAT_VERSION, "search", "scenario", s->name,
                      "ranked_by", by, "tried", r->tried, "invalid", r->invalid, "too_big", r->too_big,
                      "too_slow", r->too_slow, "over_budget", r->over_budget, "ranked", r->ranked, "seconds",
                      r->seconds, "threads", r->threads, "best", best, "front", front, "plans", plans);
        if (!j || et_atomic_write_json(o->json_out, j, &err)) {
            if (j) etsim_print_error(&err);
            rc = j ? et_error_exit_status(&err) : 1;
        }
        json_decref(j);
    }
    if (o->plot && r->n_all > 0 && plot_search(o, s, r, &err)) {
        etsim_print_error(&err);
        rc = et_error_exit_status(&err);
    }
    return rc;
}

int etsim_search_main(options *o)
{
    et_scenario s;
    int rc = etsim_load(o, o->scenario, &s);
    if (rc) return rc;
    if ((rc = search_checks(o, &s))) {
        et_scenario_free(&s);
        return rc;
    }
    et_error err;
    o->space.progress = !o->quiet && isatty(2) && o->space.rank == 0;
    search_result r;
    const int keep = o->search_top > 0 ? (int)o->search_top : 10;
    if (search_run(o->scenario, o->sets, o->n_sets, &o->space, keep, &r, &err) ||
        search_mpi_gather(&r, keep, search_ranking(&o->space), o->space.rank, o->space.ranks, &err)) {
        etsim_print_error(&err);
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
    print_table(o, &s, &r, by);
    const int k = o->search_sim < r.n_best ? (int)o->search_sim : r.n_best;
    double *simulated = k > 0 ? calloc((size_t)k, sizeof *simulated) : NULL;
    rc = simulate_best(o, &r, k, simulated);
    if (r.n_best == 0) {
        print_no_plan(o, &s, &r);
        rc = EXIT_DOES_NOT_FIT;
    } else if (own_ok) {
        print_own_plan(o, &s, &r, order, &own);
    }
    const int written = write_outputs(o, &s, &r, by, k, simulated);
    if (!rc) rc = written;
    free(simulated);
    search_result_free(&r);
    et_scenario_free(&s);
    return rc;
}

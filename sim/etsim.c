/* etsim: capacity planning for one training scenario (see docs/): loading, the output checks and one
 * scenario's report; the other modes are in etsim_*.c (etsim.h). Only the etsim files print and exit. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etsim.h"

#include "analytic.h"
#include "atomic_file.h"
#include "collective_bench.h"
#include "error_band.h"
#include "fabric.h"
#include "faults_report.h"
#include "measured_run.h"
#include "plan.h"
#include "platform.h"
#include "quantile.h"
#include "report.h"
#include "report_csv.h"
#include "scenario.h"
#include "scenario_override.h"
#include "search_mpi.h"
#include "step_sim.h"

void etsim_print_error(const et_error *err)
{
    fputs("etsim: error: ", stderr);
    et_error_print(stderr, err);
}

/* Loads a scenario and applies the command line's overrides; returns an exit status. */
/* --op-times: the measured run's factors (measured / modelled on its own device) on the scenario's ops. */
static int apply_op_times(const options *o, et_scenario *s)
{
    et_error err;
    et_measured_run run;
    if (et_measured_run_load(o->op_times, NULL, &run, &err)) {
        etsim_print_error(&err);
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
    } else if (et_measured_run_op_scales(&run, &s->op_scales, &err)) {
        rc = 1;
    }
    if (rc) {
        etsim_print_error(&err);
        et_scenario_free(s);
    } else if (!o->quiet) {
        double *f = malloc((size_t)(s->op_scales.n ? s->op_scales.n : 1) * sizeof *f);
        if (f) memcpy(f, s->op_scales.factor, (size_t)s->op_scales.n * sizeof *f);
        fprintf(stderr,
                "etsim: --op-times: %d ops of %s scaled by measured/modelled (median %.3f, from %s)\n",
                s->op_scales.n, run.plan.s.name, f ? et_quantile(f, s->op_scales.n, 0.5) : NAN, o->op_times);
        free(f);
    }
    et_measured_run_free(&run);
    return rc;
}

/* The scenario with --set applied, then the `n_extra` overrides `extra`; with `doc`, its document as
 * loaded (the caller's). */
int etsim_load_doc(const options *o, const char *path, const char *const *extra, int n_extra, et_scenario *s,
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
        etsim_print_error(&err);
        return et_error_exit_status(&err);
    }
    return 0;
}

/* The scenario with --set applied (and one more override when `extra` is not NULL). */
int etsim_load_with(const options *o, const char *path, const char *extra, et_scenario *s)
{
    return etsim_load_doc(o, path, &extra, extra ? 1 : 0, s, NULL);
}

int etsim_load(const options *o, const char *path, et_scenario *s)
{
    if (etsim_load_with(o, path, NULL, s)) return EXIT_INPUT;
    return etsim_prepare(o, path, s);
}

int etsim_prepare(const options *o, const char *path, et_scenario *s)
{
    const char *warnings[8];
    for (int i = 0, n = et_fabric_warnings(&s->cluster, warnings, 8); i < n; i++)
        fprintf(stderr, "etsim: warning: %s: %s\n", path, warnings[i]);
    if (o->seed >= 0) s->simulation.seed = (unsigned long long)o->seed;
    if (o->sim.force_no_overlap) s->parallel.overlap = false;
    return o->op_times ? apply_op_times(o, s) : 0;
}

/* Every output is checked before any work: none may be an input, each must be writable. */
int etsim_check_outputs(const options *o, const et_scenario *s)
{
    if (o->analytic && o->sim.trace_path) {
        fprintf(stderr, "etsim: error: --trace writes the simulated step's events: it needs the simulation "
                        "(drop --analytic)\n");
        return EXIT_INPUT;
    }
    et_error size_err;
    if (!o->analytic && sim_check_size(s, &size_err)) {
        etsim_print_error(&size_err);
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
            etsim_print_error(&err);
            return et_error_exit_status(&err);
        }
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        if (!outs[i].path) continue;
        if (et_output_check(outs[i].path, outs[i].flag, inputs, 5, &err)) {
            etsim_print_error(&err);
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

/* --collective: one collective benchmarked over the sizes asked, nccl-tests style; an exit status. */
static int collective_main(options *o, const et_scenario *s)
{
    et_error err;
    sim_result sim;
    double sizes[64];
    int n = 0;
    for (double b = (double)o->min_bytes; b <= (double)o->max_bytes && n < 64; b *= (double)o->step_factor)
        sizes[n++] = b;
    o->sim.bench_sizes = n;
    o->sim.bench_bytes = sizes;
    o->sim.bench_op = o->collective;
    int rc = sim_run(s, &o->sim, &sim, &err);
    if (rc) {
        etsim_print_error(&err);
        return et_error_exit_status(&err);
    }
    /* the JSON holds the measurements whatever the verdict */
    if (o->json_out) {
        json_t *j = sim_result_json(s, &sim);
        if (j) json_object_set_new(j, "format_version", json_integer(REPORT_FORMAT_VERSION));
        if (!j || et_atomic_write_json(o->json_out, j, &err)) {
            if (j)
                etsim_print_error(&err);
            else
                fputs("etsim: error: out of memory building the JSON report\n", stderr);
            rc = j ? et_error_exit_status(&err) : 1;
        }
        json_decref(j);
    }
    if (!rc) rc = collective_bench_print(stdout, &sim, 0.02) ? 4 : 0;
    sim_result_free(&sim);
    return rc;
}

/* One scenario's outputs beside its printed report: the JSON report (its simulation section written from
 * what the simulation measured, when it ran) and the CSV tables; an exit status. */
static int write_reports(const options *o, const et_scenario *s, const et_estimate *e, const sim_result *sim)
{
    et_error err;
    int rc = 0;
    json_t *section = NULL;
    if (sim && (o->json_out || o->csv_prefix)) {
        section = report_json_simulation(s, e, sim);
        if (!section) {
            fputs("etsim: error: out of memory building the JSON report\n", stderr);
            return 1;
        }
    }
    if (o->json_out) {
        json_t *j = report_json_analytic(s, e);
        if (j && section) {
            json_object_set_new(j, "engine", json_string("simgrid"));
            json_object_set(j, "simulation", section);
        }
        if (!j || et_atomic_write_json(o->json_out, j, &err)) {
            if (j)
                etsim_print_error(&err);
            else
                fputs("etsim: error: out of memory building the JSON report\n", stderr);
            rc = 1;
        }
        json_decref(j);
    }
    if (o->csv_prefix && report_csv_write(o->csv_prefix, s, section, &err)) {
        etsim_print_error(&err);
        rc = et_error_exit_status(&err);
    }
    json_decref(section);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    if (etsim_parse_args(argc, argv, &o)) return EXIT_INPUT;
    et_error_band_hold_out(o.band_held_out);
    if (o.search) {
        if (search_mpi_init(&argc, &argv, &o.space.rank, &o.space.ranks)) {
            fputs("etsim: error: cannot start MPI for the search under mpirun\n", stderr);
            return 1;
        }
        int rc = etsim_search_main(&o);
        search_mpi_finish();
        return rc;
    }
    if (o.sweep) return etsim_sweep_main(&o);
    if (o.compare_with) return etsim_compare_main(&o);
    et_error err;
    et_scenario s;
    int loaded = etsim_load(&o, o.scenario, &s);
    if (loaded) return loaded;
    if (etsim_check_outputs(&o, &s)) {
        et_scenario_free(&s);
        return EXIT_INPUT;
    }
    if (o.plan_out &&
        et_plan_write_for_scenario(o.scenario, o.plan_out, o.plan_steps > 0 ? (int)o.plan_steps : 20, &err)) {
        etsim_print_error(&err);
        et_scenario_free(&s);
        return et_error_exit_status(&err);
    }
    if (o.platform_out && platform_write_file(o.platform_out, &s, &err)) {
        etsim_print_error(&err);
        et_scenario_free(&s);
        return et_error_exit_status(&err);
    }
    if (o.collective >= 0) { /* no training step: the analytic estimate is not needed */
        const int rc = collective_main(&o, &s);
        et_scenario_free(&s);
        return rc;
    }
    sim_result sim = {0};
    /* the simulation runs in a child process: start it first and compute the analytic estimate meanwhile */
    o.sim.progress = !o.analytic && !o.quiet && isatty(2);
    sim_child child;
    const int early = !o.analytic && sim_runs_once(&s, &o.sim);
    if (early && sim_start(&s, &o.sim, &child, &err)) {
        etsim_print_error(&err);
        et_scenario_free(&s);
        return et_error_exit_status(&err);
    }
    faults_runs faults = {0};
    et_error ignored;
    if (early && faults_runs_start(&s, &o.sim, &faults, &err)) {
        etsim_print_error(&err);
        if (!sim_finish(&child, &s, &sim, &ignored)) sim_result_free(&sim);
        et_scenario_free(&s);
        return et_error_exit_status(&err);
    }
    et_estimate e;
    if (et_analytic_estimate(&s, &e, &err)) {
        etsim_print_error(&err);
        if (early && !sim_finish(&child, &s, &sim, &ignored)) sim_result_free(&sim);
        faults_runs_finish(&faults, NULL, &ignored);
        et_scenario_free(&s);
        return et_error_exit_status(&err);
    }
    if (!o.analytic) {
        if (early ? sim_finish(&child, &s, &sim, &err) : sim_run_phases(&s, &o.sim, &sim, &err)) {
            etsim_print_error(&err);
            faults_runs_finish(&faults, NULL, &ignored);
            et_scenario_free(&s);
            return et_error_exit_status(&err);
        }
        if (faults_runs_finish(&faults, &sim, &err)) {
            etsim_print_error(&err);
            sim_result_free(&sim);
            et_scenario_free(&s);
            return et_error_exit_status(&err);
        }
        report_print_simulated(stdout, &s, &e, &sim);
        faults_report_print(stdout, &sim);
    } else {
        report_print_analytic(stdout, &s, &e);
    }
    json_decref(report_tensor_train(stdout, &s));
    if (o.top_ops > 0) report_print_top_ops(stdout, &s, (int)o.top_ops, o.top_ops_by_layer);
    int rc = write_reports(&o, &s, &e, o.analytic ? NULL : &sim);
    sim_result_free(&sim);
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

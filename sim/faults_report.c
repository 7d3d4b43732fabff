#include "faults_report.h"

#include "faults.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int faults_runs_start(const et_scenario *s, const sim_options *o, faults_runs *runs, et_error *err)
{
    memset(runs, 0, sizeof *runs);
    const et_cluster *c = &s->cluster;
    if (!c->n_faults && !c->random_faults.set) return 0;
    if (et_fabric_build(c, &runs->fabric, err)) return -1;
    runs->healthy = *s;
    /* the copies borrow s's owned members (lengths, op scales) and are never freed */
    runs->healthy.cluster.n_faults = 0;
    runs->healthy.cluster.random_faults.set = false;
    runs->slowest = runs->healthy;
    if (runs->fabric.slowest >= 0) {
        runs->slowest.cluster.faults[0] = runs->fabric.effects[runs->fabric.slowest].fault;
        runs->slowest.cluster.n_faults = 1;
    }
    sim_options quiet = *o;
    quiet.progress = false;
    quiet.stats = false;
    quiet.trace_path = NULL;
    if (sim_start(&runs->healthy, &quiet, &runs->healthy_child, err)) {
        et_fabric_free(&runs->fabric);
        return -1;
    }
    if (sim_start(&runs->slowest, &quiet, &runs->slowest_child, err)) {
        sim_result r;
        et_error ignored;
        if (!sim_finish(&runs->healthy_child, &runs->healthy, &r, &ignored)) sim_result_free(&r);
        et_fabric_free(&runs->fabric);
        return -1;
    }
    runs->active = 1;
    return 0;
}

/* A fault's part, place, factor, bandwidth or speed left and effect. */
static void part_of(const et_fabric_effect *e, sim_fault_part *p)
{
    p->part = (int)e->fault.part;
    et_fault_describe(&e->fault, p->where, sizeof p->where);
    p->factor = e->fault.factor;
    p->fraction_left = e->fraction;
    snprintf(p->effect, sizeof p->effect, "%s", e->text);
}

int faults_runs_finish(faults_runs *runs, sim_result *sim, et_error *err)
{
    if (!runs->active) return 0;
    runs->active = 0;
    sim_result healthy, slowest;
    int bad = sim_finish(&runs->healthy_child, &runs->healthy, &healthy, err);
    et_error second;
    if (sim_finish(&runs->slowest_child, &runs->slowest, &slowest, bad ? &second : err)) bad = 1;
    const et_fabric *f = &runs->fabric;
    sim_faults *out = sim ? &sim->faults : NULL;
    if (!bad && out && f->n_effects > 0) {
        out->parts = calloc((size_t)f->n_effects, sizeof *out->parts);
        if (!out->parts) {
            bad = 1;
            et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory for the faults' report");
        }
    }
    if (!bad && out && f->n_effects > 0) {
        out->count = f->n_effects;
        for (int i = 0; i < f->n_effects; i++)
            part_of(&f->effects[i], &out->parts[i]);
        out->step = sim->step.mean, out->healthy_step = healthy.step.mean;
        out->cost = out->step - out->healthy_step;
        if (f->slowest >= 0) {
            out->has_slowest = true;
            part_of(&f->effects[f->slowest], &out->slowest);
            out->slowest_step_alone = slowest.step.mean;
            out->slowest_cost_alone = slowest.step.mean - out->healthy_step;
        }
    }
    sim_result_free(&healthy);
    sim_result_free(&slowest);
    et_fabric_free(&runs->fabric);
    return bad ? -1 : 0;
}

void faults_report_print(FILE *out, const sim_result *sim)
{
    const sim_faults *f = &sim->faults;
    if (!f->count) return;
    fprintf(out,
            "\nfaults       %d part%s: the step takes %.2f ms, %.2f ms (%+.1f%%) more than on the healthy "
            "cluster\n",
            f->count, f->count == 1 ? "" : "s", f->step * 1e3, f->cost * 1e3,
            f->healthy_step > 0 ? 100 * f->cost / f->healthy_step : 0);
    if (f->has_slowest)
        fprintf(out, "slowest part %s (%.0f%% left): alone it costs the step %.2f ms\n", f->slowest.where,
                100 * f->slowest.fraction_left, f->slowest_cost_alone * 1e3);
    const int shown = f->count < 8 ? f->count : 8;
    for (int i = 0; i < shown; i++)
        fprintf(out, "             %s\n", f->parts[i].effect);
    if (f->count > shown)
        fprintf(out, "             ... and %d more (the JSON report lists them all)\n", f->count - shown);
}

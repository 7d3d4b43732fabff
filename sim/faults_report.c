#include "faults_report.h"

#include "faults.h"

#include <string.h>

static double step_mean(const json_t *sim)
{
    return json_real_value(json_object_get(json_object_get(sim, "step_time_s"), "mean"));
}

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
        json_t *j;
        if (!sim_finish(&runs->healthy_child, &runs->healthy, &j, err)) json_decref(j);
        et_fabric_free(&runs->fabric);
        return -1;
    }
    runs->active = 1;
    return 0;
}

int faults_runs_finish(faults_runs *runs, json_t *sim, et_error *err)
{
    if (!runs->active) return 0;
    runs->active = 0;
    json_t *healthy = NULL, *slowest = NULL;
    int bad = sim_finish(&runs->healthy_child, &runs->healthy, &healthy, err);
    et_error second;
    if (sim_finish(&runs->slowest_child, &runs->slowest, &slowest, bad ? &second : err)) bad = 1;
    const et_fabric *f = &runs->fabric;
    if (!bad && sim) {
        json_t *parts = json_array();
        for (int i = 0; i < f->n_effects; i++) {
            char where[96];
            const et_fabric_effect *e = &f->effects[i];
            json_array_append_new(
                parts, json_pack("{s:s, s:s, s:f, s:f, s:s}", "part", et_fault_part_names[e->fault.part],
                                 "where", et_fault_describe(&e->fault, where, sizeof where), "factor",
                                 e->fault.factor, "fraction_left", e->fraction, "effect", e->text));
        }
        const double given = step_mean(sim), base = step_mean(healthy), alone = step_mean(slowest);
        json_t *out = json_pack("{s:i, s:o, s:f, s:f, s:f}", "count", f->n_effects, "parts", parts,
                                "healthy_step_s", base, "step_s", given, "cost_s", given - base);
        if (f->slowest >= 0) {
            const et_fabric_effect *e = &f->effects[f->slowest];
            char where[96];
            json_object_set_new(out, "slowest",
                                json_pack("{s:s, s:s, s:f, s:f, s:f}", "part",
                                          et_fault_part_names[e->fault.part], "where",
                                          et_fault_describe(&e->fault, where, sizeof where), "fraction_left",
                                          e->fraction, "step_alone_s", alone, "cost_alone_s", alone - base));
        }
        json_object_set_new(sim, "faults", out);
    }
    json_decref(healthy);
    json_decref(slowest);
    et_fabric_free(&runs->fabric);
    return bad ? -1 : 0;
}

void faults_report_print(FILE *out, const json_t *sim)
{
    const json_t *f = json_object_get(sim, "faults");
    if (!f) return;
    const json_t *parts = json_object_get(f, "parts");
    double cost = json_real_value(json_object_get(f, "cost_s")),
           base = json_real_value(json_object_get(f, "healthy_step_s"));
    fprintf(out,
            "\nfaults       %lld part%s: the step takes %.2f ms, %.2f ms (%+.1f%%) more than on the healthy "
            "cluster\n",
            json_integer_value(json_object_get(f, "count")),
            json_integer_value(json_object_get(f, "count")) == 1 ? "" : "s",
            json_real_value(json_object_get(f, "step_s")) * 1e3, cost * 1e3,
            base > 0 ? 100 * cost / base : 0);
    const json_t *slow = json_object_get(f, "slowest");
    if (slow)
        fprintf(out, "slowest part %s (%.0f%% left): alone it costs the step %.2f ms\n",
                json_string_value(json_object_get(slow, "where")),
                100 * json_real_value(json_object_get(slow, "fraction_left")),
                json_real_value(json_object_get(slow, "cost_alone_s")) * 1e3);
    size_t n = json_array_size(parts), shown = n < 8 ? n : 8;
    for (size_t i = 0; i < shown; i++)
        fprintf(out, "             %s\n",
                json_string_value(json_object_get(json_array_get(parts, i), "effect")));
    if (n > shown)
        fprintf(out, "             ... and %zu more (the JSON report lists them all)\n", n - shown);
}

/* etsim --compare: scenarios and their variants side by side (compare.h prints them). */
#define _POSIX_C_SOURCE 200809L
#include "etsim.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analytic.h"
#include "atomic_file.h"
#include "report.h"

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

int etsim_compare_main(options *o)
{
    const int n = o->n_compare;
    et_scenario sc[COMPARE_MAX];
    memset(sc, 0, sizeof sc); /* read only once loaded, but the compiler cannot follow that */
    et_estimate est[COMPARE_MAX];
    sim_result sims[COMPARE_MAX];
    memset(sims, 0, sizeof sims);
    json_t *docs[COMPARE_MAX] = {NULL};
    int loaded = 0, rc = 0;
    /* every scenario loaded before the outputs are checked: their files are inputs too (input_files.h) */
    for (; loaded < n && !rc; loaded++) {
        if ((rc = etsim_load_doc(o, o->compare[loaded], o->compare_sets[loaded], o->n_compare_sets[loaded],
                                 &sc[loaded], &docs[loaded])))
            break;
        if ((rc = etsim_prepare(o, o->compare[loaded], &sc[loaded]))) {
            json_decref(docs[loaded]);
            break;
        }
        name_variant(&sc[loaded], docs[loaded], o->compare_sets[loaded], o->n_compare_sets[loaded]);
    }
    if (!rc) rc = etsim_check_outputs(o, &sc[0]);
    o->sim.progress = !o->quiet && isatty(2);
    for (int i = 0; i < loaded && !rc; i++) {
        et_error err;
        if (et_analytic_estimate(&sc[i], &est[i], &err) ||
            (!o->analytic && sim_run_phases(&sc[i], &o->sim, &sims[i], &err))) {
            etsim_print_error(&err);
            rc = et_error_exit_status(&err);
        }
    }
    if (!rc) {
        const et_scenario *ps[COMPARE_MAX];
        const et_estimate *pe[COMPARE_MAX];
        const sim_result *pj[COMPARE_MAX];
        const json_t *pd[COMPARE_MAX];
        for (int i = 0; i < n; i++)
            ps[i] = &sc[i], pe[i] = &est[i], pj[i] = o->analytic ? NULL : &sims[i], pd[i] = docs[i];
        compare_print_many(stdout, n, ps, pe, pj, pd);
    }
    if (!rc && o->json_out) {
        et_error err;
        json_t *list = json_array();
        for (int i = 0; i < n && list; i++) {
            json_t *j = report_json_analytic(&sc[i], &est[i]);
            if (j && !o->analytic)
                json_object_set_new(j, "simulation", report_json_simulation(&sc[i], &est[i], &sims[i]));
            json_array_append_new(list, j);
        }
        json_t *j = json_pack("{s:s, s:i, s:o}", "tool", "etsim", "format_version", REPORT_FORMAT_VERSION,
                              "compare", list);
        if (!j || et_atomic_write_json(o->json_out, j, &err)) {
            if (j) etsim_print_error(&err);
            rc = j ? et_error_exit_status(&err) : 1;
        }
        json_decref(j);
    }
    for (int i = 0; i < loaded; i++) {
        sim_result_free(&sims[i]);
        json_decref(docs[i]);
        et_scenario_free(&sc[i]);
    }
    return rc;
}

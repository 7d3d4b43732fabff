/* etsim --sweep: the analytic estimate for each value of one key, a row each. */
#define _POSIX_C_SOURCE 200809L
#include "etsim.h"

#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "report.h"
#include "scenario_override.h"

/* --sweep key=a,b,c: one analytic estimate per value. */
int etsim_sweep_main(const options *o)
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
        if (etsim_load_with(o, o->scenario, set, &s)) return EXIT_INPUT;
        if (et_analytic_estimate(&s, &e, &err)) {
            etsim_print_error(&err);
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

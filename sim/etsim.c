/* etsim: capacity planning for one training scenario (see docs/). Only this file prints and exits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "atomic_file.h"
#include "report.h"
#include "scenario.h"

#define EXIT_INPUT 2
#define EXIT_DOES_NOT_FIT 3

static void usage(FILE *out)
{
    fputs("usage: etsim [options] scenario.json\n"
          "  --analytic        closed-form estimate (fast)\n"
          "  --json FILE       write the report as JSON (atomically)\n"
          "  --quiet           no progress output\n"
          "  --help            this text\n"
          "exit status: 0 ok, 2 bad input, 3 the plan does not fit in device memory, 1 other errors\n",
          out);
}

typedef struct options {
    const char *scenario;
    const char *json_out;
    int analytic;
    int quiet;
} options;

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--analytic") == 0) {
            o->analytic = 1;
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
        } else if (strcmp(a, "--json") == 0) {
            if (++i >= argc) {
                fprintf(stderr, "etsim: --json needs a file name\n");
                return -1;
            }
            o->json_out = argv[i];
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
    if (!o->scenario) {
        usage(stderr);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o)) return EXIT_INPUT;
    et_error err;
    et_scenario s;
    if (et_scenario_load(o.scenario, &s, &err)) {
        fputs("etsim: error: ", stderr);
        et_error_print(stderr, &err);
        return EXIT_INPUT;
    }
    et_estimate e;
    if (et_analytic_estimate(&s, &e, &err)) {
        fputs("etsim: error: ", stderr);
        et_error_print(stderr, &err);
        et_scenario_free(&s);
        return 1;
    }
    report_print_analytic(stdout, &s, &e);
    int rc = 0;
    if (o.json_out) {
        json_t *j = report_json_analytic(&s, &e);
        if (!j || et_atomic_write_json(o.json_out, j, &err)) {
            fputs("etsim: error: ", stderr);
            if (j)
                et_error_print(stderr, &err);
            else
                fputs("out of memory building the JSON report\n", stderr);
            rc = 1;
        }
        json_decref(j);
    }
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

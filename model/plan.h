/* plan: what etrun runs. A plan is a scenario (same keys, same strict rules, docs/scenario.md) plus a "run"
 * object (docs/runtime.md): steps, warm-up steps, learning rate and Adam/LAMB constants, seed, data source
 * (synthetic, or a token file), checkpoint interval, progress interval, backend. `etsim --plan-out` writes
 * one with every file name made absolute; etsim links this module without anything of runtime/.
 *
 * Contract: et_plan_load() fills *err (file, JSON path) on bad input; the plan owns its scenario
 * (et_plan_free). et_plan_write_for_scenario() validates the scenario first and writes atomically. */
#ifndef ET_PLAN_H
#define ET_PLAN_H

#include <stdbool.h>

#include "et_error.h"
#include "scenario.h"

/* The plan format etsim --plan-out writes and this ET reads: a plan's "format_version" above it is refused
 * (a plan without one is format 1, as written before the key existed). */
#define ET_PLAN_FORMAT_VERSION 1

typedef struct et_hyper {
    double lr, beta1, beta2, eps, weight_decay;
    int warmup_steps;  /* linear learning-rate warm-up over this many updates (0: none) */
    double loss_scale; /* fp16: the dynamic loss scale's first value (PyTorch's GradScaler's, 65536) */
} et_hyper;

typedef struct et_plan {
    et_scenario s;
    int steps;            /* optimizer steps to run */
    int warmup_steps;     /* first steps left out of the timings */
    int checkpoint_every; /* with --save: a checkpoint every this many steps (0: at the end only) */
    int log_every;        /* a progress line every this many steps (0: automatic, about 10 a run) */
    et_hyper hyper;
    unsigned long long seed;
    bool data_from_file;
    char data_file[1024];
    char backend[16]; /* "auto", "cpu", "cuda" */
} et_plan;

int et_plan_load(const char *path, et_plan *out, et_error *err);
void et_plan_free(et_plan *p);

/* Makes the file names of a scenario's JSON (length histogram, device profile, platform) absolute against
 * the scenario's folder, so a copy written elsewhere still names the same files. */
void et_scenario_json_absolute(json_t *root, const char *dir);

/* Writes a plan for a scenario file (the scenario's JSON with absolute file names and a default "run"). */
int et_plan_write_for_scenario(const char *scenario_path, const char *plan_path, int steps, et_error *err);
/* The same for a scenario document already in memory (`source` names it and anchors its relative files). */
int et_plan_write_for_document(const json_t *doc, const char *source, const char *plan_path, int steps,
                               et_error *err);

#endif

/* rt_plan: what etrun runs. A plan is a scenario (same keys, same strict rules, docs/scenario.md) plus a
 * "run" object (docs/runtime.md): steps, warm-up steps, learning rate and Adam/LAMB constants, seed, data
 * source (synthetic, or a token file), checkpoint interval. `etsim --plan-out` writes one with every file
 * name made absolute. Contract: rt_plan_load() fills *err (file, JSON path) on bad input; the plan owns its
 * scenario (rt_plan_free). */
#ifndef ET_RT_PLAN_H
#define ET_RT_PLAN_H

#include <stdbool.h>

#include "et_error.h"
#include "rt_model.h"
#include "scenario.h"

typedef struct rt_plan {
    et_scenario s;
    int steps, warmup_steps, checkpoint_every;
    rt_hyper hyper;
    unsigned long long seed;
    bool data_from_file;
    char data_file[1024];
} rt_plan;

int rt_plan_load(const char *path, rt_plan *out, et_error *err);
void rt_plan_free(rt_plan *p);

/* Writes a plan for a scenario file (the scenario's JSON with absolute file names and a default "run"). */
int rt_plan_write_for_scenario(const char *scenario_path, const char *plan_path, int steps, et_error *err);

#endif

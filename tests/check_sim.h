/* check_sim.h: running the simulator as a checked test step (see check.h). */
#ifndef ET_CHECK_SIM_H
#define ET_CHECK_SIM_H

#include "check.h"
#include "scenario.h"
#include "step_sim.h"

/* A simulation as the report's JSON section (sim_result_json), run with options o; a failure is a failed
 * check naming the scenario and the error, and NULL. The caller decrefs. */
static inline json_t *check_simulate_with(const et_scenario *s, const sim_options *o, et_error *err)
{
    sim_result r;
    if (sim_run(s, o, &r, err)) return NULL;
    json_t *out = sim_result_json(s, &r);
    sim_result_free(&r);
    CHECK(out != NULL, "the simulation of %s as JSON", s->name);
    return out;
}

/* The simulation section of s's report over `steps` steps (collectives after backward when no_overlap);
 * a failure is a failed check naming the scenario and the error, and NULL. The caller decrefs. */
static inline json_t *check_simulate(const et_scenario *s, int steps, int no_overlap)
{
    sim_options o = {.steps = steps, .force_no_overlap = no_overlap};
    et_error err;
    json_t *out = check_simulate_with(s, &o, &err);
    if (!out) CHECK(0, "simulation of %s failed: %s", s->name, err.text);
    return out;
}

/* The mean simulated step of a simulation section, seconds. */
static inline double check_step_mean(const json_t *sim)
{
    return json_number_value(json_object_get(json_object_get(sim, "step_time_s"), "mean"));
}

#endif

/* check_sim.h: running the simulator as a checked test step (see check.h). */
#ifndef ET_CHECK_SIM_H
#define ET_CHECK_SIM_H

#include "check.h"
#include "scenario.h"
#include "step_sim.h"

/* The simulation section of s's report over `steps` steps (collectives after backward when no_overlap);
 * a failure is a failed check naming the scenario and the error, and NULL. The caller decrefs. */
static inline json_t *check_simulate(const et_scenario *s, int steps, int no_overlap)
{
    sim_options o = {.steps = steps, .force_no_overlap = no_overlap};
    json_t *out = NULL;
    et_error err;
    if (sim_run(s, &o, &out, &err)) {
        CHECK(0, "simulation of %s failed: %s", s->name, err.text);
        return NULL;
    }
    return out;
}

/* The mean simulated step of a simulation section, seconds. */
static inline double check_step_mean(const json_t *sim)
{
    return json_number_value(json_object_get(json_object_get(sim, "step_time_s"), "mean"));
}

#endif

/* compare: two scenarios side by side (etsim --compare A.json B.json), with the speedup of B over A for
 * each part of the step: time ratios A/B (above 1: B is faster) and rate ratios B/A.
 *
 * Contract: `sim_a`/`sim_b` are the simulation objects sim_run() returned, or NULL for analytic-only
 * comparisons. Prints only; cannot fail. */
#ifndef ET_COMPARE_H
#define ET_COMPARE_H

#include <jansson.h>
#include <stdio.h>

#include "analytic.h"
#include "scenario.h"

void compare_print(FILE *out, const et_scenario *a, const et_estimate *ea, const json_t *sim_a,
                   const et_scenario *b, const et_estimate *eb, const json_t *sim_b);

/* Up to COMPARE_MAX scenarios as columns A, B, C, ..., each later one against A; the per-layer table only
 * for two. */
#define COMPARE_MAX 8
void compare_print_many(FILE *out, int n, const et_scenario *const *s, const et_estimate *const *e,
                        const json_t *const *sim);

#endif

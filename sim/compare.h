/* compare: scenarios side by side (etsim --compare A.json B.json ...), headed by the keys that differ
 * between them, with each later one against A for each part of the step: time ratios A/X (above 1: X is
 * faster) and rate ratios X/A.
 *
 * Contract: `sim` holds what sim_run() measured, or NULLs for analytic-only
 * comparisons; `docs` the scenario documents as loaded (overrides applied). Prints only; cannot fail. */
#ifndef ET_COMPARE_H
#define ET_COMPARE_H

#include <jansson.h>
#include <stdio.h>

#include "analytic.h"
#include "scenario.h"
#include "sim_result.h"

/* Up to COMPARE_MAX scenarios as columns A, B, C, ..., each later one against A, and the per-layer table. */
#define COMPARE_MAX 8
void compare_print_many(FILE *out, int n, const et_scenario *const *s, const et_estimate *const *e,
                        const sim_result *const *sim, const json_t *const *docs);

#endif

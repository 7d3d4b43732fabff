/* caveats: what a prediction leaves out, stated with every report (JSON "caveats", text "left out").
 *
 * Contract: et_caveats() fills `out` with up to `max` strings (static, or the device profile's `caveat`
 * inside *s: valid while *s is; never freed) naming the costs a scenario's prediction does not include and
 * what its profile cannot support, the ones that always hold first; returns how many it wrote. */
#ifndef ET_CAVEATS_H
#define ET_CAVEATS_H

#include "scenario.h"

#define ET_CAVEATS_MAX 24 /* more than et_caveats can name at once */

int et_caveats(const et_scenario *s, const char **out, int max);

#endif

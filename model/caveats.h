/* caveats: what a prediction leaves out, stated with every report (JSON "caveats", text "left out").
 *
 * Contract: et_caveats() fills `out` with up to `max` static strings (never freed) naming the costs a
 * scenario's prediction does not include, the ones that always hold first; returns how many it wrote. */
#ifndef ET_CAVEATS_H
#define ET_CAVEATS_H

#include "scenario.h"

#define ET_CAVEATS_MAX 16

int et_caveats(const et_scenario *s, const char **out, int max);

#endif

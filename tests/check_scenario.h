/* check_scenario.h: loading a scenario as a checked test step (see check.h). */
#ifndef ET_CHECK_SCENARIO_H
#define ET_CHECK_SCENARIO_H

#include "check.h"
#include "scenario.h"

/* Loads path into *s; a failure is a failed check naming the file and the error. Returns 0 when loaded
 * (the caller frees *s then). */
static inline int check_scenario_load(const char *path, et_scenario *s)
{
    et_error err;
    int rc = et_scenario_load(path, s, &err);
    CHECK(rc == 0, "%s loads: %s", path, rc ? err.text : "");
    return rc;
}

#endif

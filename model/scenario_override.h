/* scenario_override: a scenario document with command-line overrides applied (etsim --set, --sweep).
 *
 * Contract: et_scenario_json_load() reads the scenario file and applies each "key.path=value" in order:
 * objects on the path are created when missing; the value is JSON when it parses as JSON (numbers, true,
 * false, null, quoted strings, arrays, objects) and a string otherwise. The document is then validated by
 * the scenario parser as usual (an unknown key fails there, with its JSON path). Fails with *err on an
 * override without "=" or with an empty key, or one that goes through a value that is not an object. The
 * caller owns *out. */
#ifndef ET_SCENARIO_OVERRIDE_H
#define ET_SCENARIO_OVERRIDE_H

#include <jansson.h>

#include "et_error.h"

int et_scenario_json_set(json_t *root, const char *assignment, et_error *err);
int et_scenario_json_load(const char *path, const char *const *sets, int n_sets, json_t **out, et_error *err);

#endif

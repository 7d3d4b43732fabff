#define _POSIX_C_SOURCE 200809L
#include "scenario_override.h"

#include <stdlib.h>
#include <string.h>

#include "json_reader.h"

int et_scenario_json_set(json_t *root, const char *assignment, et_error *err)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return et_error_set(err, NULL, 0, 0, NULL, "--set %s: expected key.path=value", assignment);
    char key[512];
    snprintf(key, sizeof key, "%.*s", (int)(eq - assignment), assignment);
    json_t *value = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
    if (!value) value = json_string(eq + 1);
    json_t *at = root;
    char *save = NULL, *part = strtok_r(key, ".", &save);
    while (part) {
        char *next = strtok_r(NULL, ".", &save);
        if (!*part || !json_is_object(at)) {
            json_decref(value);
            return et_error_set(err, NULL, 0, 0, NULL, "--set %s: \"%s\" is not inside an object", assignment,
                                part);
        }
        if (!next) {
            json_object_set_new(at, part, value);
            return 0;
        }
        json_t *child = json_object_get(at, part);
        if (!child) {
            child = json_object();
            json_object_set_new(at, part, child);
        }
        at = child;
        part = next;
    }
    json_decref(value);
    return et_error_set(err, NULL, 0, 0, NULL, "--set %s: expected key.path=value", assignment);
}

int et_scenario_json_load(const char *path, const char *const *sets, int n_sets, json_t **out, et_error *err)
{
    json_t *root;
    if (et_json_load_file(path, &root, err)) return -1;
    for (int i = 0; i < n_sets; i++)
        if (et_scenario_json_set(root, sets[i], err)) {
            json_decref(root);
            return -1;
        }
    *out = root;
    return 0;
}

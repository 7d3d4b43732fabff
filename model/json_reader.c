#include "json_reader.h"

#include "input_files.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int et_json_load_file(const char *path, json_t **out, et_error *err)
{
    json_error_t jerr;
    struct stat st;
    *out = NULL;
    et_input_note(path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return et_error_set(err, path, 0, 0, NULL, "a folder, not a file: expected a JSON file");
    *out = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (*out) return 0;
    /* Jansson reports "unable to open" with line -1 for missing files. */
    if (jerr.line < 0) return et_error_set(err, path, 0, 0, NULL, "cannot read file: %s", jerr.text);
    return et_error_set(err, path, jerr.line, jerr.column, NULL, "invalid JSON: %s", jerr.text);
}

const char *et_json_path(char *buf, const char *parent, const char *key)
{
    /* "parent.key", truncated to the buffer: by hand, since every getter builds one (snprintf was a tenth
     * of the plan search's time) */
    size_t n = 0;
    for (const char *c = parent; *c && n + 1 < ET_JSON_PATH_MAX; c++)
        buf[n++] = *c;
    if (n + 1 < ET_JSON_PATH_MAX) buf[n++] = '.';
    for (const char *c = key; *c && n + 1 < ET_JSON_PATH_MAX; c++)
        buf[n++] = *c;
    buf[n] = 0;
    return buf;
}

const char *et_json_path_index(char *buf, const char *parent, size_t index)
{
    snprintf(buf, ET_JSON_PATH_MAX, "%s[%zu]", parent, index);
    return buf;
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

static int fail(const et_json_reader *r, const char *path, const char *fmt, const char *a, const char *b)
{
    return et_error_set(r->err, r->source, 0, 0, path, fmt, a, b);
}

/* Levenshtein distance for the "did you mean" hint; keys are short. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

int et_json_expect_object(const et_json_reader *r, json_t *value, const char *path,
                          const char *const *allowed)
{
    if (!json_is_object(value)) return fail(r, path, "expected an object, got %s%s", type_name(value), "");
    const char *key;
    json_t *member;
    json_object_foreach(value, key, member)
    {
        int known = 0;
        for (const char *const *k = allowed; *k && !known; k++)
            known = strcmp(*k, key) == 0;
        if (known) continue;
        /* an unknown key: the closest allowed one, for the hint */
        const char *closest = NULL;
        size_t best = 3;
        for (const char *const *k = allowed; *k; k++) {
            size_t d = edit_distance(*k, key);
            if (d < best) {
                best = d;
                closest = *k;
            }
        }
        char p[ET_JSON_PATH_MAX], allowed_list[512] = "";
        for (const char *const *k = allowed; *k; k++) {
            size_t used = strlen(allowed_list);
            snprintf(allowed_list + used, sizeof allowed_list - used, "%s%s", k == allowed ? "" : ", ", *k);
        }
        if (closest)
            return et_error_set(r->err, r->source, 0, 0, et_json_path(p, path, key),
                                "unknown key \"%s\" (did you mean \"%s\"?)", key, closest);
        return et_error_set(r->err, r->source, 0, 0, et_json_path(p, path, key),
                            "unknown key \"%s\"; expected one of: %s", key, allowed_list);
    }
    return 0;
}

/* Looks up a member; *v NULL when absent. Fails when absent and required. */
static int member(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                  json_t **v, char *p)
{
    et_json_path(p, path, key);
    *v = json_object_get(obj, key);
    if (!*v && required) return et_error_set(r->err, r->source, 0, 0, p, "missing required key \"%s\"", key);
    return 0;
}

int et_json_get_int(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                    long long def, long long min, long long max, long long *out)
{
    char p[ET_JSON_PATH_MAX];
    json_t *v;
    if (member(r, obj, path, key, required, &v, p)) return -1;
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_integer(v)) return fail(r, p, "expected an integer, got %s%s", type_name(v), "");
    long long x = json_integer_value(v);
    if (x < min || x > max) {
        if (max == 0x7fffffffffffffffLL)
            return et_error_set(r->err, r->source, 0, 0, p, "expected an integer >= %lld, got %lld", min, x);
        return et_error_set(r->err, r->source, 0, 0, p, "expected an integer in [%lld, %lld], got %lld", min,
                            max, x);
    }
    *out = x;
    return 0;
}

int et_json_get_number(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                       double def, double min, double max, double *out)
{
    char p[ET_JSON_PATH_MAX];
    json_t *v;
    if (member(r, obj, path, key, required, &v, p)) return -1;
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v)) return fail(r, p, "expected a number, got %s%s", type_name(v), "");
    double x = json_number_value(v);
    if (isinf(max) && x >= min && x > ET_JSON_NUMBER_MAX)
        return et_error_set(r->err, r->source, 0, 0, p, "expected a number >= %g and at most %g, got %g", min,
                            ET_JSON_NUMBER_MAX, x);
    if (!(x >= min && x <= max)) {
        if (isinf(max))
            return et_error_set(r->err, r->source, 0, 0, p, "expected a number >= %g, got %g", min, x);
        return et_error_set(r->err, r->source, 0, 0, p, "expected a number in [%g, %g], got %g", min, max, x);
    }
    *out = x;
    return 0;
}

int et_json_get_positive(const et_json_reader *r, json_t *obj, const char *path, const char *key,
                         bool required, double def, double *out)
{
    char p[ET_JSON_PATH_MAX];
    json_t *v;
    if (member(r, obj, path, key, required, &v, p)) return -1;
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v)) return fail(r, p, "expected a positive number, got %s%s", type_name(v), "");
    double x = json_number_value(v);
    if (!(x > 0) || isinf(x))
        return et_error_set(r->err, r->source, 0, 0, p, "expected a positive number, got %g", x);
    if (x > ET_JSON_NUMBER_MAX)
        return et_error_set(r->err, r->source, 0, 0, p, "expected a positive number of at most %g, got %g",
                            ET_JSON_NUMBER_MAX, x);
    *out = x;
    return 0;
}

int et_json_get_bool(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                     bool def, bool *out)
{
    char p[ET_JSON_PATH_MAX];
    json_t *v;
    if (member(r, obj, path, key, required, &v, p)) return -1;
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) return fail(r, p, "expected a boolean, got %s%s", type_name(v), "");
    *out = json_is_true(v);
    return 0;
}

int et_json_get_string(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                       const char *def, const char **out)
{
    char p[ET_JSON_PATH_MAX];
    json_t *v;
    if (member(r, obj, path, key, required, &v, p)) return -1;
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_string(v)) return fail(r, p, "expected a string, got %s%s", type_name(v), "");
    if (json_string_length(v) == 0) return fail(r, p, "expected a non-empty string%s%s", "", "");
    *out = json_string_value(v);
    return 0;
}

int et_json_get_enum(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                     const char *const *names, int def, int *out)
{
    const char *s;
    if (et_json_get_string(r, obj, path, key, required, NULL, &s)) return -1;
    if (!s) {
        *out = def;
        return 0;
    }
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], s) == 0) {
            *out = i;
            return 0;
        }
    char p[ET_JSON_PATH_MAX], list[512] = "";
    for (int i = 0; names[i]; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s\"%s\"", i ? ", " : "", names[i]);
    }
    return et_error_set(r->err, r->source, 0, 0, et_json_path(p, path, key), "expected one of %s, got \"%s\"",
                        list, s);
}

int et_json_get_object(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                       const char *const *allowed, json_t **out)
{
    char p[ET_JSON_PATH_MAX];
    json_t *v;
    *out = NULL;
    if (member(r, obj, path, key, required, &v, p)) return -1;
    if (!v) return 0;
    if (et_json_expect_object(r, v, p, allowed)) return -1;
    *out = v;
    return 0;
}

int et_json_get_array(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                      json_t **out)
{
    char p[ET_JSON_PATH_MAX];
    json_t *v;
    *out = NULL;
    if (member(r, obj, path, key, required, &v, p)) return -1;
    if (!v) return 0;
    if (!json_is_array(v)) return fail(r, p, "expected an array, got %s%s", type_name(v), "");
    *out = v;
    return 0;
}

int et_json_array_number(const et_json_reader *r, json_t *array, const char *path, size_t index, double min,
                         double max, double *out)
{
    char p[ET_JSON_PATH_MAX];
    et_json_path_index(p, path, index);
    json_t *v = json_array_get(array, index);
    if (!v || !json_is_number(v))
        return fail(r, p, "expected a number, got %s%s", v ? type_name(v) : "nothing", "");
    double x = json_number_value(v);
    if (!(x >= min && x <= max))
        return et_error_set(r->err, r->source, 0, 0, p, "expected a number in [%g, %g], got %g", min, max, x);
    *out = x;
    return 0;
}

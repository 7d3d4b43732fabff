/* json_reader: strict reading of JSON input files (scenarios, device profiles, plans) on top of Jansson.
 *
 * Contract: every getter checks type and range and, on failure, fills *err with the file name and the JSON
 * path of the offending value (for example `$.batch.global`) and returns -1. Syntax errors carry the line
 * and column Jansson reports. Objects are checked against the list of keys they may hold, so a misspelled
 * key is an error (with a "did you mean" hint) rather than silently ignored. Getters never take ownership:
 * returned json_t pointers and strings are borrowed from the document. */
#ifndef ET_JSON_READER_H
#define ET_JSON_READER_H

#include <jansson.h>
#include <stdbool.h>

#include "et_error.h"

typedef struct et_json_reader {
    const char *source; /* file name used in messages */
    et_error *err;
} et_json_reader;

/* Loads a whole JSON file; rejects duplicate keys and trailing garbage. The caller owns *out (json_decref).
 */
int et_json_load_file(const char *path, json_t **out, et_error *err);

/* Builds `parent.key` into buf (size ET_JSON_PATH_MAX). */
#define ET_JSON_PATH_MAX 256
const char *et_json_path(char *buf, const char *parent, const char *key);
const char *et_json_path_index(char *buf, const char *parent, size_t index);

/* Fails unless `value` is an object whose keys are all in the NULL-terminated list `allowed`. */
int et_json_expect_object(const et_json_reader *r, json_t *value, const char *path,
                          const char *const *allowed);

/* The largest number a getter accepts where its range is open above (et_json_get_positive, a max of
 * INFINITY): no device, link, memory or run reaches 10^15 of the units ET reads (GB/s, GiB, samples,
 * tokens), and below it every product the simulator and the reports form (bytes, flops, seconds, costs)
 * stays finite, so 1e308 GB/s cannot reach SimGrid as infinity. */
#define ET_JSON_NUMBER_MAX 1e15

/* Member getters. `required` false means a missing key yields the default. Ranges are inclusive. */
int et_json_get_int(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                    long long def, long long min, long long max, long long *out);
int et_json_get_number(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                       double def, double min, double max, double *out);
/* Like et_json_get_number but the value must be strictly greater than zero. */
int et_json_get_positive(const et_json_reader *r, json_t *obj, const char *path, const char *key,
                         bool required, double def, double *out);
int et_json_get_bool(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                     bool def, bool *out);
int et_json_get_string(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                       const char *def, const char **out);
/* Reads a string that must be one of `names` (NULL-terminated); *out is its index. */
int et_json_get_enum(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                     const char *const *names, int def, int *out);
/* Returns the member object (checked against `allowed`) in *out, or NULL when absent and not required. */
int et_json_get_object(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                       const char *const *allowed, json_t **out);
/* Returns the member array in *out, or NULL when absent and not required. */
int et_json_get_array(const et_json_reader *r, json_t *obj, const char *path, const char *key, bool required,
                      json_t **out);

/* Reads element `index` of an array as a number in [min, max]. */
int et_json_array_number(const et_json_reader *r, json_t *array, const char *path, size_t index, double min,
                         double max, double *out);

#endif

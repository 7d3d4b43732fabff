/* atomic_file: write an output file so that readers never see a half-written one.
 *
 * Contract: the content goes to `path.tmp.XXXXXX` in the same directory, is flushed and closed, then
 * renamed over `path`. On any failure the temporary file is removed, `path` is untouched, and *err says
 * why. et_atomic_write_json() writes a Jansson value with 2-space indentation and a trailing newline. */
#ifndef ET_ATOMIC_FILE_H
#define ET_ATOMIC_FILE_H

#include <jansson.h>
#include <stdio.h>

#include "et_error.h"

/* How ET writes JSON files (reports, traces, plans): 2-space indentation, 12 significant digits. */
#define ET_JSON_FILE_FLAGS (JSON_INDENT(2) | JSON_REAL_PRECISION(12))

typedef int (*et_file_writer)(FILE *out, void *ctx);

int et_atomic_write(const char *path, et_file_writer writer, void *ctx, et_error *err);
int et_atomic_write_json(const char *path, const json_t *value, et_error *err);

#endif

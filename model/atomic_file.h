/* atomic_file: write an output file so that readers never see a half-written one.
 *
 * Contract: the content goes to `path.tmp.XXXXXX` in the same directory, is flushed and closed, then
 * renamed over `path`. On any failure the temporary file is removed, `path` is untouched, and *err says
 * why. A `path` that is a symbolic link is followed: the file it points to is replaced, the link stays.
 * A `path` that exists but is not a regular file (a folder, a device) is refused. et_atomic_write_json()
 * writes a Jansson value with 2-space indentation and a trailing newline.
 *
 * et_output_check() is what the tools call before any work: it notes the `n` inputs named
 * (model/input_files.h) and fails with *err when `path` is any input this process has noted (the same file,
 * whatever the spelling or links: a profile found through ET_PROFILE_DIR, a histogram, a measured file), is
 * not a regular file, or cannot be created in its folder (the folder is missing or not writable), so no
 * result is lost late. */
#ifndef ET_ATOMIC_FILE_H
#define ET_ATOMIC_FILE_H

#include <jansson.h>
#include <stdio.h>

#include "et_error.h"

/* How ET writes JSON files (reports, traces, plans): 2-space indentation, 12 significant digits. */
#define ET_JSON_FILE_FLAGS (JSON_INDENT(2) | JSON_REAL_PRECISION(12))

typedef int (*et_file_writer)(FILE *out, void *ctx);

int et_atomic_write(const char *path, et_file_writer writer, void *ctx, et_error *err);
/* et_atomic_write refuses a path that is an input this process read (model/input_files.h), as a last guard
 * behind et_output_check for inputs read after the check (a search's other device profiles);
 * et_atomic_replace_input is for the one output meant to replace its input: a checkpoint saved where the
 * run resumed from. */
int et_atomic_replace_input(const char *path, et_file_writer writer, void *ctx, et_error *err);
int et_atomic_write_json(const char *path, const json_t *value, et_error *err);

/* `what` names the output in messages ("--json"); inputs[i] may be NULL (skipped). */
int et_output_check(const char *path, const char *what, const char *const *inputs, int n, et_error *err);

#endif

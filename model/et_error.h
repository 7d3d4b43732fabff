/* et_error: the caller-owned error record every ET library function fills on failure.
 *
 * Contract: functions that can fail take an `et_error *err` (never NULL) and return 0 on success or a
 * non-zero value on failure, after filling *err. `source` is the file being read (scenario, profile, CSV),
 * `line`/`column` are 1-based positions when known (0 when not), `path` is a JSON path such as
 * `$.model.heads` when known (empty when not), `text` says what was expected and `code` what kind of failure
 * it is (et_error_code, which sets the tools' exit status). The caller owns the struct;
 * nothing inside it needs freeing. Library code never prints or exits: only main() does. */
#ifndef ET_ERROR_H
#define ET_ERROR_H

#include <stdio.h>

/* What kind of failure, so that a tool's exit status follows from the error, not from where it was met. */
typedef enum et_error_code {
    ET_ERROR_NONE = 0,
    ET_ERROR_INPUT,      /* bad input: a file, a JSON value, a command-line value, a partitioned cluster */
    ET_ERROR_INFEASIBLE, /* valid input that cannot run: a plan that does not fit */
    ET_ERROR_IO,         /* an output that cannot be written (a full disk, a lost folder) */
    ET_ERROR_MEMORY,     /* out of memory */
    ET_ERROR_INTERNAL,   /* a dependency failed: SimGrid stopped, MPI, CUDA */
} et_error_code;
extern const char
    *const et_error_code_names[]; /* "none", "input", "infeasible", "io", "memory", "internal" */

typedef struct et_error {
    et_error_code code;
    char source[512];
    int line;
    int column;
    char path[256];
    char text[768];
} et_error;

/* Clears the record. */
void et_error_clear(et_error *err);

/* Fills the record as bad input (ET_ERROR_INPUT); always returns -1 so callers can write
 * `return et_error_set(...)`. */
int et_error_set(et_error *err, const char *source, int line, int column, const char *path, const char *fmt,
                 ...) __attribute__((format(printf, 6, 7)));
/* The same with another code. */
int et_error_set_code(et_error *err, et_error_code code, const char *source, int line, int column,
                      const char *path, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* The exit status of ET's tools for an error: 2 bad input, 3 infeasible, 1 otherwise. */
int et_error_exit_status(const et_error *err);

/* Writes "source:line:column: path: text" (omitting unknown parts) followed by a newline. */
void et_error_print(FILE *out, const et_error *err);

#endif

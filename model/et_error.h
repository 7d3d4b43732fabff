/* et_error: the caller-owned error record every ET library function fills on failure.
 *
 * Contract: functions that can fail take an `et_error *err` (never NULL) and return 0 on success or a
 * non-zero value on failure, after filling *err. `source` is the file being read (scenario, profile, CSV),
 * `line`/`column` are 1-based positions when known (0 when not), `path` is a JSON path such as
 * `$.model.heads` when known (empty when not), and `text` says what was expected. The caller owns the struct;
 * nothing inside it needs freeing. Library code never prints or exits: only main() does. */
#ifndef ET_ERROR_H
#define ET_ERROR_H

#include <stdio.h>

typedef struct et_error {
    char source[512];
    int line;
    int column;
    char path[256];
    char text[768];
} et_error;

/* Clears the record. */
void et_error_clear(et_error *err);

/* Fills the record; always returns -1 so callers can write `return et_error_set(...)`. */
int et_error_set(et_error *err, const char *source, int line, int column, const char *path, const char *fmt,
                 ...) __attribute__((format(printf, 6, 7)));

/* Writes "source:line:column: path: text" (omitting unknown parts) followed by a newline. */
void et_error_print(FILE *out, const et_error *err);

#endif

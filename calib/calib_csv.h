/* calib_csv: reading the calibset tables (shared/data/calibration, copied to scenarios/data/calibration):
 * CSV with RFC 4180 quoting, a header row, rows filtered by GPU name. */
#ifndef ET_CALIB_CSV_H
#define ET_CALIB_CSV_H

#include <stddef.h>
#include <stdio.h>

#include "et_error.h"

#define CALIB_CSV_FIELDS 64

/* An open table: its header and a buffer for the current row. */
typedef struct calib_csv {
    FILE *f;
    char head_buf[8192], row_buf[16384];
    char *head[CALIB_CSV_FIELDS], *row[CALIB_CSV_FIELDS];
    int n_head, n_row;
} calib_csv;

/* Opens a table and reads its header (fills *err when it cannot be opened); calib_csv_next reads the next
 * row into t->row (returns 0 at the end); calib_csv_close closes and frees. */
calib_csv *calib_csv_open(const char *path, et_error *err);
int calib_csv_next(calib_csv *t);
void calib_csv_close(calib_csv *t);

/* One record into `field` (pointers into buf); returns the field count, -1 at end of file. */
int calib_csv_record(FILE *f, char *buf, size_t size, char **field, int max_fields);
/* Index of a header name, -1 if none. */
int calib_csv_column(char **head, int n, const char *name);
/* Case-insensitive substring. */
int calib_csv_contains(const char *hay, const char *needle);
/* `gpu` names one of the '|'-separated names of filter. */
int calib_csv_gpu_matches(const char *gpu, const char *filter);
/* A number, or 0 when the field holds a range or text. */
double calib_csv_number(const char *s);

#endif

/* calib_csv: reading the calibset tables (shared/data/calibration, copied to scenarios/data/calibration):
 * CSV with RFC 4180 quoting, a header row, rows filtered by GPU name. */
#ifndef ET_CALIB_CSV_H
#define ET_CALIB_CSV_H

#include <stddef.h>
#include <stdio.h>

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

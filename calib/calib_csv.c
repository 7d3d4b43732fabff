#define _POSIX_C_SOURCE 200809L
#include "calib_csv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "input_files.h"

/* One CSV record (RFC 4180 quoting) into fields; returns the count, -1 at end of file. */
int calib_csv_record(FILE *f, char *buf, size_t size, char **field, int max_fields)
{
    int c, n = 0, quoted = 0;
    size_t at = 0;
    if ((c = fgetc(f)) == EOF) return -1;
    field[n++] = buf;
    for (; c != EOF; c = fgetc(f)) {
        if (quoted) {
            if (c == '"') {
                int d = fgetc(f);
                if (d == '"') {
                    if (at + 1 < size) buf[at++] = '"';
                    continue;
                }
                quoted = 0;
                c = d;
                if (c == EOF) break;
            } else {
                if (at + 1 < size) buf[at++] = (char)c;
                continue;
            }
        }
        if (c == '"') {
            quoted = 1;
        } else if (c == ',') {
            if (at + 1 < size) buf[at++] = 0;
            if (n < max_fields) field[n++] = buf + at;
        } else if (c == '\n') {
            break;
        } else if (c != '\r' && at + 1 < size) {
            buf[at++] = (char)c;
        }
    }
    buf[at < size ? at : size - 1] = 0;
    return n;
}

int calib_csv_column(char **head, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(head[i], name) == 0) return i;
    return -1;
}

int calib_csv_contains(const char *hay, const char *needle)
{
    const size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0) return 1;
    return 0;
}

int calib_csv_gpu_matches(const char *gpu, const char *filter)
{
    char names[256];
    snprintf(names, sizeof names, "%s", filter);
    for (char *save = NULL, *t = strtok_r(names, "|", &save); t; t = strtok_r(NULL, "|", &save))
        if (calib_csv_contains(gpu, t)) return 1;
    return 0;
}

/* A number, or 0 when the field holds a range or text */
double calib_csv_number(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    return end != s && *end == 0 ? v : 0;
}

calib_csv *calib_csv_open(const char *path, et_error *err)
{
    calib_csv *t = calloc(1, sizeof *t);
    if (!t) {
        et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
        return NULL;
    }
    et_input_note(path);
    if (!(t->f = fopen(path, "r"))) {
        free(t);
        et_error_set(err, path, 0, 0, NULL, "cannot open the table");
        return NULL;
    }
    t->n_head = calib_csv_record(t->f, t->head_buf, sizeof t->head_buf, t->head, CALIB_CSV_FIELDS);
    return t;
}

int calib_csv_next(calib_csv *t)
{
    t->n_row = calib_csv_record(t->f, t->row_buf, sizeof t->row_buf, t->row, CALIB_CSV_FIELDS);
    return t->n_row >= 0;
}

void calib_csv_close(calib_csv *t)
{
    if (!t) return;
    fclose(t->f);
    free(t);
}

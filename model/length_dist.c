#include "length_dist.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "input_files.h"

const char *const et_length_kind_names[] = {"fixed", "uniform", "histogram", NULL};

static int alloc_pmf(et_length_dist *d, int max_len, et_error *err)
{
    memset(d, 0, sizeof *d);
    d->max_len = max_len;
    d->pmf = calloc((size_t)max_len + 1, sizeof *d->pmf);
    if (!d->pmf)
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                 "out of memory for a length distribution");
    return 0;
}

int et_length_dist_fixed(int len, et_length_dist *out, et_error *err)
{
    if (alloc_pmf(out, len, err)) return -1;
    out->kind = ET_LENGTHS_FIXED;
    out->pmf[len] = 1.0;
    return 0;
}

int et_length_dist_uniform(int min_len, int max_len, et_length_dist *out, et_error *err)
{
    if (alloc_pmf(out, max_len, err)) return -1;
    out->kind = ET_LENGTHS_UNIFORM;
    for (int l = min_len; l <= max_len; l++)
        out->pmf[l] = 1.0 / (max_len - min_len + 1);
    return 0;
}

/* Parses a non-negative integer field starting at *p; advances *p. */
static int parse_field(const char **p, long long *value)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    if (!isdigit((unsigned char)*s)) return -1;
    errno = 0;
    char *end;
    *value = strtoll(s, &end, 10);
    if (errno) return -1;
    while (*end == ' ' || *end == '\t')
        end++;
    *p = end;
    return 0;
}

/* One line into *buf (NUL-terminated, newline kept): its length, -1 at the end of the file, -2 at a NUL
 * byte, -3 past 1 MiB or out of memory. */
static ssize_t read_line(FILE *f, char **buf, size_t *cap)
{
    size_t n = 0;
    int c;
    while ((c = getc(f)) != EOF) {
        if (c == 0) return -2;
        if (n + 2 > *cap) {
            if (*cap >= (1u << 20)) return -3;
            size_t bigger = *cap ? 2 * *cap : 256;
            char *p = realloc(*buf, bigger);
            if (!p) return -3;
            *buf = p, *cap = bigger;
        }
        (*buf)[n++] = (char)c;
        if (c == '\n') break;
    }
    if (n == 0 && c == EOF) return -1;
    (*buf)[n] = 0;
    return (ssize_t)n;
}

int et_length_dist_load_histogram(const char *path, int max_len, et_length_dist *out, et_error *err)
{
    et_input_note(path);
    FILE *f = fopen(path, "r");
    if (!f) return et_error_set(err, path, 0, 0, NULL, "cannot open length histogram: %s", strerror(errno));
    if (alloc_pmf(out, max_len, err)) {
        fclose(f);
        return -1;
    }
    out->kind = ET_LENGTHS_HISTOGRAM;
    snprintf(out->file, sizeof out->file, "%s", path);
    char *line = NULL;
    size_t capacity = 0;
    ssize_t got;
    int lineno = 0, header_seen = 0, rows = 0;
    double total = 0;
    /* whole lines up to 1 MiB; a NUL byte means this is no text file (and /dev/zero never ends) */
    while ((got = read_line(f, &line, &capacity)) >= 0) {
        lineno++;
        size_t n = (size_t)got;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        const char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == 0 || *s == '#') continue;
        if (!header_seen && !isdigit((unsigned char)*s)) {
            if (strncmp(s, "length,count", 12) != 0) {
                fclose(f);
                free(line);
                et_length_dist_free(out);
                return et_error_set(err, path, lineno, 1, NULL, "expected the header \"length,count\"");
            }
            header_seen = 1;
            continue;
        }
        header_seen = 1;
        long long len, count;
        const char *p = s;
        if (parse_field(&p, &len)) {
            const int column = (int)(p - line) + 1;
            fclose(f);
            free(line);
            et_length_dist_free(out);
            return et_error_set(err, path, lineno, column, NULL,
                                "expected a length (a non-negative integer)");
        }
        if (*p != ',') {
            const int column = (int)(p - line) + 1;
            fclose(f);
            free(line);
            et_length_dist_free(out);
            return et_error_set(err, path, lineno, column, NULL, "expected ',' after the length");
        }
        p++;
        const char *count_at = p;
        if (parse_field(&p, &count) || *p != 0) {
            const int column = (int)(count_at - line) + 1;
            fclose(f);
            free(line);
            et_length_dist_free(out);
            return et_error_set(err, path, lineno, column, NULL,
                                "expected a count (a non-negative integer) and nothing after it");
        }
        if (len < 1 || (len > max_len && count > 0)) {
            fclose(f);
            free(line);
            et_length_dist_free(out);
            return et_error_set(err, path, lineno, 1, NULL,
                                "length %lld is outside 1..%d (data.seq_len) but has %lld sequences", len,
                                max_len, count);
        }
        if (len <= max_len) out->pmf[len] += (double)count;
        total += (double)count;
        rows++;
    }
    free(line);
    int read_error = ferror(f);
    fclose(f);
    if (got < -1) {
        et_length_dist_free(out);
        return et_error_set(err, path, lineno + 1, 0, NULL,
                            got == -2 ? "a NUL byte: expected a text file of \"length,count\" lines"
                                      : "a line longer than 1 MiB: expected \"length,count\" lines");
    }
    if (read_error) {
        et_length_dist_free(out);
        return et_error_set(err, path, 0, 0, NULL, "read error");
    }
    if (rows == 0 || total <= 0) {
        et_length_dist_free(out);
        return et_error_set(err, path, lineno, 0, NULL, "the histogram holds no sequences");
    }
    for (int l = 0; l <= max_len; l++)
        out->pmf[l] /= total;
    out->total_count = total;
    return 0;
}

void et_length_dist_free(et_length_dist *d)
{
    free(d->pmf);
    d->pmf = NULL;
}

double et_length_mean(const et_length_dist *d)
{
    double s = 0;
    for (int l = 1; l <= d->max_len; l++)
        s += l * d->pmf[l];
    return s;
}

double et_length_mean_square(const et_length_dist *d)
{
    double s = 0;
    for (int l = 1; l <= d->max_len; l++)
        s += (double)l * l * d->pmf[l];
    return s;
}

double et_length_padding_fraction(const et_length_dist *d, int pad_to)
{
    return 1.0 - et_length_mean(d) / pad_to;
}

double et_length_share(const et_length_dist *d, int lo, int hi)
{
    double s = 0;
    for (int l = lo < 1 ? 1 : lo; l <= hi && l <= d->max_len; l++)
        s += d->pmf[l];
    return s;
}

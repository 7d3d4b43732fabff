#include "rt_checkpoint.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "atomic_file.h"

static const char magic[8] = {'E', 'T', 'C', 'K', 'P', 'T', '0', '1'};

typedef struct ckpt {
    const rt_model *m;
    uint64_t step;
    float *params, *m1, *v; /* host copies */
} ckpt;

static int write_ckpt(FILE *out, void *p)
{
    const ckpt *c = p;
    uint64_t n = c->m->n_params, t = (uint64_t)c->m->adam_t;
    if (fwrite(magic, 1, 8, out) != 8 || fwrite(&c->step, 8, 1, out) != 1 || fwrite(&n, 8, 1, out) != 1 ||
        fwrite(&t, 8, 1, out) != 1 || fwrite(c->params, 4, n, out) != n || fwrite(c->m1, 4, n, out) != n ||
        fwrite(c->v, 4, n, out) != n)
        return -1;
    return 0;
}

/* mkdir -p */
static int make_dirs(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(path, 0777) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(path, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

int rt_checkpoint_prepare(const char *dir, et_error *err)
{
    if (make_dirs(dir))
        return et_error_set(err, dir, 0, 0, NULL, "--save: cannot create the checkpoint folder: %s",
                            strerror(errno));
    char path[4096];
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    return et_output_check(path, "--save", NULL, 0, err);
}

int rt_checkpoint_save(const char *dir, const rt_model *m, long long next_step, et_error *err)
{
    if (make_dirs(dir))
        return et_error_set(err, dir, 0, 0, NULL, "cannot create the checkpoint folder: %s", strerror(errno));
    char path[4096];
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    const size_t n = m->n_params ? m->n_params : 1;
    ckpt c = {m, (uint64_t)next_step, malloc(n * 4), malloc(n * 4), malloc(n * 4)};
    int rc;
    if (!c.params || !c.m1 || !c.v) {
        rc = et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory for the checkpoint");
    } else {
        rt_model_get_state(m, c.params, c.m1, c.v, NULL);
        rc = et_atomic_write(path, write_ckpt, &c, err);
    }
    free(c.params), free(c.m1), free(c.v);
    return rc;
}

static int all_finite(const float *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

int rt_checkpoint_load(const char *dir, rt_model *m, long long *next_step, et_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return et_error_set(err, path, 0, 0, NULL, "cannot open the checkpoint: %s", strerror(errno));
    char mg[8];
    uint64_t step, n, t;
    int rc = -1;
    float *host[3] = {NULL, NULL, NULL};
    if (fread(mg, 1, 8, f) != 8 || memcmp(mg, magic, 8) != 0) {
        et_error_set(err, path, 0, 0, NULL, "not an ET checkpoint (magic \"ETCKPT01\" expected)");
    } else if (fread(&step, 8, 1, f) != 1 || fread(&n, 8, 1, f) != 1 || fread(&t, 8, 1, f) != 1) {
        et_error_set(err, path, 0, 0, NULL, "truncated checkpoint header");
    } else if (n != m->n_params) {
        et_error_set(err, path, 0, 0, NULL, "the checkpoint holds %llu parameters, the plan's model %zu",
                     (unsigned long long)n, m->n_params);
    } else if (!(host[0] = malloc(n * 4 + 4)) || !(host[1] = malloc(n * 4 + 4)) ||
               !(host[2] = malloc(n * 4 + 4))) {
        et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory reading the checkpoint");
    } else if (fread(host[0], 4, n, f) != n || fread(host[1], 4, n, f) != n || fread(host[2], 4, n, f) != n ||
               fgetc(f) != EOF) {
        et_error_set(err, path, 0, 0, NULL,
                     "checkpoint size does not match its header (truncated or corrupt)");
    } else if (step > (uint64_t)INT_MAX || t > (uint64_t)LLONG_MAX) {
        et_error_set(err, path, 0, 0, NULL,
                     "the checkpoint's next step %llu (optimizer step %llu) is out of range",
                     (unsigned long long)step, (unsigned long long)t);
    } else if (!all_finite(host[0], n) || !all_finite(host[1], n) || !all_finite(host[2], n)) {
        et_error_set(err, path, 0, 0, NULL,
                     "the checkpoint holds non-finite values (NaN or inf): it was written by a diverged run "
                     "or is corrupt");
    } else {
        rt_model_set_state(m, host[0], host[1], host[2]);
        *next_step = (long long)step;
        m->adam_t = (long long)t;
        rc = 0;
    }
    free(host[0]), free(host[1]), free(host[2]);
    fclose(f);
    return rc;
}

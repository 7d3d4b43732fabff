#include "rt_checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "atomic_file.h"
#include "checksum.h"
#include "input_files.h"
#include "method.h"
#include "optimizer.h"

static const char magic[8] = {'E', 'T', 'C', 'K', 'P', 'T', '0', '2'};
static const char magic_v1[8] = {'E', 'T', 'C', 'K', 'P', 'T', '0', '1'};
#define HEADER_BYTES 36 /* magic, step, n, t, fingerprint length */
#define FINGERPRINT_MAX 65536

/* xxh64 of every parameter's id and size, in the graph's order: the layout the flat buffers follow. */
static unsigned long long layout_hash(const et_graph *g)
{
    XXH64_state_t *st = XXH64_createState();
    if (!st) return 0;
    XXH64_reset(st, 0);
    for (int i = 0; i < g->n_params; i++) {
        const et_param *p = &g->params[i];
        uint64_t count = (uint64_t)llround(p->count);
        XXH64_update(st, p->id, strlen(p->id) + 1);
        XXH64_update(st, &count, sizeof count);
    }
    unsigned long long h = XXH64_digest(st);
    XXH64_freeState(st);
    return h;
}

int rt_checkpoint_fingerprint(const rt_model *m, char *buf, size_t size)
{
    const et_model_config *c = &m->s->model;
    int n = snprintf(
        buf, size,
        "model.layers=%d\nmodel.hidden=%d\nmodel.heads=%d\nmodel.kv_heads=%d\nmodel.ffn=%d\nmodel.vocab=%d\n"
        "model.max_positions=%d\nmodel.type_vocab=%d\nmodel.architecture=%s\nmodel.loss_head=%s\n"
        "model.mlp=%s\nmodel.norm=%s\nmodel.position=%s\nmodel.tie_embeddings=%d\nmodel.no_bias=%d\n"
        "model.moe.experts=%d\nmodel.moe.top_k=%d\nmodel.moe.every=%d\nmodel.moe.ffn=%d\nmethod=%s\n"
        "method.tt_rank=%d\noptimizer=%s\nparameters=%zu\nlayout=%016llx\n",
        c->layers, c->hidden, c->heads, c->kv_heads ? c->kv_heads : c->heads, c->ffn, c->vocab,
        c->max_positions, c->type_vocab, et_arch_names[c->arch], et_loss_head_names[c->head],
        et_mlp_names[c->mlp], et_norm_names[c->norm], et_position_names[c->position], (int)c->tie_embeddings,
        (int)c->no_bias, c->moe.experts, c->moe.top_k, c->moe.every, c->moe.ffn,
        et_method_kind_names[m->s->method.kind], m->s->method.tt_rank,
        et_optimizer_names[m->s->optimizer.name], m->n_params, layout_hash(&m->graph));
    return n < 0 || (size_t)n >= size ? -1 : n;
}

typedef struct ckpt {
    const rt_model *m;
    uint64_t step;
    const char *fingerprint;
    uint32_t fingerprint_len;
    float *params, *m1, *v; /* host copies */
} ckpt;

/* fwrite that also feeds the checksum */
static int put(FILE *out, XXH64_state_t *st, const void *p, size_t bytes)
{
    XXH64_update(st, p, bytes);
    return fwrite(p, 1, bytes, out) == bytes ? 0 : -1;
}

static int write_ckpt(FILE *out, void *p)
{
    const ckpt *c = p;
    uint64_t n = c->m->n_params, t = (uint64_t)c->m->adam_t;
    XXH64_state_t *st = XXH64_createState();
    if (!st) return -1;
    XXH64_reset(st, 0);
    int rc = put(out, st, magic, 8) || put(out, st, &c->step, 8) || put(out, st, &n, 8) ||
             put(out, st, &t, 8) || put(out, st, &c->fingerprint_len, 4) ||
             put(out, st, c->fingerprint, c->fingerprint_len) || put(out, st, c->params, 4 * n) ||
             put(out, st, c->m1, 4 * n) || put(out, st, c->v, 4 * n);
    uint64_t sum = XXH64_digest(st);
    XXH64_freeState(st);
    if (rc || fwrite(&sum, 8, 1, out) != 1) return -1;
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

/* Removes checkpoint.bin.tmp.* in `dir` (a write a SIGKILL interrupted). */
static void remove_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4400];
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "checkpoint.bin.tmp.", 19) == 0) {
            if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path) unlink(path);
        }
    closedir(d);
}

/* N for a folder entry named step-N, else -1 */
static long long step_folder(const char *name)
{
    if (strncmp(name, "step-", 5) != 0 || !name[5]) return -1;
    char *end;
    long long v = strtoll(name + 5, &end, 10);
    return *end || v < 0 ? -1 : v;
}

int rt_checkpoint_prepare(const char *dir, et_error *err)
{
    if (make_dirs(dir))
        return et_error_set_code(err, ET_ERROR_IO, dir, 0, 0, NULL,
                                 "--save: cannot create the checkpoint folder: %s", strerror(errno));
    remove_temporaries(dir);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char sub[4400];
        while ((e = readdir(d)))
            if (step_folder(e->d_name) >= 0) {
                if (snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) >= (int)sizeof sub) continue;
                remove_temporaries(sub);
                rmdir(sub); /* only when empty: a killed run's folder */
            }
        closedir(d);
    }
    char path[4096];
    if (snprintf(path, sizeof path, "%s/checkpoint.bin", dir) >= (int)sizeof path)
        return et_error_set(err, dir, 0, 0, NULL, "--save: the folder's path is too long");
    return et_output_check(path, "--save", NULL, 0, err);
}

int rt_checkpoint_save(const char *dir, const rt_model *m, long long next_step, et_error *err)
{
    if (make_dirs(dir))
        return et_error_set_code(err, ET_ERROR_IO, dir, 0, 0, NULL, "cannot create the checkpoint folder: %s",
                                 strerror(errno));
    char path[4096], fingerprint[4096];
    if (snprintf(path, sizeof path, "%s/checkpoint.bin", dir) >= (int)sizeof path)
        return et_error_set_code(err, ET_ERROR_IO, dir, 0, 0, NULL,
                                 "the checkpoint folder's path is too long");
    const int len = rt_checkpoint_fingerprint(m, fingerprint, sizeof fingerprint);
    if (len < 0)
        return et_error_set_code(err, ET_ERROR_INTERNAL, path, 0, 0, NULL, "the fingerprint does not fit");
    const size_t n = m->n_params ? m->n_params : 1;
    ckpt c = {
        m, (uint64_t)next_step, fingerprint, (uint32_t)len, malloc(n * 4), malloc(n * 4), malloc(n * 4)};
    int rc;
    if (!c.params || !c.m1 || !c.v) {
        rc = et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory for the checkpoint");
    } else {
        rt_model_get_state(m, c.params, c.m1, c.v, NULL);
        rc = et_atomic_replace_input(path, write_ckpt, &c, err); /* --resume DIR --save DIR */
    }
    free(c.params), free(c.m1), free(c.v);
    return rc;
}

/* The next step a checkpoint file's header holds, or -1 when it is no readable ETCKPT02 file. */
static long long header_step(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char mg[8];
    uint64_t step = 0;
    const int ok = fread(mg, 1, 8, f) == 8 && memcmp(mg, magic, 8) == 0 && fread(&step, 8, 1, f) == 1;
    fclose(f);
    return ok && step <= (uint64_t)INT_MAX ? (long long)step : -1;
}

int rt_checkpoint_find(const char *dir, char *path, size_t size, et_error *err)
{
    struct stat st;
    char best[4400] = "", candidate[4400];
    long long best_step = -1;
    if (snprintf(candidate, sizeof candidate, "%s/checkpoint.bin", dir) >= (int)sizeof candidate)
        return et_error_set(err, dir, 0, 0, NULL, "--resume: the path is too long");
    if (stat(candidate, &st) == 0) {
        snprintf(best, sizeof best, "%s", candidate); /* loaded even when unreadable, to say why */
        best_step = header_step(candidate);
    }
    DIR *d = opendir(dir);
    if (!d)
        return et_error_set(err, dir, 0, 0, NULL, "--resume: cannot open the checkpoint folder: %s",
                            strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (step_folder(e->d_name) < 0) continue;
        if (snprintf(candidate, sizeof candidate, "%s/%s/checkpoint.bin", dir, e->d_name) >=
            (int)sizeof candidate)
            continue;
        long long s = stat(candidate, &st) == 0 ? header_step(candidate) : -1;
        if (s > best_step) { /* the newest complete one: a killed run's empty folder holds none */
            best_step = s;
            snprintf(best, sizeof best, "%s", candidate);
        }
    }
    closedir(d);
    if (!best[0])
        return et_error_set(
            err, dir, 0, 0, NULL,
            "--resume: no checkpoint here (neither checkpoint.bin nor a step-N/checkpoint.bin)");
    if (strlen(best) >= size) return et_error_set(err, dir, 0, 0, NULL, "--resume: the path is too long");
    snprintf(path, size, "%s", best);
    return 0;
}

/* Hashes the whole file but its last 8 bytes, which it returns in *stored. */
static int file_checksum(FILE *f, uint64_t size, uint64_t *computed, uint64_t *stored)
{
    unsigned long long h;
    rewind(f);
    if (et_xxh64_stream(f, size - 8, &h) || fread(stored, 8, 1, f) != 1) return -1;
    *computed = h;
    return 0;
}

/* The value of `key` in a fingerprint text (copied into out), 0 when found. */
static int field(const char *text, const char *key, char *out, size_t size)
{
    size_t k = strlen(key);
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > k && strncmp(line, key, k) == 0 && line[k] == '=') {
            snprintf(out, size, "%.*s", (int)(len - k - 1), line + k + 1);
            return 0;
        }
        line += len + (end != NULL);
    }
    return -1;
}

/* Every field of the plan's fingerprint against the checkpoint's: the first that differs named. */
static int compare_fingerprints(const char *path, const char *mine, const char *theirs, et_error *err)
{
    for (const char *line = mine; *line;) {
        const char *eq = strchr(line, '='), *end = strchr(line, '\n');
        if (!eq || !end) break;
        char key[128], want[256], got[256];
        snprintf(key, sizeof key, "%.*s", (int)(eq - line), line);
        snprintf(want, sizeof want, "%.*s", (int)(end - eq - 1), eq + 1);
        if (field(theirs, key, got, sizeof got))
            return et_error_set(err, path, 0, 0, NULL, "the checkpoint's fingerprint has no %s", key);
        if (strcmp(want, got) != 0)
            return et_error_set(
                err, path, 0, 0, NULL,
                "the checkpoint belongs to another model or plan: %s is %s in the checkpoint, %s "
                "in the plan",
                key, got, want);
        line = end + 1;
    }
    return 0;
}

/* The payload's checks after the checksum: finite values, second moments >= 0. */
static int check_state(const char *path, float *const host[3], uint64_t n, et_error *err)
{
    static const char *const names[3] = {"parameter", "first moment", "second moment"};
    for (int k = 0; k < 3; k++)
        for (uint64_t i = 0; i < n; i++)
            if (!isfinite(host[k][i]))
                return et_error_set(
                    err, path, 0, 0, NULL,
                    "%s %llu is %g: the checkpoint was written by a diverged run or is corrupt", names[k],
                    (unsigned long long)i, host[k][i]);
    for (uint64_t i = 0; i < n; i++)
        if (host[2][i] < 0)
            return et_error_set(err, path, 0, 0, NULL,
                                "second moment %llu is %g: Adam's second moment is a mean of squares, never "
                                "negative; the checkpoint is corrupt",
                                (unsigned long long)i, host[2][i]);
    return 0;
}

static int load_file(const char *path, FILE *f, rt_model *m, long long *next_step, et_error *err)
{
    struct stat st;
    char mg[8], *theirs = NULL, mine[4096];
    uint64_t hdr[3], sum_stored = 0, sum_computed = 0;
    uint32_t len = 0;
    float *host[3] = {NULL, NULL, NULL};
    int rc = -1;
    if (fstat(fileno(f), &st) != 0 || fread(mg, 1, 8, f) != 8)
        return et_error_set(err, path, 0, 0, NULL, "truncated checkpoint (no header)");
    if (memcmp(mg, magic_v1, 8) == 0)
        return et_error_set(err, path, 0, 0, NULL,
                            "an ETCKPT01 checkpoint (an older etrun): it has no fingerprint or checksum to "
                            "check, so it is not loaded");
    if (memcmp(mg, magic, 8) != 0)
        return et_error_set(err, path, 0, 0, NULL, "not an ET checkpoint (magic \"ETCKPT02\" expected)");
    const uint64_t size = (uint64_t)st.st_size;
    if (fread(hdr, 8, 3, f) != 3 || fread(&len, 4, 1, f) != 1)
        return et_error_set(err, path, 0, 0, NULL, "truncated checkpoint header");
    const uint64_t step = hdr[0], n = hdr[1], t = hdr[2];
    if (len == 0 || len > FINGERPRINT_MAX || n > size / 12 ||
        size != HEADER_BYTES + (uint64_t)len + 12 * n + 8)
        return et_error_set(err, path, 0, 0, NULL,
                            "checkpoint size does not match its header (truncated or corrupt)");
    if (file_checksum(f, size, &sum_computed, &sum_stored))
        return et_error_set_code(err, ET_ERROR_IO, path, 0, 0, NULL, "read error");
    if (sum_computed != sum_stored)
        return et_error_set(err, path, 0, 0, NULL,
                            "checksum mismatch (xxh64 %016llx stored, %016llx computed): the file is corrupt",
                            (unsigned long long)sum_stored, (unsigned long long)sum_computed);
    if (!(theirs = calloc(1, (size_t)len + 1)))
        return et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
    if (fseek(f, HEADER_BYTES, SEEK_SET) != 0 || fread(theirs, 1, len, f) != len) {
        et_error_set_code(err, ET_ERROR_IO, path, 0, 0, NULL, "read error");
    } else if (rt_checkpoint_fingerprint(m, mine, sizeof mine) < 0) {
        et_error_set_code(err, ET_ERROR_INTERNAL, path, 0, 0, NULL, "the plan's fingerprint does not fit");
    } else if (compare_fingerprints(path, mine, theirs, err)) {
        /* named above */
    } else if (n != m->n_params) { /* the fingerprint's parameters= says the same */
        et_error_set(err, path, 0, 0, NULL, "the checkpoint holds %llu parameters, the plan's model %zu",
                     (unsigned long long)n, m->n_params);
    } else if (step > (uint64_t)INT_MAX || t != step) {
        et_error_set(
            err, path, 0, 0, NULL,
            "inconsistent checkpoint: next step %llu, optimizer step %llu (etrun updates once a step, "
            "so the two are equal)",
            (unsigned long long)step, (unsigned long long)t);
    } else if (!(host[0] = malloc(n * 4 + 4)) || !(host[1] = malloc(n * 4 + 4)) ||
               !(host[2] = malloc(n * 4 + 4))) {
        et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory reading the checkpoint");
    } else if (fread(host[0], 4, n, f) != n || fread(host[1], 4, n, f) != n || fread(host[2], 4, n, f) != n) {
        et_error_set_code(err, ET_ERROR_IO, path, 0, 0, NULL, "read error");
    } else if (!check_state(path, host, n, err)) {
        rt_model_set_state(m, host[0], host[1], host[2]);
        *next_step = (long long)step;
        m->adam_t = (long long)t;
        rc = 0;
    }
    free(theirs);
    free(host[0]), free(host[1]), free(host[2]);
    return rc;
}

int rt_checkpoint_load(const char *dir, rt_model *m, long long *next_step, et_error *err)
{
    char path[4400];
    if (rt_checkpoint_find(dir, path, sizeof path, err)) return -1;
    et_input_note(path);
    FILE *f = fopen(path, "rb");
    if (!f) return et_error_set(err, path, 0, 0, NULL, "cannot open the checkpoint: %s", strerror(errno));
    int rc = load_file(path, f, m, next_step, err);
    fclose(f);
    return rc;
}

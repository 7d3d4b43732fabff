#include "rt_data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "input_files.h"
#include "rng.h"

static const char magic[8] = {'E', 'T', 'T', 'O', 'K', 'E', 'N', 'S'};

void rt_token_file_free(rt_token_file *f)
{
    free(f->offsets);
    free(f->tokens);
    free(f->by_length);
    memset(f, 0, sizeof *f);
}

static const rt_token_file *sort_file; /* qsort context */

static int by_length(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    uint64_t lx = sort_file->offsets[x + 1] - sort_file->offsets[x],
             ly = sort_file->offsets[y + 1] - sort_file->offsets[y];
    return lx < ly ? -1 : lx > ly ? 1 : (x > y) - (x < y);
}

int rt_token_file_load(const char *path, int vocab, int seq_len, rt_token_file *out, et_error *err)
{
    (void)seq_len; /* longer sequences are truncated to the drawn length */
    memset(out, 0, sizeof *out);
    et_input_note(path);
    FILE *f = fopen(path, "rb");
    if (!f) return et_error_set(err, path, 0, 0, NULL, "cannot open the token file: %s", strerror(errno));
    char m[8];
    uint32_t version;
    int rc = -1;
    if (fread(m, 1, 8, f) != 8 || memcmp(m, magic, 8) != 0) {
        et_error_set(err, path, 0, 0, NULL,
                     "not an ET token file (expected the magic \"ETTOKENS\" at offset 0)");
        goto done;
    }
    if (fread(&version, 4, 1, f) != 1) {
        et_error_set(err, path, 0, 0, NULL, "truncated header (32 bytes expected)");
        goto done;
    }
    if (version != 1) {
        et_error_set(err, path, 0, 0, NULL, "unsupported token file version %u (expected 1)", version);
        goto done;
    }
    if (fread(&out->vocab, 4, 1, f) != 1 || fread(&out->n_sequences, 8, 1, f) != 1 ||
        fread(&out->n_tokens, 8, 1, f) != 1) {
        et_error_set(err, path, 0, 0, NULL, "truncated header (32 bytes expected)");
        goto done;
    }
    if (out->vocab <= RT_FIRST_TOKEN) {
        et_error_set(err, path, 0, 0, NULL, "the file's vocabulary (%u) holds no token ids: ids start at %d",
                     out->vocab, RT_FIRST_TOKEN);
        goto done;
    }
    if (out->vocab > (uint32_t)vocab) {
        et_error_set(err, path, 0, 0, NULL, "the file's vocabulary (%u) exceeds the model's (%d)", out->vocab,
                     vocab);
        goto done;
    }
    if (out->n_sequences == 0 || out->n_sequences > (1ULL << 40) || out->n_tokens > (1ULL << 40)) {
        et_error_set(err, path, 0, 0, NULL, "implausible header: %llu sequences, %llu tokens",
                     (unsigned long long)out->n_sequences, (unsigned long long)out->n_tokens);
        goto done;
    }
    fseek(f, 0, SEEK_END);
    long long size = ftell(f),
              want = 32 + 8LL * (long long)(out->n_sequences + 1) + 4LL * (long long)out->n_tokens;
    if (size != want) {
        et_error_set(err, path, 0, 0, NULL,
                     "file is %lld bytes; the header promises %lld (truncated or corrupt)", size, want);
        goto done;
    }
    fseek(f, 32, SEEK_SET);
    out->offsets = malloc((out->n_sequences + 1) * sizeof *out->offsets);
    out->tokens = malloc(out->n_tokens * sizeof *out->tokens + 1);
    out->by_length = malloc(out->n_sequences * sizeof *out->by_length);
    if (!out->offsets || !out->tokens || !out->by_length) {
        et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory reading the token file");
        goto done;
    }
    if (fread(out->offsets, 8, out->n_sequences + 1, f) != out->n_sequences + 1 ||
        fread(out->tokens, 4, out->n_tokens, f) != out->n_tokens) {
        et_error_set(err, path, 0, 0, NULL, "read error");
        goto done;
    }
    if (out->offsets[0] != 0 || out->offsets[out->n_sequences] != out->n_tokens) {
        et_error_set(err, path, 0, 0, NULL, "sequence offsets must start at 0 and end at the token count");
        goto done;
    }
    for (uint64_t i = 0; i < out->n_sequences; i++)
        if (out->offsets[i + 1] <= out->offsets[i]) {
            et_error_set(err, path, 0, 0, NULL, "sequence %llu is empty or its offsets decrease",
                         (unsigned long long)i);
            goto done;
        }
    for (uint64_t i = 0; i < out->n_tokens; i++)
        if (out->tokens[i] >= out->vocab || out->tokens[i] < RT_FIRST_TOKEN) {
            et_error_set(err, path, 0, 0, NULL, "token %llu has id %u, outside %d..%u", (unsigned long long)i,
                         out->tokens[i], RT_FIRST_TOKEN, out->vocab - 1);
            goto done;
        }
    for (uint64_t i = 0; i < out->n_sequences; i++)
        out->by_length[i] = i;
    sort_file = out;
    qsort(out->by_length, out->n_sequences, sizeof *out->by_length, by_length);
    rc = 0;
done:
    fclose(f);
    if (rc) rt_token_file_free(out);
    return rc;
}

typedef struct token_file_ctx {
    uint32_t vocab;
    const uint64_t *offsets;
    uint64_t n;
    const uint32_t *tokens;
} token_file_ctx;

static int write_tokens(FILE *out, void *p)
{
    const token_file_ctx *c = p;
    uint32_t version = 1;
    uint64_t n_tokens = c->offsets[c->n];
    if (fwrite(magic, 1, 8, out) != 8 || fwrite(&version, 4, 1, out) != 1 ||
        fwrite(&c->vocab, 4, 1, out) != 1 || fwrite(&c->n, 8, 1, out) != 1 ||
        fwrite(&n_tokens, 8, 1, out) != 1 || fwrite(c->offsets, 8, c->n + 1, out) != c->n + 1 ||
        fwrite(c->tokens, 4, n_tokens, out) != n_tokens)
        return -1;
    return 0;
}

int rt_token_file_write(const char *path, uint32_t vocab, const uint64_t *offsets, uint64_t n_sequences,
                        const uint32_t *tokens, et_error *err)
{
    token_file_ctx c = {vocab, offsets, n_sequences, tokens};
    return et_atomic_write(path, write_tokens, &c, err);
}

int rt_data_init(rt_data *d, const et_scenario *s, int world, int rank, unsigned long long seed,
                 rt_token_file *file, et_error *err)
{
    memset(d, 0, sizeof *d);
    d->s = s;
    d->local = (int)s->batch.local;
    d->chunks = (int)(s->batch.global / s->batch.local);
    d->world = world;
    d->rank = rank;
    d->seed = seed;
    d->file = file;
    d->causal = s->model.head == ET_HEAD_CAUSAL_LM;
    if (s->model.vocab <= RT_FIRST_TOKEN)
        return et_error_set(
            err, s->source, 0, 0, "$.model.vocab",
            "etrun needs a vocabulary of at least %d (id %d is [PAD], %d is [MASK], tokens from %d); "
            "got %d",
            RT_FIRST_TOKEN + 1, RT_TOKEN_PAD, RT_TOKEN_MASK, RT_FIRST_TOKEN, s->model.vocab);
    if (d->causal && s->data.lengths.max_len < 2)
        return et_error_set(
            err, s->source, 0, 0, "$.data.seq_len",
            "a causal language model predicts each next token, so its sequences need at least 2 "
            "tokens; the longest here has %d",
            s->data.lengths.max_len);
    if (d->chunks % world != 0)
        return et_error_set(
            err, s->source, 0, 0, "$.batch",
            "the global batch of %lld is %d local batches of %d, which do not divide across %d ranks",
            s->batch.global, d->chunks, d->local, world);
    d->accum = d->chunks / world;
    /* presort groups must fit the chunk count; the sampler checks */
    return et_sampler_init(&d->sampler, &s->data.lengths, &s->data.sampling, d->local, d->chunks, seed,
                           s->source, "$.data.sampling", err);
}

void rt_data_free(rt_data *d)
{
    et_sampler_free(&d->sampler);
}

et_batch_shape rt_batch_shape(const rt_batch *b)
{
    et_batch_shape s = {.sequences = b->B, .tokens = b->T, .predictions = b->P};
    for (int i = 0; i < b->B; i++) {
        double l = b->offsets[i + 1] - b->offsets[i];
        s.tokens_sq += l * l;
    }
    return s;
}

void rt_batch_free(rt_batch *b)
{
    free(b->tokens);
    free(b->positions);
    free(b->offsets);
    free(b->pred_rows);
    free(b->targets);
    memset(b, 0, sizeof *b);
}

static int reserve(rt_batch *b, int T, int B)
{
    if (T > b->capacity_T) {
        int *t = realloc(b->tokens, T * sizeof(int)), *p = t ? realloc(b->positions, T * sizeof(int)) : NULL;
        if (t) b->tokens = t;
        if (p) b->positions = p;
        int *r = p ? realloc(b->pred_rows, T * sizeof(int)) : NULL,
            *g = r ? realloc(b->targets, T * sizeof(int)) : NULL;
        if (r) b->pred_rows = r;
        if (g) b->targets = g;
        if (!g) return -1;
        b->capacity_T = T;
    }
    if (B + 1 > b->capacity_B) {
        int *o = realloc(b->offsets, (B + 1) * sizeof(int));
        if (!o) return -1;
        b->offsets = o;
        b->capacity_B = B + 1;
    }
    return 0;
}

/* Fills tokens of one sequence of length l (synthetic progression or a file sequence truncated to l). */
static void sequence_tokens(const rt_data *d, unsigned long long *st, int *out, int l)
{
    const int V = d->s->model.vocab;
    if (d->file) {
        const rt_token_file *f = d->file;
        /* a random sequence of at least l tokens (the longest if none is that long), truncated to l */
        uint64_t lo = 0, hi = f->n_sequences;
        while (lo < hi) {
            uint64_t mid = (lo + hi) / 2, idx = f->by_length[mid];
            if (f->offsets[idx + 1] - f->offsets[idx] >= (uint64_t)l)
                hi = mid;
            else
                lo = mid + 1;
        }
        if (lo == f->n_sequences) lo = f->n_sequences - 1;
        uint64_t pick = f->by_length[lo + (uint64_t)(et_rng_uniform(st) * (double)(f->n_sequences - lo))];
        uint64_t len = f->offsets[pick + 1] - f->offsets[pick];
        for (int i = 0; i < l; i++)
            out[i] = (int)f->tokens[f->offsets[pick] + ((uint64_t)i < len ? (uint64_t)i : len - 1)];
        return;
    }
    const int span = V - RT_FIRST_TOKEN;
    int x = (int)(et_rng_uniform(st) * span), stride = 1 + (int)(et_rng_uniform(st) * 3);
    for (int i = 0; i < l; i++)
        out[i] = RT_FIRST_TOKEN + (x + i * stride) % span;
}

/* Every chunk's lengths of a step, drawn once: chunk c is the sampler's rank c (presorting couples them).
 * The caller frees *all and *counts. */
static int draw_step(const rt_data *d, int step, int **all, int **counts)
{
    int per = et_sampler_max_per_rank(&d->sampler);
    *all = malloc((size_t)d->chunks * per * sizeof **all);
    *counts = malloc((size_t)d->chunks * sizeof **counts);
    if (!*all || !*counts || et_sampler_draw(&d->sampler, step, *all, per, *counts)) {
        free(*all);
        free(*counts);
        return -1;
    }
    return 0;
}

/* Chunk `chunk` of a step from its drawn lengths (padded runs fill every sequence to the padded length:
 * seq_len, or the chunk's longest under data.pad_to "longest"). */
static int build_batch(const rt_data *d, int step, int chunk, const int *drawn, int n, rt_batch *b)
{
    const et_scenario *s = d->s;
    int T = 0;
    const int padded = et_sampler_padded_length(&d->sampler, drawn, n);
    for (int i = 0; i < n; i++)
        T += s->data.unpadded ? drawn[i] : padded;
    if (reserve(b, T, n)) return -1;
    b->B = n;
    b->T = T;
    b->P = 0;
    int o = 0;
    for (int i = 0; i < n; i++) {
        unsigned long long st = et_rng_stream(d->seed ^ 0x5eed5eedULL, (unsigned long long)step,
                                              (unsigned long long)chunk * 100003ULL + (unsigned long long)i);
        int l = s->data.unpadded ? drawn[i] : padded;
        b->offsets[i] = o;
        sequence_tokens(d, &st, b->tokens + o, l);
        for (int k = 0; k < l; k++)
            b->positions[o + k] = k;
        if (d->causal) {
            /* every token but the last predicts the next one; under data.answer_fraction only the answer's
             * (the sequence's last ceil(f l) tokens) are scored, the prompt's predictions masked */
            const double f = s->data.answer_fraction > 0 ? s->data.answer_fraction : 1;
            const int answer = (int)ceil(f * l - 1e-9);
            for (int k = 0; k < l; k++) {
                b->pred_rows[b->P] = o + k;
                b->targets[b->P++] = k + 1 < l && k + 1 >= l - answer ? b->tokens[o + k + 1] : -1;
            }
        } else {
            int want = (int)et_model_predictions_for_length(&s->model, l);
            /* choose `want` distinct positions (partial Fisher-Yates over the sequence) */
            int *pick = b->pred_rows + b->P;
            for (int k = 0; k < l && k < want; k++)
                pick[k] = k;
            for (int k = want; k < l; k++) {
                int j = (int)(et_rng_uniform(&st) * (k + 1));
                if (j < want) pick[j] = k;
            }
            for (int k = 0; k < want; k++) {
                int row = o + pick[k];
                b->pred_rows[b->P] = row;
                b->targets[b->P++] = b->tokens[row];
                b->tokens[row] = RT_TOKEN_MASK;
            }
        }
        o += l;
    }
    b->offsets[n] = o;
    return 0;
}

int rt_data_batch(const rt_data *d, int step, int micro, rt_batch *b)
{
    int *all, *counts, chunk = d->rank * d->accum + micro;
    if (draw_step(d, step, &all, &counts)) return -1;
    int rc = build_batch(d, step, chunk, all + (size_t)chunk * et_sampler_max_per_rank(&d->sampler),
                         counts[chunk], b);
    free(all);
    free(counts);
    return rc;
}

double rt_data_global_predictions(const rt_data *d, int step)
{
    int *all, *counts, per = et_sampler_max_per_rank(&d->sampler);
    if (draw_step(d, step, &all, &counts)) return 0;
    rt_batch b = {0};
    double total = 0;
    for (int c = 0; c < d->chunks; c++) {
        if (build_batch(d, step, c, all + (size_t)c * per, counts[c], &b)) break;
        for (int p = 0; p < b.P; p++)
            total += b.targets[p] >= 0;
    }
    rt_batch_free(&b);
    free(all);
    free(counts);
    return total;
}

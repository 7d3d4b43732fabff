#include "scenario.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "faults.h"
#include "input_files.h"
#include "json_reader.h"

#ifndef ET_DEFAULT_PROFILE_DIR
#define ET_DEFAULT_PROFILE_DIR "scenarios/profiles"
#endif

const char *const et_clip_mode_names[] = {"none", "after_allreduce", "per_bucket", NULL};
const char *const et_timing_rule_names[] = {"steps", "mlperf", NULL};
const char *const et_coll_algo_names[] = {"auto", "ring", "tree", "hierarchical", "fastest", NULL};
const char *const et_topology_names[] = {"fat_tree", "rail", NULL};

#define BIG LLONG_MAX
#define FAIL(...) return et_error_set(r->err, r->source, 0, 0, __VA_ARGS__)

/* Resolves `name` relative to the scenario directory (absolute names are kept). */
static void resolve(char *out, size_t size, const char *dir, const char *name)
{
    int n = (name[0] == '/' || dir[0] == 0) ? snprintf(out, size, "%s", name)
                                            : snprintf(out, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size) out[size - 1] = 0; /* over-long names fail later as missing files */
}

#ifndef ET_DEFAULT_DATA_DIR
#define ET_DEFAULT_DATA_DIR "scenarios"
#endif

void et_data_file_path(const char *name, const char *dir, char *out, size_t size)
{
    resolve(out, size, dir, name);
    struct stat st;
    if (name[0] == '/' || stat(out, &st) == 0) return;
    char shipped[1100]; /* a shipped scenario copied into one's own folder: its data stay in ET's */
    resolve(shipped, sizeof shipped, ET_DEFAULT_DATA_DIR, name);
    if (stat(shipped, &st) == 0) snprintf(out, size, "%s", shipped);
}

/* model.moe: experts, top_k, capacity_factor, every, expert_ffn, routing {distribution, skew}; a preset's
 * values are the defaults. */
static int read_moe(const et_json_reader *r, json_t *model, et_model_config *m)
{
    static const char *const keys[] = {"experts",     "top_k",      "capacity_factor",
                                       "every",       "expert_ffn", "shared_experts",
                                       "first_dense", "routing",    NULL};
    static const char *const routing_keys[] = {"distribution", "skew", NULL};
    json_t *o, *routing;
    long long v;
    int e;
    if (et_json_get_object(r, model, "$.model", "moe", false, keys, &o)) return -1;
    if (!o) return 0;
    et_moe *moe = &m->moe;
    if (et_json_get_int(r, o, "$.model.moe", "experts", !moe->experts, moe->experts, 1, 1 << 16, &v))
        return -1;
    moe->experts = (int)v;
    if (et_json_get_int(r, o, "$.model.moe", "top_k", false, moe->top_k ? moe->top_k : 1, 1, 1 << 16, &v))
        return -1;
    moe->top_k = (int)v;
    if (et_json_get_number(r, o, "$.model.moe", "capacity_factor", false, moe->capacity_factor, 0, 64,
                           &moe->capacity_factor))
        return -1;
    if (et_json_get_int(r, o, "$.model.moe", "every", false, moe->every ? moe->every : 1, 1, ET_MAX_LAYERS,
                        &v))
        return -1;
    moe->every = (int)v;
    if (et_json_get_int(r, o, "$.model.moe", "expert_ffn", false, moe->ffn, 0, INT_MAX / 8, &v)) return -1;
    moe->ffn = (int)v;
    if (et_json_get_int(r, o, "$.model.moe", "shared_experts", false, moe->shared_experts, 0, 1 << 16, &v))
        return -1;
    moe->shared_experts = (int)v;
    if (et_json_get_int(r, o, "$.model.moe", "first_dense", false, moe->first_dense, 0, ET_MAX_LAYERS, &v))
        return -1;
    moe->first_dense = (int)v;
    if (et_json_get_object(r, o, "$.model.moe", "routing", false, routing_keys, &routing)) return -1;
    if (routing) {
        if (et_json_get_enum(r, routing, "$.model.moe.routing", "distribution", true, et_routing_names,
                             moe->routing, &e))
            return -1;
        moe->routing = (et_routing_kind)e;
        if (et_json_get_number(r, routing, "$.model.moe.routing", "skew", moe->routing == ET_ROUTING_ZIPF,
                               moe->skew, 0, 16, &moe->skew))
            return -1;
        if (json_object_get(routing, "skew") && moe->routing != ET_ROUTING_ZIPF)
            FAIL("$.model.moe.routing.skew", "\"skew\" applies only to distribution \"zipf\"");
    }
    return 0;
}

/* model.mla: q_lora_rank, kv_lora_rank, rope_dim, v_head_dim (a preset's values are the defaults; without
 * one, kv_lora_rank is required). model.head_dim is the part of a head without positions. */
static int read_mla(const et_json_reader *r, json_t *model, et_model_config *m)
{
    static const char *const keys[] = {"q_lora_rank", "kv_lora_rank", "rope_dim", "v_head_dim", NULL};
    json_t *o;
    long long v;
    if (et_json_get_object(r, model, "$.model", "mla", false, keys, &o)) return -1;
    if (!o) return 0;
    et_mla *a = &m->mla;
    if (et_json_get_int(r, o, "$.model.mla", "kv_lora_rank", !a->kv_lora, a->kv_lora, 1, 1 << 20, &v))
        return -1;
    a->kv_lora = (int)v;
    if (et_json_get_int(r, o, "$.model.mla", "q_lora_rank", false, a->q_lora, 0, 1 << 20, &v)) return -1;
    a->q_lora = (int)v;
    if (et_json_get_int(r, o, "$.model.mla", "rope_dim", false, a->rope_dim, 0, 1 << 16, &v)) return -1;
    a->rope_dim = (int)v;
    if (et_json_get_int(r, o, "$.model.mla", "v_head_dim", false, a->v_dim ? a->v_dim : et_model_head_dim(m),
                        1, 1 << 16, &v))
        return -1;
    a->v_dim = (int)v;
    return 0;
}

/* model.sliding_window: size (tokens), full_every (0: every layer windowed). */
static int read_window(const et_json_reader *r, json_t *model, et_model_config *m)
{
    static const char *const keys[] = {"size", "full_every", NULL};
    json_t *o;
    long long v;
    if (et_json_get_object(r, model, "$.model", "sliding_window", false, keys, &o)) return -1;
    if (!o) return 0;
    if (et_json_get_int(r, o, "$.model.sliding_window", "size", !m->window, m->window, 1, 1 << 24, &v))
        return -1;
    m->window = (int)v;
    if (et_json_get_int(r, o, "$.model.sliding_window", "full_every", false, m->full_every, 0, ET_MAX_LAYERS,
                        &v))
        return -1;
    m->full_every = (int)v;
    return 0;
}

static int read_model(const et_json_reader *r, json_t *root, et_model_config *m)
{
    static const char *const keys[] = {"preset",
                                       "layers",
                                       "hidden",
                                       "heads",
                                       "ffn",
                                       "vocab",
                                       "max_positions",
                                       "type_vocab",
                                       "architecture",
                                       "loss_head",
                                       "max_predictions",
                                       "mask_fraction",
                                       "tie_embeddings",
                                       "dropout",
                                       "kv_heads",
                                       "mlp",
                                       "norm",
                                       "position_embedding",
                                       "bias",
                                       "moe",
                                       "rope_theta",
                                       "head_dim",
                                       "qk_norm",
                                       "mla",
                                       "sliding_window",
                                       "attention_sinks",
                                       "mtp_layers",
                                       "mtp_loss_scale",
                                       NULL};
    json_t *o;
    if (et_json_get_object(r, root, "$", "model", true, keys, &o)) return -1;
    const char *preset;
    if (et_json_get_string(r, o, "$.model", "preset", false, NULL, &preset)) return -1;
    memset(m, 0, sizeof *m);
    bool have_preset = preset != NULL;
    if (preset && et_model_preset(preset, m)) {
        char list[512] = "";
        for (int i = 0; et_model_preset_names[i]; i++) {
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s\"%s\"", i ? ", " : "", et_model_preset_names[i]);
        }
        FAIL("$.model.preset", "unknown model preset \"%s\"; expected one of %s", preset, list);
    }
    if (!preset) {
        snprintf(m->name, sizeof m->name, "custom");
        m->mask_fraction = 0.15;
        m->tie_embeddings = true;
    }
    long long v;
    struct {
        const char *key;
        int *field;
        long long min;
    } dims[] = {{"layers", &m->layers, 1},         {"hidden", &m->hidden, 1},
                {"heads", &m->heads, 1},           {"ffn", &m->ffn, 1},
                {"vocab", &m->vocab, 1},           {"max_positions", &m->max_positions, 1},
                {"type_vocab", &m->type_vocab, 0}, {"max_predictions", &m->max_predictions, 0}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        bool required = !have_preset && i < 6;
        /* bounds that keep the op graph and the tables within a machine's memory (the largest published
         * models have a few hundred layers, hidden sizes below 10^5, vocabularies below 10^7) */
        const long long max = i == 0 ? ET_MAX_LAYERS : INT_MAX / 8;
        if (et_json_get_int(r, o, "$.model", dims[i].key, required, *dims[i].field, dims[i].min, max, &v))
            return -1;
        *dims[i].field = (int)v;
    }
    int e;
    if (et_json_get_enum(r, o, "$.model", "architecture", !have_preset, et_arch_names, m->arch, &e))
        return -1;
    m->arch = (et_arch)e;
    et_loss_head default_head = m->arch == ET_ARCH_DECODER && !have_preset ? ET_HEAD_CAUSAL_LM : m->head;
    if (et_json_get_enum(r, o, "$.model", "loss_head", false, et_loss_head_names, default_head, &e))
        return -1;
    m->head = (et_loss_head)e;
    if (et_json_get_number(r, o, "$.model", "mask_fraction", false, m->mask_fraction, 0.001, 1,
                           &m->mask_fraction))
        return -1;
    if (et_json_get_bool(r, o, "$.model", "tie_embeddings", false, m->tie_embeddings, &m->tie_embeddings))
        return -1;
    if (et_json_get_number(r, o, "$.model", "dropout", false, m->dropout, 0, 0.99, &m->dropout)) return -1;
    if (et_json_get_int(r, o, "$.model", "kv_heads", false, m->kv_heads ? m->kv_heads : m->heads, 1,
                        INT_MAX / 8, &v))
        return -1;
    m->kv_heads = (int)v;
    if (et_json_get_enum(r, o, "$.model", "mlp", false, et_mlp_names, m->mlp, &e)) return -1;
    m->mlp = (et_mlp_kind)e;
    if (et_json_get_enum(r, o, "$.model", "norm", false, et_norm_names, m->norm, &e)) return -1;
    m->norm = (et_norm_kind)e;
    if (et_json_get_enum(r, o, "$.model", "position_embedding", false, et_position_names, m->position, &e))
        return -1;
    m->position = (et_position_kind)e;
    bool bias = !m->no_bias;
    if (et_json_get_bool(r, o, "$.model", "bias", false, bias, &bias)) return -1;
    m->no_bias = !bias;
    if (read_moe(r, o, m)) return -1;
    if (et_json_get_number(r, o, "$.model", "rope_theta", false, m->rope_base > 0 ? m->rope_base : 10000, 1,
                           1e12, &m->rope_base))
        return -1;
    if (et_json_get_int(r, o, "$.model", "head_dim", false, m->head_dim, 0, 1 << 16, &v)) return -1;
    m->head_dim = (int)v;
    if (et_json_get_bool(r, o, "$.model", "qk_norm", false, m->qk_norm, &m->qk_norm)) return -1;
    if (read_mla(r, o, m) || read_window(r, o, m)) return -1;
    if (et_json_get_bool(r, o, "$.model", "attention_sinks", false, m->sinks, &m->sinks)) return -1;
    if (et_json_get_int(r, o, "$.model", "mtp_layers", false, m->mtp_layers, 0, 64, &v)) return -1;
    m->mtp_layers = (int)v;
    if (et_json_get_number(r, o, "$.model", "mtp_loss_scale", false, et_model_mtp_loss_scale(m), 1e-6, 100,
                           &m->mtp_loss_scale))
        return -1;
    return et_model_config_check(m, r->source, "$.model", r->err);
}

static int read_sampling(const et_json_reader *r, json_t *data, et_scenario *s);

static int read_data(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"seq_len",         "lengths", "unpadded",     "sampling",
                                       "answer_fraction", "pad_to",  "pad_multiple", NULL};
    static const char *const length_keys[] = {"distribution", "file", "min", NULL};
    json_t *o, *lengths;
    long long v;
    if (et_json_get_object(r, root, "$", "data", true, keys, &o)) return -1;
    if (et_json_get_int(r, o, "$.data", "seq_len", true, 0, 1, 1 << 20, &v)) return -1;
    s->data.seq_len = (int)v;
    if (s->data.seq_len > s->model.max_positions)
        FAIL("$.data.seq_len", "seq_len %d exceeds the model's max_positions %d", s->data.seq_len,
             s->model.max_positions);
    if (et_json_get_bool(r, o, "$.data", "unpadded", false, false, &s->data.unpadded)) return -1;
    if (et_json_get_number(r, o, "$.data", "answer_fraction", false, 1, 1e-6, 1, &s->data.answer_fraction))
        return -1;
    if (s->data.answer_fraction < 1 && s->model.head != ET_HEAD_CAUSAL_LM)
        FAIL("$.data.answer_fraction",
             "answer_fraction applies to the causal_lm head (a masked-LM head scores its masked tokens)%s",
             "");
    if (read_sampling(r, o, s)) return -1;
    int pad = ET_PAD_SEQ_LEN;
    if (et_json_get_enum(r, o, "$.data", "pad_to", false, et_pad_to_names, ET_PAD_SEQ_LEN, &pad) ||
        et_json_get_int(r, o, "$.data", "pad_multiple", false, 1, 1, s->data.seq_len, &v))
        return -1;
    s->data.sampling.pad_to = (et_pad_to)pad;
    s->data.sampling.pad_multiple = (int)v;
    if (json_object_get(o, "pad_to") && s->data.unpadded)
        FAIL("$.data.pad_to", "pad_to applies to padded batches; data.unpadded computes on real tokens%s",
             "");
    if (json_object_get(o, "pad_multiple") && pad != ET_PAD_LONGEST)
        FAIL("$.data.pad_multiple", "pad_multiple applies to pad_to \"longest\"%s", "");
    if (pad == ET_PAD_LONGEST && s->data.sampling.scheme == ET_SAMPLING_PACKED)
        FAIL("$.data.pad_to",
             "packed rows are padded to seq_len; pad_to \"longest\" applies to random, "
             "stratified or binned sampling%s",
             "");
    if (pad == ET_PAD_LONGEST && s->data.sampling.presort_group > 1)
        FAIL("$.data.pad_to",
             "pad_to \"longest\" with a local presort is not modelled (the expected batch "
             "assumes independent draws)%s",
             "");
    if (et_json_get_object(r, o, "$.data", "lengths", false, length_keys, &lengths)) return -1;
    int kind = ET_LENGTHS_FIXED;
    if (lengths && et_json_get_enum(r, lengths, "$.data.lengths", "distribution", true, et_length_kind_names,
                                    ET_LENGTHS_FIXED, &kind))
        return -1;
    const char *file = NULL;
    long long min_len = 1;
    if (lengths) {
        if (et_json_get_string(r, lengths, "$.data.lengths", "file", kind == ET_LENGTHS_HISTOGRAM, NULL,
                               &file))
            return -1;
        if (file && kind != ET_LENGTHS_HISTOGRAM)
            FAIL("$.data.lengths.file", "\"file\" applies only to distribution \"histogram\"");
        if (et_json_get_int(r, lengths, "$.data.lengths", "min", false, 1, 1, s->data.seq_len, &min_len))
            return -1;
        if (json_object_get(lengths, "min") && kind != ET_LENGTHS_UNIFORM)
            FAIL("$.data.lengths.min", "\"min\" applies only to distribution \"uniform\"");
    }
    switch (kind) {
    case ET_LENGTHS_FIXED:
        return et_length_dist_fixed(s->data.seq_len, &s->data.lengths, r->err);
    case ET_LENGTHS_UNIFORM:
        return et_length_dist_uniform((int)min_len, s->data.seq_len, &s->data.lengths, r->err);
    default: {
        char path[1100];
        et_data_file_path(file, s->dir, path, sizeof path);
        FILE *f = fopen(path, "r");
        if (!f)
            FAIL("$.data.lengths.file",
                 "cannot open the length histogram %s: %s (a relative name is relative to the scenario's "
                 "folder, then to ET's scenarios folder)",
                 path, strerror(errno));
        fclose(f);
        /* errors inside the histogram name its own file, line and column */
        return et_length_dist_load_histogram(path, s->data.seq_len, &s->data.lengths, r->err);
    }
    }
}

/* data.sampling: scheme, stratification bins and counts, presort group. Checked against the batch once
 * the data-parallel degree is known (check_sampling). */
static int read_sampling(const et_json_reader *r, json_t *data, et_scenario *s)
{
    static const char *const keys[] = {"scheme", "bins", "counts", "presort_group", NULL};
    et_sampling *c = &s->data.sampling;
    memset(c, 0, sizeof *c);
    json_t *o, *bins, *counts;
    if (et_json_get_object(r, data, "$.data", "sampling", false, keys, &o)) return -1;
    if (!o) return 0;
    int e;
    long long v;
    if (et_json_get_enum(r, o, "$.data.sampling", "scheme", true, et_sampling_scheme_names, 0, &e)) return -1;
    c->scheme = (et_sampling_scheme)e;
    if (et_json_get_int(r, o, "$.data.sampling", "presort_group", false, 0, 0, 1 << 20, &v)) return -1;
    c->presort_group = (int)v;
    const int strat = c->scheme == ET_SAMPLING_STRATIFIED, binned = c->scheme == ET_SAMPLING_BINNED;
    if (et_json_get_array(r, o, "$.data.sampling", "bins", strat || binned, &bins)) return -1;
    if (et_json_get_array(r, o, "$.data.sampling", "counts", strat, &counts)) return -1;
    if (!strat && !binned && (bins || counts))
        FAIL("$.data.sampling", "\"bins\" and \"counts\" apply only to scheme \"stratified\" (\"bins\" to "
                                "\"binned\" too)");
    if (binned && counts)
        FAIL("$.data.sampling.counts",
             "a binned micro-batch draws all its sequences from one bin: \"counts\" "
             "applies only to scheme \"stratified\"");
    if (!strat && !binned) return 0;
    size_t n = json_array_size(bins);
    if (n == 0 || n > ET_MAX_BINS)
        FAIL("$.data.sampling.bins", "expected 1 to %d bin upper bounds", ET_MAX_BINS);
    if (strat && json_array_size(counts) != n)
        FAIL("$.data.sampling.counts", "expected %zu counts, one per bin, got %zu", n,
             json_array_size(counts));
    c->n_bins = (int)n;
    for (size_t i = 0; i < n; i++) {
        double x = 0; /* a binned scheme's counts stay 0 */
        if (et_json_array_number(r, bins, "$.data.sampling.bins", i, 1, s->data.seq_len, &x)) return -1;
        c->bin_upper[i] = (int)x;
        x = 0;
        if (strat && et_json_array_number(r, counts, "$.data.sampling.counts", i, 0, 1 << 20, &x)) return -1;
        c->bin_count[i] = (int)x;
        if (x != (int)x || c->bin_upper[i] != json_number_value(json_array_get(bins, i)))
            FAIL("$.data.sampling", "bins and counts must be whole numbers%s", "");
    }
    return 0;
}

static int read_optimizer(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"name", "clip", "max_grad_norm", "galore", NULL};
    static const char *const galore_keys[] = {"rank", "update_interval", NULL};
    json_t *o, *galore;
    int e;
    long long v;
    if (et_json_get_object(r, root, "$", "optimizer", true, keys, &o)) return -1;
    if (et_json_get_enum(r, o, "$.optimizer", "name", true, et_optimizer_names, 0, &e)) return -1;
    s->optimizer.name = (et_optimizer)e;
    if (et_json_get_object(r, o, "$.optimizer", "galore", false, galore_keys, &galore)) return -1;
    if (galore) {
        if (s->optimizer.name == ET_OPT_LAMB)
            FAIL("$.optimizer.galore", "GaLore projects Adam's states: optimizer \"adam\" or \"adamw\", got "
                                       "\"lamb\"");
        if (et_json_get_int(r, galore, "$.optimizer.galore", "rank", true, 0, 1, 1 << 20, &v)) return -1;
        s->optimizer.galore.rank = (int)v;
        if (et_json_get_int(r, galore, "$.optimizer.galore", "update_interval", false, 200, 1, 1 << 30, &v))
            return -1;
        s->optimizer.galore.update_interval = (int)v;
    }
    if (et_json_get_enum(r, o, "$.optimizer", "clip", false, et_clip_mode_names, ET_CLIP_NONE, &e)) return -1;
    s->optimizer.clip = (et_clip_mode)e;
    return et_json_get_positive(r, o, "$.optimizer", "max_grad_norm", false, 1.0,
                                &s->optimizer.max_grad_norm);
}

static int by_name(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

/* The profile names in a folder (NAME for each NAME.json, sorted), comma-separated, into buf. */
static void et_profile_names(const char *dir, char *buf, size_t size)
{
    char names[64][64];
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && n < 64 && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len > 5 && len < 64 && strcmp(e->d_name + len - 5, ".json") == 0) {
            memcpy(names[n], e->d_name, len - 5);
            names[n++][len - 5] = 0;
        }
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, size - used, "%s%s", i ? ", " : "", names[i]);
    }
    if (!n) snprintf(buf, size, "none");
}

int et_device_profile_path(const char *name, const char *dir, const char *source, const char *where,
                           char *path, size_t size, et_error *err)
{
    size_t n = strlen(name);
    if (strchr(name, '/') || (n > 5 && strcmp(name + n - 5, ".json") == 0)) {
        resolve(path, size, dir, name);
        return 0;
    }
    const char *pdir = getenv("ET_PROFILE_DIR");
    snprintf(path, size, "%s/%s.json", pdir && *pdir ? pdir : ET_DEFAULT_PROFILE_DIR, name);
    FILE *f = fopen(path, "r");
    if (f) {
        fclose(f);
        return 0;
    }
    char found[512];
    et_profile_names(pdir && *pdir ? pdir : ET_DEFAULT_PROFILE_DIR, found, sizeof found);
    return et_error_set(err, source, 0, 0, where,
                        "no device profile named \"%s\" (looked for %s; profiles there: %s)", name, path,
                        found);
}

static int read_device(const et_json_reader *r, const char *name, et_scenario *s)
{
    char path[1100];
    if (et_device_profile_path(name, s->dir, r->source, "$.cluster.device", path, sizeof path, r->err))
        return -1;
    /* The last profile read by this thread, while its file is unchanged (same path, size, modification
     * time): the plan search parses tens of thousands of candidates naming one profile. */
    static _Thread_local char cached_path[1100];
    static _Thread_local struct stat cached_stat;
    static _Thread_local et_device_profile cached;
    struct stat st;
    const int known = stat(path, &st) == 0;
    if (known && cached_path[0] && !strcmp(cached_path, path) && st.st_size == cached_stat.st_size &&
        st.st_mtim.tv_sec == cached_stat.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == cached_stat.st_mtim.tv_nsec && st.st_ino == cached_stat.st_ino) {
        s->cluster.device = cached;
        return 0;
    }
    if (et_device_profile_load(path, &s->cluster.device, r->err)) return -1;
    if (known) {
        snprintf(cached_path, sizeof cached_path, "%s", path);
        cached_stat = st;
        cached = s->cluster.device;
    }
    return 0;
}

static int read_cluster(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"device",
                                       "nodes",
                                       "gpus_per_node",
                                       "nvlink_GBps",
                                       "nvlink_latency_us",
                                       "nics_per_node",
                                       "nic_Gbps",
                                       "nic_latency_us",
                                       "fabric",
                                       "collective_latency_us",
                                       "platform_file",
                                       "bandwidth_factor",
                                       "latency_factor",
                                       "nvlink_efficiency",
                                       "nic_efficiency",
                                       "faults",
                                       "random_faults",
                                       NULL};
    static const char *const fabric_keys[] = {
        "topology", "oversubscription", "nodes_per_leaf",        "switch_latency_us",
        "tiers",    "leaves_per_pod",   "core_oversubscription", "channels_per_nic",
        NULL};
    et_cluster *c = &s->cluster;
    json_t *o, *fabric;
    const char *device, *platform;
    long long v;
    double x;
    int e;
    if (et_json_get_object(r, root, "$", "cluster", true, keys, &o)) return -1;
    if (et_json_get_string(r, o, "$.cluster", "device", true, NULL, &device)) return -1;
    if (et_json_get_int(r, o, "$.cluster", "nodes", true, 0, 1, 1 << 20, &v)) return -1;
    c->nodes = (int)v;
    if (et_json_get_int(r, o, "$.cluster", "gpus_per_node", true, 0, 1, ET_MAX_GPUS_PER_NODE, &v)) return -1;
    c->gpus_per_node = (int)v;
    if (et_json_get_positive(r, o, "$.cluster", "nvlink_GBps", false, 600, &x)) return -1;
    c->intra_node_bandwidth = x * 1e9 / 2; /* marketed bidirectional figure -> per direction */
    if (et_json_get_number(r, o, "$.cluster", "nvlink_latency_us", false, 0.7, 0, 1e6, &x)) return -1;
    c->intra_node_latency = x * 1e-6;
    if (et_json_get_int(r, o, "$.cluster", "nics_per_node", c->nodes > 1, 1, 1, ET_MAX_GPUS_PER_NODE, &v))
        return -1;
    c->nics_per_node = (int)v;
    if (et_json_get_positive(r, o, "$.cluster", "nic_Gbps", c->nodes > 1, 200, &x)) return -1;
    c->nic_bandwidth = x * 1e9 / 8;
    if (et_json_get_number(r, o, "$.cluster", "nic_latency_us", false, 2.0, 0, 1e6, &x)) return -1;
    c->nic_latency = x * 1e-6;
    if (et_json_get_number(r, o, "$.cluster", "collective_latency_us", false, 4.0, 0, 1e6, &x)) return -1;
    c->collective_step_latency = x * 1e-6;
    if (et_json_get_number(r, o, "$.cluster", "bandwidth_factor", false, 1.0, 0.01, 1.0,
                           &c->bandwidth_factor))
        return -1;
    /* achieved / wire bandwidth of large collectives per link class (docs/cost-model.md, "Network"):
     * NVLink 234.9 of 300 GB/s all-reduce busbw on an A100 node, InfiniBand 84.8 of 100 GB/s */
    if (et_json_get_number(r, o, "$.cluster", "nvlink_efficiency", false, 0.78, 0.01, 1.0,
                           &c->intra_node_efficiency))
        return -1;
    if (et_json_get_number(r, o, "$.cluster", "nic_efficiency", false, 0.85, 0.01, 1.0,
                           &c->inter_node_efficiency))
        return -1;
    if (et_json_get_number(r, o, "$.cluster", "latency_factor", false, 1.0, 0, 1000, &c->latency_factor))
        return -1;
    if (et_json_get_string(r, o, "$.cluster", "platform_file", false, NULL, &platform)) return -1;
    if (platform) {
        resolve(c->platform_file, sizeof c->platform_file, s->dir, platform);
        et_input_note(c->platform_file);
        struct stat pst;
        if (stat(c->platform_file, &pst) == 0 && !S_ISREG(pst.st_mode))
            FAIL("$.cluster.platform_file", "%s is a folder or a device, not a SimGrid platform file",
                 c->platform_file);
        FILE *pf = fopen(c->platform_file, "r");
        if (!pf)
            FAIL("$.cluster.platform_file", "cannot open platform file %s: %s", c->platform_file,
                 strerror(errno));
        fclose(pf);
    }
    if (et_json_get_object(r, o, "$.cluster", "fabric", false, fabric_keys, &fabric)) return -1;
    json_t *f = fabric ? fabric : json_object();
    int rc = et_json_get_enum(r, f, "$.cluster.fabric", "topology", false, et_topology_names,
                              ET_TOPO_FAT_TREE, &e) ||
             et_json_get_number(r, f, "$.cluster.fabric", "oversubscription", false, 1.0, 1.0, 64,
                                &c->oversubscription) ||
             et_json_get_int(r, f, "$.cluster.fabric", "nodes_per_leaf", false, 16, 1, 1 << 16, &v);
    c->topology = (et_topology)e;
    c->nodes_per_leaf = (int)v;
    if (!rc) rc = et_json_get_number(r, f, "$.cluster.fabric", "switch_latency_us", false, 0.3, 0, 1e6, &x);
    c->switch_latency = x * 1e-6;
    if (!rc) rc = et_json_get_int(r, f, "$.cluster.fabric", "tiers", false, 2, 2, 3, &v);
    c->tiers = (int)v;
    if (!rc) rc = et_json_get_int(r, f, "$.cluster.fabric", "leaves_per_pod", false, 16, 1, 1 << 16, &v);
    c->leaves_per_pod = (int)v;
    if (!rc)
        rc = et_json_get_number(r, f, "$.cluster.fabric", "core_oversubscription", false, 1.0, 1.0, 64,
                                &c->core_oversubscription);
    if (!rc) rc = et_json_get_int(r, f, "$.cluster.fabric", "channels_per_nic", false, 2, 1, 64, &v);
    c->channels_per_nic = (int)v;
    if (!rc && c->tiers < 3 &&
        (json_object_get(f, "leaves_per_pod") || json_object_get(f, "core_oversubscription")))
        rc = et_error_set(r->err, r->source, 0, 0, "$.cluster.fabric",
                          "leaves_per_pod and core_oversubscription describe a three-tier fabric: set "
                          "\"tiers\": 3");
    if (!fabric) json_decref(f);
    if (rc) return -1;
    if (et_faults_read(r, o, c)) return -1;
    if (read_device(r, device, s)) return -1;
    /* NVLink as the device's profile gives it, unless the scenario says (600 GB/s, A100's, when neither
     * does) */
    if (!json_object_get(o, "nvlink_GBps") && c->device.nvlink_bandwidth > 0)
        c->intra_node_bandwidth = c->device.nvlink_bandwidth / 2;
    return 0;
}

/* parallelism.recompute_modules: Megatron's module names (schedule.h), with recompute "selective". */
static int read_recompute_modules(const et_json_reader *r, json_t *p, et_scenario *s)
{
    json_t *a;
    if (et_json_get_array(r, p, "$.parallelism", "recompute_modules", false, &a)) return -1;
    if (!a) return 0;
    if (s->parallel.recompute != ET_RECOMPUTE_SELECTIVE)
        FAIL("$.parallelism.recompute_modules", "recompute_modules apply to recompute \"selective\"");
    char list[256] = "";
    for (int k = 0; et_recompute_module_names[k]; k++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s\"%s\"", k ? ", " : "", et_recompute_module_names[k]);
    }
    for (size_t i = 0; i < json_array_size(a); i++) {
        const char *name = json_string_value(json_array_get(a, i));
        int k = 0;
        while (name && et_recompute_module_names[k] && strcmp(name, et_recompute_module_names[k]) != 0)
            k++;
        if (!name)
            FAIL("$.parallelism.recompute_modules", "entry %zu: expected a string, one of %s", i, list);
        if (!et_recompute_module_names[k])
            FAIL("$.parallelism.recompute_modules", "entry %zu: expected one of %s, got \"%s\"", i, list,
                 name);
        s->parallel.recompute_modules |= 1u << k;
    }
    if (!s->parallel.recompute_modules)
        FAIL("$.parallelism.recompute_modules", "expected at least one module (%s)", list);
    const unsigned m = s->parallel.recompute_modules;
    if (ET_RECOMPUTES(m, ET_RECOMPUTE_MLA_UP_PROJ) && s->model.mla.kv_lora <= 0)
        FAIL("$.parallelism.recompute_modules",
             "\"mla_up_proj\" needs a model with latent attention (model.mla)");
    if (ET_RECOMPUTES(m, ET_RECOMPUTE_MOE_ACT) && s->model.moe.experts <= 0)
        FAIL("$.parallelism.recompute_modules", "\"moe_act\" needs a mixture of experts (model.moe)");
    if (ET_RECOMPUTES(m, ET_RECOMPUTE_SHARED_EXPERTS) && s->model.moe.shared_experts <= 0)
        FAIL("$.parallelism.recompute_modules", "\"shared_experts\" needs model.moe.shared_experts");
    return 0;
}

static int read_parallelism(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"tensor",
                                       "pipeline",
                                       "virtual_pipeline",
                                       "zero_stage",
                                       "recompute",
                                       "sequence_parallel",
                                       "bucket_MiB",
                                       "allreduce",
                                       "overlap",
                                       "attention",
                                       "layers_per_stage",
                                       "distributed_optimizer",
                                       "tp_overlap",
                                       "expert",
                                       "expert_tensor",
                                       "context",
                                       "recompute_modules",
                                       "recompute_layers",
                                       NULL};
    json_t *o;
    long long v;
    double x;
    int e;
    if (et_json_get_object(r, root, "$", "parallelism", false, keys, &o)) return -1;
    json_t *p = o ? o : json_object();
    int rc = -1;
    if (et_json_get_int(r, p, "$.parallelism", "tensor", false, 1, 1, 4096, &v)) goto done;
    s->parallel.tensor = (int)v;
    if (et_json_get_int(r, p, "$.parallelism", "pipeline", false, 1, 1, ET_MAX_PIPELINE, &v)) goto done;
    s->parallel.pipeline = (int)v;
    if (et_json_get_int(r, p, "$.parallelism", "expert", false, 1, 1, 1 << 16, &v)) goto done;
    s->parallel.expert = (int)v;
    if (et_json_get_int(r, p, "$.parallelism", "expert_tensor", false, 0, 1, 4096, &v)) goto done;
    s->parallel.expert_tensor = (int)v; /* 0: not given, the tensor degree */
    if (et_json_get_int(r, p, "$.parallelism", "context", false, 1, 1, 1 << 16, &v)) goto done;
    s->parallel.context = (int)v;
    if (et_json_get_int(r, p, "$.parallelism", "zero_stage", false, 0, 0, 3, &v)) goto done;
    s->parallel.zero_stage = (int)v;
    if (et_json_get_bool(r, p, "$.parallelism", "distributed_optimizer", false, false,
                         &s->parallel.distributed_optimizer))
        goto done;
    json_t *lps;
    if (et_json_get_array(r, p, "$.parallelism", "layers_per_stage", false, &lps)) goto done;
    if (lps) {
        size_t n = json_array_size(lps);
        if (n != (size_t)s->parallel.pipeline) {
            et_error_set(r->err, r->source, 0, 0, "$.parallelism.layers_per_stage",
                         "expected one layer count per pipeline stage (%d), got %zu", s->parallel.pipeline,
                         n);
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            if (et_json_array_number(r, lps, "$.parallelism.layers_per_stage", i, 1, 1 << 20, &x)) goto done;
            if (x != (int)x) {
                et_error_set(r->err, r->source, 0, 0, "$.parallelism.layers_per_stage",
                             "layer counts must be whole numbers, got %g", x);
                goto done;
            }
            s->parallel.layers_per_stage[i] = (int)x;
        }
        s->parallel.uneven = true;
    }
    if (et_json_get_int(r, p, "$.parallelism", "virtual_pipeline", false, 1, 1, 1024, &v)) goto done;
    s->parallel.virtual_pipeline = (int)v;
    /* recompute: true / false (full / none, the older form) or one of the mode names */
    json_t *rv = json_object_get(p, "recompute");
    if (json_is_boolean(rv)) {
        s->parallel.recompute = json_is_true(rv) ? ET_RECOMPUTE_FULL : ET_RECOMPUTE_NONE;
    } else {
        if (et_json_get_enum(r, p, "$.parallelism", "recompute", false, et_recompute_names, ET_RECOMPUTE_NONE,
                             &e))
            goto done;
        s->parallel.recompute = (et_recompute)e;
    }
    if (read_recompute_modules(r, p, s)) goto done;
    if (et_json_get_int(r, p, "$.parallelism", "recompute_layers", false, 0, 1, 1 << 20, &v)) goto done;
    s->parallel.recompute_layers = (int)v;
    if (v > 0 && s->parallel.recompute != ET_RECOMPUTE_FULL) {
        et_error_set(
            r->err, r->source, 0, 0, "$.parallelism.recompute_layers",
            "recompute_layers applies to recompute \"full\" (the first layers of each chunk recomputed "
            "whole), got recompute \"%s\"",
            et_recompute_names[s->parallel.recompute]);
        goto done;
    }
    if (et_json_get_bool(r, p, "$.parallelism", "sequence_parallel", false, false,
                         &s->parallel.sequence_parallel))
        goto done;
    if (et_json_get_bool(r, p, "$.parallelism", "tp_overlap", false, false, &s->parallel.tp_overlap))
        goto done;
    if (et_json_get_enum(r, p, "$.parallelism", "attention", false, et_attention_names, ET_ATTENTION_STANDARD,
                         &e))
        goto done;
    s->parallel.attention = (et_attention_kind)e;
    if (et_json_get_positive(r, p, "$.parallelism", "bucket_MiB", false, 25, &x)) goto done;
    s->parallel.bucket_bytes = x * 1048576.0;
    if (et_json_get_enum(r, p, "$.parallelism", "allreduce", false, et_coll_algo_names, ET_COLL_AUTO, &e))
        goto done;
    s->parallel.allreduce = (et_coll_algo)e;
    if (et_json_get_bool(r, p, "$.parallelism", "overlap", false, true, &s->parallel.overlap)) goto done;
    rc = 0;
done:
    if (!o) json_decref(p);
    return rc;
}

/* Reads an array of 1..ET_TT_MAX_CORES positive integers; returns the count in *n. */
static int read_factor_list(const et_json_reader *r, json_t *obj, const char *path, const char *key, int *out,
                            int *n, double *product)
{
    json_t *a;
    char p[ET_JSON_PATH_MAX];
    if (et_json_get_array(r, obj, path, key, true, &a)) return -1;
    et_json_path(p, path, key);
    size_t len = json_array_size(a);
    if (len < 1 || len > ET_TT_MAX_CORES) FAIL(p, "expected 1 to %d factors, got %zu", ET_TT_MAX_CORES, len);
    *product = 1;
    for (size_t i = 0; i < len; i++) {
        double x;
        if (et_json_array_number(r, a, p, i, 1, 1 << 20, &x)) return -1;
        if (x != (int)x) FAIL(p, "factors must be whole numbers, got %g", x);
        out[i] = (int)x;
        *product *= x;
    }
    *n = (int)len;
    return 0;
}

static int read_sparsity(const et_json_reader *r, json_t *method, et_scenario *s)
{
    static const char *const keys[] = {"attention", "mlp", "embeddings", "head", NULL};
    static const char *const spec_keys[] = {"density", "pattern", "block", NULL};
    json_t *o;
    et_method *m = &s->method;
    if (et_json_get_object(r, method, "$.method", "sparsity", true, keys, &o)) return -1;
    for (int g = 0; g < ET_GROUP_COUNT; g++) {
        char path[ET_JSON_PATH_MAX], p[ET_JSON_PATH_MAX];
        et_json_path(path, "$.method.sparsity", et_layer_group_names[g]);
        json_t *spec;
        m->sparse[g] = (et_sparse_spec){.density = 1, .pattern = ET_PATTERN_DENSE};
        if (et_json_get_object(r, o, "$.method.sparsity", et_layer_group_names[g], false, spec_keys, &spec))
            return -1;
        if (!spec) continue;
        et_sparse_spec *sp = &m->sparse[g];
        int e;
        long long block;
        if (et_json_get_number(r, spec, path, "density", true, 1, 1e-6, 1, &sp->density)) return -1;
        if (et_json_get_enum(r, spec, path, "pattern", true, et_sparse_pattern_names, 0, &e)) return -1;
        sp->pattern = (et_sparse_pattern)e;
        if (et_json_get_int(r, spec, path, "block", sp->pattern == ET_PATTERN_BLOCK, 0, 1, 4096, &block))
            return -1;
        sp->block = (int)block;
        if (json_object_get(spec, "block") && sp->pattern != ET_PATTERN_BLOCK)
            FAIL(et_json_path(p, path, "block"), "\"block\" applies only to pattern \"block\"%s", "");
        if (sp->pattern == ET_PATTERN_2_4) {
            if (sp->density != 0.5)
                FAIL(et_json_path(p, path, "density"),
                     "2:4 sparsity keeps exactly half the weights: density 0.5, got %g", sp->density);
            if (et_sparse_rate_factor(&s->cluster.device, sp) < 0)
                FAIL(et_json_path(p, path, "pattern"),
                     "device %s has no 2:4 sparse units (sparse.semi_structured_2_4_speedup is 0 in %s)",
                     s->cluster.device.name, s->cluster.device.file);
        }
    }
    return et_json_get_bool(r, method, "$.method", "dense_gradients", false, false, &m->dense_gradients);
}

static int read_tensor_train(const et_json_reader *r, json_t *method, et_scenario *s)
{
    static const char *const keys[] = {"rank", "layers", "factors", "embedding", "rank_schedule", NULL};
    static const char *const factor_keys[] = {"shape", "in", "out", NULL};
    static const char *const emb_keys[] = {"rows", "cols", "rank", NULL};
    static const char *const phase_keys[] = {"from", "rank", NULL};
    et_method *m = &s->method;
    json_t *o, *layers, *factors, *emb, *schedule;
    long long v;
    char p[ET_JSON_PATH_MAX];
    if (et_json_get_object(r, method, "$.method", "tensor_train", true, keys, &o)) return -1;
    if (et_json_get_int(r, o, "$.method.tensor_train", "rank", true, 0, 1, 4096, &v)) return -1;
    m->tt_rank = (int)v;
    if (et_json_get_array(r, o, "$.method.tensor_train", "layers", true, &layers)) return -1;
    for (size_t i = 0; i < json_array_size(layers); i++) {
        json_t *x = json_array_get(layers, i);
        int g = -1;
        for (int k = 0; k < ET_GROUP_EMBEDDINGS; k++)
            if (json_is_string(x) && strcmp(json_string_value(x), et_layer_group_names[k]) == 0) g = k;
        if (g < 0)
            FAIL(et_json_path_index(p, "$.method.tensor_train.layers", i),
                 "expected \"attention\" or \"mlp\" (embeddings go under \"embedding\")%s", "");
        m->tt_group[g] = true;
    }
    if (et_json_get_array(r, o, "$.method.tensor_train", "factors", true, &factors)) return -1;
    if (json_array_size(factors) > ET_MAX_TT_SHAPES)
        FAIL("$.method.tensor_train.factors", "at most %d factorisations", ET_MAX_TT_SHAPES);
    for (size_t i = 0; i < json_array_size(factors); i++) {
        char path[ET_JSON_PATH_MAX];
        et_json_path_index(path, "$.method.tensor_train.factors", i);
        json_t *f = json_array_get(factors, i), *shape;
        if (et_json_expect_object(r, f, path, factor_keys)) return -1;
        if (et_json_get_array(r, f, path, "shape", true, &shape)) return -1;
        double n_in, n_out, pin, pout;
        if (json_array_size(shape) != 2)
            FAIL(et_json_path(p, path, "shape"), "expected [inputs, outputs]%s", "");
        if (et_json_array_number(r, shape, et_json_path(p, path, "shape"), 0, 1, 1 << 24, &n_in) ||
            et_json_array_number(r, shape, p, 1, 1, 1 << 24, &n_out))
            return -1;
        et_tt_factors *tf = &m->factors[m->n_factors++];
        tf->n_in = (int)n_in;
        tf->n_out = (int)n_out;
        if (read_factor_list(r, f, path, "in", tf->in, &tf->d_in, &pin) ||
            read_factor_list(r, f, path, "out", tf->out, &tf->d_out, &pout))
            return -1;
        if (pin != n_in || pout != n_out)
            FAIL(path, "factors multiply to %g x %g, the shape is %g x %g", pin, pout, n_in, n_out);
        if (tf->d_in + tf->d_out > ET_TT_MAX_CORES)
            FAIL(path, "at most %d cores in all, got %d", ET_TT_MAX_CORES, tf->d_in + tf->d_out);
    }
    /* every tensor-train layer of the model needs a factorisation; the attention's are H x H each (q, k, v)
     */
    const int H = s->model.hidden, F = s->model.ffn;
    if (m->tt_group[ET_GROUP_ATTENTION] && et_model_head_dim(&s->model) * s->model.heads != H)
        FAIL("$.method.tensor_train.layers",
             "tensor-train attention layers are H x H: heads x head_dim (%d) "
             "must equal hidden (%d)",
             et_model_head_dim(&s->model) * s->model.heads, H);
    int need[3][3] = {{ET_GROUP_ATTENTION, H, H}, {ET_GROUP_MLP, H, F}, {ET_GROUP_MLP, F, H}};
    for (int i = 0; i < 3; i++)
        if (m->tt_group[need[i][0]] && !et_method_factors(m, need[i][1], need[i][2]))
            FAIL("$.method.tensor_train.factors", "no factorisation for the %d x %d layers of group %s",
                 need[i][1], need[i][2], et_layer_group_names[need[i][0]]);
    if (et_json_get_object(r, o, "$.method.tensor_train", "embedding", false, emb_keys, &emb)) return -1;
    if (emb) {
        double rows, cols;
        int dc;
        m->tt_embedding = true;
        if (read_factor_list(r, emb, "$.method.tensor_train.embedding", "rows", m->emb_rows, &m->emb_d,
                             &rows) ||
            read_factor_list(r, emb, "$.method.tensor_train.embedding", "cols", m->emb_cols, &dc, &cols))
            return -1;
        if (dc != m->emb_d)
            FAIL("$.method.tensor_train.embedding.cols",
                 "expected %d column factors, one per row factor, got %d", m->emb_d, dc);
        if (rows < s->model.vocab)
            FAIL("$.method.tensor_train.embedding.rows",
                 "row factors multiply to %g, below the vocabulary %d", rows, s->model.vocab);
        if (cols != H)
            FAIL("$.method.tensor_train.embedding.cols",
                 "column factors multiply to %g, the hidden size is %d", cols, H);
        if (et_json_get_int(r, emb, "$.method.tensor_train.embedding", "rank", false, m->tt_rank, 1, 4096,
                            &v))
            return -1;
        m->emb_rank = (int)v;
    }
    if (et_json_get_array(r, o, "$.method.tensor_train", "rank_schedule", false, &schedule)) return -1;
    m->n_phases = 1;
    m->phases[0] = (et_rank_phase){0, m->tt_rank};
    if (schedule) {
        size_t n = json_array_size(schedule);
        if (n < 1 || n > ET_MAX_RANK_PHASES)
            FAIL("$.method.tensor_train.rank_schedule", "expected 1 to %d phases", ET_MAX_RANK_PHASES);
        m->n_phases = (int)n;
        for (size_t i = 0; i < n; i++) {
            char path[ET_JSON_PATH_MAX];
            et_json_path_index(path, "$.method.tensor_train.rank_schedule", i);
            json_t *ph = json_array_get(schedule, i);
            if (et_json_expect_object(r, ph, path, phase_keys)) return -1;
            if (et_json_get_number(r, ph, path, "from", true, 0, 0, 1, &m->phases[i].from)) return -1;
            if (et_json_get_int(r, ph, path, "rank", true, 0, 1, 4096, &v)) return -1;
            m->phases[i].rank = (int)v;
            if (i == 0 && m->phases[i].from != 0)
                FAIL(et_json_path(p, path, "from"), "the first phase starts at 0, got %g", m->phases[i].from);
            if (i > 0 && m->phases[i].from <= m->phases[i - 1].from)
                FAIL(et_json_path(p, path, "from"), "phases must start in increasing order (%g after %g)",
                     m->phases[i].from, m->phases[i - 1].from);
        }
        m->tt_rank = m->phases[0].rank;
    }
    return 0;
}

/* method.lora: rank (required), alpha (default the rank), targets (default all four). */
static int read_lora(const et_json_reader *r, json_t *method, et_scenario *s)
{
    static const char *const keys[] = {"rank", "alpha", "targets", NULL};
    et_method *m = &s->method;
    json_t *o, *targets;
    long long v;
    char p[ET_JSON_PATH_MAX];
    if (et_json_get_object(r, method, "$.method", "lora", true, keys, &o)) return -1;
    if (et_json_get_int(r, o, "$.method.lora", "rank", true, 0, 1, 1 << 16, &v)) return -1;
    m->lora_rank = (int)v;
    if (et_json_get_number(r, o, "$.method.lora", "alpha", false, m->lora_rank, 1e-6, 1e6, &m->lora_alpha))
        return -1;
    if (et_json_get_array(r, o, "$.method.lora", "targets", false, &targets)) return -1;
    if (!targets) m->lora_targets = (1u << ET_LORA_TARGETS) - 1;
    for (size_t i = 0; targets && i < json_array_size(targets); i++) {
        const char *name = json_string_value(json_array_get(targets, i));
        int k = 0;
        while (name && et_lora_target_names[k] && strcmp(name, et_lora_target_names[k]) != 0)
            k++;
        if (!name || !et_lora_target_names[k])
            FAIL(et_json_path_index(p, "$.method.lora.targets", i),
                 "expected \"linear_qkv\", \"linear_proj\", \"linear_fc1\" or \"linear_fc2\"%s", "");
        m->lora_targets |= 1u << k;
    }
    if (!m->lora_targets) FAIL("$.method.lora.targets", "expected at least one target%s", "");
    if (s->model.mla.kv_lora > 0 && (m->lora_targets & (1u << ET_LORA_QKV)))
        FAIL("$.method.lora.targets", "latent attention has no \"linear_qkv\" product (model.mla)%s", "");
    return 0;
}

static int read_method(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"kind", "sparsity", "dense_gradients", "tensor_train", "lora", NULL};
    json_t *o;
    int e;
    memset(&s->method, 0, sizeof s->method);
    for (int g = 0; g < ET_GROUP_COUNT; g++)
        s->method.sparse[g] = (et_sparse_spec){.density = 1};
    if (et_json_get_object(r, root, "$", "method", false, keys, &o)) return -1;
    if (!o) return 0;
    if (et_json_get_enum(r, o, "$.method", "kind", true, et_method_kind_names, 0, &e)) return -1;
    s->method.kind = (et_method_kind)e;
    if (s->method.kind != ET_METHOD_SPARSE &&
        (json_object_get(o, "sparsity") || json_object_get(o, "dense_gradients")))
        FAIL("$.method", "\"sparsity\" and \"dense_gradients\" apply only to kind \"sparse\"%s", "");
    if (s->method.kind != ET_METHOD_TENSOR_TRAIN && json_object_get(o, "tensor_train"))
        FAIL("$.method.tensor_train", "\"tensor_train\" applies only to kind \"tensor_train\"%s", "");
    if (s->method.kind != ET_METHOD_LORA && json_object_get(o, "lora"))
        FAIL("$.method.lora", "\"lora\" applies only to kind \"lora\"%s", "");
    if (s->method.kind == ET_METHOD_SPARSE) return read_sparsity(r, o, s);
    if (s->method.kind == ET_METHOD_TENSOR_TRAIN) return read_tensor_train(r, o, s);
    if (s->method.kind == ET_METHOD_LORA) return read_lora(r, o, s);
    return 0;
}

static int check_parallelism(const et_json_reader *r, et_scenario *s)
{
    if (s->parallel.distributed_optimizer && s->parallel.zero_stage > 0)
        FAIL("$.parallelism.distributed_optimizer",
             "Megatron's distributed optimizer replaces ZeRO: zero_stage must be 0, got %d",
             s->parallel.zero_stage);
    if (s->parallel.tp_overlap && !s->parallel.sequence_parallel)
        FAIL("$.parallelism.tp_overlap", "overlapping tensor-parallel communication with GEMMs needs "
                                         "sequence_parallel (its all-gathers and reduce-scatters are what is "
                                         "pipelined)");
    int gpus = et_scenario_gpus(s), t = s->parallel.tensor, pp = s->parallel.pipeline;
    if (s->cluster.gpus_per_node % t != 0)
        FAIL("$.parallelism.tensor",
             "tensor-parallel degree %d must divide gpus_per_node %d (tensor parallelism "
             "stays inside a node)",
             t, s->cluster.gpus_per_node);
    if (gpus % (t * pp) != 0)
        FAIL("$.parallelism.pipeline", "tensor x pipeline = %d must divide the %d GPUs", t * pp, gpus);
    const int cp = s->parallel.context;
    if (cp > 1) {
        if (gpus % (t * pp * cp) != 0)
            FAIL("$.parallelism.context", "tensor x pipeline x context = %d must divide the %d GPUs",
                 t * pp * cp, gpus);
        if (s->data.seq_len % (2 * cp) != 0)
            FAIL("$.parallelism.context",
                 "context parallelism %d needs seq_len divisible by 2 x %d (each rank takes two chunks of "
                 "every sequence, balancing causal attention), got seq_len %d",
                 cp, cp, s->data.seq_len);
        if (s->parallel.attention != ET_ATTENTION_FLASH)
            FAIL("$.parallelism.context",
                 "context parallelism (ring attention) needs attention \"flash\" (its chunks are fused "
                 "kernels), got \"%s\"",
                 et_attention_names[s->parallel.attention]);
        if (s->parallel.expert > 1)
            FAIL("$.parallelism.context", "context and expert parallelism together are not modelled%s", "");
    }
    if (s->model.heads % t != 0)
        FAIL("$.parallelism.tensor", "tensor-parallel degree %d must divide the %d attention heads", t,
             s->model.heads);
    if (s->model.ffn % t != 0)
        FAIL("$.parallelism.tensor", "tensor-parallel degree %d must divide ffn %d", t, s->model.ffn);
    if (s->parallel.uneven) {
        int sum = 0;
        for (int k = 0; k < pp; k++)
            sum += s->parallel.layers_per_stage[k];
        if (sum != s->model.layers)
            FAIL("$.parallelism.layers_per_stage", "the stages' layers add up to %d, the model has %d", sum,
                 s->model.layers);
        /* interleaved: each stage's layers in virtual_pipeline chunks, every chunk at least one layer, but
         * for the first chunk of the first stage and the last chunk of the last, which may hold the
         * embedding or the loss alone (Megatron's account_for_embedding_in_pipeline_split and
         * account_for_loss_in_pipeline_split count them as layers) */
        for (int k = 0; k < pp && s->parallel.virtual_pipeline > 1; k++) {
            const int ends = k == 0 || k == pp - 1;
            if (s->parallel.layers_per_stage[k] < s->parallel.virtual_pipeline - ends)
                FAIL("$.parallelism.layers_per_stage",
                     "stage %d's %d layers cannot fill %d virtual stages (each holds whole layers; the first "
                     "and the last stage's end chunk may hold the embedding or the loss alone)",
                     k, s->parallel.layers_per_stage[k], s->parallel.virtual_pipeline);
        }
    } else if (s->model.layers % pp != 0) {
        FAIL("$.parallelism.pipeline",
             "pipeline degree %d must divide the %d layers (or give parallelism.layers_per_stage)", pp,
             s->model.layers);
    }
    const int v = s->parallel.virtual_pipeline;
    if (v > 1 && pp < 2)
        FAIL("$.parallelism.virtual_pipeline",
             "virtual pipeline stages (%d) need a pipeline of 2 or more stages", v);
    if (v > 1 && !s->parallel.uneven && s->model.layers % (pp * v) != 0)
        FAIL("$.parallelism.virtual_pipeline",
             "pipeline %d x virtual stages %d = %d must divide the %d layers (each virtual stage holds whole "
             "layers)",
             pp, v, pp * v, s->model.layers);
    if (s->parallel.recompute_layers > 0 && s->parallel.recompute == ET_RECOMPUTE_FULL) {
        int most = 0; /* the largest chunk of a stage, in layers */
        for (int k = 0; k < pp; k++) {
            const int n = s->parallel.uneven ? s->parallel.layers_per_stage[k] : s->model.layers / pp;
            const int chunk = et_pipeline_chunk_layers(n, v);
            most = chunk > most ? chunk : most;
        }
        if (s->parallel.recompute_layers > most)
            FAIL("$.parallelism.recompute_layers",
                 "%d layers recomputed a chunk, but a stage's largest chunk holds %d (layers / (pipeline x "
                 "virtual_pipeline))",
                 s->parallel.recompute_layers, most);
    }
    s->parallel.data = gpus / (t * pp * cp);
    if (t > 1 && s->method.kind == ET_METHOD_TENSOR_TRAIN)
        FAIL("$.parallelism.tensor",
             "tensor-train layers are not split across GPUs: tensor parallelism must be 1, "
             "got %d",
             t);
    if (s->optimizer.galore.rank > 0 && s->method.kind != ET_METHOD_DENSE)
        FAIL("$.optimizer.galore", "GaLore with method \"%s\" is not modelled (dense weights only)",
             et_method_kind_names[s->method.kind]);
    if (s->optimizer.galore.rank > 0 && (s->parallel.zero_stage > 0 || s->parallel.distributed_optimizer))
        FAIL("$.optimizer.galore",
             "GaLore with sharded optimizer states (ZeRO or the distributed optimizer) is "
             "not modelled%s",
             "");
    const int ep = s->parallel.expert, experts = s->model.moe.experts;
    if (ep > 1 && experts == 0)
        FAIL("$.parallelism.expert", "expert parallelism %d needs a mixture-of-experts model (model.moe)",
             ep);
    if (experts > 0 && experts % ep != 0)
        FAIL("$.parallelism.expert", "expert parallelism %d must divide the %d experts", ep, experts);
    const int etp = et_scenario_expert_tensor(s);
    if (etp != 1 && etp != t)
        FAIL("$.parallelism.expert_tensor",
             "expert tensor parallelism %d is not modelled: 1 (each expert whole, folded over the tensor "
             "ranks) or the tensor degree %d",
             etp, t);
    if (etp < t && experts == 0)
        FAIL("$.parallelism.expert_tensor",
             "expert tensor parallelism %d needs a mixture-of-experts model "
             "(model.moe)",
             etp);
    if (etp < t && !s->parallel.sequence_parallel)
        FAIL("$.parallelism.expert_tensor",
             "experts folded over the tensor ranks (expert_tensor 1, tensor %d) need sequence_parallel: each "
             "rank routes its sequence-parallel share of the tokens (Megatron requires sequence parallelism "
             "with experts and tensor parallelism)",
             t);
    if (etp < t && ep % t != 0)
        FAIL("$.parallelism.expert",
             "expert parallelism %d must be a multiple of the tensor degree %d when the experts are folded "
             "over the tensor ranks (expert_tensor 1: an expert group spans whole tensor groups)",
             ep, t);
    if (etp < t && (t * s->parallel.data) % ep != 0)
        FAIL("$.parallelism.expert",
             "expert parallelism %d must divide the %d tensor x data ranks of a stage (expert_tensor 1)", ep,
             t * s->parallel.data);
    if (etp == t && ep > 1 && s->parallel.data % ep != 0)
        FAIL("$.parallelism.expert",
             "expert parallelism %d must divide the %d data-parallel ranks (expert ranks are data ranks; "
             "parallelism.expert_tensor 1 folds them over the tensor ranks too)",
             ep, s->parallel.data);
    if (experts > 0 && s->method.kind != ET_METHOD_DENSE)
        FAIL("$.model.moe", "a mixture of experts with method \"%s\" is not modelled (dense methods only)",
             et_method_kind_names[s->method.kind]);
    const et_precision pr = s->precision;
    if (s->cluster.device.peak_flops[pr] <= 0)
        FAIL("$.precision", "device %s has no %s support (peak 0 in %s)", s->cluster.device.name,
             et_precision_names[pr], s->cluster.device.file);
    return 0;
}

static int read_batch(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"global", "local", "grad_accum", NULL};
    json_t *o;
    if (et_json_get_object(r, root, "$", "batch", true, keys, &o)) return -1;
    if (et_json_get_int(r, o, "$.batch", "local", true, 0, 1, ET_MAX_LOCAL_BATCH, &s->batch.local)) return -1;
    if (et_json_get_int(r, o, "$.batch", "grad_accum", false, 0, 1, 1 << 20, &s->batch.grad_accum)) return -1;
    return et_json_get_int(r, o, "$.batch", "global", false, 0, 1, 1LL << 40, &s->batch.global);
}

/* The batch a plan makes of the given local batch and global batch or accumulation (0: not given). */
static int derive_batch(const et_json_reader *r, et_scenario *s)
{
    long long dp = s->parallel.data, local = s->batch.local, global = s->batch.global,
              accum = s->batch.grad_accum;
    if (!global && !accum) accum = 1;
    if (!global) global = local * dp * accum;
    if (!accum) {
        if (global % (local * dp) != 0)
            FAIL("$.batch.global",
                 "global batch %lld is not divisible by local batch %lld x %lld data-parallel "
                 "ranks = %lld",
                 global, local, dp, local * dp);
        accum = global / (local * dp);
    }
    if (global != local * dp * accum)
        FAIL("$.batch.global",
             "global batch %lld must equal local %lld x data-parallel ranks %lld x grad_accum "
             "%lld = %lld",
             global, local, dp, accum, local * dp * accum);
    s->batch.global = global;
    s->batch.local = local;
    s->batch.grad_accum = accum;
    return 0;
}

static int check_sampling(const et_json_reader *r, et_scenario *s)
{
    /* variable lengths are sampled sequence by sequence, 16 steps for the analytic estimate: bound the
     * draws so that the estimate finishes in seconds */
    if (s->data.lengths.kind != ET_LENGTHS_FIXED && s->batch.global > ET_MAX_SAMPLED_BATCH)
        FAIL(
            "$.batch.global",
            "a global batch of %lld sequences of variable length is more than ET samples (at most %d a step)",
            s->batch.global, ET_MAX_SAMPLED_BATCH);
    return et_sampler_check(&s->data.lengths, &s->data.sampling, (int)s->batch.local, s->parallel.data,
                            r->source, "$.data.sampling", r->err);
}

static int read_target(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {
        "samples",      "steps",  "tokens", "eval_interval_samples", "eval_samples", "timing",
        "initial_eval", "warmup", NULL};
    static const char *const warmup_keys[] = {"steps", "extra_s", NULL};
    json_t *o;
    if (et_json_get_object(r, root, "$", "target", true, keys, &o)) return -1;
    int has_samples = json_object_get(o, "samples") != NULL, has_steps = json_object_get(o, "steps") != NULL;
    const int has_tokens = json_object_get(o, "tokens") != NULL;
    if (has_samples + has_steps + has_tokens != 1)
        FAIL("$.target", "give exactly one of \"samples\", \"steps\" or \"tokens\"");
    if (et_json_get_positive(r, o, "$.target", "samples", false, 0, &s->target.samples)) return -1;
    if (has_tokens) {
        /* a token budget counts real tokens: samples of the data's mean length (padding excluded) */
        double tokens;
        if (et_json_get_positive(r, o, "$.target", "tokens", true, 0, &tokens)) return -1;
        s->target.samples = tokens / et_length_mean(&s->data.lengths);
        has_samples = 1;
    }
    if (et_json_get_int(r, o, "$.target", "steps", false, 0, 1, 1000000000000000LL, &s->target.steps))
        return -1;
    if (has_samples && s->target.samples < 1) /* 5e-324 samples were 0 steps */
        FAIL(has_tokens ? "$.target.tokens" : "$.target.samples",
             "%.3g samples: a run trains on at least one sequence", s->target.samples);
    s->target.steps_given = !has_samples;
    s->target.tokens_given = has_tokens;
    if (et_json_get_number(r, o, "$.target", "eval_interval_samples", false, 0, 0, INFINITY,
                           &s->target.eval_interval_samples))
        return -1;
    if (et_json_get_number(r, o, "$.target", "eval_samples", false, 0, 0, INFINITY, &s->target.eval_samples))
        return -1;
    if (s->target.eval_samples > 0 && s->target.eval_interval_samples <= 0)
        FAIL("$.target.eval_interval_samples", "eval_samples needs a positive eval_interval_samples");
    int timing = ET_TIMING_STEPS;
    if (et_json_get_enum(r, o, "$.target", "timing", false, et_timing_rule_names, ET_TIMING_STEPS, &timing))
        return -1;
    s->target.timing = (et_timing_rule)timing;
    if (s->target.timing == ET_TIMING_MLPERF && !(s->target.eval_samples > 0))
        FAIL(
            "$.target.timing",
            "\"mlperf\" stops the run at the evaluation that sees the target: give eval_interval_samples and "
            "eval_samples");
    if (et_json_get_bool(r, o, "$.target", "initial_eval", false, false, &s->target.initial_eval)) return -1;
    if (s->target.initial_eval && !(s->target.eval_samples > 0))
        FAIL("$.target.initial_eval", "an initial evaluation needs eval_interval_samples and eval_samples");
    json_t *w;
    if (et_json_get_object(r, o, "$.target", "warmup", false, warmup_keys, &w)) return -1;
    if (w) {
        if (et_json_get_int(r, w, "$.target.warmup", "steps", true, 0, 0, 1000000000000000LL,
                            &s->target.warmup_steps) ||
            et_json_get_number(r, w, "$.target.warmup", "extra_s", true, 0, 0, 1e9,
                               &s->target.warmup_extra_s))
            return -1;
    }
    return 0;
}

/* Steps from the samples at the plan's global batch, or samples from the given steps. */
static int derive_target(const et_json_reader *r, et_scenario *s)
{
    if (s->target.steps_given) {
        s->target.samples = (double)s->target.steps * (double)s->batch.global;
        return 0;
    }
    const double steps = ceil(s->target.samples / (double)s->batch.global);
    if (!(steps <= 1e15))
        FAIL(s->target.tokens_given ? "$.target.tokens" : "$.target.samples",
             "%.3g samples are %.3g steps of %lld sequences: more than 10^15 steps", s->target.samples, steps,
             s->batch.global);
    s->target.steps = (long long)steps;
    return 0;
}

int et_scenario_check_plan(et_scenario *s, et_error *err)
{
    et_json_reader rd = {s->source, err}, *r = &rd;
    return check_parallelism(r, s) || derive_batch(r, s) || check_sampling(r, s) || derive_target(r, s) ? -1
                                                                                                        : 0;
}

static int read_simulation(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"steps", "seed", "straggler_sigma", NULL};
    json_t *o;
    long long v;
    if (et_json_get_object(r, root, "$", "simulation", false, keys, &o)) return -1;
    json_t *p = o ? o : json_object();
    int rc = et_json_get_int(r, p, "$.simulation", "steps", false, 3, 1, 10000, &v);
    s->simulation.steps = (int)v;
    if (!rc) rc = et_json_get_int(r, p, "$.simulation", "seed", false, 1, 0, BIG, &v);
    s->simulation.seed = (unsigned long long)v;
    if (!rc)
        rc = et_json_get_number(r, p, "$.simulation", "straggler_sigma", false, 0, 0, 1,
                                &s->simulation.straggler_sigma);
    if (!o) json_decref(p);
    return rc;
}

/* resilience: failures and checkpoints (model/resilience.h); every key has a default */
static int read_resilience(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"interruptions_per_gpu_hour",
                                       "checkpoint",
                                       "write_GBps_per_node",
                                       "host_copy_GBps",
                                       "restart_minutes",
                                       "checkpoint_interval_minutes",
                                       NULL};
    static const char *const modes[] = {"synchronous", "asynchronous", NULL};
    json_t *o;
    et_resilience *res = &s->resilience;
    *res = et_resilience_defaults();
    if (et_json_get_object(r, root, "$", "resilience", false, keys, &o)) return -1;
    if (!o) return 0;
    int mode = 0;
    double restart_min = res->restart_s / 60, interval_min = 0;
    if (et_json_get_number(r, o, "$.resilience", "interruptions_per_gpu_hour", false,
                           res->interruptions_per_gpu_hour, 0, 1, &res->interruptions_per_gpu_hour) ||
        et_json_get_enum(r, o, "$.resilience", "checkpoint", false, modes, 0, &mode) ||
        et_json_get_positive(r, o, "$.resilience", "write_GBps_per_node", false, res->write_GBps_per_node,
                             &res->write_GBps_per_node) ||
        et_json_get_positive(r, o, "$.resilience", "host_copy_GBps", false, res->host_copy_GBps,
                             &res->host_copy_GBps) ||
        et_json_get_number(r, o, "$.resilience", "restart_minutes", false, restart_min, 0, 1e6,
                           &restart_min) ||
        et_json_get_number(r, o, "$.resilience", "checkpoint_interval_minutes", false, 0, 0, 1e9,
                           &interval_min))
        return -1;
    res->asynchronous = mode == 1;
    res->restart_s = restart_min * 60;
    res->interval_s = interval_min * 60;
    return 0;
}

/* energy: the facility's overhead and the grid's carbon intensity (docs/cost-model.md, "Energy") */
static int read_energy(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"pue", "carbon_g_per_kWh", NULL};
    json_t *o;
    s->energy.pue = 1.2, s->energy.carbon_g_per_kwh = 0;
    if (et_json_get_object(r, root, "$", "energy", false, keys, &o)) return -1;
    if (!o) return 0;
    return et_json_get_number(r, o, "$.energy", "pue", false, 1.2, 1, 10, &s->energy.pue) ||
                   et_json_get_number(r, o, "$.energy", "carbon_g_per_kWh", false, 0, 0, 1e4,
                                      &s->energy.carbon_g_per_kwh)
               ? -1
               : 0;
}

static int read_host(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"launch", "per_kernel_us", NULL};
    json_t *o;
    int e = 0;
    double x = 0;
    if (et_json_get_object(r, root, "$", "host", false, keys, &o)) return -1;
    json_t *p = o ? o : json_object();
    int rc = et_json_get_enum(r, p, "$.host", "launch", false, et_launch_mode_names,
                              ET_LAUNCH_FRAMEWORK_EAGER, &e);
    s->host.mode = (et_launch_mode)e;
    if (!rc)
        rc = et_json_get_number(r, p, "$.host", "per_kernel_us", false,
                                et_launch_default_seconds(s->host.mode) * 1e6, 0, 1e6, &x);
    s->host.per_kernel = x * 1e-6;
    /* on a CPU the kernels run on the host itself: their cost is the profile's kernel overhead */
    if (s->cluster.device.kind == ET_DEVICE_CPU) s->host.per_kernel = 0;
    if (!o) json_decref(p);
    return rc;
}

int et_scenario_grad_ranks(const et_scenario *s)
{
    return s->parallel.data * (s->parallel.context > 1 ? s->parallel.context : 1);
}

bool et_scenario_reduce_scatters_gradients(const et_scenario *s)
{
    return s->parallel.zero_stage >= 2 || s->parallel.distributed_optimizer;
}

bool et_scenario_gathers_parameters(const et_scenario *s)
{
    return s->parallel.zero_stage >= 1 || s->parallel.distributed_optimizer;
}

int et_scenario_gpus(const et_scenario *s)
{
    return s->cluster.nodes * s->cluster.gpus_per_node;
}

int et_scenario_expert_tensor(const et_scenario *s)
{
    return s->parallel.expert_tensor > 0 ? s->parallel.expert_tensor : s->parallel.tensor;
}

bool et_scenario_experts_folded(const et_scenario *s)
{
    return et_scenario_expert_tensor(s) < s->parallel.tensor;
}

int et_scenario_expert_data_span(const et_scenario *s)
{
    const int x = s->parallel.expert > 1 ? s->parallel.expert : 1;
    return et_scenario_experts_folded(s) ? x / s->parallel.tensor : x;
}

/* software.fp8_param_gather: FP8 weights (Transformer Engine's Float8Tensor parameters, per-tensor scales)
 * gathered by a sharded optimizer. */
static int check_fp8_param_gather(const et_json_reader *r, const et_scenario *s)
{
    if (!s->software.fp8_param_gather) return 0;
    if (s->precision != ET_FP8 || (s->scaling != ET_SCALING_DELAYED && s->scaling != ET_SCALING_CURRENT))
        FAIL("$.software.fp8_param_gather",
             "FP8 parameter gathers need precision fp8 with scaling \"delayed\" or \"current\" (per-tensor "
             "FP8 weights); got %s%s%s",
             et_precision_names[s->precision], et_precision_quantized(s->precision) ? " with " : "",
             et_precision_quantized(s->precision) ? et_scaling_names[s->scaling] : "");
    if (!et_scenario_gathers_parameters(s))
        FAIL("$.software.fp8_param_gather",
             "FP8 parameter gathers need an optimizer that gathers parameters (distributed_optimizer or "
             "zero_stage 1-3)%s",
             "");
    return 0;
}

/* bf16_layers {first, last}: under fp8 and fp4, layers kept in 16 bits at each end of the model. */
static int read_bf16_layers(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"first", "last", NULL};
    json_t *o;
    long long first, last;
    if (et_json_get_object(r, root, "$", "bf16_layers", false, keys, &o)) return -1;
    if (!o) return 0;
    if (!et_precision_quantized(s->precision))
        FAIL("$.bf16_layers", "keeps layers in 16 bits under fp8 or fp4 precision; precision is %s",
             et_precision_names[s->precision]);
    const int layers = s->model.layers;
    if (et_json_get_int(r, o, "$.bf16_layers", "first", false, 0, 0, layers, &first) ||
        et_json_get_int(r, o, "$.bf16_layers", "last", false, 0, 0, layers, &last))
        return -1;
    if (first + last > layers)
        FAIL("$.bf16_layers", "%lld first and %lld last layers in 16 bits: the model has %d layers", first,
             last, layers);
    s->bf16_layers.first = (int)first, s->bf16_layers.last = (int)last;
    return 0;
}

int et_scenario_read(json_t *root, const char *source, const char *const *extra_keys, et_scenario *out,
                     et_error *err)
{
    const char *keys[26] = {"name",      "description", "model",       "method",  "data",    "batch",
                            "optimizer", "precision",   "parallelism", "cluster", "target",  "simulation",
                            "host",      "software",    "resilience",  "energy",  "scaling", "bf16_layers"};
    int n_keys = 18;
    for (int i = 0; extra_keys && extra_keys[i] && n_keys < 25; i++)
        keys[n_keys++] = extra_keys[i];
    keys[n_keys] = NULL;
    memset(out, 0, sizeof *out);
    snprintf(out->source, sizeof out->source, "%s", source);
    snprintf(out->dir, sizeof out->dir, "%s", source);
    char *slash = strrchr(out->dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(out->dir, sizeof out->dir, ".");
    et_json_reader rd = {source, err}, *r = &rd;
    const char *name, *description;
    int e, rc = -1;
    if (et_json_expect_object(r, root, "$", keys)) goto done;
    if (et_json_get_string(r, root, "$", "name", true, NULL, &name)) goto done;
    snprintf(out->name, sizeof out->name, "%s", name);
    if (et_json_get_string(r, root, "$", "description", false, NULL, &description)) goto done;
    if (read_model(r, root, &out->model)) goto done;
    if (read_data(r, root, out)) goto done;
    if (et_json_get_enum(r, root, "$", "precision", true, et_precision_names, 0, &e)) goto done;
    out->precision = (et_precision)e;
    if (et_json_get_enum(r, root, "$", "scaling", false, et_scaling_names, et_scaling_default(out->precision),
                         &e))
        goto done;
    out->scaling = (et_scaling)e;
    if (json_object_get(root, "scaling") && !et_scaling_allowed(out->precision, out->scaling)) {
        /* the scalings the precision takes, listed from et_scaling_allowed: "a", "b" or "c" */
        char allowed[128] = "";
        int n = 0, total = 0;
        for (int i = 0; et_scaling_names[i]; i++)
            total += et_scaling_allowed(out->precision, (et_scaling)i);
        for (int i = 0; et_scaling_names[i]; i++) {
            if (!et_scaling_allowed(out->precision, (et_scaling)i)) continue;
            const size_t used = strlen(allowed);
            snprintf(allowed + used, sizeof allowed - used, "%s\"%s\"",
                     n == 0           ? "scaling "
                     : n == total - 1 ? " or "
                                      : ", ",
                     et_scaling_names[i]);
            n++;
        }
        et_error_set(err, source, 0, 0, "$.scaling", "precision %s trains with %s, not \"%s\"",
                     et_precision_names[out->precision],
                     n ? allowed : "no scaling (only fp8 and fp4 quantize)", et_scaling_names[out->scaling]);
        goto done;
    }
    if (read_bf16_layers(r, root, out)) goto done;
    if (read_optimizer(r, root, out)) goto done;
    if (read_cluster(r, root, out)) goto done;
    if (read_method(r, root, out)) goto done;
    if (read_parallelism(r, root, out)) goto done;
    if (read_batch(r, root, out)) goto done;
    if (read_target(r, root, out)) goto done;
    if (read_simulation(r, root, out)) goto done;
    if (read_host(r, root, out)) goto done;
    if (et_software_read(r, root, &out->software) || check_fp8_param_gather(r, out)) goto done;
    if (read_resilience(r, root, out)) goto done;
    if (read_energy(r, root, out)) goto done;
    rc = 0;
done:
    if (rc) et_scenario_free(out);
    return rc;
}

int et_scenario_parse(json_t *root, const char *source, const char *const *extra_keys, et_scenario *out,
                      et_error *err)
{
    if (et_scenario_read(root, source, extra_keys, out, err)) return -1;
    if (et_scenario_check_plan(out, err)) {
        et_scenario_free(out);
        return -1;
    }
    return 0;
}

int et_scenario_load(const char *path, et_scenario *out, et_error *err)
{
    json_t *root;
    memset(out, 0, sizeof *out);
    if (et_json_load_file(path, &root, err)) return -1;
    int rc = et_scenario_parse(root, path, NULL, out, err);
    json_decref(root);
    return rc;
}

void et_op_scales_free(et_op_scales *s)
{
    free(s->id), free(s->factor);
    s->id = NULL, s->factor = NULL, s->n = 0;
}

void et_scenario_free(et_scenario *s)
{
    et_length_dist_free(&s->data.lengths);
    et_op_scales_free(&s->op_scales);
}

#include "scenario.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json_reader.h"

#ifndef ET_DEFAULT_PROFILE_DIR
#define ET_DEFAULT_PROFILE_DIR "scenarios/profiles"
#endif

const char *const et_clip_mode_names[] = {"none", "after_allreduce", "per_bucket", NULL};
const char *const et_coll_algo_names[] = {"auto", "ring", "tree", "hierarchical", NULL};
const char *const et_topology_names[] = {"fat_tree", NULL};

#define BIG LLONG_MAX
#define FAIL(...) return et_error_set(r->err, r->source, 0, 0, __VA_ARGS__)

/* Resolves `name` relative to the scenario directory (absolute names are kept). */
static void resolve(char *out, size_t size, const char *dir, const char *name)
{
    int n = (name[0] == '/' || dir[0] == 0) ? snprintf(out, size, "%s", name)
                                            : snprintf(out, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size) out[size - 1] = 0; /* over-long names fail later as missing files */
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
                                       NULL};
    json_t *o;
    if (et_json_get_object(r, root, "$", "model", true, keys, &o)) return -1;
    const char *preset;
    if (et_json_get_string(r, o, "$.model", "preset", false, NULL, &preset)) return -1;
    memset(m, 0, sizeof *m);
    bool have_preset = preset != NULL;
    if (preset && et_model_preset(preset, m)) {
        char list[256] = "";
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
        if (et_json_get_int(r, o, "$.model", dims[i].key, required, *dims[i].field, dims[i].min, INT_MAX / 8,
                            &v))
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
    return et_model_config_check(m, r->source, "$.model", r->err);
}

static int read_sampling(const et_json_reader *r, json_t *data, et_scenario *s);

static int read_data(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"seq_len", "lengths", "unpadded", "sampling", NULL};
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
    if (read_sampling(r, o, s)) return -1;
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
        resolve(path, sizeof path, s->dir, file);
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
    int strat = c->scheme == ET_SAMPLING_STRATIFIED;
    if (et_json_get_array(r, o, "$.data.sampling", "bins", strat, &bins)) return -1;
    if (et_json_get_array(r, o, "$.data.sampling", "counts", strat, &counts)) return -1;
    if (!strat && (bins || counts))
        FAIL("$.data.sampling", "\"bins\" and \"counts\" apply only to scheme \"stratified\"");
    if (!strat) return 0;
    size_t n = json_array_size(bins);
    if (n == 0 || n > ET_MAX_BINS)
        FAIL("$.data.sampling.bins", "expected 1 to %d bin upper bounds", ET_MAX_BINS);
    if (json_array_size(counts) != n)
        FAIL("$.data.sampling.counts", "expected %zu counts, one per bin, got %zu", n,
             json_array_size(counts));
    c->n_bins = (int)n;
    for (size_t i = 0; i < n; i++) {
        double x;
        if (et_json_array_number(r, bins, "$.data.sampling.bins", i, 1, s->data.seq_len, &x)) return -1;
        c->bin_upper[i] = (int)x;
        if (et_json_array_number(r, counts, "$.data.sampling.counts", i, 0, 1 << 20, &x)) return -1;
        c->bin_count[i] = (int)x;
        if (x != (int)x || c->bin_upper[i] != json_number_value(json_array_get(bins, i)))
            FAIL("$.data.sampling", "bins and counts must be whole numbers%s", "");
    }
    return 0;
}

static int read_optimizer(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"name", "clip", "max_grad_norm", NULL};
    json_t *o;
    int e;
    if (et_json_get_object(r, root, "$", "optimizer", true, keys, &o)) return -1;
    if (et_json_get_enum(r, o, "$.optimizer", "name", true, et_optimizer_names, 0, &e)) return -1;
    s->optimizer.name = (et_optimizer)e;
    if (et_json_get_enum(r, o, "$.optimizer", "clip", false, et_clip_mode_names, ET_CLIP_NONE, &e)) return -1;
    s->optimizer.clip = (et_clip_mode)e;
    return et_json_get_positive(r, o, "$.optimizer", "max_grad_norm", false, 1.0,
                                &s->optimizer.max_grad_norm);
}

static int read_device(const et_json_reader *r, const char *name, et_scenario *s)
{
    char path[1100];
    size_t n = strlen(name);
    if (strchr(name, '/') || (n > 5 && strcmp(name + n - 5, ".json") == 0)) {
        resolve(path, sizeof path, s->dir, name);
    } else {
        const char *dir = getenv("ET_PROFILE_DIR");
        snprintf(path, sizeof path, "%s/%s.json", dir && *dir ? dir : ET_DEFAULT_PROFILE_DIR, name);
        FILE *f = fopen(path, "r");
        if (!f) FAIL("$.cluster.device", "no device profile named \"%s\" (looked for %s)", name, path);
        fclose(f);
    }
    return et_device_profile_load(path, &s->cluster.device, r->err);
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
                                       NULL};
    static const char *const fabric_keys[] = {"topology", "oversubscription", "nodes_per_leaf",
                                              "switch_latency_us", NULL};
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
    if (et_json_get_int(r, o, "$.cluster", "gpus_per_node", true, 0, 1, 64, &v)) return -1;
    c->gpus_per_node = (int)v;
    if (et_json_get_positive(r, o, "$.cluster", "nvlink_GBps", false, 600, &x)) return -1;
    c->intra_node_bandwidth = x * 1e9 / 2; /* marketed bidirectional figure -> per direction */
    if (et_json_get_number(r, o, "$.cluster", "nvlink_latency_us", false, 0.7, 0, 1e6, &x)) return -1;
    c->intra_node_latency = x * 1e-6;
    if (et_json_get_int(r, o, "$.cluster", "nics_per_node", c->nodes > 1, 1, 1, 64, &v)) return -1;
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
    if (et_json_get_number(r, o, "$.cluster", "latency_factor", false, 1.0, 0, 1000, &c->latency_factor))
        return -1;
    if (et_json_get_string(r, o, "$.cluster", "platform_file", false, NULL, &platform)) return -1;
    if (platform) resolve(c->platform_file, sizeof c->platform_file, s->dir, platform);
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
    if (!fabric) json_decref(f);
    if (rc) return -1;
    return read_device(r, device, s);
}

static int read_parallelism(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"tensor",     "pipeline",  "zero_stage", "recompute",
                                       "bucket_MiB", "allreduce", "overlap",    NULL};
    json_t *o;
    long long v;
    double x;
    int e;
    if (et_json_get_object(r, root, "$", "parallelism", false, keys, &o)) return -1;
    json_t *p = o ? o : json_object();
    int rc = -1;
    if (et_json_get_int(r, p, "$.parallelism", "tensor", false, 1, 1, 4096, &v)) goto done;
    s->parallel.tensor = (int)v;
    if (et_json_get_int(r, p, "$.parallelism", "pipeline", false, 1, 1, 4096, &v)) goto done;
    s->parallel.pipeline = (int)v;
    if (et_json_get_int(r, p, "$.parallelism", "zero_stage", false, 0, 0, 3, &v)) goto done;
    s->parallel.zero_stage = (int)v;
    if (et_json_get_bool(r, p, "$.parallelism", "recompute", false, false, &s->parallel.recompute)) goto done;
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

static int check_parallelism(const et_json_reader *r, et_scenario *s)
{
    int gpus = et_scenario_gpus(s), t = s->parallel.tensor, pp = s->parallel.pipeline;
    if (s->cluster.gpus_per_node % t != 0)
        FAIL("$.parallelism.tensor",
             "tensor-parallel degree %d must divide gpus_per_node %d (tensor parallelism "
             "stays inside a node)",
             t, s->cluster.gpus_per_node);
    if (gpus % (t * pp) != 0)
        FAIL("$.parallelism.pipeline", "tensor x pipeline = %d must divide the %d GPUs", t * pp, gpus);
    if (s->model.heads % t != 0)
        FAIL("$.parallelism.tensor", "tensor-parallel degree %d must divide the %d attention heads", t,
             s->model.heads);
    if (s->model.ffn % t != 0)
        FAIL("$.parallelism.tensor", "tensor-parallel degree %d must divide ffn %d", t, s->model.ffn);
    if (s->model.layers % pp != 0)
        FAIL("$.parallelism.pipeline", "pipeline degree %d must divide the %d layers", pp, s->model.layers);
    s->parallel.data = gpus / (t * pp);
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
    long long dp = s->parallel.data, local, global, accum;
    if (et_json_get_int(r, o, "$.batch", "local", true, 0, 1, 1 << 24, &local)) return -1;
    if (et_json_get_int(r, o, "$.batch", "grad_accum", false, 0, 1, 1 << 20, &accum)) return -1;
    if (et_json_get_int(r, o, "$.batch", "global", false, 0, 1, 1LL << 40, &global)) return -1;
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
    et_sampler sampler;
    if (et_sampler_init(&sampler, &s->data.lengths, &s->data.sampling, (int)s->batch.local, s->parallel.data,
                        0, r->source, "$.data.sampling", r->err))
        return -1;
    et_sampler_free(&sampler);
    return 0;
}

static int read_target(const et_json_reader *r, json_t *root, et_scenario *s)
{
    static const char *const keys[] = {"samples", "steps", "eval_interval_samples", "eval_samples", NULL};
    json_t *o;
    if (et_json_get_object(r, root, "$", "target", true, keys, &o)) return -1;
    int has_samples = json_object_get(o, "samples") != NULL, has_steps = json_object_get(o, "steps") != NULL;
    if (has_samples == has_steps) FAIL("$.target", "give exactly one of \"samples\" or \"steps\"");
    if (et_json_get_positive(r, o, "$.target", "samples", false, 0, &s->target.samples)) return -1;
    if (et_json_get_int(r, o, "$.target", "steps", false, 0, 1, BIG, &s->target.steps)) return -1;
    if (has_samples)
        s->target.steps = (long long)ceil(s->target.samples / (double)s->batch.global);
    else
        s->target.samples = (double)s->target.steps * (double)s->batch.global;
    if (et_json_get_number(r, o, "$.target", "eval_interval_samples", false, 0, 0, INFINITY,
                           &s->target.eval_interval_samples))
        return -1;
    if (et_json_get_number(r, o, "$.target", "eval_samples", false, 0, 0, INFINITY, &s->target.eval_samples))
        return -1;
    if (s->target.eval_samples > 0 && s->target.eval_interval_samples <= 0)
        FAIL("$.target.eval_interval_samples", "eval_samples needs a positive eval_interval_samples");
    return 0;
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

int et_scenario_gpus(const et_scenario *s)
{
    return s->cluster.nodes * s->cluster.gpus_per_node;
}

int et_scenario_load(const char *path, et_scenario *out, et_error *err)
{
    static const char *const keys[] = {"name",    "description", "model",      "data",
                                       "batch",   "optimizer",   "precision",  "parallelism",
                                       "cluster", "target",      "simulation", NULL};
    memset(out, 0, sizeof *out);
    snprintf(out->source, sizeof out->source, "%s", path);
    snprintf(out->dir, sizeof out->dir, "%s", path);
    char *slash = strrchr(out->dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(out->dir, sizeof out->dir, ".");
    json_t *root;
    if (et_json_load_file(path, &root, err)) return -1;
    et_json_reader rd = {path, err}, *r = &rd;
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
    if (read_optimizer(r, root, out)) goto done;
    if (read_cluster(r, root, out)) goto done;
    if (read_parallelism(r, root, out)) goto done;
    /* Profile and histogram errors carry their own file; everything after is the scenario's again. */
    if (check_parallelism(r, out)) goto done;
    if (read_batch(r, root, out)) goto done;
    if (check_sampling(r, out)) goto done;
    if (read_target(r, root, out)) goto done;
    if (read_simulation(r, root, out)) goto done;
    rc = 0;
done:
    json_decref(root);
    if (rc) et_scenario_free(out);
    return rc;
}

void et_scenario_free(et_scenario *s)
{
    et_length_dist_free(&s->data.lengths);
}

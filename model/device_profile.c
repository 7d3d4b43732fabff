#include "device_profile.h"

#include <math.h>
#include <string.h>

#include "json_reader.h"

const char *const et_precision_names[] = {"fp32", "tf32", "fp16", "bf16", "fp8", "fp4", NULL};
const char *const et_device_kind_names[] = {"gpu", "cpu", "dataflow", NULL};

double et_precision_bytes(et_precision p)
{
    /* fp8 and fp4 store bf16; their quantized copies are transient */
    return (p == ET_FP16 || p == ET_BF16 || p == ET_FP8 || p == ET_FP4) ? 2.0 : 4.0;
}

/* "cache": one level ({"MiB", "bandwidth_GBps"}) or an array of up to ET_CACHE_LEVELS, smallest first */
static int read_cache_levels(const et_json_reader *r, json_t *root, et_device_profile *out)
{
    static const char *const cache_keys[] = {"MiB", "bandwidth_GBps", NULL};
    json_t *cache = json_object_get(root, "cache");
    if (!cache) return 0;
    const bool many = json_is_array(cache);
    const size_t n = many ? json_array_size(cache) : 1;
    if (!many && !json_is_object(cache))
        return et_error_set(r->err, r->source, 0, 0, "$.cache",
                            "expected an object (one cache level) or an array of them");
    if (many && (n < 1 || n > ET_CACHE_LEVELS))
        return et_error_set(r->err, r->source, 0, 0, "$.cache", "expected 1 to %d cache levels, got %zu",
                            ET_CACHE_LEVELS, n);
    for (size_t l = 0; l < n; l++) {
        char p[ET_JSON_PATH_MAX], pm[ET_JSON_PATH_MAX + 8];
        json_t *level = many ? json_array_get(cache, l) : cache;
        if (many)
            et_json_path_index(p, "$.cache", l);
        else
            snprintf(p, sizeof p, "$.cache");
        double mib, gbps;
        if (et_json_expect_object(r, level, p, cache_keys) ||
            et_json_get_positive(r, level, p, "MiB", true, 0, &mib) ||
            et_json_get_positive(r, level, p, "bandwidth_GBps", true, 0, &gbps))
            return -1;
        if (l > 0 && mib * 1048576.0 <= out->cache_bytes[l - 1]) {
            snprintf(pm, sizeof pm, "%s.MiB", p);
            return et_error_set(r->err, r->source, 0, 0, pm,
                                "expected more than the level before's %g MiB (levels go smallest first)",
                                out->cache_bytes[l - 1] / 1048576.0);
        }
        out->cache_bytes[l] = mib * 1048576.0;
        out->cache_bandwidth[l] = gbps * 1e9;
        out->cache_levels = (int)l + 1;
    }
    return 0;
}

static const char *const power_keys[] = {"busy", "idle", NULL};
static const char *const sparse_keys[] = {"unstructured_efficiency", "block_half",
                                          "semi_structured_2_4_speedup", "masked_dense", NULL};
static const char *const peak_keys[] = {"fp32", "tf32", "fp16", "bf16", "fp8", "fp4", NULL};
static const char *const tt_keys[] = {"layout_copies", NULL};
static const char *const eff_keys[] = {"gemm_max",
                                       "gemm_half_dim",
                                       "gemm_tile",
                                       "memory",
                                       "kernel_overhead_us",
                                       "gemm_max_by_precision",
                                       "flash_attention",
                                       "flash_half_len",
                                       "attention_products",
                                       "cudnn_attention",
                                       NULL};

/* The efficiency section, with the multiprocessors and the GEMM tile the wave quantization needs (both). */
static int read_efficiency(const et_json_reader *r, json_t *root, et_device_profile *out)
{
    json_t *eff;
    double v;
    if (et_json_get_object(r, root, "$", "efficiency", true, eff_keys, &eff)) return -1;
    if (et_json_get_number(r, eff, "$.efficiency", "gemm_max", true, 0, 0.01, 1, &out->gemm_max_efficiency))
        return -1;
    if (et_json_get_number(r, eff, "$.efficiency", "gemm_half_dim", true, 0, 0, 1e6, &out->gemm_half_dim))
        return -1;
    json_t *by;
    if (et_json_get_object(r, eff, "$.efficiency", "gemm_max_by_precision", false, peak_keys, &by)) return -1;
    for (int p = 0; by && p < ET_PRECISION_COUNT; p++)
        if (et_json_get_number(r, by, "$.efficiency.gemm_max_by_precision", peak_keys[p], false, 0, 0.01, 1,
                               &out->gemm_max_by_precision[p]))
            return -1;
    long long sms;
    if (et_json_get_int(r, root, "$", "multiprocessors", false, 0, 0, 1 << 20, &sms)) return -1;
    out->multiprocessors = (int)sms;
    if (et_json_get_number(r, root, "$", "compute_capability", false, 0, 1, 100, &out->compute_capability))
        return -1;
    json_t *tile;
    if (et_json_get_array(r, eff, "$.efficiency", "gemm_tile", false, &tile)) return -1;
    if (tile) {
        if (json_array_size(tile) != 2) {
            return et_error_set(r->err, r->source, 0, 0, "$.efficiency.gemm_tile",
                                "expected [rows, columns], got %zu values", json_array_size(tile));
        }
        for (size_t i = 0; i < 2; i++)
            if (et_json_array_number(r, tile, "$.efficiency.gemm_tile", i, 1, 1 << 16, &out->gemm_tile[i]))
                return -1;
    }
    if (et_json_get_number(r, eff, "$.efficiency", "memory", true, 0, 0.01, 1, &out->memory_efficiency))
        return -1;
    if (et_json_get_number(r, eff, "$.efficiency", "kernel_overhead_us", true, 0, 0, 1e6, &v)) return -1;
    out->kernel_overhead_s = v * 1e-6;
    if (et_json_get_number(r, eff, "$.efficiency", "flash_attention", false, 0, 0.01, 1,
                           &out->flash_attention_efficiency))
        return -1;
    if (et_json_get_number(r, eff, "$.efficiency", "cudnn_attention", false, 0, 0.01, 1,
                           &out->cudnn_attention_efficiency))
        return -1;
    /* the fused attention's own sequence term; a profile without it takes the products' half dimension */
    if (et_json_get_number(r, eff, "$.efficiency", "flash_half_len", false, out->gemm_half_dim, 0, 1e6,
                           &out->flash_half_len))
        return -1;
    if (et_json_get_number(r, eff, "$.efficiency", "attention_products", false, 1, 0.01, 1,
                           &out->attention_products_efficiency))
        return -1;
    return 0;
}

/* NVLink, power and the sparse kernels' figures (all optional). */
static int read_links_power_sparse(const et_json_reader *r, json_t *root, et_device_profile *out)
{
    double v;
    if (et_json_get_number(r, root, "$", "nvlink_GBps", false, 0, 0, 1e6, &v)) return -1;
    out->nvlink_bandwidth = v * 1e9;
    json_t *power;
    if (et_json_get_object(r, root, "$", "power_W", false, power_keys, &power)) return -1;
    if (power && (et_json_get_number(r, power, "$.power_W", "busy", true, 0, 1, 1e5, &out->power_busy_w) ||
                  et_json_get_number(r, power, "$.power_W", "idle", true, 0, 0, out->power_busy_w,
                                     &out->power_idle_w)))
        return -1;
    json_t *sparse;
    if (et_json_get_object(r, root, "$", "sparse", false, sparse_keys, &sparse)) return -1;
    json_t *sp = sparse ? sparse : json_object();
    int bad =
        et_json_get_number(r, sp, "$.sparse", "unstructured_efficiency", false, 0.05, 0.001, 1,
                           &out->sparse_unstructured_efficiency) ||
        et_json_get_number(r, sp, "$.sparse", "block_half", false, 96, 0, 1e6, &out->sparse_block_half) ||
        et_json_get_number(r, sp, "$.sparse", "semi_structured_2_4_speedup", false, 0, 0, 2,
                           &out->sparse_2_4_speedup) ||
        et_json_get_bool(r, sp, "$.sparse", "masked_dense", false, false, &out->sparse_masked_dense);
    if (!sparse) json_decref(sp);
    if (bad) return -1;
    return 0;
}

int et_device_profile_load(const char *path, et_device_profile *out, et_error *err)
{
    static const char *const top_keys[] = {"name",
                                           "kind",
                                           "source",
                                           "peak_tflops",
                                           "vector_tflops",
                                           "optimizer_tflops",
                                           "memory_GiB",
                                           "memory_bandwidth_GBps",
                                           "reserved_GiB",
                                           "efficiency",
                                           "on_chip_MiB",
                                           "sparse",
                                           "multiprocessors",
                                           "compute_capability",
                                           "special_tops",
                                           "cache",
                                           "tensor_train",
                                           "power_W",
                                           "nvlink_GBps",
                                           "caveat",
                                           NULL};
    json_t *root;
    if (et_json_load_file(path, &root, err)) return -1;
    et_json_reader r = {path, err};
    memset(out, 0, sizeof *out);
    snprintf(out->file, sizeof out->file, "%s", path);
    int rc = -1;
    const char *name, *source;
    int kind;
    json_t *peak;
    double v, gib, bw, reserved, vec, on_chip;
    if (et_json_expect_object(&r, root, "$", top_keys)) goto done;
    if (et_json_get_string(&r, root, "$", "name", true, NULL, &name)) goto done;
    snprintf(out->name, sizeof out->name, "%s", name);
    if (et_json_get_string(&r, root, "$", "source", true, NULL, &source)) goto done;
    const char *caveat;
    if (et_json_get_string(&r, root, "$", "caveat", false, "", &caveat)) goto done;
    if (strlen(caveat) >= sizeof out->caveat) {
        et_error_set(err, path, 0, 0, "$.caveat", "a caveat of %zu characters: at most %zu", strlen(caveat),
                     sizeof out->caveat - 1);
        goto done;
    }
    snprintf(out->caveat, sizeof out->caveat, "%s", caveat);
    if (et_json_get_enum(&r, root, "$", "kind", false, et_device_kind_names, ET_DEVICE_GPU, &kind)) goto done;
    out->kind = (et_device_kind)kind;
    if (et_json_get_object(&r, root, "$", "peak_tflops", true, peak_keys, &peak)) goto done;
    for (int p = 0; p < ET_PRECISION_COUNT; p++) {
        /* fp8 and fp4 are optional: a profile without them has no such units */
        if (et_json_get_number(&r, peak, "$.peak_tflops", peak_keys[p], p != ET_FP8 && p != ET_FP4, 0, 0, 1e6,
                               &v))
            goto done;
        out->peak_flops[p] = v * 1e12;
    }
    if (out->peak_flops[ET_FP32] <= 0) {
        et_error_set(err, path, 0, 0, "$.peak_tflops.fp32", "every device needs a positive fp32 peak");
        goto done;
    }
    if (et_json_get_positive(&r, root, "$", "vector_tflops", false, out->peak_flops[ET_FP32] / 1e12, &vec))
        goto done;
    out->vector_flops = vec * 1e12;
    if (et_json_get_positive(&r, root, "$", "optimizer_tflops", false, vec, &vec)) goto done;
    out->optimizer_flops = vec * 1e12;
    double special;
    if (et_json_get_number(&r, root, "$", "special_tops", false, 0, 0, 1e6, &special)) goto done;
    out->special_rate = special * 1e12;
    if (read_cache_levels(&r, root, out)) goto done;
    json_t *tt;
    if (et_json_get_object(&r, root, "$", "tensor_train", false, tt_keys, &tt)) goto done;
    if (tt && et_json_get_bool(&r, tt, "$.tensor_train", "layout_copies", true, false,
                               &out->tensor_train_layout_copies))
        goto done;
    if (et_json_get_positive(&r, root, "$", "memory_GiB", true, 0, &gib)) goto done;
    out->memory_bytes = gib * 1073741824.0;
    if (et_json_get_positive(&r, root, "$", "memory_bandwidth_GBps", true, 0, &bw)) goto done;
    out->memory_bandwidth = bw * 1e9;
    if (et_json_get_number(&r, root, "$", "reserved_GiB", false, 0, 0, gib, &reserved)) goto done;
    out->reserved_bytes = reserved * 1073741824.0;
    if (et_json_get_number(&r, root, "$", "on_chip_MiB", false, 0, 0, 1e9, &on_chip)) goto done;
    out->on_chip_bytes = on_chip * 1048576.0;
    if (read_efficiency(&r, root, out) || read_links_power_sparse(&r, root, out)) goto done;
    rc = 0;
done:
    json_decref(root);
    return rc;
}

/* Useful fraction of the work when an m x n output is cut into tm x tn tiles run in waves of `sms` tiles:
 * tile quantization (partial edge tiles) times wave quantization (a partial last wave). */
static double narrow_side(double side, double dim)
{
    /* a dimension shorter than the tile runs on a narrower tile (power of two, 16 or more), as the
     * libraries' kernels for skinny products do */
    if (dim >= side) return side;
    double s = 16;
    while (s < dim)
        s *= 2;
    return s < side ? s : side;
}

static double tile_wave_fraction(double m, double n, double tm, double tn, double sms)
{
    tm = narrow_side(tm, m);
    tn = narrow_side(tn, n);
    double tiles_m = ceil(m / tm), tiles_n = ceil(n / tn), tiles = tiles_m * tiles_n;
    double waves = ceil(tiles / sms);
    return (m * n) / (tiles_m * tm * tiles_n * tn) * tiles / (waves * sms);
}

/* The same over `slots` = multiprocessors / split: with split-K, each tile's K is cut into `split` slices run
 * as separate blocks, so tiles x split blocks fill the waves. */
static double wave_efficiency_split(const et_device_profile *d, double m, double n, double split)
{
    const double a = d->gemm_tile[0], b = d->gemm_tile[1], c = fmin(a, b), slots = d->multiprocessors / split;
    /* the library picks the best of its tile, the tile transposed and the square of the shorter side */
    double best = tile_wave_fraction(m, n, a, b, slots);
    best = fmax(best, tile_wave_fraction(m, n, b, a, slots));
    return fmax(best, tile_wave_fraction(m, n, c, c, slots));
}

/* The wave model needs both the multiprocessors and the GEMM tile: a profile with the multiprocessors alone
 * (what overlapped communication takes a share of) keeps GEMMs at their dimension terms. */
static int wave_model(const et_device_profile *d)
{
    return d->multiprocessors > 0 && d->gemm_tile[0] > 0 && d->gemm_tile[1] > 0;
}

double et_gemm_wave_efficiency(const et_device_profile *d, double m, double n)
{
    if (!wave_model(d) || m <= 0 || n <= 0) return 1;
    return wave_efficiency_split(d, m, n, 1);
}

double et_gemm_dimension_efficiency(const et_device_profile *d, double m, double n, double k)
{
    double h = d->gemm_half_dim;
    double e = d->gemm_max_efficiency;
    if (h > 0) e *= (m / (m + h)) * (n / (n + h)) * (k / (k + h));
    return e;
}

/* Split-K slices are at least this deep (a tile's main loop needs several K steps to pipeline). */
#define SPLIT_K_MIN_DEPTH 128

double et_gemm_batched_efficiency(const et_device_profile *d, double batch, double m, double n, double k)
{
    /* a batch of equal products is one grid of batch x tiles: stacked rows quantize the same way */
    const double rows = m * (batch > 1 ? batch : 1);
    double best = et_gemm_dimension_efficiency(d, m, n, k) * et_gemm_wave_efficiency(d, rows, n);
    /* an output smaller than one wave of tiles is split along K (cuBLAS's split-K kernels): each slice a
     * block, at the efficiency of its shallower K; the partial sums' reduction is not costed. Larger outputs
     * keep their tiles (their last wave's quantization stays) */
    const int small = wave_model(d) && rows * n < d->multiprocessors * d->gemm_tile[0] * d->gemm_tile[1];
    for (double split = 2; small && split <= d->multiprocessors && k / split >= SPLIT_K_MIN_DEPTH; split *= 2)
        best = fmax(best, et_gemm_dimension_efficiency(d, m, n, k / split) *
                              wave_efficiency_split(d, rows, n, split));
    return best;
}

double et_gemm_efficiency(const et_device_profile *d, double m, double n, double k)
{
    return et_gemm_batched_efficiency(d, 1, m, n, k);
}

double et_stream_bandwidth(const et_device_profile *d, double bytes)
{
    for (int l = 0; l < d->cache_levels; l++)
        if (bytes <= d->cache_bytes[l]) return d->cache_bandwidth[l];
    return d->memory_bandwidth * d->memory_efficiency;
}

double et_stream_time(const et_device_profile *d, double bytes)
{
    return bytes > 0 ? bytes / et_stream_bandwidth(d, bytes) : 0;
}

double et_roofline_time(const et_device_profile *d, double rate, double flops, double special, double bytes,
                        double cold_bytes, double footprint, double kernels)
{
    if (flops <= 0 && bytes <= 0) return 0;
    cold_bytes = fmin(fmax(cold_bytes, 0), bytes);
    double t_compute = flops > 0 ? flops / rate : 0;
    if (special > 0 && d->special_rate > 0) {
        const double t_special = special / d->special_rate;
        t_compute = d->kind == ET_DEVICE_CPU ? t_compute + t_special : fmax(t_compute, t_special);
    }
    const double cold_bandwidth =
        footprint > 0 ? et_stream_bandwidth(d, footprint) : d->memory_bandwidth * d->memory_efficiency;
    const double t_memory = et_stream_time(d, bytes - cold_bytes) + cold_bytes / cold_bandwidth;
    return fmax(t_compute, t_memory) + d->kernel_overhead_s * kernels;
}

double et_gemm_peak(const et_device_profile *d, et_precision p)
{
    const double by = d->gemm_max_by_precision[p];
    return by > 0 && d->gemm_max_efficiency > 0 ? d->peak_flops[p] * by / d->gemm_max_efficiency
                                                : d->peak_flops[p];
}

double et_kernel_time(const et_device_profile *d, et_precision prec, int matrix, double flops, double bytes,
                      double gemm_m, double gemm_n, double gemm_k)
{
    double rate = matrix ? et_gemm_peak(d, prec) * et_gemm_efficiency(d, gemm_m, gemm_n, gemm_k)
                         : d->vector_flops * d->memory_efficiency;
    return et_roofline_time(d, rate, flops, 0, bytes, 0, 0, 1);
}

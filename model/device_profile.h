/* device_profile: what one accelerator (or the host CPU) can do, and how close kernels get to it.
 *
 * Contract: profiles are JSON files (scenarios/profiles/NAME.json, format in docs/scenario.md). Rates are
 * stored in SI base units: FLOP/s, bytes, bytes/s, seconds. A peak of 0 means the precision is not
 * supported. Time of one kernel is a roofline:
 *     t = max(flops / (peak * eff_compute), bytes / (bandwidth * eff_memory)) + kernel_overhead
 * with eff_compute for matrix products = gemm_max * prod_d d / (d + gemm_half_dim) over d in {M, N, K},
 * times the tile and wave quantization of the M x N output over the device's multiprocessors when the
 * profile gives them (docs/cost-model.md gives the formula and sources). Loading fills *err with file and
 * JSON path on bad input. */
#ifndef ET_DEVICE_PROFILE_H
#define ET_DEVICE_PROFILE_H

#include <stdbool.h>

#include "et_error.h"

/* fp8: matrix products on FP8 units with per-product input casts (Transformer Engine style), everything
 * else in bf16 (docs/cost-model.md, "FP8"). */
/* The products' units: fp8 and fp4 train with 16-bit activations and quantize each product's operands
 * (model/quantization.h says how). */
typedef enum { ET_FP32, ET_TF32, ET_FP16, ET_BF16, ET_FP8, ET_FP4, ET_PRECISION_COUNT } et_precision;
extern const char *const et_precision_names[]; /* "fp32", "tf32", "fp16", "bf16", "fp8", "fp4", NULL */

typedef enum { ET_DEVICE_GPU, ET_DEVICE_CPU, ET_DEVICE_DATAFLOW } et_device_kind;
extern const char *const et_device_kind_names[]; /* "gpu", "cpu", "dataflow", NULL */

#define ET_CACHE_LEVELS 2 /* cache levels a profile can describe (a core's L2 and its share of L3) */

typedef struct et_device_profile {
    char name[64];
    char file[512];
    et_device_kind kind;
    double peak_flops[ET_PRECISION_COUNT]; /* dense matrix-unit peak, FLOP/s */
    double vector_flops;                   /* non-matrix fp32 peak (elementwise ops), FLOP/s */
    double optimizer_flops;     /* the optimizer kernels' arithmetic rate, FLOP/s (default vector_flops: one
                                   fused pass of multiply-adds, without the element-wise kernels' mix) */
    double special_rate;        /* special functions (exp, tanh, sigmoid) per second; 0: not costed */
    double memory_bytes;        /* device memory capacity, bytes */
    double memory_bandwidth;    /* bytes/s */
    double reserved_bytes;      /* context, library workspaces, fragmentation: bytes */
    double gemm_max_efficiency; /* fraction of peak a large GEMM reaches */
    double gemm_max_by_precision[ET_PRECISION_COUNT]; /* the same for one precision (0: gemm_max) */
    double gemm_half_dim; /* GEMM dimension at which efficiency halves, elements */
    int multiprocessors;  /* SMs: a GEMM's tiles are spread over them (the wave model, with gemm_tile), an
                             overlapped collective takes some (software.overlap_sms); 0: not given */
    double compute_capability; /* CUDA compute capability (8.0 A100); 0: not given (NCCL's tuning, 8.0) */
    double gemm_tile[2];       /* output tile of a large GEMM, rows x columns (elements) */
    double memory_efficiency;  /* fraction of bandwidth a streaming kernel reaches */
    /* cache levels, smallest first (profile "cache": one object or an array of up to ET_CACHE_LEVELS):
     * a kernel whose working set fits a level streams at that level's bandwidth; 0 levels: none modelled */
    int cache_levels;
    double cache_bytes[ET_CACHE_LEVELS];     /* capacity, bytes, strictly ascending */
    double cache_bandwidth[ET_CACHE_LEVELS]; /* bytes/s a streaming kernel reaches there */
    double kernel_overhead_s;                /* launch + tail per kernel, seconds */
    double on_chip_bytes; /* dataflow devices: on-chip memory holding fused intermediates */
    /* sparse kernels (profile "sparse"; calibration replaces them) */
    double sparse_unstructured_efficiency; /* fraction of the dense rate on kept FLOPs, unstructured (CSR) */
    double sparse_block_half;              /* block edge at which block-sparse runs at half the dense rate */
    double sparse_2_4_speedup;             /* 2:4 semi-structured speedup over dense; 0 = no sparse units */
    bool sparse_masked_dense; /* sparse weights run as dense products with a mask (no sparse kernels) */
    bool tensor_train_layout_copies;   /* tensor-train contractions copy their operands into matrices first */
    double flash_attention_efficiency; /* fraction of the 16-bit peak a fused attention kernel reaches (0: the
                                          GEMM model) */
    double cudnn_attention_efficiency; /* the same for cuDNN's fused attention (0: FlashAttention 2's) */
    double flash_half_len; /* sequence length at which the fused attention's rate halves, keys a row
                              (efficiency.flash_half_len; default gemm_half_dim) */
    double attention_products_efficiency; /* unfused attention's per-head products against a matrix product
                                             of the same shape (1: as fast; etcalib fit sets it) */
    double power_busy_w, power_idle_w;    /* a device's draw computing and idle, W (0: unknown, no energy) */
    double nvlink_bandwidth; /* its NVLink per GPU as marketed (both directions), bytes/s; 0: not given */
    char caveat[512]; /* what the profile cannot support (profile "caveat"), among every report's caveats;
                         empty: none */
} et_device_profile;

int et_device_profile_load(const char *path, et_device_profile *out, et_error *err);

/* The matrix peak of precision p as the GEMM model uses it: peak x gemm_max_by_precision[p] / gemm_max when
 * the profile gives that precision its own large-GEMM efficiency (so that et_gemm_efficiency's gemm_max
 * becomes the precision's), else the peak. FLOP/s. */
double et_gemm_peak(const et_device_profile *d, et_precision p);

/* Tile and wave quantization of an M x N output on this device (1 without a wave model). */
double et_gemm_wave_efficiency(const et_device_profile *d, double m, double n);

/* Efficiency of an M x N x K matrix product on this device (0..1). */
double et_gemm_efficiency(const et_device_profile *d, double m, double n, double k);

/* gemm_max times the small-dimension terms only (no tile or wave quantization): for products that are
 * sequences of differently shaped kernels, such as tensor-train contractions. */
double et_gemm_dimension_efficiency(const et_device_profile *d, double m, double n, double k);

/* Efficiency of `batch` independent M x N x K products launched as one batched kernel. */
double et_gemm_batched_efficiency(const et_device_profile *d, double batch, double m, double n, double k);

/* The one roofline of ET's costs: max(compute, memory time) plus the launch overhead of `kernels`
 * kernels (0 when nothing moves or computes), compute = flops / rate with `special` special-function
 * evaluations at special_rate: added on a CPU (its vector units evaluate the polynomials), max() on a GPU
 * or dataflow device (separate units: a GPU's SFUs); memory time = the bytes other than cold_bytes at the
 * bandwidth of the smallest cache level they fit in (else memory bandwidth x memory efficiency), plus
 * cold_bytes (data nothing else touches between two runs of the op, such as the optimizer's moments) at
 * the bandwidth of the level that holds `footprint`, the bytes the device touches between two runs of the
 * op (its step's working set: 0 when unknown, then from memory).
 * et_kernel_time and graph.h's et_op_time choose the rate and call it. */
double et_roofline_time(const et_device_profile *d, double rate, double flops, double special, double bytes,
                        double cold_bytes, double footprint, double kernels);
/* Bytes/s of streaming a working set of `bytes`: the smallest cache level that holds it, else memory
 * bandwidth x memory efficiency. */
double et_stream_bandwidth(const et_device_profile *d, double bytes);
/* Time to stream `bytes` (a copy's reads and writes) at the bandwidth of the level they fit in. */
double et_stream_time(const et_device_profile *d, double bytes);

/* Roofline time of a kernel; `matrix` selects the matrix-unit peak of `prec` (else vector_flops). */
double et_kernel_time(const et_device_profile *d, et_precision prec, int matrix, double flops, double bytes,
                      double gemm_m, double gemm_n, double gemm_k);

/* Bytes per element of activations and weights in a precision (fp32/tf32: 4, fp16/bf16: 2). */
double et_precision_bytes(et_precision p);

#endif

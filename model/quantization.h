/* quantization: how FP8 and FP4 training quantize each product's operands (Transformer Engine's recipes,
 * Megatron-core's --fp8-recipe; docs/cost-model.md, "Low-precision recipes").
 *
 *   delayed  FP8 with per-tensor scales from the amax history of earlier steps (TE DelayedScaling): one
 *            cast kernel a quantized operand, reading the 16-bit tensor and writing FP8: 3 bytes an element.
 *   current  FP8 with a per-tensor scale from the tensor itself (TE Float8CurrentScaling): an amax pass (a
 *            read) before the cast: 5 bytes an element, two kernels.
 *   mxfp8    FP8 in blocks of 32 with an E8M0 scale each (TE MXFP8BlockScaling, OCP MX v1.0): the scale runs
 *            along the reduction dimension, so the row-wise and column-wise copies are quantized apart, in
 *            one kernel: read 2, write 1 + 1 and 2/32 of scales: 4.0625 bytes an element.
 *   nvfp4    FP4 (E2M1) in blocks of 16 with an E4M3 scale each and a per-tensor fp32 scale (NVIDIA's NVFP4):
 *            an amax pass for the tensor's scale, then both copies: read 2 + 2, write 2 x (0.5 + 1/16):
 *            5.125 bytes an element, two kernels.
 * Precision fp8 takes delayed (the default), current or mxfp8; fp4 takes nvfp4. Attention's products and
 * everything outside the linear layers stay in 16 bits.
 *
 * Contract: pure functions; names for the scenario's "scaling" key. */
#ifndef ET_QUANTIZATION_H
#define ET_QUANTIZATION_H

#include <stdbool.h>

#include "device_profile.h"

typedef enum { ET_SCALING_DELAYED, ET_SCALING_CURRENT, ET_SCALING_MXFP8, ET_SCALING_NVFP4 } et_scaling;
extern const char *const et_scaling_names[]; /* "delayed", "current", "mxfp8", "nvfp4", NULL */

/* Whether a precision quantizes its products' operands (fp8, fp4). */
bool et_precision_quantized(et_precision p);

/* Whether `scaling` is one `p` can train with; the default scaling of p. */
bool et_scaling_allowed(et_precision p, et_scaling scaling);
et_scaling et_scaling_default(et_precision p);

/* Bytes a quantized element keeps, scales included: what a product's input saved for its weight gradient
 * costs in memory (Transformer Engine's Linear and LayerNormLinear save the quantized copy, not the 16-bit
 * input): 1 (delayed, current), 1 + 1/32 (mxfp8), 0.5 + 1/16 (nvfp4). */
double et_quantized_saved_bytes(et_scaling scaling);

/* Bytes moved and kernels launched to quantize one element of a product's operand. */
double et_quantize_bytes(et_scaling scaling);
int et_quantize_kernels(et_scaling scaling);

#endif

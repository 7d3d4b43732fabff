#include "quantization.h"

const char *const et_scaling_names[] = {"delayed", "current", "mxfp8", "nvfp4", NULL};

bool et_precision_quantized(et_precision p)
{
    return p == ET_FP8 || p == ET_FP4;
}

bool et_scaling_allowed(et_precision p, et_scaling scaling)
{
    if (p == ET_FP8)
        return scaling == ET_SCALING_DELAYED || scaling == ET_SCALING_CURRENT || scaling == ET_SCALING_MXFP8;
    if (p == ET_FP4) return scaling == ET_SCALING_NVFP4;
    return false;
}

et_scaling et_scaling_default(et_precision p)
{
    return p == ET_FP4 ? ET_SCALING_NVFP4 : ET_SCALING_DELAYED;
}

double et_quantize_bytes(et_scaling scaling)
{
    switch (scaling) {
    case ET_SCALING_CURRENT:
        return 2 + 2 + 1; /* amax read, then read and write FP8 */
    case ET_SCALING_MXFP8:
        return 2 + 1 + 1 + 2.0 / 32; /* both copies and their E8M0 scales, one read */
    case ET_SCALING_NVFP4:
        return 2 + 2 + 2 * (0.5 + 1.0 / 16); /* amax read, then both FP4 copies and their E4M3 scales */
    case ET_SCALING_DELAYED:
    default:
        return 2 + 1;
    }
}

int et_quantize_kernels(et_scaling scaling)
{
    return scaling == ET_SCALING_CURRENT || scaling == ET_SCALING_NVFP4 ? 2 : 1;
}

double et_quantized_saved_bytes(et_scaling scaling)
{
    switch (scaling) {
    case ET_SCALING_MXFP8:
        return 1 + 1.0 / 32;
    case ET_SCALING_NVFP4:
        return 0.5 + 1.0 / 16;
    case ET_SCALING_CURRENT:
    case ET_SCALING_DELAYED:
    default:
        return 1;
    }
}

#include "error_band.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "input_files.h"
#include "quantile.h"

#ifndef ET_DEFAULT_DATA_DIR
#define ET_DEFAULT_DATA_DIR "scenarios"
#endif

#define MAX_ROWS 512

int et_error_band_shape(const et_scenario *s)
{
    /* parameters or gradients sharded over the data ranks (ZeRO 2 and 3, FSDP) gather and scatter them
     * every step: another communication pattern, and in the published runs another stack */
    return (s->parallel.pipeline > 1 ? 2
            : s->parallel.tensor > 1 ? 1
                                     : 0) +
           3 * (s->parallel.zero_stage >= 2);
}

static const char *const shapes[ET_BAND_SHAPES] = {"data",         "tensor",         "pipeline",
                                                   "data sharded", "tensor sharded", "pipeline sharded"};

/* The device generation: A100-SXM4-80GB is an A100. */
static void generation_of(const et_scenario *s, char *out, size_t size)
{
    snprintf(out, size, "%.40s", s->cluster.device.name);
    out[strcspn(out, "- ")] = 0;
}

/* The shape's name, "experts" after it for a mixture of experts (its routing and all-to-alls are another
 * step: the published MoE runs are a family of their own). */
static void shape_of(const et_scenario *s, char *out, size_t size)
{
    snprintf(out, size, "%s%s", shapes[et_error_band_shape(s)], s->model.moe.experts > 0 ? " experts" : "");
}

/* "A100 megatron-lm-2022 pipeline": the generation, the stack, the shape; a scenario that names no stack
 * (the preset "fused"), or with `any_stack`, is of "A100 pipeline, any stack". */
static void family_of(const et_scenario *s, int any_stack, char *out, size_t size)
{
    char device[48], shape[48];
    generation_of(s, device, sizeof device);
    shape_of(s, shape, sizeof shape);
    if (any_stack || s->software.stack == ET_STACK_FUSED)
        snprintf(out, size, "%.15s %.24s, any stack", device, shape);
    else
        snprintf(out, size, "%.15s %.20s %.24s", device, et_stack_names[s->software.stack], shape);
}

/* Whether a row of errors.csv is of the scenario's family: the same family, or with `any_stack` (a scenario
 * that names no stack, or one whose stack has too few rows of its own), the same generation and shape under
 * any stack. */
static int same_family(const et_scenario *s, const char *family, const char *row, int any_stack)
{
    if (!strcmp(family, row)) return 1;
    if (!any_stack) return 0;
    char device[48], row_device[48], row_shape[48], shape[48];
    generation_of(s, device, sizeof device);
    shape_of(s, shape, sizeof shape);
    return sscanf(row, "%47s %*s %47[^\n]", row_device, row_shape) == 2 && !strcmp(row_device, device) &&
           !strcmp(row_shape, shape);
}

void et_error_band_edges(const et_scenario *s, double edge[ET_BAND_SHAPES])
{
    for (int k = 0; k < ET_BAND_SHAPES; k++) { /* a scenario of each shape: et_error_band_shape's inverse */
        et_scenario shape = *s;
        shape.parallel.tensor = k % 3 == 1 ? 2 : 1, shape.parallel.pipeline = k % 3 == 2 ? 2 : 1;
        shape.parallel.zero_stage = k >= 3 ? 3 : 0; /* the stack is s's */
        et_error_band b;
        et_error_band_of(&shape, &b);
        edge[k] = b.rows >= 3 ? b.high : 1;
    }
}

/* The band over the rows of out->family (with any_stack, of the generation and shape under every stack). */
static void band_of(const et_scenario *s, int any_stack, et_error_band *out)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/data/validation/errors.csv", ET_DEFAULT_DATA_DIR);
    FILE *f = fopen(path, "r");
    if (!f) return;
    et_input_note(path);
    char names[MAX_ROWS][96];
    double ratio[MAX_ROWS], distance[MAX_ROWS], sum = 0;
    char line[512];
    int n = 0;
    const double gpus = et_scenario_gpus(s);
    while (fgets(line, sizeof line, f) && n < MAX_ROWS) {
        char name[96], family[64];
        double row_gpus, error;
        /* scenario,family,gpus,error (the header and anything else that does not parse is skipped) */
        if (sscanf(line, "%95[^,],%63[^,],%lf,%lf", name, family, &row_gpus, &error) != 4) continue;
        if (!same_family(s, out->family, family, any_stack) || !(error > -1) || !(row_gpus > 0)) continue;
        snprintf(names[n], sizeof names[n], "%s", name);
        ratio[n] = 1 / (1 + error);
        distance[n] = fabs(log(row_gpus / gpus));
        sum += error;
        n++;
    }
    fclose(f);
    out->rows = n;
    if (n == 0) return;
    out->mean_error = sum / n;
    for (int k = 0; k < ET_BAND_NEAREST && k < n; k++) { /* the nearest by GPU count, first listed first */
        int best = -1;
        for (int i = 0; i < n; i++)
            if (distance[i] >= 0 && (best < 0 || distance[i] < distance[best])) best = i;
        snprintf(out->nearest[out->n_nearest++], sizeof out->nearest[0], "%s", names[best]);
        distance[best] = -1;
    }
    out->low = et_quantile(ratio, n, 0.1);
    out->high = et_quantile_sorted(ratio, n, 0.9);
}

void et_error_band_of(const et_scenario *s, et_error_band *out)
{
    memset(out, 0, sizeof *out);
    family_of(s, 0, out->family, sizeof out->family);
    snprintf(out->rows_family, sizeof out->rows_family, "%s", out->family);
    const int fused = s->software.stack == ET_STACK_FUSED;
    band_of(s, fused, out);
    if (fused || out->rows >= 3) return;
    /* too few runs of its own stack for a band: its generation and shape under every stack, if they make one
     * (the family says so, and how many runs of its own stack there are) */
    et_error_band any = *out;
    any.rows = any.n_nearest = 0;
    char every[64];
    family_of(s, 1, every, sizeof every);
    snprintf(any.rows_family, sizeof any.rows_family, "%s: %d of %.20s", every, out->rows,
             et_stack_names[s->software.stack]);
    band_of(s, 1, &any);
    if (any.rows >= 3) *out = any;
}

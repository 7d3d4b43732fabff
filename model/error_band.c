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

#define MAX_ROWS 4096

static bool hold_out_model; /* et_error_band_hold_out */

void et_error_band_hold_out(bool on)
{
    hold_out_model = on;
}

void et_error_band_model(const et_scenario *s, char *out, size_t size)
{
    snprintf(out, size, "%dx%dx%dx%d", s->model.layers, s->model.hidden, s->model.ffn, s->model.moe.experts);
}

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

/* A family's parts: the generation, the stack ("" for "any stack") and the shape. */
typedef struct {
    char generation[48], stack[48], shape[48];
} family_parts;

static void parts_of(const et_scenario *s, family_parts *p)
{
    generation_of(s, p->generation, sizeof p->generation);
    snprintf(p->stack, sizeof p->stack, "%s",
             s->software.stack == ET_STACK_FUSED ? "" : et_stack_names[s->software.stack]);
    shape_of(s, p->shape, sizeof p->shape);
}

/* A row's family, "A100 megatron-lm-2022 pipeline" or "H100 pipeline, any stack", into its parts. */
static int parse_family(const char *family, family_parts *p)
{
    const char *any = ", any stack";
    const size_t n = strlen(family), k = strlen(any);
    if (n > k && !strcmp(family + n - k, any)) {
        p->stack[0] = 0;
        return sscanf(family, "%47s %47[^,]", p->generation, p->shape) == 2 ? 0 : -1;
    }
    return sscanf(family, "%47s %47s %47[^\n]", p->generation, p->stack, p->shape) == 3 ? 0 : -1;
}

/* Whether a family's shape is a mixture of experts' ("data experts"). */
static int experts(const family_parts *p)
{
    return strstr(p->shape, "experts") != NULL;
}

/* The rows a band may be drawn from, narrowest first: the family; its generation and shape under every stack;
 * its generation and stack in every shape; its generation. A band is drawn from the first whose rows come
 * from ET_BAND_MODELS models or more, or hold ET_BAND_ROWS of the scenario's own model: fewer models cannot
 * speak for one they do not include (bench/validation.sh's held-out count). No level crosses the device
 * generation, or mixes mixtures of experts with dense models. */
enum { LEVEL_FAMILY, LEVEL_GENERATION_SHAPE, LEVEL_GENERATION_STACK, LEVEL_GENERATION, LEVELS };

static int in_level(int level, const family_parts *s, const family_parts *row)
{
    if (strcmp(s->generation, row->generation) || experts(s) != experts(row)) return 0;
    switch (level) {
    case LEVEL_FAMILY: /* a scenario that names no stack: its shape's rows under every stack */
        return (!s->stack[0] || !strcmp(s->stack, row->stack)) && !strcmp(s->shape, row->shape);
    case LEVEL_GENERATION_SHAPE:
        return !strcmp(s->shape, row->shape);
    case LEVEL_GENERATION_STACK:
        return !strcmp(s->stack, row->stack);
    default:
        return 1;
    }
}

static void level_name(int level, const family_parts *p, char *out, size_t size)
{
    const char *kind = experts(p) ? "experts" : "dense";
    switch (level) {
    case LEVEL_FAMILY:
        if (p->stack[0])
            snprintf(out, size, "%.15s %.20s %.24s", p->generation, p->stack, p->shape);
        else
            snprintf(out, size, "%.15s %.24s, any stack", p->generation, p->shape);
        break;
    case LEVEL_GENERATION_SHAPE:
        snprintf(out, size, "%.15s %.24s, any stack", p->generation, p->shape);
        break;
    case LEVEL_GENERATION_STACK:
        snprintf(out, size, "%.15s %.20s %s, any shape", p->generation, p->stack, kind);
        break;
    default:
        snprintf(out, size, "%.15s %s, any stack and shape", p->generation, kind);
    }
}

/* errors.csv's rows, read once per band (once for et_error_band_edges' six), and room to sort a level's. */
typedef struct {
    int n;
    char name[MAX_ROWS][96], model[MAX_ROWS][64];
    family_parts family[MAX_ROWS];
    double gpus[MAX_ROWS], error[MAX_ROWS];
    double ratio[MAX_ROWS], distance[MAX_ROWS];
    int use[MAX_ROWS];
} error_rows;

static int read_rows(error_rows *r)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/data/validation/errors.csv", ET_DEFAULT_DATA_DIR);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    et_input_note(path);
    char line[512];
    r->n = 0;
    while (fgets(line, sizeof line, f) && r->n < MAX_ROWS) {
        char family[64];
        const int i = r->n;
        r->model[i][0] = 0;
        /* scenario,family,gpus,error,model (the header and anything else that does not parse is skipped) */
        if (sscanf(line, "%95[^,],%63[^,],%lf,%lf,%63[^,\r\n]", r->name[i], family, &r->gpus[i], &r->error[i],
                   r->model[i]) < 4)
            continue;
        if (!(r->error[i] > -1) || !(r->gpus[i] > 0) || parse_family(family, &r->family[i])) continue;
        r->n++;
    }
    fclose(f);
    return 0;
}

/* The rows of a level (the scenario's own model's left out when held out): their count, models, mean error,
 * nearest by GPU count and band. */
static void band_of(const et_scenario *s, error_rows *r, int level, const family_parts *p, et_error_band *out)
{
    double *ratio = r->ratio, *distance = r->distance, sum = 0;
    int *use = r->use, n = 0, models = 0, own = 0;
    const double gpus = et_scenario_gpus(s);
    for (int i = 0; i < r->n; i++) {
        if (!in_level(level, p, &r->family[i]) || (out->held_out && !strcmp(r->model[i], out->model)))
            continue;
        int seen = 0;
        for (int j = 0; j < n && !seen; j++)
            seen = !strcmp(r->model[use[j]], r->model[i]);
        models += !seen;
        own += !strcmp(r->model[i], out->model);
        use[n] = i;
        ratio[n] = 1 / (1 + r->error[i]);
        distance[n] = fabs(log(r->gpus[i] / gpus));
        sum += r->error[i];
        n++;
    }
    out->rows = n, out->models = models, out->n_nearest = 0, out->band = false;
    level_name(level, p, out->rows_family, sizeof out->rows_family);
    if (n == 0) return;
    out->mean_error = sum / n;
    for (int k = 0; k < ET_BAND_NEAREST && k < n; k++) { /* the nearest by GPU count, first listed first */
        int best = -1;
        for (int i = 0; i < n; i++)
            if (distance[i] >= 0 && (best < 0 || distance[i] < distance[best])) best = i;
        snprintf(out->nearest[out->n_nearest++], sizeof out->nearest[0], "%s", r->name[use[best]]);
        distance[best] = -1;
    }
    out->low = et_quantile(ratio, n, 0.1);
    out->high = et_quantile_sorted(ratio, n, 0.9);
    out->widening = 1;
    /* A model outside the rows (fewer than the three runs that would speak for it): its runs scatter about ET
     * as the rows' models do, around a centre and with a spread known from `models` of them, not from n runs.
     * A normal prediction interval for a new member of a population seen through M samples is mean +- t(M -
     * 1) s sqrt(1 + 1/M) where the population's own is mean +- z s: each edge's log distance from the rows'
     * median widens by that ratio. */
    if (own < ET_BAND_ROWS && models >= 2) {
        const double mid = et_quantile_sorted(ratio, n, 0.5), z90 = 1.2815515655446004;
        out->widening = et_student_t90(models - 1) / z90 * sqrt(1 + 1.0 / models);
        out->low = mid * pow(out->low / mid, out->widening);
        out->high = mid * pow(out->high / mid, out->widening);
    }
    /* runs of enough models, or enough of its own model's (the band then speaks for it) */
    out->band = n >= ET_BAND_ROWS && (models >= ET_BAND_MODELS || own >= ET_BAND_ROWS);
}

/* Too few runs, or runs of too few models, for a band: the next level that has them, said so. */
static void wider_band(const et_scenario *s, error_rows *rows, const family_parts *p, et_error_band *out)
{
    const et_error_band own = *out;
    for (int level = LEVEL_GENERATION_SHAPE; level < LEVELS; level++) {
        if (!p->stack[0] && level != LEVEL_GENERATION) continue; /* no stack named: the family was these */
        et_error_band wider = own;
        band_of(s, rows, level, p, &wider);
        if (!wider.band) continue;
        char name[80];
        level_name(level, p, name, sizeof name);
        snprintf(wider.rows_family, sizeof wider.rows_family, "%s (%s: %d run%s of %d model%s)", name,
                 own.family, own.rows, own.rows == 1 ? "" : "s", own.models, own.models == 1 ? "" : "s");
        *out = wider;
        return;
    }
}

/* The band of s from rows already read: its family's, or the first wider level's that has one. */
static void band_from_rows(const et_scenario *s, error_rows *rows, et_error_band *out)
{
    memset(out, 0, sizeof *out);
    family_parts p;
    parts_of(s, &p);
    level_name(LEVEL_FAMILY, &p, out->family, sizeof out->family);
    snprintf(out->rows_family, sizeof out->rows_family, "%s", out->family);
    et_error_band_model(s, out->model, sizeof out->model);
    out->held_out = hold_out_model;
    if (!rows) return;
    band_of(s, rows, LEVEL_FAMILY, &p, out);
    if (!out->band) wider_band(s, rows, &p, out);
}

/* errors.csv read into a buffer of the caller's to free; NULL when it cannot be read (or no memory). */
static error_rows *rows_read(void)
{
    error_rows *rows = malloc(sizeof *rows); /* 1.4 MiB: not on a search thread's stack */
    if (rows && read_rows(rows)) {
        free(rows);
        return NULL;
    }
    return rows;
}

void et_error_band_of(const et_scenario *s, et_error_band *out)
{
    error_rows *rows = rows_read();
    band_from_rows(s, rows, out);
    free(rows);
}

void et_error_band_edges(const et_scenario *s, double edge[ET_BAND_SHAPES])
{
    error_rows *rows = rows_read();            /* once for the six shapes */
    for (int k = 0; k < ET_BAND_SHAPES; k++) { /* a scenario of each shape: et_error_band_shape's inverse */
        et_scenario shape = *s;
        shape.parallel.tensor = k % 3 == 1 ? 2 : 1, shape.parallel.pipeline = k % 3 == 2 ? 2 : 1;
        shape.parallel.zero_stage = k >= 3 ? 3 : 0; /* the stack is s's */
        et_error_band b;
        band_from_rows(&shape, rows, &b);
        edge[k] = b.band ? b.high : 1;
    }
    free(rows);
}

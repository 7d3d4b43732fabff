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

static void family_of(const et_scenario *s, char *out, size_t size)
{
    char device[sizeof s->cluster.device.name];
    snprintf(device, sizeof device, "%s", s->cluster.device.name);
    device[strcspn(device, "- ")] = 0; /* the generation: A100-SXM4-80GB is an A100 */
    const char *shape = s->parallel.pipeline > 1 ? "pipeline" : s->parallel.tensor > 1 ? "tensor" : "data";
    /* parameters or gradients sharded over the data ranks (ZeRO 2 and 3, FSDP) gather and scatter them
     * every step: another communication pattern, and in the published runs another stack */
    const char *sharded = s->parallel.zero_stage >= 2 ? " sharded" : "";
    snprintf(out, size, "%.40s %s%s", device, shape, sharded);
}

void et_error_band_of(const et_scenario *s, et_error_band *out)
{
    memset(out, 0, sizeof *out);
    family_of(s, out->family, sizeof out->family);
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
        if (strcmp(family, out->family) || !(error > -1) || !(row_gpus > 0)) continue;
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

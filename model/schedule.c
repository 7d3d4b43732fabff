#include "schedule.h"

#include <stddef.h>

const char *const et_recompute_names[] = {"none", "full", "selective", NULL};

double et_pipeline_bubble_micro_batches(int stages, int virtual_stages)
{
    if (stages <= 1) return 0;
    return (double)(stages - 1) / (virtual_stages > 1 ? virtual_stages : 1);
}

int et_pipeline_sends_per_micro_batch(int stages, int virtual_stages)
{
    if (stages <= 1) return 0;
    return virtual_stages > 1 ? virtual_stages : 1;
}

double et_pipeline_in_flight(int stages, int virtual_stages, int stage, long long micro_batches)
{
    long long n = stages - stage;
    if (n > micro_batches) n = micro_batches;
    if (n < 1) n = 1;
    double f = (double)n;
    if (virtual_stages > 1 && stages > 1) f *= 1 + (double)(stages - 1) / ((double)stages * virtual_stages);
    return f;
}

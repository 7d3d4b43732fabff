/* libFuzzer target: measured.json as etcalib and etsim --op-times read it (calib/et_measured_run.h), with the
 * plan it names (the seed, from a real etrun run, names the runner's copy of the plan, so mutations of the
 * ops, ranks, shapes and times reach the checks past the plan's checksum). */
#include "fuzz_common.h"
#include "measured_run.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    et_measured_run r;
    et_error err;
    if (et_measured_run_load(fuzz_file(data, size, "measured.json"), NULL, &r, &err) == 0) {
        double *pred = malloc(((size_t)r.graph.n_ops + 1) * sizeof *pred);
        if (pred) et_measured_run_predict(&r, &r.plan.s.cluster.device, pred); /* what the report does next */
        free(pred);
        et_measured_run_free(&r);
    }
    return 0;
}

/* libFuzzer target: measured.json as etcalib and etsim --op-times read it (calib/calib_run.h), with the plan
 * it names (the seed, from a real etrun run, names the runner's copy of the plan, so mutations of the ops,
 * ranks, shapes and times reach the checks past the plan's checksum). */
#include "calib_run.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    calib_run r;
    et_error err;
    if (calib_run_load(fuzz_file(data, size, "measured.json"), NULL, &r, &err) == 0) {
        double *pred = malloc(((size_t)r.graph.n_ops + 1) * sizeof *pred);
        if (pred) calib_run_predict(&r, &r.plan.s.cluster.device, pred); /* what the report does next */
        free(pred);
        calib_run_free(&r);
    }
    return 0;
}

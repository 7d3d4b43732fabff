/* calib_allreduce for a device build without MPI (calib_allreduce.h): one process, so there is no
 * all-reduce across ranks to measure; etcalib bench runs its other benchmarks and says so. */
#include "calib_allreduce.h"

int calib_allreduce_active(void)
{
    return 0;
}

int calib_allreduce_init(int *argc, char ***argv, int *rank)
{
    (void)argc, (void)argv;
    *rank = 0;
    return 0;
}

int calib_allreduce_rank(void)
{
    return 0;
}

json_t *calib_allreduce_bench(FILE *out, et_error *err)
{
    (void)out;
    et_error_set(err, NULL, 0, 0, NULL,
                 "this build of etcalib has no MPI: the all-reduce benchmark needs it");
    return NULL;
}

void calib_allreduce_finish(void) {}

/* calib_allreduce: all-reduce bus bandwidth over message sizes, measured over the ranks of mpirun with MPI
 * (etcalib bench under mpirun; NCCL's would come with the CUDA backend), nccl-tests style.
 *
 * Contract: calib_allreduce_active() says whether etcalib runs under mpirun with more than one rank;
 * calib_allreduce_init() starts MPI then (0, or -1 when MPI cannot start) and gives the rank;
 * calib_allreduce_bench() runs the same sequence on every rank: float sums from 4 KiB to 64 MiB, a factor
 * of 4 apart, each timed from a barrier (the mean of enough calls for 0.2 s, at least 5, after 2 warm-up
 * calls); on rank 0 it returns the rows {bytes, ranks, seconds, algbw_GBps, busbw_GBps} and prints the
 * table to `out` (NULL: quiet), on the other ranks NULL. calib_allreduce_finish() ends MPI. The samples of
 * a micro.json's "allreduce" rows: calib_allreduce_samples() (one node, `ranks` GPUs per node), for
 * etcalib fit-network (calib_allreduce_rows.c). A device build without MPI has calib_allreduce_single.c:
 * never active, one rank. */
#ifndef ET_CALIB_ALLREDUCE_H
#define ET_CALIB_ALLREDUCE_H

#include <jansson.h>
#include <stdio.h>

#include "calib_network.h"

int calib_allreduce_active(void);
int calib_allreduce_init(int *argc, char ***argv, int *rank);
int calib_allreduce_rank(void); /* this process's rank once started (0 otherwise) */
json_t *calib_allreduce_bench(FILE *out, et_error *err);
void calib_allreduce_finish(void);
int calib_allreduce_samples(const json_t *micro, const char *source, calib_coll_sample **out, int *n,
                            et_error *err);

#endif

/* collective_bench: etsim's nccl-tests-style mode: one collective per message size on the scenario's
 * data-parallel communicator, simulated as flows, printed beside its closed form.
 *
 * Conventions (nccl-tests): size is bytes per rank; algbw = size / time; busbw = algbw x 2(N-1)/N for
 * all-reduce and (N-1)/N for reduce-scatter and all-gather. The verdict passes when every simulated time
 * is within `tolerance` of its closed form. Contract: collective_bench_print() returns 0 on PASS, 1 on FAIL.
 */
#ifndef ET_COLLECTIVE_BENCH_H
#define ET_COLLECTIVE_BENCH_H

#include <stdio.h>

#include "sim_result.h"

int collective_bench_print(FILE *out, const sim_result *result, double tolerance);

#endif

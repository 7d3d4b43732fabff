#include "collective_bench.h"

#include <math.h>

int collective_bench_print(FILE *out, const sim_result *r, double tolerance)
{
    fprintf(out, "# etsim collective benchmark: %s on %d GPUs (%d nodes x %d), simulated with SimGrid\n",
            r->collective, r->bench_ranks, r->bench_nodes, r->bench_ranks_per_node);
    fprintf(out, "#%15s %13s %12s %12s %12s %16s %9s\n", "size(B)", "algorithm", "time(us)", "algbw(GB/s)",
            "busbw(GB/s)", "closed_form(us)", "error(%)");
    double worst = 0;
    for (int i = 0; i < r->n_collectives; i++) {
        const sim_collective_record *row = &r->collectives[i];
        worst = fmax(worst, fabs(row->error));
        fprintf(out, " %15.0f %13s %12.2f %12.2f %12.2f %16.2f %9.3f\n", row->bytes, row->algorithm,
                row->time * 1e6, row->algbw_GBps, row->busbw_GBps, row->closed_form * 1e6, 100 * row->error);
    }
    int pass = worst <= tolerance;
    fprintf(out, "# verdict: %s (largest deviation from the closed form %.3f%%, tolerance %.1f%%)\n",
            pass ? "PASS" : "FAIL", 100 * worst, 100 * tolerance);
    return pass ? 0 : 1;
}

#include "collective_bench.h"

#include <math.h>

#include "report.h"

int collective_bench_print(FILE *out, const json_t *r, double tolerance)
{
    const json_t *rows = json_object_get(r, "results");
    fprintf(out, "# etsim collective benchmark: %s on %d GPUs (%d nodes x %d), simulated with SimGrid\n",
            json_string_value(json_object_get(r, "collective")),
            (int)json_integer_value(json_object_get(r, "ranks")),
            (int)json_integer_value(json_object_get(r, "nodes")),
            (int)json_integer_value(json_object_get(r, "ranks_per_node")));
    fprintf(out, "#%15s %13s %12s %12s %12s %16s %9s\n", "size(B)", "algorithm", "time(us)", "algbw(GB/s)",
            "busbw(GB/s)", "closed_form(us)", "error(%)");
    double worst = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *row = json_array_get(rows, i);
        double err = report_num(row, "error");
        worst = fmax(worst, fabs(err));
        fprintf(out, " %15.0f %13s %12.2f %12.2f %12.2f %16.2f %9.3f\n", report_num(row, "bytes"),
                json_string_value(json_object_get(row, "algorithm")), report_num(row, "time_s") * 1e6,
                report_num(row, "algbw_GBps"), report_num(row, "busbw_GBps"),
                report_num(row, "closed_form_s") * 1e6, 100 * err);
    }
    int pass = worst <= tolerance;
    fprintf(out, "# verdict: %s (largest deviation from the closed form %.3f%%, tolerance %.1f%%)\n",
            pass ? "PASS" : "FAIL", 100 * worst, 100 * tolerance);
    return pass ? 0 : 1;
}

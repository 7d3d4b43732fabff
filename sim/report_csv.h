/* report_csv: the tables people sweep and plot, as CSV files beside the JSON report (etsim --csv PREFIX).
 *
 * Contract: report_op_rows() returns a new JSON array with one object per op of graph g for batch b (id,
 * phase, kind, flops, bytes, time_s): the simulator's "ops" and the CSV's rows alike. report_csv_write()
 * writes PREFIX-ops.csv always and, when `sim` is not NULL, PREFIX-buckets.csv, PREFIX-ranks.csv and
 * PREFIX-steps.csv (header row with units, one row per record), each atomically; fails with *err naming
 * the file. report_csv_paths() lists the files it would write (for the tools' output checks). */
#ifndef ET_REPORT_CSV_H
#define ET_REPORT_CSV_H

#include <jansson.h>

#include "graph.h"
#include "scenario.h"

#define REPORT_CSV_FILES 4

json_t *report_op_rows(const et_scenario *s, const et_graph *g, const et_batch_shape *b);
int report_csv_paths(const char *prefix, int simulated, char paths[REPORT_CSV_FILES][1024]);
int report_csv_write(const char *prefix, const et_scenario *s, const json_t *sim, et_error *err);

#endif

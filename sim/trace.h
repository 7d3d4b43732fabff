/* trace: Chrome trace-event JSON (opens in Perfetto / chrome://tracing) of simulated ranks.
 *
 * Contract: events are appended in memory (sim_trace_add) and written at the end (sim_trace_write,
 * atomically). pid = rank, tid 0 = compute stream, tid 1 = communication stream; times in microseconds. */
#ifndef ET_TRACE_H
#define ET_TRACE_H

#include "et_error.h"

typedef struct sim_trace_event {
    int rank;
    int lane;
    char name[64];
    double start, duration; /* seconds */
} sim_trace_event;

typedef struct sim_trace {
    sim_trace_event *events;
    int count, capacity;
    double window_start; /* events starting before this time are not written (only the last step is kept) */
} sim_trace;

void sim_trace_add(sim_trace *t, int rank, int lane, const char *name, double start, double duration);
int sim_trace_write(const sim_trace *t, const char *path, const char *scenario_name, et_error *err);
void sim_trace_free(sim_trace *t);

#endif

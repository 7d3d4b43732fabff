/* trace: Chrome trace-event JSON (opens in Perfetto / chrome://tracing) of simulated ranks.
 *
 * Contract: events are appended in memory (sim_trace_add) and written at the end (sim_trace_write,
 * atomically). pid = rank, tid 0 = compute stream, tid 1 = communication stream; times in microseconds from
 * the start of the step kept (the last one); collectives carry their bytes and algorithm as args, and the
 * compute lane shows idle time waiting for other ranks. */
#ifndef ET_TRACE_H
#define ET_TRACE_H

#include "et_error.h"

typedef struct sim_trace_event {
    int rank;
    int lane;
    char name[64];
    double start, duration; /* seconds */
    double bytes;           /* a collective's message, 0 for compute */
    char algorithm[16];     /* a collective's algorithm, "" for compute */
} sim_trace_event;

typedef struct sim_trace {
    sim_trace_event *events;
    int count, capacity;
    double window_start; /* events starting before this time are not written (only the last step is kept) */
} sim_trace;

void sim_trace_add(sim_trace *t, int rank, int lane, const char *name, double start, double duration);
/* A collective's event: its bytes and algorithm go into the event's args. */
void sim_trace_add_comm(sim_trace *t, int rank, const char *name, double start, double duration, double bytes,
                        const char *algorithm);
/* stage_of_rank[r] and gpus_per_node name each rank's process "GPU r (node n, stage s)". */
int sim_trace_write(const sim_trace *t, const char *path, const char *scenario_name, const int *stage_of_rank,
                    int gpus_per_node, et_error *err);
void sim_trace_free(sim_trace *t);

#endif

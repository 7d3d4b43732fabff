#include "trace.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"

void sim_trace_add(sim_trace *t, int rank, int lane, const char *name, double start, double duration)
{
    if (start < t->window_start) return;
    if (t->count == t->capacity) {
        int cap = t->capacity ? 2 * t->capacity : 1024;
        sim_trace_event *e = realloc(t->events, (size_t)cap * sizeof *e);
        if (!e) return; /* a trace is best effort; the report does not depend on it */
        t->events = e;
        t->capacity = cap;
    }
    sim_trace_event *e = &t->events[t->count++];
    e->rank = rank;
    e->lane = lane;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->start = start;
    e->duration = duration;
    e->bytes = 0;
    e->algorithm[0] = 0;
}

void sim_trace_add_comm(sim_trace *t, int rank, const char *name, double start, double duration, double bytes,
                        const char *algorithm)
{
    const int before = t->count;
    sim_trace_add(t, rank, 1, name, start, duration);
    if (t->count == before) return;
    t->events[t->count - 1].bytes = bytes;
    snprintf(t->events[t->count - 1].algorithm, sizeof t->events[0].algorithm, "%s", algorithm);
}

static const sim_trace_event *sort_base;

/* By rank, lane and start time, then by the order they were added: a stable order for review. */
static int by_lane_and_time(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    const sim_trace_event *x = &sort_base[i], *y = &sort_base[j];
    if (x->rank != y->rank) return x->rank - y->rank;
    if (x->lane != y->lane) return x->lane - y->lane;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return i - j;
}

int sim_trace_write(const sim_trace *t, const char *path, const char *scenario_name, const int *stage_of_rank,
                    int gpus_per_node, et_error *err)
{
    int *order = malloc(((size_t)t->count + 1) * sizeof *order);
    if (!order)
        return et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory for the trace");
    for (int i = 0; i < t->count; i++)
        order[i] = i;
    sort_base = t->events;
    qsort(order, (size_t)t->count, sizeof *order, by_lane_and_time);
    json_t *events = json_array();
    for (int i = 0; i < t->count; i++) {
        const sim_trace_event *e = &t->events[order[i]];
        if (e->start < t->window_start) continue; /* only the last simulated step */
        json_t *ev =
            json_pack("{s:s, s:s, s:s, s:f, s:f, s:i, s:i}", "name", e->name, "cat",
                      e->lane ? "comm" : "compute", "ph", "X", "ts", (e->start - t->window_start) * 1e6,
                      "dur", e->duration * 1e6, "pid", e->rank, "tid", e->lane);
        if (ev && e->algorithm[0])
            json_object_set_new(ev, "args",
                                json_pack("{s:f, s:s}", "bytes", e->bytes, "algorithm", e->algorithm));
        json_array_append_new(events, ev);
    }
    /* name the lanes, in rank order */
    int previous = -1;
    for (int i = 0; i < t->count; i++) {
        const sim_trace_event *e = &t->events[order[i]];
        int r = e->rank;
        if (e->start < t->window_start || r == previous) continue;
        previous = r;
        char name[64];
        snprintf(name, sizeof name, "GPU %d (node %d, stage %d)", r,
                 gpus_per_node > 0 ? r / gpus_per_node : 0, stage_of_rank ? stage_of_rank[r] : 0);
        json_array_append_new(events, json_pack("{s:s, s:s, s:i, s:{s:s}}", "name", "process_name", "ph", "M",
                                                "pid", r, "args", "name", name));
        for (int lane = 0; lane < 2; lane++)
            json_array_append_new(events, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name",
                                                    "ph", "M", "pid", r, "tid", lane, "args", "name",
                                                    lane ? "communication" : "compute"));
    }
    free(order);
    json_t *root = json_pack("{s:o, s:s, s:{s:s}}", "traceEvents", events, "displayTimeUnit", "ms",
                             "otherData", "scenario", scenario_name);
    int rc = et_atomic_write_json(path, root, err);
    json_decref(root);
    return rc;
}

void sim_trace_free(sim_trace *t)
{
    free(t->events);
    memset(t, 0, sizeof *t);
}

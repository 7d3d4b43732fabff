/* step_schedule: one rank's training step as an ordered list of typed events, built once from the scenario,
 * the stage's graph and its gradient buckets. It is the one place that decides the step's order (1F1B
 * micro-batch order, where the pipeline bubble falls), what runs on which stream, what overlaps what and
 * what waits for what. The analytic model (analytic.c) evaluates it with the closed forms; the simulator
 * (sim/sim_actors.c) plays the same events as SimGrid executions and flows.
 *
 * Two streams. The compute stream runs, in order: the bubble's fill share, the micro-batches' forward and
 * backward passes in 1F1B order (a stage p - 1 - stage micro-batches deep runs that many forwards first),
 * each pass followed by its pipeline send, the bubble's drain share after the last forward, and the last
 * micro-batch's backward, cut where gradient buckets become ready (each bucket's clipping kernel first when
 * clipping per bucket, and its gradients accumulated first when the stack accumulates in a pass of its own);
 * the stack's host synchronisations after the passes and sends it synchronises, and its accumulation pass
 * after every earlier backward; then the point where backward is done, a wait for the communication stream,
 * the global-norm all-reduce, the optimizer and the ZeRO parameter all-gather. The communication stream runs
 * ZeRO 3's parameter gathers (from the step's start, prefetched: no compute waits for them) and then one
 * collective per bucket, each from when its bucket is ready on every rank of its group (with overlap off:
 * from the end of backward) or when the previous collective ends, if later.
 *
 * A pass (forward, backward, or the last backward) is a list of items: compute segments (a run of the
 * phase's ops in graph order, their blocking tensor-parallel and ring-attention communication included),
 * each ended by an experts' all-to-all (every member of the expert-parallel group meets), a bucket's
 * clipping and readiness, or the pass's end. Step events name the pass they run and the micro-batch.
 *
 * Contract: et_step_schedule_build fills *q from the stage graph's op classes (op_classes.h; free with
 * et_step_schedule_free); the graph and the buckets must outlive it. Fails with ET_ERROR_MEMORY only.
 * et_step_time_pass times one pass's segments at a batch shape (the op classes timed at that shape);
 * et_step_micro_batch_seconds is one micro-batch's forward and backward with their blocking communication and
 * sends, the bubble's unit. */
#ifndef ET_STEP_SCHEDULE_H
#define ET_STEP_SCHEDULE_H

#include <stdbool.h>

#include "buckets.h"
#include "et_error.h"
#include "graph.h"
#include "op_classes.h"
#include "phase_time.h"
#include "scenario.h"

typedef enum et_step_stream { ET_STREAM_COMPUTE, ET_STREAM_COMM } et_step_stream;

typedef enum et_step_pass {
    ET_PASS_FORWARD,
    ET_PASS_BACKWARD,
    ET_PASS_LAST_BACKWARD,
    ET_PASSES
} et_step_pass;

typedef enum et_step_event_kind {
    /* the step's events */
    ET_STEP_BUBBLE,        /* compute: `share` of the stage's 1F1B bubble */
    ET_STEP_PASS,          /* compute: pass `pass` of micro-batch `micro` (its items, below) */
    ET_STEP_SEND,          /* compute: the pipeline send after pass `pass` of micro-batch `micro` */
    ET_STEP_BACKWARD_DONE, /* compute: a point, the last backward (and its send) has ended */
    ET_STEP_PARAM_GATHERS, /* comm: ZeRO 3's parameter all-gathers, two per micro-batch, from the start */
    ET_STEP_COLLECTIVE, /* comm: bucket `bucket`'s reduction, after event `wait` and the stream's previous */
    ET_STEP_GRADS_REDUCED, /* compute: waits for the communication stream's last event */
    ET_STEP_GLOBAL_NORM,   /* compute: the gradients' norm, one value all-reduced over the data-parallel ranks
                            */
    ET_STEP_OPTIMIZER,     /* compute */
    ET_STEP_ZERO_GATHER,   /* compute waits: the updated parameters all-gathered (ZeRO, distributed optimizer)
                            */
    ET_STEP_SYNC,       /* compute: `count` host synchronisations (the stack's timers, p2p, .item() reads) */
    ET_STEP_ACCUMULATE, /* compute: micro-batch `micro`'s gradients accumulated (the stack's pass) */
    /* a pass's items */
    ET_STEP_COMPUTE,           /* segment `segment`'s ops */
    ET_STEP_ALLTOALL,          /* the experts' all-to-all op `op`, toward the experts when `to_experts` */
    ET_STEP_CLIP,              /* bucket `bucket`'s clipping kernel */
    ET_STEP_BUCKET_READY,      /* a point: bucket `bucket`'s gradients are final on this rank */
    ET_STEP_ACCUMULATE_BUCKET, /* bucket `bucket`'s gradients accumulated (the last backward's share) */
} et_step_event_kind;

extern const char *const et_step_event_names[]; /* by kind: "bubble", "pass", ... */

typedef struct et_step_event {
    et_step_event_kind kind;
    et_step_stream stream;
    int micro;         /* PASS, SEND: the micro-batch (0 .. grad_accum - 1) */
    et_step_pass pass; /* PASS, SEND */
    int segment;       /* COMPUTE: index into the schedule's segments */
    int op;            /* ALLTOALL: its graph op */
    bool to_experts; /* ALLTOALL: dispatch and combine's gradient (each rank's rows to the experts' ranks) */
    int bucket;      /* COLLECTIVE, CLIP, BUCKET_READY */
    double share;    /* BUBBLE: of the stage's bubble (fill: stage / (p - 1), drain: the rest) */
    int count;       /* SYNC: synchronisations */
    double fixed; /* SYNC, ACCUMULATE, ACCUMULATE_BUCKET, CLIP: its seconds, which do not depend on the batch:
                     priced once, when the schedule is built */
    int wait;     /* COLLECTIVE: the compute-stream event it waits for (index into events; the bucket's
                     BUCKET_READY is an item, so -1 then: the bucket's readiness) */
} et_step_event;

/* A run of one phase's ops, [first_op, end_op) in graph order, ops of other phases and all-to-alls left out.
 */
typedef struct et_step_segment {
    et_phase phase;
    int first_op, end_op;
    int expert_layer; /* the layer of its expert ops (whose rows the routing draws), -1 when none */
} et_step_segment;

typedef struct et_step_schedule {
    const et_graph *graph;
    const et_bucket *buckets; /* the stage's gradient buckets (the caller's) */
    int stage, micro_batches, n_buckets;
    et_step_event *events; /* the step, both streams, in order */
    int n_events;
    et_step_event *items; /* the passes' items: pass p's are items[pass_first[p] .. + pass_items[p]] */
    int pass_first[ET_PASSES], pass_items[ET_PASSES];
    et_step_segment *segments;
    int n_segments;
    int segment_first[ET_PASSES], pass_segments[ET_PASSES]; /* each pass's segments, consecutive */
    bool overlap;      /* collectives from their bucket's readiness (else from the end of backward) */
    bool has_alltoall; /* some pass meets the expert-parallel group */
    int backward_done; /* index of the ET_STEP_BACKWARD_DONE event */
} et_step_schedule;

int et_step_schedule_build(const et_scenario *s, const et_op_classes *c, int stage, const et_bucket *buckets,
                           int nb, bool overlap, et_step_schedule *q, et_error *err);
void et_step_schedule_free(et_step_schedule *q);

/* Times pass p's segments at shape b into t[0 .. pass_segments[p]) (c, the graph's classes, timed at b). */
void et_step_time_pass(const et_step_schedule *q, const et_scenario *s, et_op_classes *c, et_step_pass p,
                       const et_batch_shape *b, et_segment_time *t);

/* An all-to-all item's closed form at shape b: the busiest expert rank's rows (moe.h). */
double et_step_alltoall_seconds(const et_scenario *s, const et_graph *g, int op, const et_batch_shape *b);

/* The experts' all-to-alls overlapped with computation (software.ep_overlap: Megatron-Core's
 * --overlap-moe-expert-parallel-comm, whose schedule runs one micro-batch's forward beside another's
 * backward): the share of the all-to-alls' closed-form seconds that the compute stream still pays, 1 without
 * it. A pair's all-to-alls a = the forward's and the backward's run beside its compute c (both passes at b,
 * t timed as for et_step_micro_batch_seconds), costing et_overlap_blocking(a, c, overlap_sms, SMs); the
 * passes that have no partner (et_step_alltoall_unpaired) pay theirs whole. */
double et_step_alltoall_share(const et_step_schedule *q, const et_scenario *s, const et_batch_shape *b,
                              const et_segment_time *t);
/* The same share as if software.ep_overlap were on, whatever it is (what the overlap would leave). */
double et_step_alltoall_overlap_share(const et_step_schedule *q, const et_scenario *s,
                                      const et_batch_shape *b, const et_segment_time *t);
/* The share of a stage's forward and backward passes that run without a partner under ep_overlap: the first
 * stage's warm-up forwards (and as many cool-down backwards) and the steady phase's first, over its
 * micro-batches x virtual stages, at most 1. */
double et_step_alltoall_unpaired(const et_scenario *s);

/* What the data-parallel collectives beside the compute stream cost it: NCCL runs a collective as one block
 * per channel, software.overlap_sms of the device's S multiprocessors, which the passes lose while it runs
 * (the same share the tensor-parallel collectives beside their products cost, et_overlap_blocking). Of
 * `overlapped` seconds the communication stream was busy while the compute stream was (each bucket's
 * collective and ZeRO 3's parameter gathers, clipped to [step start, backward done)), the compute stream
 * pays overlapped x k / S, after backward and before it waits for the communication stream: the step's
 * data-parallel cost is the larger of that and the collectives' tail. 0 on a device without a count of
 * multiprocessors. */
double et_step_dp_contention(const et_scenario *s, double overlapped);
/* The seconds [start, end) shares with [0, until). */
double et_step_overlap_before(double start, double end, double until);

/* One micro-batch's forward and backward at shape b (experts at the expected imbalance, all-to-alls by
 * their closed forms at the exposed share of et_step_alltoall_share, blocking communication and both pipeline
 * sends included): the bubble's unit. t holds the forward and backward passes' segments timed at b
 * (et_step_time_pass), at their schedule indices. */
double et_step_micro_batch_seconds(const et_step_schedule *q, const et_scenario *s, const et_batch_shape *b,
                                   const et_segment_time *t);

/* The optimizer event: the graph's optimizer ops (c timed at b) and the stack's passes beyond them. */
double et_step_optimizer_seconds(const et_step_schedule *q, const et_scenario *s, const et_op_classes *c,
                                 const et_batch_shape *b);

#endif

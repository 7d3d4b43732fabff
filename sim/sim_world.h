/* sim_world: state shared by the actors of one simulation (child process only). */
#ifndef ET_SIM_WORLD_H
#define ET_SIM_WORLD_H

#include <simgrid/actor.h>
#include <simgrid/barrier.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <simgrid/semaphore.h>
#include <xbt/log.h>

#include "analytic.h"
#include "buckets.h"
#include "collectives.h"
#include "graph.h"
#include "scenario.h"
#include "step_sim.h"
#include "trace.h"

typedef struct sim_group {
    int size;
    int *members;             /* global ranks, index order = ring order */
    sg_bar_t comm_barrier;    /* bucket collectives */
    sg_bar_t compute_barrier; /* after backward: global-norm all-reduce, ZeRO parameter gather */
    /* Collective start times announced ahead: every rank posts when its buckets will be ready at the start
     * of a step, so a collective starts at the latest announcement and its ranks wake together (one
     * scheduling round) instead of one by one at a barrier. */
    double *latest; /* [step * buckets + k]: latest ready time of bucket k over the group's ranks */
    int *announced; /* [step]: ranks that have announced */
    int *waiting;   /* [step]: ranks blocked until the last announcement */
    sg_sem_t announce_gate;
} sim_group;

typedef struct sim_rank {
    int rank;
    int stage;
    int group; /* data-parallel communicator */
    int index; /* position in the communicator */
    sg_host_t host;
    int route_dst[6]; /* small cache of route latencies to the peers this rank sends to */
    double route_latency[6];
    int route_cached;
    double not_before; /* the next collective phase starts no earlier than this (0: now) */
    /* per step, filled by the actors */
    double *step_start, *step_end, *busy, *bwd_end, *wait_end, *idle;
} sim_rank;

typedef struct sim_stage {
    et_graph graph;
    et_bucket *buckets;
    int n_buckets;
    double *clip;       /* per bucket: clipping kernel seconds */
    et_coll_algo *algo; /* per bucket: the all-reduce algorithm (auto resolved) */
} sim_stage;

typedef struct sim_world {
    const et_scenario *s;
    const sim_options *o;
    int steps;
    int n_ranks;
    sim_rank *ranks;
    int n_groups;
    sim_group *groups;
    int n_stages;
    sim_stage *stages;
    et_comm_group dp;
    double *bucket_start, *bucket_end; /* last step, per bucket of stage 0 group 0 */
    et_batch_shape *shapes;            /* [(step * grad_accum + micro) * dp + dp_index]: each rank's batch */
    int trace_every;                   /* keep ranks with rank % trace_every == 0 in the trace */
    sim_trace trace;
} sim_world;

extern sim_world *sim_w;

/* Compute-time plan of one rank for one step (seconds). seg has n_buckets + 1 entries. */
typedef struct sim_plan {
    double pre;  /* forward and every micro-batch before the last backward, bubble and blocking comm */
    double *seg; /* last backward, split at bucket-ready points */
    double opt;
} sim_plan;

void sim_rank_plan(const sim_world *w, int rank, int step, sim_plan *plan);

/* Collectives over a rank's data-parallel group, run by the calling actor with its own mailboxes and
 * barrier; they return when the last rank of the group is done (a collective ends for everyone together). */
void sim_allreduce(sim_rank *r, sg_mailbox_t *boxes, sg_bar_t barrier, et_coll_algo algo, double bytes);
void sim_ring_gather(sim_rank *r, sg_mailbox_t *boxes, sg_bar_t barrier, double bytes, int factor_num);

/* Creates the actor of every rank. */
void sim_start_actors(sim_world *w);

#endif

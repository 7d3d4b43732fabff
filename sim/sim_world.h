/* sim_world: state shared by the actors of one simulation (child process only). */
#ifndef ET_SIM_WORLD_H
#define ET_SIM_WORLD_H

#include <jansson.h>
#include <simgrid/actor.h>
#include <simgrid/barrier.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/semaphore.h>
#include <xbt/log.h>

#include "analytic.h"
#include "buckets.h"
#include "collectives.h"
#include "graph.h"
#include "op_classes.h"
#include "scenario.h"
#include "step_schedule.h"
#include "step_sim.h"
#include "trace.h"

/* A route from a rank to a peer, as SimGrid resolves it: its latency (scaled by the latency factor) and
 * its links as ids into sim_links (n_links < 0: too long to track, never mirrored). */
#define SIM_ROUTES 8
#define SIM_ROUTE_LINKS 12
typedef struct sim_route {
    int dst;
    int n_links;
    double latency;
    int link[SIM_ROUTE_LINKS];
} sim_route;

/* The links collective flows cross, numbered as routes are first resolved, with the properties that decide
 * how a flow alone on them progresses. */
#define SIM_LINK_SHARED_BY_GROUPS (-2)
typedef struct sim_links {
    int count, capacity;
    double *bandwidth, *latency;
    int *shared; /* sharing policy other than FATPIPE */
    int *owner;  /* the only communicator whose flows cross it, -1 none yet, or SIM_LINK_SHARED_BY_GROUPS */
    int *in_use; /* flows of the current phase crossing it */
} sim_links;

/* One flow of a collective phase, between two GPU hosts. */
typedef struct sim_flow {
    struct sim_rank *src;
    const struct sim_rank *dst;
    double share;           /* of the phase's bytes */
    double start;           /* simulated time the flow is launched */
    int order;              /* position in the phase, for a deterministic launch order */
    const sim_route *route; /* NULL when not cached (then never mirrored) */
    int alone;              /* no other flow crosses any of its links: mirrored from an identical one */
    sim_route spare;
} sim_flow;

/* The flow patterns of the algorithms' phases: one ring over the group, the intra-node rings and the
 * inter-node rings of the hierarchical form, the tree's reduce and broadcast. */
typedef enum sim_pattern {
    SIM_RING,
    SIM_RING_INTRA,
    SIM_RING_INTER,
    SIM_TREE_REDUCE,
    SIM_TREE_BROADCAST,
    SIM_PATTERNS
} sim_pattern;

/* A flow to launch, scaled to the phase: share x the phase's bytes, starting `offset` after the phase's
 * reference time plus its latency term (minus its sender's longest route latency). */
typedef struct sim_launch {
    sg_host_t src, dst;
    double share, offset;
} sim_launch;

/* The flows a pattern launches, in launch order, without those mirrored from an identical flow: the same
 * for every bucket, so built once per group. */
typedef struct sim_phase_plan {
    sim_launch *launch;
    int n;          /* -1: not built yet */
    int n_modelled; /* the pattern's flows, mirrored ones included */
} sim_phase_plan;

/* A data-parallel communicator. Its actor plays the communication stream of all its ranks, NCCL-style:
 * every bucket's collective in backward order, each phase a set of flows from GPU host to GPU host. The
 * GPU actors only compute; they hand their buckets over by announcing when each will be ready, and meet the
 * communicator where they must wait for it (after backward, around ZeRO parameter gathers). */
typedef struct sim_group {
    int size; /* members: subgroups x sub_size */
    int stage;
    /* Identical data-parallel communicators of one stage (the tensor ranks' ones, on a healthy generated
     * fabric without per-rank noise) are merged: their ranks compute identically, so their collectives
     * start together, and the fabric's symmetry gives every subgroup's flows the same max-min rates; one
     * actor then plays all their flows at once, which lets the shortcuts of sim_collectives.c see every
     * flow on the links they share (step_sim.c decides; --all-groups keeps them apart). */
    int subgroups, sub_size;
    int *members;             /* global ranks: subgroup by subgroup, each in ring order */
    sg_bar_t meet;            /* the ranks and the communicator actor (size + 1) */
    sg_bar_t compute_barrier; /* the ranks: global-norm all-reduce after backward */
    /* Bucket-ready times, announced by each rank as soon as it knows them (ahead of time: compute waits for
     * nothing but the experts' all-to-alls): a collective starts at the latest announcement of its bucket,
     * or when the previous collective ends, if later. bucket_announced[step * (buckets + 1) + k] ranks have
     * announced bucket k; bucket_gate is released once per bucket announced by all. */
    double *latest; /* [step * (buckets + 1) + k]: latest ready time of bucket k over the group's ranks */
    int *bucket_announced;
    sg_sem_t bucket_gate;
    /* what the communicator played, read by the ranks after they meet it */
    double *coll_start, *coll_end; /* [step * (buckets + 1) + k]; k = buckets: ZeRO 3's parameter gathers */
    sim_flow *flows;               /* one phase's flows (at most 4 per rank), while planning it */
    const et_comm_group *comm;     /* its shape (ranks per node, nodes, latencies); NULL: the data-parallel */
    sg_comm_t *comms;
    sim_phase_plan plans[SIM_PATTERNS];
} sim_group;

typedef struct sim_rank {
    int rank;
    int stage;
    int group; /* data-parallel communicator */
    int index; /* position in the communicator */
    sg_host_t host;
    int ep_group, ep_index;       /* expert-parallel group and position in it (mixture of experts) */
    sim_route routes[SIM_ROUTES]; /* the routes to the peers this rank sends to, cached */
    int n_routes;
    /* per step, filled by the actors */
    double *step_start, *step_end, *busy, *bwd_end, *idle;
} sim_rank;

typedef struct sim_stage {
    et_graph graph;
    et_bucket *buckets;
    int n_buckets;
    et_coll_algo *algo; /* per bucket: the all-reduce algorithm (auto resolved) */
    et_op_classes classes;
    et_step_schedule
        schedule; /* one rank's step (model/step_schedule.h), which every rank of the stage plays */
} sim_stage;

/* An expert-parallel group: `size` consecutive data-parallel ranks of one stage and tensor rank, whose
 * experts' all-to-alls its members play together (sim_moe.c). */
typedef struct sim_ep_group {
    int size;
    int *members; /* global ranks, by position */
    sg_bar_t bar;
} sim_ep_group;

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
    sim_links links;
    int mirror_allowed; /* the network model shares bandwidth per link only: flows alone on links can be
                           mirrored */
    int equal_shares;   /* flows share links equally, start together and have no rate bound of their own: a
                           phase's flows that are not alone can be played by those of its most contended link */
    const double *gpu_speed;    /* [rank] compute speed left (slow GPUs, fabric.h); NULL: all nominal */
    double flow_latency_factor; /* route latency -> the latency SimGrid makes a flow pay (0: none) */
    long long flows_modelled, flows_simulated; /* for --stats: flows of all phases, and those played */
    /* mixture of experts with expert parallelism: all-to-alls played as flows (sim_moe.c) */
    int moe;
    et_comm_group edp;        /* the ranks holding the same experts (the expert buckets' reductions) */
    sim_group *expert_groups; /* [n_groups]: each communicator's members as x such groups */
    int n_ep_groups;
    sim_ep_group *ep_groups;
    et_comm_group ep;
    double moe_tokens; /* the expected tokens of a rank's micro-batch: what the routing draws are for */
    double *a2a;    /* [3 * rank]: seconds in all-to-alls, waiting for expert peers, and the closed forms */
    int *a2a_count; /* [rank] all-to-alls played */
} sim_world;

extern sim_world *sim_w;

/* The batch of rank `rank` for micro-batch i of a step (its context-parallel share). */
static inline const et_batch_shape *sim_shape(const sim_world *w, int rank, int step, int i)
{
    return &w->shapes[((size_t)step * w->s->batch.grad_accum + i) * et_scenario_grad_ranks(w->s) +
                      w->ranks[rank].index];
}

/* Collectives over a data-parallel group, played by the group's communicator actor from simulated time
 * `start` (or now, if later); they return when the last flow of the last phase has ended. A phase's flows
 * start together (less each route's own latency), and the next phase starts when the last one ends. */
void sim_allreduce(sim_group *g, et_coll_algo algo, double bytes, double start);
void sim_ring_gather(sim_group *g, double bytes, int factor_num, double start); /* factor 1 RS/AG, 2 AR */

/* Marks the links that flows of more than one communicator may cross (every collective pattern of every
 * group), so that flows on them are never mirrored. Needed only with several groups. Returns 0. */
int sim_claim_links(sim_world *w);

/* A user platform: every route a collective pattern takes exists (0), or err names the first missing one
 * (-1); SimGrid would abort on it mid-simulation. */
int sim_check_routes(sim_world *w, char *err, size_t size);

/* A compute execution on the rank's host (busy time and the trace), and a trace event on lane 0 (compute)
 * or 1 (communication), formatted only for ranks kept in the trace. */
void sim_exec(sim_rank *r, double seconds, const char *name, int step);
void sim_trace_note(const sim_rank *r, int lane, double start, double duration, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Mixture of experts (sim_moe.c): the expert-parallel groups and the records (-1 when out of memory); the
 * loads of layer `layer`'s expert ranks for micro-batch i (the routing's draw, the same on every member of
 * the group; load[j] times the balanced rows on member j); one all-to-all item of the step schedule played
 * as flows among the rank's group (comms: scratch of one entry per member); the records, per rank and step.
 */
int sim_moe_build(sim_world *w);
void sim_moe_loads(const sim_world *w, const sim_rank *r, int step, int i, int layer, double *load);
void sim_moe_alltoall(sim_world *w, sim_rank *r, int step, int i, const et_step_event *e, const double *load,
                      sg_comm_t *comms);
void sim_moe_results(const sim_world *w, sim_alltoall_stats *out);

/* Creates the actor of every rank. */
void sim_start_actors(sim_world *w);

#endif

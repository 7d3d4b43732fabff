/* NCCL-style collectives as SimGrid flows. Fluid form: each algorithm phase is one flow per rank carrying
 * everything that rank sends in the phase (a pipelined ring or tree keeps every link busy for the whole
 * phase), preceded by the phase's latency term; detailed form: the 2(N-1) ring steps one message each. */
#include <math.h>
#include <simgrid/comm.h>

#include "sim_world.h"

XBT_LOG_NEW_DEFAULT_CATEGORY(et_collectives, "etsim collectives");

static char payload; /* SimGrid refuses NULL payloads; flows carry sizes only */

/* Route latency to a peer, cached: SimGrid computes routes on every call. */
static double route_latency(sim_rank *r, const sim_rank *dst)
{
    for (int i = 0; i < r->route_cached; i++)
        if (r->route_dst[i] == dst->rank) return r->route_latency[i];
    double lat = sg_host_get_route_latency(r->host, dst->host) * sim_w->s->cluster.latency_factor;
    if (r->route_cached < 6) {
        r->route_dst[r->route_cached] = dst->rank;
        r->route_latency[r->route_cached++] = lat;
    }
    return lat;
}

static sim_rank *member(const sim_rank *r, int index)
{
    const sim_group *g = &sim_w->groups[r->group];
    return &sim_w->ranks[g->members[index]];
}

/* Sends `bytes` to `dst` so that the flow ends `latency_term` + transfer time after now (the route's own
 * latency is part of the term), while receiving `n_recv` flows on `self`. */
static void exchange(sim_rank *r, sg_mailbox_t *boxes, const sim_rank *const *dst, const double *bytes,
                     int n_send, int n_recv, double latency_term)
{
    sg_comm_t comms[16];
    void *data;
    int n = 0;
    for (int i = 0; i < n_recv; i++)
        comms[n++] = sg_mailbox_get_async(boxes[r->rank], &data);
    double route = 0;
    for (int i = 0; i < n_send; i++)
        route = fmax(route, route_latency(r, dst[i])); /* SimGrid scales it by the latency factor */
    /* the phase starts now, or at the collective's announced start when the caller has not slept to it */
    double t_ref = fmax(simgrid_get_clock(), r->not_before);
    r->not_before = 0;
    if (t_ref + latency_term - route > simgrid_get_clock())
        sg_actor_sleep_until(t_ref + latency_term - route);
    for (int i = 0; i < n_send; i++)
        comms[n++] = sg_mailbox_put_async(boxes[dst[i]->rank], &payload, (long)bytes[i]);
    sg_comm_wait_all(comms, (size_t)n);
}

static void ring_phase(sim_rank *r, sg_mailbox_t *boxes, int next_index, double bytes, double latency_term)
{
    const sim_rank *dst = member(r, next_index);
    exchange(r, boxes, &dst, &bytes, 1, 1, latency_term);
}

void sim_ring_gather(sim_rank *r, sg_mailbox_t *boxes, sg_bar_t barrier, double bytes, int factor_num)
{
    /* factor_num 1: reduce-scatter or all-gather, (N-1)/N S and N-1 steps; 2: all-reduce */
    const et_comm_group *g = &sim_w->dp;
    int N = g->ranks;
    if (N <= 1) return;
    double alpha = g->nodes > 1 ? g->alpha_inter : g->alpha_intra;
    ring_phase(r, boxes, (r->index + 1) % N, factor_num * (N - 1.0) / N * bytes,
               factor_num * (N - 1) * alpha);
    sg_barrier_wait(barrier);
}

static void ring_allreduce_detailed(sim_rank *r, sg_mailbox_t *boxes, double bytes)
{
    const et_comm_group *g = &sim_w->dp;
    int N = g->ranks;
    double alpha = g->nodes > 1 ? g->alpha_inter : g->alpha_intra;
    for (int step = 0; step < 2 * (N - 1); step++)
        ring_phase(r, boxes, (r->index + 1) % N, bytes / N, alpha);
}

static void hierarchical(sim_rank *r, sg_mailbox_t *boxes, sg_bar_t barrier, double bytes)
{
    const et_comm_group *g = &sim_w->dp;
    int k = g->ranks_per_node, n = g->nodes, node = r->index / k, local = r->index % k;
    if (k > 1) /* intra-node reduce-scatter */
        ring_phase(r, boxes, node * k + (local + 1) % k, (k - 1.0) / k * bytes, (k - 1) * g->alpha_intra);
    sg_barrier_wait(barrier);
    if (n > 1) /* k concurrent inter-node rings, one per local rank, on S/k each */
        ring_phase(r, boxes, ((node + 1) % n) * k + local, 2.0 * (n - 1) / n * bytes / k,
                   2 * (n - 1) * g->alpha_inter);
    sg_barrier_wait(barrier);
    if (k > 1) /* intra-node all-gather */
        ring_phase(r, boxes, node * k + (local + 1) % k, (k - 1.0) / k * bytes, (k - 1) * g->alpha_intra);
}

/* One tree phase: reduce (flows towards the roots) or broadcast (away from them). Inside a node a chain
 * towards local rank 0 carries S; between nodes, two mirrored binary trees carry S/2 each. */
static void tree_phase(sim_rank *r, sg_mailbox_t *boxes, double bytes, int reduce)
{
    const et_comm_group *g = &sim_w->dp;
    int k = g->ranks_per_node, n = g->nodes, node = r->index / k, local = r->index % k;
    const sim_rank *dst[8];
    double sizes[8];
    int n_send = 0, n_recv = 0;
    /* intra-node chain: local j sends to j-1 when reducing, receives from j-1 when broadcasting */
    if (reduce) {
        if (local > 0) dst[n_send] = member(r, r->index - 1), sizes[n_send++] = bytes;
        if (local < k - 1) n_recv++;
    } else {
        if (local < k - 1) dst[n_send] = member(r, r->index + 1), sizes[n_send++] = bytes;
        if (local > 0) n_recv++;
    }
    if (local == 0 && n > 1)
        for (int t = 0; t < 2; t++) {
            int parent = et_tree_parent(n, t, node), children[2];
            int n_children = et_tree_children(n, t, node, children);
            if (reduce) {
                if (parent >= 0) dst[n_send] = member(r, parent * k), sizes[n_send++] = bytes / 2;
                n_recv += n_children;
            } else {
                for (int c = 0; c < n_children; c++)
                    dst[n_send] = member(r, children[c] * k), sizes[n_send++] = bytes / 2;
                n_recv += parent >= 0;
            }
        }
    double latency = (k - 1) * g->alpha_intra + et_tree_depth(n) * g->alpha_inter;
    exchange(r, boxes, dst, sizes, n_send, n_recv, latency);
}

static void tree(sim_rank *r, sg_mailbox_t *boxes, sg_bar_t barrier, double bytes)
{
    tree_phase(r, boxes, bytes, 1);
    sg_barrier_wait(barrier);
    tree_phase(r, boxes, bytes, 0);
}

void sim_allreduce(sim_rank *r, sg_mailbox_t *boxes, sg_bar_t barrier, et_coll_algo algo, double bytes)
{
    if (sim_w->dp.ranks <= 1) return;
    switch (algo) {
    case ET_COLL_TREE:
        tree(r, boxes, barrier, bytes);
        break;
    case ET_COLL_HIERARCHICAL:
        hierarchical(r, boxes, barrier, bytes);
        break;
    default:
        if (sim_w->o->detailed) {
            ring_allreduce_detailed(r, boxes, bytes);
        } else {
            sim_ring_gather(r, boxes, barrier, bytes, 2);
            return; /* ends with its barrier */
        }
    }
    sg_barrier_wait(barrier);
    XBT_DEBUG("rank %d all-reduce of %.0f bytes done at %f", r->rank, bytes, simgrid_get_clock());
}

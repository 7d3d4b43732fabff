/* NCCL-style collectives as SimGrid flows, played by a communicator's actor. Fluid form: each algorithm
 * phase is one flow per sending rank and peer carrying everything it sends in the phase (a pipelined ring
 * or tree keeps every link busy for the whole phase), preceded by the phase's latency term; detailed form:
 * the 2(N-1) ring steps, one message each.
 *
 * Mirroring: a flow alone on every link of its route (no other flow of the phase crosses any of them, and
 * no other communicator's flows ever do) progresses independently of all other traffic, so flows alone on
 * routes with the same link properties, of the same size and start, progress identically. One of each such
 * set is played and stands for the others: NVLink flows inside every node, and ring flows between nodes,
 * collapse to a handful per phase, with no change to any time (docs/simulator.md).
 *
 * Most contended link: when flows share links equally and start together (CM02 or LV08 with flows paying
 * no latency of their own and no TCP window), a flow's max-min rate is never below the smallest equal
 * share C/n along its route, and the flows of the link where C/n is smallest in the phase, r, can together
 * take no more than C: each runs at exactly r, whatever else runs, until they all end together. Every other
 * flow runs at r or faster and, carrying the same bytes, ends no later. So the flows of that link, played
 * alone, end the phase exactly when all of them would: a tree phase on 4096 GPUs plays 2 inter-node flows
 * instead of about 1030, with no change to any time. */
#include <math.h>
#include <stddef.h> /* simgrid/link.h uses size_t without it */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <simgrid/link.h>
#include <xbt/dynar.h>

#include "sg_cxx.h"
#include "sim_world.h"

XBT_LOG_NEW_DEFAULT_CATEGORY(et_collectives, "etsim collectives");

static int grow_links(sim_links *l)
{
    int cap = l->capacity ? 2 * l->capacity : 1024;
    double *bw = realloc(l->bandwidth, (size_t)cap * sizeof *bw);
    if (bw) l->bandwidth = bw;
    double *lat = realloc(l->latency, (size_t)cap * sizeof *lat);
    if (lat) l->latency = lat;
    int *shared = realloc(l->shared, (size_t)cap * sizeof *shared);
    if (shared) l->shared = shared;
    int *owner = realloc(l->owner, (size_t)cap * sizeof *owner);
    if (owner) l->owner = owner;
    int *use = realloc(l->in_use, (size_t)cap * sizeof *use);
    if (use) l->in_use = use;
    if (!bw || !lat || !shared || !owner || !use) return -1;
    l->capacity = cap;
    return 0;
}

/* The id of a link, numbered on first sight (its SimGrid user data holds id + 1); -1 when out of memory. */
static int link_id(sim_links *l, sg_link_t link)
{
    intptr_t id = (intptr_t)sg_link_get_data(link);
    if (id > 0) return (int)id - 1;
    if (l->count == l->capacity && grow_links(l)) return -1;
    int i = l->count++;
    l->bandwidth[i] = sg_link_get_bandwidth(link);
    l->latency[i] = sg_link_get_latency(link);
    l->shared[i] = sg_link_is_shared(link);
    l->owner[i] = -1;
    l->in_use[i] = 0;
    sg_link_set_data(link, (void *)(intptr_t)(i + 1));
    return i;
}

static void resolve(const sim_rank *r, const sim_rank *dst, sim_route *route)
{
    route->dst = dst->rank;
    route->latency = sim_w->flow_latency_factor > 0
                         ? sg_host_get_route_latency(r->host, dst->host) * sim_w->flow_latency_factor
                         : 0; /* flows pay no latency of their own: no need to walk the route for it */
    xbt_dynar_t links = xbt_dynar_new(sizeof(sg_link_t), NULL);
    sg_host_get_route(r->host, dst->host, links);
    unsigned long n = xbt_dynar_length(links);
    route->n_links = n <= SIM_ROUTE_LINKS ? (int)n : -1;
    for (int i = 0; i < route->n_links; i++) {
        route->link[i] = link_id(&sim_w->links, xbt_dynar_get_as(links, i, sg_link_t));
        if (route->link[i] < 0) route->n_links = -1;
    }
    xbt_dynar_free(&links);
}

/* The route to a peer, cached per rank (SimGrid resolves routes on every call); `spare` holds it when the
 * cache is full. */
static const sim_route *route_to(sim_rank *r, const sim_rank *dst, sim_route *spare)
{
    for (int i = 0; i < r->n_routes; i++)
        if (r->routes[i].dst == dst->rank) return &r->routes[i];
    sim_route *route = r->n_routes < SIM_ROUTES ? &r->routes[r->n_routes++] : spare;
    resolve(r, dst, route);
    return route;
}

/* Whether flows alone on identical routes are played once (see the top of this file). */
static int mirroring(void)
{
    return sim_w->mirror_allowed && !sim_w->o->all_flows && !sim_w->o->detailed;
}

/* The shape of a group's collectives: its own (expert buckets) or the data-parallel communicator's. */
static const et_comm_group *group_comm(const sim_group *g)
{
    return g->comm ? g->comm : &sim_w->dp;
}

static sim_rank *member(const sim_group *g, int index)
{
    return &sim_w->ranks[g->members[index]];
}

static void add_flow(sim_group *g, int *n, int src, int dst, double share)
{
    g->flows[*n] = (sim_flow){.src = member(g, src), .dst = member(g, dst), .share = share, .order = *n};
    (*n)++;
}

/* Flow sets of the algorithms' phases, in g->flows; each returns the count. A sender's flows are
 * consecutive. */

/* Every rank sends the phase's bytes to the next one of its ring: inside its node (inter = 0), or to the same
 * local rank of the next node (inter = 1). k ranks per node, n nodes; k = N, n = 1 is one ring over all
 * ranks. `off` is the subgroup's first member (merged groups, sim_world.h); flows are appended from *n. */
static void ring_flows(sim_group *g, int off, int k, int n_nodes, int inter, int *n)
{
    for (int i = 0; i < g->sub_size; i++) {
        int node = i / k, local = i % k;
        int next = inter ? ((node + 1) % n_nodes) * k + local : node * k + (local + 1) % k;
        add_flow(g, n, off + i, off + next, 1);
    }
}

/* One tree phase: reduce (flows towards the roots) or broadcast (away from them). Inside a node a chain
 * towards local rank 0 carries S; between nodes, two mirrored binary trees carry S/2 each. */
static void tree_flows(sim_group *g, int off, int reduce, int *n)
{
    const et_comm_group *c = group_comm(g);
    int k = c->ranks_per_node, n_nodes = c->nodes;
    for (int i = 0; i < g->sub_size; i++) {
        int node = i / k, local = i % k;
        /* intra-node chain: local j sends to j-1 when reducing, to j+1 when broadcasting */
        if (reduce && local > 0) add_flow(g, n, off + i, off + i - 1, 1);
        if (!reduce && local < k - 1) add_flow(g, n, off + i, off + i + 1, 1);
        if (local == 0 && n_nodes > 1)
            for (int t = 0; t < 2; t++) {
                int parent = et_tree_parent(n_nodes, t, node), children[2];
                int n_children = et_tree_children(n_nodes, t, node, children);
                if (reduce && parent >= 0) add_flow(g, n, off + i, off + parent * k, 0.5);
                if (!reduce)
                    for (int x = 0; x < n_children; x++)
                        add_flow(g, n, off + i, off + children[x] * k, 0.5);
            }
    }
}

/* The flows of a pattern, each carrying its share of the phase's bytes: every subgroup's. */
static int pattern_flows(sim_group *g, sim_pattern p)
{
    const et_comm_group *c = group_comm(g);
    int n = 0;
    for (int sub = 0; sub < g->subgroups; sub++) {
        const int off = sub * g->sub_size;
        switch (p) {
        case SIM_RING:
            ring_flows(g, off, g->sub_size, 1, 0, &n);
            break;
        case SIM_RING_INTRA:
            ring_flows(g, off, c->ranks_per_node, c->nodes, 0, &n);
            break;
        case SIM_RING_INTER:
            ring_flows(g, off, c->ranks_per_node, c->nodes, 1, &n);
            break;
        case SIM_TREE_REDUCE:
            tree_flows(g, off, 1, &n);
            break;
        default:
            tree_flows(g, off, 0, &n);
        }
    }
    return n;
}

/* Same share, start and link properties along the route: flows alone on their links then end together. */
static int same_progress(const sim_flow *a, const sim_flow *b)
{
    const sim_links *l = &sim_w->links;
    const sim_route *x = a->route, *y = b->route;
    if (a->share != b->share || a->start != b->start || x->n_links != y->n_links || x->latency != y->latency)
        return 0;
    for (int i = 0; i < x->n_links; i++) {
        int p = x->link[i], q = y->link[i];
        if (l->bandwidth[p] != l->bandwidth[q] || l->latency[p] != l->latency[q] ||
            l->shared[p] != l->shared[q])
            return 0;
    }
    return 1;
}

static int by_start(const void *a, const void *b)
{
    const sim_flow *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->order - y->order;
}

#define MAX_PLAYED_FOR_OTHERS 64

/* A link's equal share per flow in this phase (FATPIPE links give every flow all of it). */
static double link_share(const sim_links *l, int id)
{
    return l->shared[id] ? l->bandwidth[id] / l->in_use[id] : l->bandwidth[id];
}

/* The smallest link share along a flow's route, and the link that gives it. */
static double flow_bottleneck(const sim_flow *f, int *link)
{
    const sim_links *l = &sim_w->links;
    double best = INFINITY;
    for (int x = 0; x < f->route->n_links; x++) {
        double share = link_share(l, f->route->link[x]);
        if (share < best) {
            best = share;
            *link = f->route->link[x];
        }
    }
    return best;
}

/* Equal-share phases (see the top of this file): with l->in_use counting the phase's flows, returns the
 * most contended link of the flows that are not alone (the smallest equal share C/n along their routes),
 * if they all carry the same share of bytes; -1 otherwise. Max-min fairness gives every flow crossing a
 * link of that share exactly that rate until they all end together; every other flow runs at least as
 * fast and ends no later. The flows of the returned link, played without the others, get that rate too
 * (every link they cross carries at most as many flows as in the phase), so they end the phase when all of
 * them would. */
static int most_contended_link(const sim_group *g, int n)
{
    const sim_links *l = &sim_w->links;
    double rate = INFINITY, share = -1;
    int link = -1;
    for (int i = 0; i < n; i++) {
        const sim_flow *f = &g->flows[i];
        if (f->alone) continue;
        if (!f->route || f->route->n_links < 0 || (share >= 0 && f->share != share)) return -1;
        share = f->share;
        for (int x = 0; x < f->route->n_links; x++)
            if (l->owner[f->route->link[x]] == SIM_LINK_SHARED_BY_GROUPS) return -1;
        int at = -1;
        double b = flow_bottleneck(f, &at);
        if (b < rate) {
            rate = b;
            link = at;
        }
    }
    return link;
}

static int crosses(const sim_flow *f, int link)
{
    for (int x = 0; x < f->route->n_links; x++)
        if (f->route->link[x] == link) return 1;
    return 0;
}

/* Builds a pattern's launch plan. Each sender's flows start so that they end the phase's latency term plus
 * their transfer time after its reference time (the route's own latency, where SimGrid makes a flow pay
 * it, is part of the term: a sender starts its longest route's latency early). */
static void plan_phase(sim_group *g, sim_pattern pattern)
{
    sim_phase_plan *plan = &g->plans[pattern];
    sim_links *l = &sim_w->links;
    const int mirror = mirroring();
    const int n = pattern_flows(g, pattern);
    for (int i = 0; i < n;) {
        int j = i;
        double route = 0;
        for (; j < n && g->flows[j].src == g->flows[i].src; j++) {
            sim_flow *f = &g->flows[j];
            f->route = route_to(f->src, f->dst, &f->spare);
            route = fmax(route, f->route->latency);
            if (f->route == &f->spare) f->route = NULL; /* not cached: never mirrored */
        }
        for (; i < j; i++)
            g->flows[i].start = -route;
    }
    /* which flows are alone on all their links in this phase */
    if (mirror)
        for (int i = 0; i < n; i++)
            for (int x = 0; g->flows[i].route && x < g->flows[i].route->n_links; x++)
                l->in_use[g->flows[i].route->link[x]]++;
    for (int i = 0; i < n; i++) {
        sim_flow *f = &g->flows[i];
        f->alone = mirror && f->route && f->route->n_links >= 0;
        for (int x = 0; f->alone && x < f->route->n_links; x++) {
            int id = f->route->link[x];
            if (l->in_use[id] != 1 || l->owner[id] == SIM_LINK_SHARED_BY_GROUPS) f->alone = 0;
        }
    }
    const int bottleneck = mirror && sim_w->equal_shares ? most_contended_link(g, n) : -1;
    if (mirror)
        for (int i = 0; i < n; i++)
            for (int x = 0; g->flows[i].route && x < g->flows[i].route->n_links; x++)
                l->in_use[g->flows[i].route->link[x]] = 0;
    qsort(g->flows, (size_t)n, sizeof *g->flows, by_start);
    const sim_flow *played[MAX_PLAYED_FOR_OTHERS];
    int n_played = 0;
    plan->n = 0;
    plan->n_modelled = n;
    for (int i = 0; i < n; i++) {
        const sim_flow *f = &g->flows[i];
        if (f->alone) {
            int same = 0;
            for (int p = 0; p < n_played && !same; p++)
                same = same_progress(f, played[p]);
            if (same) continue; /* an identical flow, played already, ends when this one would */
            if (n_played < MAX_PLAYED_FOR_OTHERS) played[n_played++] = f;
        } else if (bottleneck >= 0 && !crosses(f, bottleneck)) {
            continue; /* the flows of the most contended link end when this one would, or later */
        }
        plan->launch[plan->n++] = (sim_launch){f->src->host, f->dst->host, f->share, f->start};
    }
}

/* Plays one phase of a pattern on `bytes` and returns when its last flow has ended. */
static void run_phase(sim_group *g, sim_pattern pattern, double bytes, double t_ref, double latency_term)
{
    sim_phase_plan *plan = &g->plans[pattern];
    if (plan->n < 0) plan_phase(g, pattern);
    for (int i = 0; i < plan->n; i++) {
        const sim_launch *f = &plan->launch[i];
        double start = t_ref + latency_term + f->offset;
        if (start > simgrid_get_clock()) sg_actor_sleep_until(start);
        g->comms[i] = et_sendto_async(f->src, f->dst, f->share * bytes);
    }
    sg_comm_wait_all(g->comms, (size_t)plan->n);
    sim_w->flows_modelled += plan->n_modelled;
    sim_w->flows_simulated += plan->n;
}

void sim_ring_gather(sim_group *g, double bytes, int factor_num, double start)
{
    /* factor_num 1: reduce-scatter or all-gather, (N-1)/N S and N-1 steps; 2: all-reduce */
    const et_comm_group *c = group_comm(g);
    int N = c->ranks;
    if (N <= 1) return;
    double alpha = et_step_alpha(c);
    run_phase(g, SIM_RING, factor_num * (N - 1.0) / N * bytes, fmax(start, simgrid_get_clock()),
              factor_num * (N - 1) * alpha);
}

static void ring_allreduce_detailed(sim_group *g, double bytes, double start)
{
    const et_comm_group *c = group_comm(g);
    int N = c->ranks;
    double alpha = et_step_alpha(c);
    for (int step = 0; step < 2 * (N - 1); step++)
        run_phase(g, SIM_RING, bytes / N, fmax(start, simgrid_get_clock()), alpha);
}

static void hierarchical(sim_group *g, double bytes, double start)
{
    const et_comm_group *c = group_comm(g);
    int k = c->ranks_per_node, n = c->nodes;
    double t = fmax(start, simgrid_get_clock());
    if (k > 1) /* intra-node reduce-scatter */
        run_phase(g, SIM_RING_INTRA, (k - 1.0) / k * bytes, t, (k - 1) * c->alpha_intra);
    if (n > 1) /* k concurrent inter-node rings, one per local rank, on S/k each */
        run_phase(g, SIM_RING_INTER, 2.0 * (n - 1) / n * bytes / k, fmax(t, simgrid_get_clock()),
                  2 * (n - 1) * c->alpha_inter);
    if (k > 1) /* intra-node all-gather */
        run_phase(g, SIM_RING_INTRA, (k - 1.0) / k * bytes, fmax(t, simgrid_get_clock()),
                  (k - 1) * c->alpha_intra);
}

static void tree(sim_group *g, double bytes, double start)
{
    const et_comm_group *c = group_comm(g);
    double latency = (c->ranks_per_node - 1) * c->alpha_intra + et_tree_depth(c->nodes) * c->alpha_inter;
    run_phase(g, SIM_TREE_REDUCE, bytes, fmax(start, simgrid_get_clock()), latency);
    run_phase(g, SIM_TREE_BROADCAST, bytes, simgrid_get_clock(), latency);
}

void sim_allreduce(sim_group *g, et_coll_algo algo, double bytes, double start)
{
    if (group_comm(g)->ranks <= 1) return;
    switch (algo) {
    case ET_COLL_TREE:
        tree(g, bytes, start);
        break;
    case ET_COLL_HIERARCHICAL:
        hierarchical(g, bytes, start);
        break;
    default:
        if (sim_w->o->detailed)
            ring_allreduce_detailed(g, bytes, start);
        else
            sim_ring_gather(g, bytes, 2, start);
    }
    XBT_DEBUG("all-reduce of %.0f bytes on %d ranks done at %f", bytes, g->size, simgrid_get_clock());
}

static void claim(sim_group *g, int id, int n)
{
    sim_links *l = &sim_w->links;
    for (int i = 0; i < n; i++) {
        sim_flow *f = &g->flows[i];
        const sim_route *r = route_to(f->src, f->dst, &f->spare);
        for (int x = 0; x < r->n_links; x++) {
            int *owner = &l->owner[r->link[x]];
            if (*owner == -1)
                *owner = id;
            else if (*owner != id)
                *owner = SIM_LINK_SHARED_BY_GROUPS;
        }
    }
}

int sim_check_routes(sim_world *w, char *err, size_t size)
{
    for (int id = 0; id < w->n_groups && w->dp.ranks > 1; id++) {
        sim_group *g = &w->groups[id];
        for (int p = 0; p < SIM_PATTERNS; p++)
            for (int i = 0, n = pattern_flows(g, (sim_pattern)p); i < n; i++) {
                char why[400];
                if (!et_route_check(g->flows[i].src->host, g->flows[i].dst->host, why, sizeof why)) continue;
                snprintf(err, size, "the platform has no usable route from %s to %s: %s",
                         sg_host_get_name(g->flows[i].src->host), sg_host_get_name(g->flows[i].dst->host),
                         why);
                return -1;
            }
    }
    return 0;
}

/* A route's links that could not be numbered (out of memory) make it untracked: never mirrored. */
int sim_claim_links(sim_world *w)
{
    if (w->n_groups <= 1 || w->dp.ranks <= 1 || !mirroring()) return 0;
    for (int id = 0; id < w->n_groups; id++)
        for (int p = 0; p < SIM_PATTERNS; p++)
            claim(&w->groups[id], id, pattern_flows(&w->groups[id], (sim_pattern)p));
    return 0;
}

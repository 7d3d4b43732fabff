#include "collectives.h"

#include <math.h>
#include <stdlib.h>

#include "fabric.h"

static et_comm_group group(const et_scenario *s, int ranks, int per_node, int groups_per_node)
{
    const et_cluster *c = &s->cluster;
    et_comm_group g;
    g.ranks = ranks;
    g.ranks_per_node = per_node < ranks ? per_node : ranks;
    g.nodes = ranks / g.ranks_per_node;
    g.intra_bw = et_cluster_nvlink_bandwidth(c) * c->bandwidth_factor;
    g.inter_bw = c->nics_per_node * et_cluster_nic_bandwidth(c) * c->bandwidth_factor / groups_per_node;
    g.alpha_intra = c->intra_node_latency * c->latency_factor + c->collective_step_latency;
    /* worst path between nodes: NIC, leaf switch, spine (and core, spine), leaf switch, NIC */
    const int leaves = et_fabric_leaves(c), pods = et_fabric_pods(c);
    double switches = pods > 1 ? 5 : leaves > 1 ? 3 : 1;
    g.alpha_inter =
        (c->nic_latency + switches * c->switch_latency) * c->latency_factor + c->collective_step_latency;
    g.nodes_per_leaf = c->nodes_per_leaf;
    g.nodes_per_pod = c->nodes_per_leaf * (c->tiers >= 3 ? c->leaves_per_pod : leaves);
    g.leaf_up_bw =
        g.nodes > g.nodes_per_leaf ? et_fabric_min_leaf_uplink(c) * c->bandwidth_factor / groups_per_node : 0;
    g.pod_up_bw = c->tiers >= 3 && g.nodes > g.nodes_per_pod
                      ? et_fabric_min_pod_uplink(c) * c->bandwidth_factor / groups_per_node
                      : 0;
    g.compute_capability = c->device.compute_capability;
    g.channels = c->channels_per_nic * c->nics_per_node / groups_per_node;
    if (g.channels < 1) g.channels = 1;
    return g;
}

/* `ranks` consecutive ranks after the tensor ranks (data, expert or context ranks): as many on a node as it
 * has of them, gpus_per_node / tensor at most; every `stride`-th of those (1: all). */
static et_comm_group after_tensor_ranks(const et_scenario *s, int ranks, int stride)
{
    int k = s->cluster.gpus_per_node / s->parallel.tensor;
    if (k > ranks * stride) k = ranks * stride;
    k = k / stride > 1 ? k / stride : 1;
    return group(s, ranks, k, s->cluster.gpus_per_node / k);
}

et_comm_group et_dp_group(const et_scenario *s)
{
    /* pipeline stages beyond one node's worth split the node's GPUs further */
    return after_tensor_ranks(s, et_scenario_grad_ranks(s), 1);
}

et_comm_group et_tp_group(const et_scenario *s)
{
    return group(s, s->parallel.tensor, s->parallel.tensor, s->cluster.gpus_per_node / s->parallel.tensor);
}

et_comm_group et_ep_group(const et_scenario *s)
{
    const int x = s->parallel.expert > 1 ? s->parallel.expert : 1;
    if (!et_scenario_experts_folded(s)) return after_tensor_ranks(s, x, 1);
    /* folded: x consecutive ranks, tensor ranks and data ranks together (Megatron's order) */
    const int per_node = x < s->cluster.gpus_per_node ? x : s->cluster.gpus_per_node;
    return group(s, x, per_node, s->cluster.gpus_per_node / per_node);
}

et_comm_group et_ep_data_group(const et_scenario *s)
{
    const int xd = et_scenario_expert_data_span(s);
    return after_tensor_ranks(s, et_scenario_grad_ranks(s) / xd, xd);
}

et_comm_group et_cp_group(const et_scenario *s)
{
    return after_tensor_ranks(s, s->parallel.context > 1 ? s->parallel.context : 1, 1);
}

double et_busbw_factor_allreduce(int ranks)
{
    return 2.0 * (ranks - 1) / ranks;
}

double et_busbw_factor_gather(int ranks)
{
    return (double)(ranks - 1) / ranks;
}

/* Between nodes: the NIC share, or the up-link share where the group crosses leaves or pods. */
static double inter_node_bw(const et_comm_group *g)
{
    double bw = g->inter_bw;
    if (g->leaf_up_bw > 0) bw = fmin(bw, g->leaf_up_bw);
    if (g->pod_up_bw > 0) bw = fmin(bw, g->pod_up_bw);
    return bw;
}

static double ring_bw(const et_comm_group *g)
{
    return g->nodes > 1 ? fmin(g->intra_bw, inter_node_bw(g)) : g->intra_bw;
}

double et_step_alpha(const et_comm_group *g)
{
    return g->nodes > 1 ? g->alpha_inter : g->alpha_intra;
}

double et_ring_allreduce_time(const et_comm_group *g, double bytes)
{
    int N = g->ranks;
    if (N <= 1 || bytes <= 0) return 0;
    return 2.0 * (N - 1) * et_step_alpha(g) + et_busbw_factor_allreduce(N) * bytes / ring_bw(g);
}

double et_ring_reduce_scatter_time(const et_comm_group *g, double bytes)
{
    int N = g->ranks;
    if (N <= 1 || bytes <= 0) return 0;
    return (N - 1) * et_step_alpha(g) + et_busbw_factor_gather(N) * bytes / ring_bw(g);
}

double et_ring_allgather_time(const et_comm_group *g, double bytes)
{
    return et_ring_reduce_scatter_time(g, bytes);
}

double et_ring_step_time(const et_comm_group *g, double bytes)
{
    if (g->ranks <= 1 || bytes <= 0) return 0;
    return et_step_alpha(g) + bytes / ring_bw(g);
}

double et_alltoall_time(const et_comm_group *g, double bytes)
{
    const int N = g->ranks, k = g->ranks_per_node;
    if (N <= 1 || bytes <= 0) return 0;
    double intra = k > 1 ? (double)(k - 1) / N * bytes / g->intra_bw : 0;
    double inter = g->nodes > 1 ? (double)k * (N - k) / N * bytes / inter_node_bw(g) : 0;
    return et_step_alpha(g) + fmax(intra, inter);
}

double et_alltoall_dedup_time(const et_comm_group *g, double token_bytes, double gpu_copies,
                              double node_copies)
{
    const int k = g->ranks_per_node;
    if (g->ranks <= 1 || token_bytes <= 0) return 0;
    /* NVLink: a copy for each other GPU the token reaches (a remote node's forwarded by the GPU that received
     * it there: by symmetry the same load on every GPU) */
    const double intra = k > 1 ? gpu_copies * token_bytes / g->intra_bw : 0;
    /* the fabric: a copy for each other node, over this GPU's share of its node's links */
    const double inter = g->nodes > 1 ? k * node_copies * token_bytes / inter_node_bw(g) : 0;
    return et_step_alpha(g) + fmax(intra, inter);
}

double et_hierarchical_allreduce_time(const et_comm_group *g, double bytes)
{
    int n = g->nodes, k = g->ranks_per_node;
    if (g->ranks <= 1 || bytes <= 0) return 0;
    double intra = 0, inter = 0;
    if (k > 1) intra = (k - 1) * g->alpha_intra + et_busbw_factor_gather(k) * bytes / g->intra_bw;
    /* k concurrent rings share the node's NICs: each gets inter_bw / k for S / k bytes */
    if (n > 1)
        inter = 2.0 * (n - 1) * g->alpha_inter + et_busbw_factor_allreduce(n) * bytes / inter_node_bw(g);
    return 2 * intra + inter;
}

int et_tree_parent(int n, int tree, int i)
{
    /* tree 0: heap order over node indices; tree 1: the mirror image, so the inner nodes of one tree are
     * (mostly) leaves of the other, as in NCCL's double binary tree. */
    int j = tree == 0 ? i : n - 1 - i;
    if (j == 0) return -1;
    int pj = (j - 1) / 2;
    return tree == 0 ? pj : n - 1 - pj;
}

int et_tree_children(int n, int tree, int i, int out[2])
{
    int j = tree == 0 ? i : n - 1 - i, count = 0;
    for (int c = 2 * j + 1; c <= 2 * j + 2 && c < n; c++)
        out[count++] = tree == 0 ? c : n - 1 - c;
    return count;
}

int et_tree_depth(int n)
{
    int depth = 0;
    while ((1 << (depth + 1)) - 1 < n)
        depth++;
    return depth;
}

double et_tree_max_nic_load(int n)
{
    if (n <= 1) return 0;
    /* called for every bucket of every simulated rank: remember the last answer */
    static _Thread_local int cached_n; /* per thread: the search evaluates plans in parallel */
    static _Thread_local double cached_load;
    if (n == cached_n) return cached_load;
    /* each tree carries half the data: a node sends S/2 up each tree it has a parent in and receives S/2
     * from each child; no allocation, so no failure to hide */
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double up = 0, down = 0;
        int kids[2];
        for (int t = 0; t < 2; t++) {
            if (et_tree_parent(n, t, i) >= 0) up += 0.5;
            down += 0.5 * et_tree_children(n, t, i, kids);
        }
        worst = fmax(worst, fmax(up, down));
    }
    cached_n = n;
    cached_load = worst;
    return worst;
}

double et_tree_max_uplink_load(int n, int span)
{
    if (n <= span || span < 1) return 0;
    static _Thread_local int cached_n, cached_span;
    static _Thread_local double cached_load;
    if (n == cached_n && span == cached_span) return cached_load;
    /* per block: edges from a child inside to a parent outside (up in the reduce phase) and from a parent
     * inside to a child outside (down); the broadcast phase swaps the two. No allocation: a block's nodes
     * are consecutive, so each block's counts are complete when the walk leaves it. */
    double worst = 0, up = 0, down = 0;
    for (int i = 0; i < n; i++) {
        const int block = i / span;
        for (int t = 0; t < 2; t++) {
            int p = et_tree_parent(n, t, i), kids[2];
            if (p >= 0 && p / span != block) up += 0.5;
            for (int c = 0, m = et_tree_children(n, t, i, kids); c < m; c++)
                if (kids[c] / span != block) down += 0.5;
        }
        if (i == n - 1 || (i + 1) / span != block) {
            worst = fmax(worst, fmax(up, down));
            up = down = 0;
        }
    }
    cached_n = n;
    cached_span = span;
    cached_load = worst;
    return worst;
}

/* The tree's bandwidth in bus-bandwidth terms (its two phases move 2 S at this rate): the slowest of the
 * intra-node chain, the busiest node's NICs and the up-links it crosses. */
static double tree_bw(const et_comm_group *g)
{
    const int n = g->nodes, k = g->ranks_per_node;
    double per_byte = k > 1 ? 1 / g->intra_bw : 0;
    if (n > 1) per_byte = fmax(per_byte, et_tree_max_nic_load(n) / g->inter_bw);
    if (n > 1 && g->leaf_up_bw > 0)
        per_byte = fmax(per_byte, et_tree_max_uplink_load(n, g->nodes_per_leaf) / g->leaf_up_bw);
    if (n > 1 && g->pod_up_bw > 0)
        per_byte = fmax(per_byte, et_tree_max_uplink_load(n, g->nodes_per_pod) / g->pod_up_bw);
    return 1 / per_byte;
}

double et_tree_allreduce_time(const et_comm_group *g, double bytes)
{
    int n = g->nodes, k = g->ranks_per_node;
    if (g->ranks <= 1 || bytes <= 0) return 0;
    double alpha = (k - 1) * g->alpha_intra + et_tree_depth(n) * g->alpha_inter;
    return 2 * (alpha + bytes / tree_bw(g));
}

et_nccl_choice et_nccl_allreduce_choice(const et_comm_group *g, double bytes)
{
    const et_nccl_comm c = {
        g->ranks, g->nodes, ring_bw(g), g->ranks > 1 ? tree_bw(g) : 0, g->compute_capability, g->channels, 1};
    return et_nccl_choose_allreduce(&c, bytes);
}

double et_allreduce_time(const et_comm_group *g, et_coll_algo algo, double bytes, et_coll_algo *chosen)
{
    double t;
    switch (algo) {
    case ET_COLL_RING:
        t = et_ring_allreduce_time(g, bytes);
        break;
    case ET_COLL_TREE:
        t = et_tree_allreduce_time(g, bytes);
        break;
    case ET_COLL_HIERARCHICAL:
        t = et_hierarchical_allreduce_time(g, bytes);
        break;
    case ET_COLL_FASTEST: {
        double ring = et_ring_allreduce_time(g, bytes), tree = et_tree_allreduce_time(g, bytes);
        algo = tree < ring ? ET_COLL_TREE : ET_COLL_RING;
        t = fmin(ring, tree);
        break;
    }
    default:
        algo = g->ranks > 1 && bytes > 0 && et_nccl_allreduce_choice(g, bytes).algorithm == ET_NCCL_TREE
                   ? ET_COLL_TREE
                   : ET_COLL_RING;
        t = algo == ET_COLL_TREE ? et_tree_allreduce_time(g, bytes) : et_ring_allreduce_time(g, bytes);
    }
    if (chosen) *chosen = algo;
    return t;
}

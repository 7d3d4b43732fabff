#include "fabric.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"
#include "rng.h"

int et_fabric_leaves(const et_cluster *c)
{
    return (c->nodes + c->nodes_per_leaf - 1) / c->nodes_per_leaf;
}

int et_fabric_pods(const et_cluster *c)
{
    int leaves = et_fabric_leaves(c);
    return c->tiers >= 3 ? (leaves + c->leaves_per_pod - 1) / c->leaves_per_pod : 1;
}

double et_fabric_node_nic_bandwidth(const et_cluster *c)
{
    return c->nics_per_node * et_cluster_nic_bandwidth(c);
}

double et_cluster_nvlink_bandwidth(const et_cluster *c)
{
    return c->intra_node_bandwidth * c->intra_node_efficiency;
}

double et_cluster_nic_bandwidth(const et_cluster *c)
{
    return c->nic_bandwidth * c->inter_node_efficiency;
}

static int nodes_in_leaf(const et_cluster *c, int leaf)
{
    int first = leaf * c->nodes_per_leaf;
    return first + c->nodes_per_leaf <= c->nodes ? c->nodes_per_leaf : c->nodes - first;
}

static double leaf_uplink(const et_cluster *c, int leaf)
{
    return nodes_in_leaf(c, leaf) * et_fabric_node_nic_bandwidth(c) / c->oversubscription;
}

static double pod_uplink(const et_cluster *c, int pod)
{
    int leaves = et_fabric_leaves(c), first = pod * c->leaves_per_pod;
    double sum = 0;
    for (int l = first; l < leaves && l < first + c->leaves_per_pod; l++)
        sum += leaf_uplink(c, l);
    return sum / c->core_oversubscription;
}

/* The smallest of n up-links (0 with a single one: nothing to cross). */
static double min_uplink(const et_cluster *c, int n, double (*uplink)(const et_cluster *, int))
{
    if (n <= 1) return 0;
    double m = INFINITY;
    for (int i = 0; i < n; i++)
        m = fmin(m, uplink(c, i));
    return m;
}

double et_fabric_min_leaf_uplink(const et_cluster *c)
{
    return min_uplink(c, et_fabric_leaves(c), leaf_uplink);
}

double et_fabric_min_pod_uplink(const et_cluster *c)
{
    return min_uplink(c, et_fabric_pods(c), pod_uplink);
}

int et_fabric_warnings(const et_cluster *c, const char **out, int max)
{
    int n = 0, leaves = et_fabric_leaves(c);
    if (c->platform_file[0]) return 0;
    if (n < max && c->oversubscription != 1 && leaves <= 1)
        out[n++] = "cluster.fabric.oversubscription has no effect: every node is under one leaf switch "
                   "(nodes_per_leaf >= nodes)";
    if (n < max && c->tiers >= 3 && et_fabric_pods(c) <= 1)
        out[n++] =
            "cluster.fabric.tiers 3 has no effect: every leaf is in one pod (leaves_per_pod >= leaves)";
    if (n < max && c->nodes == 1 && (c->topology == ET_TOPO_RAIL || c->tiers >= 3))
        out[n++] = "cluster.fabric has no effect on one node: every GPU talks over NVLink";
    if (n < max && c->topology == ET_TOPO_RAIL && c->nics_per_node == 1)
        out[n++] = "a rail fabric with one NIC per node is a fat tree: one rail";
    return n;
}

/* link ids: nvl [0, G), nic [G, G+N), cable [G+N, G+2N), leaf-up [G+2N, G+2N+L), pod-up after */
static int nvl_id(const et_fabric *f, int gpu)
{
    (void)f;
    return gpu;
}
static int nic_id(const et_fabric *f, int node)
{
    return f->gpus + node;
}
static int cable_id(const et_fabric *f, int node)
{
    return f->gpus + f->nodes + node;
}
static int leaf_id(const et_fabric *f, int leaf)
{
    return f->gpus + 2 * f->nodes + leaf;
}
static int pod_id(const et_fabric *f, int pod)
{
    return f->gpus + 2 * f->nodes + f->leaves + pod;
}

void et_fabric_host_name(char *buf, size_t size, int node, int local)
{
    snprintf(buf, size, "gpu-%d-%d", node, local);
}

void et_fabric_link_name(const et_fabric *f, int id, char *buf, size_t size)
{
    if (id < f->gpus)
        snprintf(buf, size, "nvl-%d-%d", id / f->gpus_per_node, id % f->gpus_per_node);
    else if ((id -= f->gpus) < f->nodes)
        snprintf(buf, size, "nic-%d", id);
    else if ((id -= f->nodes) < f->nodes)
        snprintf(buf, size, "cable-%d", id);
    else if ((id -= f->nodes) < f->leaves)
        snprintf(buf, size, "leaf-%d-up", id);
    else
        snprintf(buf, size, "pod-%d-up", id - f->leaves);
}

int et_fabric_route(const et_fabric *f, int a, int b, et_fabric_hop *hops)
{
    const int k = f->gpus_per_node, na = a / k, nb = b / k;
    int n = 0;
    if (na == nb) {
        hops[n++] = (et_fabric_hop){nvl_id(f, a), 0};
        hops[n++] = (et_fabric_hop){nvl_id(f, b), 1};
        return n;
    }
    const int la = na / f->nodes_per_leaf, lb = nb / f->nodes_per_leaf;
    const int pa = la / f->leaves_per_pod, pb = lb / f->leaves_per_pod;
    hops[n++] = (et_fabric_hop){nic_id(f, na), 0};
    hops[n++] = (et_fabric_hop){cable_id(f, na), 0};
    if (la != lb) {
        hops[n++] = (et_fabric_hop){leaf_id(f, la), 0};
        if (f->tiers >= 3 && pa != pb) {
            hops[n++] = (et_fabric_hop){pod_id(f, pa), 0};
            hops[n++] = (et_fabric_hop){pod_id(f, pb), 1};
        }
        hops[n++] = (et_fabric_hop){leaf_id(f, lb), 1};
    }
    hops[n++] = (et_fabric_hop){cable_id(f, nb), 1};
    hops[n++] = (et_fabric_hop){nic_id(f, nb), 1};
    return n;
}

/* The faults listed, then those drawn: `count` distinct parts of the kind by a partial Fisher-Yates
 * shuffle from the seed. Returns the number, or -1 when out of memory; *out is malloc'd. */
static int all_faults(const et_cluster *c, et_fault **out)
{
    const et_random_faults *r = &c->random_faults;
    long long population = 0, count = 0;
    if (r->set) {
        population = r->part == ET_FAULT_NIC ? (long long)c->nodes * c->nics_per_node
                                             : (long long)c->nodes * c->gpus_per_node;
        count = llround(r->fraction * (double)population);
    }
    et_fault *list = malloc(((size_t)c->n_faults + (size_t)count + 1) * sizeof *list);
    int *perm = count ? malloc((size_t)population * sizeof *perm) : NULL;
    if (!list || (count && !perm)) {
        free(list);
        free(perm);
        return -1;
    }
    memcpy(list, c->faults, (size_t)c->n_faults * sizeof *list);
    for (long long i = 0; i < population && count; i++)
        perm[i] = (int)i;
    unsigned long long state = et_rng_mix(r->seed ^ 0x5eedfa17ULL);
    for (long long i = 0; i < count; i++) {
        state = et_rng_mix(state);
        long long j = i + (long long)(state % (unsigned long long)(population - i));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        int per = r->part == ET_FAULT_NIC ? c->nics_per_node : c->gpus_per_node;
        list[c->n_faults + i] = (et_fault){.part = r->part,
                                           .node = perm[i] / per,
                                           .index = perm[i] % per,
                                           .leaf = -1,
                                           .pod = -1,
                                           .factor = r->factor};
    }
    free(perm);
    *out = list;
    return c->n_faults + (int)count;
}

/* A node's NIC bundle under its NICs' factors (left, 0 = failed), by the channel rule of fabric.h: each
 * channel of a failed NIC goes to the least loaded NIC left (the next one on ties); the bundle runs at
 * channels x the slowest channel's rate. Returns the fraction of the nominal bundle (0: no NIC left);
 * load is scratch of nics_per_node entries. */
static double bundle_fraction(const et_cluster *c, const double *left, int *load)
{
    const int R = c->nics_per_node, cpn = c->channels_per_nic;
    int alive = 0;
    for (int i = 0; i < R; i++) {
        load[i] = left[i] > 0 ? cpn : 0;
        alive += left[i] > 0;
    }
    if (!alive) return 0;
    for (int i = 0; i < R; i++)
        for (int ch = 0; left[i] <= 0 && ch < cpn; ch++) {
            int best = -1;
            for (int d = 1; d <= R; d++) {
                int j = (i + d) % R;
                if (left[j] > 0 && (best < 0 || load[j] < load[best])) best = j;
            }
            load[best]++;
        }
    double rate = INFINITY;
    for (int i = 0; i < R; i++)
        if (load[i] > 0) rate = fmin(rate, left[i] / load[i]);
    return cpn * rate; /* R x cpn channels at the slowest channel's rate, over R NICs' worth */
}

/* A fault's direct effect on the links and GPUs: NICs (and rail switches, which are NIC r of every node of
 * a unit) gather into nic_left per node, which the channel rule turns into bandwidth after. */
static void apply_fault(const et_cluster *c, et_fabric *f, const et_fault *x, et_fabric_effect *e,
                        double *nic_left)
{
    const int R = c->nics_per_node;
    e->fault = *x;
    e->fraction = x->factor;
    char part[96];
    et_fault_describe(x, part, sizeof part);
    snprintf(e->text, sizeof e->text, "%s at %.0f%%", part, 100 * x->factor);
    switch (x->part) {
    case ET_FAULT_GPU:
        f->gpu_speed[x->node * c->gpus_per_node + x->index] *= x->factor;
        snprintf(e->text, sizeof e->text, "%s computes at %.0f%% of its speed", part, 100 * x->factor);
        break;
    case ET_FAULT_NVLINK:
        for (int g = 0; g < c->gpus_per_node; g++)
            if (x->index < 0 || g == x->index)
                f->bandwidth[nvl_id(f, x->node * c->gpus_per_node + g)] *= x->factor;
        break;
    case ET_FAULT_NIC:
        nic_left[x->node * R + x->index] *= x->factor;
        break;
    case ET_FAULT_RAIL_SWITCH:
        for (int n = x->leaf * c->nodes_per_leaf; n < c->nodes && n < (x->leaf + 1) * c->nodes_per_leaf; n++)
            nic_left[n * R + x->index] *= x->factor;
        break;
    case ET_FAULT_LEAF_SWITCH:
        for (int n = x->leaf * c->nodes_per_leaf; n < c->nodes && n < (x->leaf + 1) * c->nodes_per_leaf; n++)
            f->bandwidth[cable_id(f, n)] *= x->factor;
        if (f->leaves > 1) f->bandwidth[leaf_id(f, x->leaf)] *= x->factor;
        break;
    case ET_FAULT_UPLINK:
        if (x->pod >= 0 && f->tiers >= 3)
            f->bandwidth[pod_id(f, x->pod)] *= x->factor;
        else if (x->leaf >= 0 && f->leaves > 1)
            f->bandwidth[leaf_id(f, x->leaf)] *= x->factor;
        else
            snprintf(e->text, sizeof e->text, "%s: no effect (a single %s has no up-links in use)", part,
                     x->pod >= 0 ? "pod" : "leaf");
        break;
    }
}

/* A NIC or rail fault's nodes by the channel rule: each node's bundle of NICs runs at the fraction its
 * channels leave; -1 (*err) when a node has none left. */
static int apply_channels(const et_cluster *c, et_fabric *f, et_fabric_effect *e, const double *nic_left,
                          int *load, et_error *err)
{
    const int R = c->nics_per_node;
    const double node_nic = et_fabric_node_nic_bandwidth(c);
    const et_fault *x = &e->fault;
    int first = x->part == ET_FAULT_NIC ? x->node : x->leaf * c->nodes_per_leaf;
    int last = x->part == ET_FAULT_NIC
                   ? x->node + 1
                   : (first + c->nodes_per_leaf < c->nodes ? first + c->nodes_per_leaf : c->nodes);
    double worst = 1;
    for (int n = first; n < last; n++) {
        double fr = bundle_fraction(c, nic_left + (size_t)n * R, load);
        if (fr <= 0)
            return et_error_set(err, NULL, 0, 0, "$.cluster.random_faults",
                                "every NIC of node %d failed: the node is cut off (draw fewer faults)", n);
        f->bandwidth[nic_id(f, n)] = node_nic * fr;
        f->bandwidth[cable_id(f, n)] = fmin(f->bandwidth[cable_id(f, n)], node_nic * fr);
        worst = fmin(worst, fr);
    }
    e->fraction = worst;
    char part[96];
    et_fault_describe(x, part, sizeof part);
    if (x->factor == 0)
        snprintf(e->text, sizeof e->text,
                 "%s failed: its %d NCCL channels moved to the NICs left; %s inter-node bandwidth is %.0f%% "
                 "of nominal",
                 part, c->channels_per_nic, x->part == ET_FAULT_NIC ? "the node's" : "each node's",
                 100 * worst);
    else
        snprintf(e->text, sizeof e->text,
                 "%s at %.0f%%: channels run at the slowest NIC's pace; %s inter-node bandwidth is %.0f%% "
                 "of nominal",
                 part, 100 * x->factor, x->part == ET_FAULT_NIC ? "the node's" : "each node's", 100 * worst);
    return 0;
}

/* The healthy links: NVLink ports, NICs, node cables, leaf and pod up-links. */
static void healthy_links(const et_cluster *c, et_fabric *f)
{
    const double node_nic = et_fabric_node_nic_bandwidth(c);
    for (int g = 0; g < f->gpus; g++) {
        f->bandwidth[nvl_id(f, g)] = et_cluster_nvlink_bandwidth(c);
        f->latency[nvl_id(f, g)] = c->intra_node_latency / 2;
        f->gpu_speed[g] = 1;
    }
    for (int n = 0; n < f->nodes; n++) {
        f->bandwidth[nic_id(f, n)] = node_nic;
        f->latency[nic_id(f, n)] = c->nic_latency / 2;
        f->bandwidth[cable_id(f, n)] = node_nic;
        f->latency[cable_id(f, n)] = c->switch_latency / 2;
    }
    for (int l = 0; l < f->leaves; l++) {
        f->bandwidth[leaf_id(f, l)] = leaf_uplink(c, l);
        f->latency[leaf_id(f, l)] = c->switch_latency;
    }
    for (int p = 0; f->tiers >= 3 && p < f->pods; p++) {
        f->bandwidth[pod_id(f, p)] = pod_uplink(c, p);
        f->latency[pod_id(f, p)] = c->switch_latency;
    }
}

int et_fabric_build(const et_cluster *c, et_fabric *f, et_error *err)
{
    memset(f, 0, sizeof *f);
    f->slowest = -1;
    f->nodes = c->nodes;
    f->gpus_per_node = c->gpus_per_node;
    f->gpus = c->nodes * c->gpus_per_node;
    f->leaves = et_fabric_leaves(c);
    f->tiers = c->tiers;
    f->pods = et_fabric_pods(c);
    f->nodes_per_leaf = c->nodes_per_leaf;
    f->leaves_per_pod = c->tiers >= 3 ? c->leaves_per_pod : f->leaves;
    f->n_links = f->gpus + 2 * f->nodes + f->leaves + (f->tiers >= 3 ? f->pods : 0);
    const int R = c->nics_per_node;
    f->bandwidth = malloc((size_t)f->n_links * sizeof *f->bandwidth);
    f->latency = malloc((size_t)f->n_links * sizeof *f->latency);
    f->gpu_speed = malloc((size_t)f->gpus * sizeof *f->gpu_speed);
    et_fault *faults = NULL;
    int n_faults = all_faults(c, &faults);
    double *nic_left = NULL;
    int *load = malloc((size_t)R * sizeof *load);
    if (n_faults > 0) nic_left = malloc((size_t)c->nodes * R * sizeof *nic_left);
    if (n_faults > 0) f->effects = calloc((size_t)n_faults, sizeof *f->effects);
    int rc = 0;
    if (!f->bandwidth || !f->latency || !f->gpu_speed || n_faults < 0 || !load ||
        (n_faults > 0 && (!nic_left || !f->effects)))
        rc = et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                               "out of memory for the cluster's fabric (%d GPUs)",
                               c->nodes * c->gpus_per_node);
    if (!rc) {
        healthy_links(c, f);
        for (size_t i = 0; nic_left && i < (size_t)c->nodes * R; i++)
            nic_left[i] = 1;
        for (int i = 0; i < n_faults; i++) /* direct effects, NICs gathered per node */
            apply_fault(c, f, &faults[i], &f->effects[i], nic_left);
        for (int i = 0; i < n_faults && !rc; i++) /* each node's bundle, by the channel rule */
            if (faults[i].part == ET_FAULT_NIC || faults[i].part == ET_FAULT_RAIL_SWITCH)
                rc = apply_channels(c, f, &f->effects[i], nic_left, load, err);
    }
    free(faults);
    free(nic_left);
    free(load);
    if (rc) {
        et_fabric_free(f);
        return -1;
    }
    f->n_effects = n_faults;
    for (int i = 0; i < n_faults; i++)
        if (f->slowest < 0 || f->effects[i].fraction < f->effects[f->slowest].fraction) f->slowest = i;
    return 0;
}

void et_fabric_free(et_fabric *f)
{
    free(f->bandwidth);
    free(f->latency);
    free(f->gpu_speed);
    free(f->effects);
    memset(f, 0, sizeof *f);
    f->slowest = -1;
}

/* fabric: the network of a generated cluster, as links and routes: one rule for the simulator's built-in
 * SimGrid zone, the platform XML etsim writes, and the analytic estimate's up-link shares.
 *
 * Links, all full duplex (SimGrid SPLITDUPLEX), per direction:
 *   nvl-<node>-<gpu>  each GPU's NVLink switch port (one NVLink switch fabric per node: an HGX board's
 *                     NVSwitches, or a GB200 NVL72 rack with gpus_per_node 72)
 *   nic-<node>        the node's NICs as one bundle (NCCL spreads its channels over them), nics x speed
 *   cable-<node>      the node's cables to its leaf switch (or, rail fabric, to its unit's rail switches)
 *   leaf-<l>-up       a leaf's (or rail unit's) up-links to the spine: nodes in it x node NIC bandwidth /
 *                     oversubscription
 *   pod-<p>-up        three tiers: a pod's up-links to the core: its leaves' up-link bandwidth /
 *                     core_oversubscription
 * Routes: inside a node, source port up and destination port down; between nodes, NIC, cable, then the
 * up-links to the lowest tier the two share and back down. A rail fabric keeps every inter-node hop on
 * one rail inside a unit (NCCL's rail-aligned channels, PXN), so a unit's rail switches route like one leaf;
 * a rail switch is its own failure domain (faults.h). Latencies: NVLink hop halves on the two ports, NIC
 * latency halves on the two NICs, half a switch hop per cable and one per up-link.
 *
 * Faults (faults.h) scale links: a node's bundle runs at channels x the slowest channel's rate, where NCCL's
 * channels (channels_per_nic per NIC) sit round-robin on the NICs and those of a failed NIC move to the
 * next NICs left (one failed NIC of four, 2 channels each: 8 channels on 3 NICs, 3 on the busiest: the
 * bundle runs at 8/3 of one NIC, not 3). A slow GPU scales its compute.
 *
 * Contract: et_fabric_build() fills f from a cluster (random faults drawn from their seed); -1 with *err
 * when out of memory or when drawn faults cut a node off. et_fabric_free() releases it. Link ids are dense
 * in [0, n_links); et_fabric_route() writes at most ET_FABRIC_MAX_HOPS hops. */
#ifndef ET_FABRIC_H
#define ET_FABRIC_H

#include <stddef.h>

#include "scenario.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ET_FABRIC_MAX_HOPS 10

typedef struct et_fabric_hop {
    int link;
    int down; /* 0: the link's UP direction, 1: DOWN */
} et_fabric_hop;

/* What one fault does, for the report. */
typedef struct et_fabric_effect {
    et_fault fault;
    double fraction; /* of the part's nominal bandwidth or speed its flows now get (the bundle's, for NICs) */
    char text[200];
} et_fabric_effect;

typedef struct et_fabric {
    int nodes, gpus_per_node, gpus, leaves, pods, nodes_per_leaf, leaves_per_pod, tiers;
    int n_links;
    double *bandwidth, *latency; /* [n_links] bytes/s per direction, seconds */
    double *gpu_speed;           /* [gpus] compute speed left, 1 = nominal */
    et_fabric_effect *effects;   /* one per fault, listed and drawn */
    int n_effects;
    int slowest; /* the effect with the smallest fraction, -1 when healthy */
} et_fabric;

/* Usable bandwidth per direction of one GPU's NVLink port and of one NIC: the wire figure times the link
 * class's efficiency (what the simulator's links and the closed forms both use), bytes/s. */
double et_cluster_nvlink_bandwidth(const et_cluster *c);
double et_cluster_nic_bandwidth(const et_cluster *c);

int et_fabric_build(const et_cluster *c, et_fabric *f, et_error *err);
void et_fabric_free(et_fabric *f);

int et_fabric_route(const et_fabric *f, int src_gpu, int dst_gpu, et_fabric_hop *hops);
void et_fabric_link_name(const et_fabric *f, int link, char *buf, size_t size);
void et_fabric_host_name(char *buf, size_t size, int node, int local);

/* Nominal bandwidths (no faults), per direction: a node's NIC bundle, and the smallest leaf and pod up-link
 * of the cluster (0 when the cluster has a single leaf or pod). */
double et_fabric_node_nic_bandwidth(const et_cluster *c);
double et_fabric_min_leaf_uplink(const et_cluster *c);
double et_fabric_min_pod_uplink(const et_cluster *c);
int et_fabric_leaves(const et_cluster *c);
int et_fabric_pods(const et_cluster *c);

/* Knobs that change nothing for this cluster (static strings), e.g. oversubscription with one leaf. */
int et_fabric_warnings(const et_cluster *c, const char **out, int max);

#ifdef __cplusplus
}
#endif

#endif

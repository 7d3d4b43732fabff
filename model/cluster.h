/* cluster: the machines of a scenario as its parser reads them (cluster section, docs/scenario.md): the
 * device, nodes and their GPUs and NICs, NVLink and the fabric's shape, faults, calibration factors. Types
 * only (the parser in scenario.c fills them; faults.h reads the faults and names their parts). Units SI:
 * bytes/s, seconds. */
#ifndef ET_CLUSTER_H
#define ET_CLUSTER_H

#include <stdbool.h>

#include "device_profile.h"

#define ET_MAX_FAULTS 64

typedef enum {
    ET_FAULT_GPU,
    ET_FAULT_NVLINK,
    ET_FAULT_NIC,
    ET_FAULT_LEAF_SWITCH,
    ET_FAULT_RAIL_SWITCH,
    ET_FAULT_UPLINK,
} et_fault_part;

typedef struct et_fault {
    et_fault_part part;
    int node;  /* gpu, nvlink, nic */
    int index; /* gpu: GPU in the node; nvlink: GPU or -1 for every port of the node; nic: NIC; rail: rail */
    int leaf;  /* leaf_switch, uplink (-1: a pod's up-links); rail_switch: the unit */
    int pod;   /* uplink of a pod (three-tier fat tree), else -1 */
    double factor; /* fraction left, 0 = failed */
} et_fault;

/* A random fraction of one kind of part, drawn from a seed (gpu, nvlink or nic). */
typedef struct et_random_faults {
    bool set;
    et_fault_part part;
    double fraction; /* of the parts of that kind, rounded to the nearest count */
    double factor;
    unsigned long long seed;
} et_random_faults;

typedef enum { ET_TOPO_FAT_TREE, ET_TOPO_RAIL } et_topology;
extern const char *const et_topology_names[]; /* "fat_tree", "rail", NULL */

typedef struct et_cluster {
    et_device_profile device;
    int nodes;
    int gpus_per_node;
    double intra_node_bandwidth; /* per GPU, per direction, bytes/s (half the bidirectional NVLink figure) */
    double intra_node_latency;   /* seconds per hop */
    int nics_per_node;
    double nic_bandwidth; /* per NIC, per direction, bytes/s */
    double nic_latency;   /* seconds, NIC to NIC through one switch */
    et_topology topology;
    double oversubscription; /* leaf down-links : leaf up-links bandwidth ratio (1 = non-blocking) */
    int nodes_per_leaf;      /* fat tree: nodes under one leaf switch; rail: nodes of one unit */
    int tiers;               /* 2: leaf and spine; 3: leaf, spine and core (pods of leaves_per_pod leaves) */
    int leaves_per_pod;
    double core_oversubscription; /* a pod's down-links : its up-links to the core */
    int channels_per_nic;         /* NCCL channels per NIC: how traffic moves off a failed NIC (fabric.h) */
    et_fault faults[ET_MAX_FAULTS];
    int n_faults;
    et_random_faults random_faults;
    double switch_latency;          /* seconds per switch hop */
    double collective_step_latency; /* NCCL per-step software latency, seconds */
    double bandwidth_factor;        /* achieved / nominal link bandwidth (calibration; 1 = wire speed) */
    double intra_node_efficiency;   /* achieved / wire bandwidth of NVLink collectives (link class) */
    double inter_node_efficiency;   /* achieved / wire bandwidth of NIC collectives (link class) */
    double latency_factor;          /* multiplies every link latency (calibration) */
    char platform_file[512];        /* user-supplied SimGrid platform, "" to generate one */
} et_cluster;

#endif

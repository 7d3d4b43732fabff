/* collectives: closed-form times of NCCL-style collectives on the cluster of a scenario (alpha-beta).
 *
 * A communicator of N = n*k ranks spans n nodes with k ranks on each. Bandwidths are bytes/s per direction:
 * `intra_bw` per GPU (NVSwitch port), `inter_bw` per node as seen by this communicator (the node's NICs
 * aggregated, shared by every communicator on the node). Latencies alpha_* are seconds per algorithm step
 * (path latency plus NCCL's per-step software latency). S is bytes per rank.
 *   ring          2(N-1) alpha + 2(N-1)/N * S / B_ring,  B_ring = intra_bw (n = 1) or min(intra_bw, inter_bw)
 *   hierarchical  intra reduce-scatter, n-node ring all-reduce of S/k on each of k rings, intra all-gather
 *   tree          NCCL's pipelined double binary tree over nodes with an intra-node chain:
 *                 2 * [(k-1) alpha_intra + depth alpha_inter + max(S/intra_bw, load * S/inter_bw)]
 *   all-to-all    every rank sends S / N to each peer at once (NCCL's grouped send/receive):
 *                 alpha + max((k-1)/N * S / intra_bw, k (N-k)/N * S / inter_bw), the node's k ranks sharing
 *                 its NICs (one alpha: every peer's transfer is posted together)
 * The simulator (sim/) plays the same algorithms as flows; tests check it against these forms. */
#ifndef ET_COLLECTIVES_H
#define ET_COLLECTIVES_H

#include "fabric.h"
#include "nccl_tuning.h"
#include "scenario.h"

typedef struct et_comm_group {
    int ranks;          /* N */
    int nodes;          /* n */
    int ranks_per_node; /* k */
    double intra_bw;
    double inter_bw;
    double alpha_intra;
    double alpha_inter;
    /* The group's share of the up-links it crosses (fabric.h): the smallest leaf (pod) up-link over the
     * groups that share a node's NICs, each of whose rings crosses every leaf (pod) boundary once each
     * way; 0 when the group sits under one leaf (pod). nodes_per_leaf, nodes_per_pod: the blocks. */
    double leaf_up_bw, pod_up_bw;
    int nodes_per_leaf, nodes_per_pod;
    /* for NCCL's algorithm choice (nccl_tuning.h): the device's compute capability (0: unknown) and the
     * communicator's channels, `channels_per_nic` x its share of the node's NICs */
    double compute_capability;
    int channels;
} et_comm_group;

/* The data-parallel communicator of a scenario (tensor-parallel ranks fill a node first). */
et_comm_group et_dp_group(const et_scenario *s);
/* The tensor-parallel communicator (inside one node). */
et_comm_group et_tp_group(const et_scenario *s);
/* The expert-parallel communicator: `parallelism.expert` consecutive data-parallel ranks; with the experts
 * folded over the tensor ranks (et_scenario_experts_folded) x consecutive ranks, x / t tensor groups. */
et_comm_group et_ep_group(const et_scenario *s);
/* The ranks holding the same experts (expert parallelism x): every x-th data-parallel rank, d / x of them
 * (folded: every (x / t)-th, t d / x of them); their expert gradients are reduced together. The
 * data-parallel group when x is 1. */
et_comm_group et_ep_data_group(const et_scenario *s);
/* The context-parallel ring: `parallelism.context` consecutive ranks after the tensor ranks. */
et_comm_group et_cp_group(const et_scenario *s);

/* One step of a ring: every rank sends `bytes` to its neighbour, alpha + bytes / B_ring. */
double et_ring_step_time(const et_comm_group *g, double bytes);

/* The latency of one step of a collective over the group: alpha_inter when it spans nodes, else
 * alpha_intra (rings, all-to-alls; the simulator pays the same). */
double et_step_alpha(const et_comm_group *g);

double et_ring_allreduce_time(const et_comm_group *g, double bytes);
double et_hierarchical_allreduce_time(const et_comm_group *g, double bytes);
double et_tree_allreduce_time(const et_comm_group *g, double bytes);
/* NCCL's view of the group (bus bandwidths of ET's ring and tree terms) and its choice for `bytes`. */
et_nccl_choice et_nccl_allreduce_choice(const et_comm_group *g, double bytes);
double et_ring_reduce_scatter_time(const et_comm_group *g, double bytes); /* bytes = full buffer */
double et_ring_allgather_time(const et_comm_group *g, double bytes);      /* bytes = full buffer */
double et_alltoall_time(const et_comm_group *g, double bytes); /* bytes = each rank's send buffer */
/* An all-to-all that sends each token once to every GPU and node it reaches (DeepEP's normal kernels):
 * token_bytes a token, gpu_copies the other GPUs of the group it reaches (over NVLink, the remote ones
 * forwarded inside their node), node_copies the other nodes (over the fabric, this GPU's share of its node's
 * links); the latency and the slower of the two. */
double et_alltoall_dedup_time(const et_comm_group *g, double token_bytes, double gpu_copies,
                              double node_copies);

/* Time of an all-reduce with `algo`: AUTO runs the algorithm NCCL's tuning model picks (nccl_tuning.h),
 * FASTEST the faster of ET's ring and tree closed forms (what calibrated bandwidths and latencies say);
 * the pick goes to *chosen (may be NULL). */
double et_allreduce_time(const et_comm_group *g, et_coll_algo algo, double bytes, et_coll_algo *chosen);

/* Double binary tree over n nodes: parent of node i in tree t (0 or 1), -1 for the root. */
int et_tree_parent(int n, int tree, int i);
/* Children of node i in tree t (0, 1 or 2 of them) into out[]; returns how many. */
int et_tree_children(int n, int tree, int i, int out[2]);
/* Depth (edges from the deepest leaf to the root) of the double binary tree over n nodes. */
int et_tree_depth(int n);
/* Largest per-direction NIC load of any node, in units of S, when each tree carries S/2. */
double et_tree_max_nic_load(int n);
/* Largest per-direction load, in units of S, on the up-links of any block of `span` consecutive nodes (a
 * leaf or a pod): the tree edges with one end inside the block, S/2 each. */
double et_tree_max_uplink_load(int n, int span);

/* nccl-tests conventions: algbw = S / t; busbw = algbw * factor, factor 2(N-1)/N for all-reduce and
 * (N-1)/N for reduce-scatter and all-gather. */
double et_busbw_factor_allreduce(int ranks);
double et_busbw_factor_gather(int ranks);

#endif

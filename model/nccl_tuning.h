/* nccl_tuning: which all-reduce algorithm NCCL's tuner picks for a message, by its own cost model.
 *
 * NCCL chooses an (algorithm, protocol) pair per call from a latency-bandwidth model (src/graph/tuning.cc,
 * ncclTopoTuneModel and ncclTopoGetAlgoTime). ET follows that model for `parallelism.allreduce: auto`, so
 * the algorithm a bucket runs with is the one NCCL would run, not the one ET's own closed forms find
 * faster; the bucket's time is then ET's closed form (or the simulator's flows) of that algorithm.
 *
 * For N ranks on n nodes (k = N/n per node), message S bytes, algorithm a in {ring, tree} and protocol p
 * in {LL, LL128, Simple}:
 *   time(a, p) = lat(a, p) + S / algbw(a, p)
 *   lat(ring, p) = base(ring, p) + (2(N-1) - i) max(hw_intra(ring, p), o(p)) + i hw_net(ring, p),
 *                  i = 2n inter-node steps when n > 1 (else 0), o(p) the network post overhead (x3 Simple)
 *                  times 1.4 (compute capability >= 8.0, else 1.9) for Simple across nodes when
 *                  S / (channels N) >= 64 bytes (the ring's plateau)
 *   lat(tree, p) = base(tree, p) + 2 ((k-1) hw_intra(tree, p) + floor(log2 n) hw_net(tree, p))
 *   algbw(ring, p) = busbw(ring, p) N / (2(N-1));  algbw(tree, p) = busbw(tree, p) / 2 x correction(p, S)
 *   busbw: the group's bottleneck bandwidth (ET's ring and tree bandwidth terms), then NCCL's refinements:
 *          ring LL 1/4 (at most the LL cap), ring LL128 0.92 (0.7 with one rank per node),
 *          tree 0.92, tree LL further 1/3.8 (at most the LL cap), tree LL128 120/128 (7/9 on one node)
 * Constants (microseconds, GB/s): the tables base, hw and correction and the LL caps are NCCL 2.28.9's,
 * read from the constant tables of libnccl.so.2 of CUDA 13.0 (docs/cost-model.md lists them). Left out:
 * NCCL's per-channel bandwidth caps (ET does not model the topology search's channel count beyond
 * `channels_per_nic`), CollNet, NVLS and PAT, and tuner plugins. */
#ifndef ET_NCCL_TUNING_H
#define ET_NCCL_TUNING_H

typedef enum { ET_NCCL_LL, ET_NCCL_LL128, ET_NCCL_SIMPLE, ET_NCCL_PROTOCOLS } et_nccl_protocol;
extern const char *const et_nccl_protocol_names[]; /* "LL", "LL128", "Simple", NULL */

typedef enum { ET_NCCL_TREE, ET_NCCL_RING, ET_NCCL_ALGORITHMS } et_nccl_algorithm;

/* What NCCL's model needs of a communicator. Bandwidths in bytes/s, in nccl-tests bus-bandwidth terms: a
 * ring moves 2(N-1)/N S at ring_busbw, a tree 2 S at tree_busbw (before NCCL's refinements). */
typedef struct et_nccl_comm {
    int ranks, nodes;
    double ring_busbw, tree_busbw;
    double compute_capability; /* 8.0 A100, 9.0 H100/H200, 10.0 B200; 0: unknown, taken as 8.0 */
    int channels;              /* NCCL channels of the communicator (at least 1) */
    int nvlink;                /* intra-node links are NVLink (else PCI latencies) */
} et_nccl_comm;

typedef struct et_nccl_choice {
    et_nccl_algorithm algorithm;
    et_nccl_protocol protocol;
    double seconds; /* NCCL's own estimate of the call */
} et_nccl_choice;

/* NCCL's estimate of an all-reduce of `bytes` with algorithm a and protocol p, seconds. */
double et_nccl_allreduce_time(const et_nccl_comm *c, et_nccl_algorithm a, et_nccl_protocol p, double bytes);

/* The pair with the smallest estimate; ties to the first in NCCL's order (tree, ring; LL, LL128, Simple). */
et_nccl_choice et_nccl_choose_allreduce(const et_nccl_comm *c, double bytes);

#endif

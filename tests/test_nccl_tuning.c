/* NCCL's tuning model (model/nccl_tuning.h): its estimates against figures computed by hand from NCCL
 * 2.28.9's tables, and the algorithm `parallelism.allreduce: auto` runs against the one ET's closed forms
 * find faster (`fastest`). */
#include "check.h"
#include "collectives.h"
#include "nccl_tuning.h"

/* 8 A100 per node, NVLink 234 GB/s per GPU, 8 NICs of 21.25 GB/s (170 GB/s a node), 16 channels */
static et_nccl_comm a100(int nodes)
{
    const double bw = nodes == 1 ? 234e9 : 170e9;
    return (et_nccl_comm){8 * nodes, nodes, bw, bw, 8.0, 16, 1};
}

static void test_hand_computed(void)
{
    et_nccl_comm c = a100(16);
    /* ring, Simple, 128 ranks on 16 nodes, 1 GB: 254 steps, 32 of them between nodes; the plateau x1.4 */
    double lat = (8.4 + (254 - 32) * 3.4 + 32 * 14.0) * 1.4;
    CHECK_REL(et_nccl_allreduce_time(&c, ET_NCCL_RING, ET_NCCL_SIMPLE, 1e9),
              lat * 1e-6 + 1e9 / (170e9 * 128 / 254), 1e-12, "ring Simple, 128 ranks, 1 GB");
    /* tree, LL128, 64 ranks on 8 nodes, 1 MiB: bus 170 x 0.92 x 120/128, halved, x0.8 (log2(2^20/64) = 14) */
    c = a100(8);
    lat = 14.0 + 2 * (7 * 1.25 + 3 * 8.5);
    CHECK_REL(et_nccl_allreduce_time(&c, ET_NCCL_TREE, ET_NCCL_LL128, 1048576),
              lat * 1e-6 + 1048576 / (170e9 * .92 * 120 / 128 * 0.5 * 0.8), 1e-12,
              "tree LL128, 64 ranks, 1 MiB");
    /* ring, LL, one node: a quarter of the bus bandwidth, NVLink latencies, no network overhead */
    c = a100(1);
    CHECK_REL(et_nccl_allreduce_time(&c, ET_NCCL_RING, ET_NCCL_LL, 65536),
              (6.6 + 14 * 0.6) * 1e-6 + 65536 / (234e9 / 4 * 8 / 14), 1e-12, "ring LL, one node, 64 KiB");
    /* the LL cap: 87.7 GB/s on one Ampere node binds a quarter of 400 GB/s */
    c.ring_busbw = 400e9;
    CHECK_REL(et_nccl_allreduce_time(&c, ET_NCCL_RING, ET_NCCL_LL, 65536),
              (6.6 + 14 * 0.6) * 1e-6 + 65536 / (87.7e9 * 8 / 14), 1e-12, "ring LL capped on one node");
    CHECK(et_nccl_allreduce_time(&(et_nccl_comm){1, 1, 1e9, 1e9, 8, 1, 1}, ET_NCCL_RING, ET_NCCL_SIMPLE,
                                 1e6) == 0,
          "one rank costs nothing");
}

static void test_choices(void)
{
    /* inside one node NCCL runs rings at every size; LL for small messages, Simple for large */
    et_nccl_comm c = a100(1);
    for (double S = 1024; S <= 1e9; S *= 4)
        CHECK(et_nccl_choose_allreduce(&c, S).algorithm == ET_NCCL_RING, "one node: ring at %.0f bytes", S);
    CHECK(et_nccl_choose_allreduce(&c, 4096).protocol == ET_NCCL_LL, "one node: LL at 4 kB");
    CHECK(et_nccl_choose_allreduce(&c, 1e9).protocol == ET_NCCL_SIMPLE, "one node: Simple at 1 GB");
    /* small messages across many nodes: the tree's log-depth latency */
    c = a100(64);
    CHECK(et_nccl_choose_allreduce(&c, 4096).algorithm == ET_NCCL_TREE, "512 ranks: tree at 4 kB");
    /* medium messages across a few nodes: the ring, where the tree's shortfall (0.92 and the correction
     * factors) outweighs its latency */
    c = a100(4);
    CHECK(et_nccl_choose_allreduce(&c, 16e6).algorithm == ET_NCCL_RING, "32 ranks: ring at 16 MB");
}

/* The case: on 4 nodes, ET's own closed forms find the tree faster at 16 MB; NCCL runs the ring,
 * and `auto` follows NCCL. */
static void test_auto_follows_nccl(void)
{
    et_comm_group g = {.ranks = 32,
                       .nodes = 4,
                       .ranks_per_node = 8,
                       .intra_bw = 234e9,
                       .inter_bw = 170e9,
                       .alpha_intra = 4.7e-6,
                       .alpha_inter = 6.9e-6,
                       .compute_capability = 8.0,
                       .channels = 16};
    const double S = 16e6;
    et_coll_algo fastest, nccl;
    double t_fastest = et_allreduce_time(&g, ET_COLL_FASTEST, S, &fastest);
    double t_auto = et_allreduce_time(&g, ET_COLL_AUTO, S, &nccl);
    CHECK(fastest == ET_COLL_TREE, "ET's closed forms: the tree is faster at 16 MB on 4 nodes");
    CHECK(nccl == ET_COLL_RING, "auto: NCCL's ring at 16 MB on 4 nodes");
    CHECK(t_auto == et_ring_allreduce_time(&g, S), "auto charges the ring's closed form");
    CHECK(t_fastest == et_tree_allreduce_time(&g, S) && t_fastest < t_auto, "fastest charges the tree's");
}

int main(void)
{
    test_hand_computed();
    test_choices();
    test_auto_follows_nccl();
    return check_summary("test_nccl_tuning");
}

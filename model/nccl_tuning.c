#include "nccl_tuning.h"

#include <math.h>
#include <stddef.h>

const char *const et_nccl_protocol_names[] = {"LL", "LL128", "Simple", NULL};

/* NCCL 2.28.9 (libnccl.so.2 of CUDA 13.0), src/graph/tuning.cc: latencies in microseconds, bandwidth caps in
 * GB/s, for the tree and ring rows of its algorithm tables, protocols LL, LL128, Simple. */
static const double base_latency[ET_NCCL_ALGORITHMS][ET_NCCL_PROTOCOLS] = {{6.8, 14.0, 8.4},
                                                                           {6.6, 14.0, 8.4}};
enum { HW_NVLINK, HW_PCI, HW_NET };
static const double hw_latency[3][ET_NCCL_ALGORITHMS][ET_NCCL_PROTOCOLS] = {
    {{.6, 1.25, 4.0}, {.6, 1.9, 3.4}},   /* NVLink */
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}},  /* PCI */
    {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}} /* network */
};
/* rows: Volta, Ampere, Hopper, Blackwell; columns: 1 node, 2 nodes, more */
static const double ll_max_bw[4][3] = {
    {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
static const double ring_ll128_channel_bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {73.4, 34.6, 73.4}};
static const double tree_ll128_channel_bw[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
static const double tree_channel_bw[4][3] = {
    {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
/* the tree's measured shortfall by log2(bytes / 64), 0..22 */
static const double tree_correction[ET_NCCL_PROTOCOLS][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
/* NCCL_NET_OVERHEAD's default on x86 Intel hosts, microseconds per step (three for Simple) */
#define NET_OVERHEAD_US 1.0

static int log2i(double x)
{
    int l = 0;
    for (long long n = (long long)x; n >>= 1;)
        l++;
    return l;
}

static int arch_row(double cc)
{
    if (cc <= 0) cc = 8.0;
    return cc < 8 ? 0 : cc < 9 ? 1 : cc < 10 ? 2 : 3;
}

double et_nccl_allreduce_time(const et_nccl_comm *c, et_nccl_algorithm a, et_nccl_protocol p, double bytes)
{
    const int N = c->ranks, n = c->nodes > 0 ? c->nodes : 1, k = N / n,
              ch = c->channels > 0 ? c->channels : 1;
    if (N <= 1 || bytes <= 0) return 0;
    const int row = arch_row(c->compute_capability), col = n == 1 ? 0 : n == 2 ? 1 : 2;
    const double ll_cap = ll_max_bw[row][col];
    /* bus bandwidth, GB/s */
    double bus = (a == ET_NCCL_RING ? c->ring_busbw : c->tree_busbw) / 1e9;
    if (a == ET_NCCL_RING && p == ET_NCCL_LL) bus = fmin(ll_cap, bus / 4);
    if (a == ET_NCCL_RING && p == ET_NCCL_LL128)
        bus = fmin(bus * (k < 2 ? 0.7 : 0.92), ch * ring_ll128_channel_bw[row][col]);
    if (a == ET_NCCL_TREE) bus = fmin(bus * .92, ch * tree_channel_bw[row][col]);
    if (a == ET_NCCL_TREE && p == ET_NCCL_LL) bus = fmin(bus / 3.8, ll_cap);
    if (a == ET_NCCL_TREE && p == ET_NCCL_LL128)
        bus = fmin(bus * (n == 1 ? 7.0 / 9.0 : 120.0 / 128.0), ch * tree_ll128_channel_bw[row][col]);
    const int steps = 2 * (N - 1), inter_steps = n > 1 ? 2 * n : 0;
    double algbw = a == ET_NCCL_RING ? bus * N / steps : bus * 0.5;
    const double intra = hw_latency[c->nvlink ? HW_NVLINK : HW_PCI][a][p], inter = hw_latency[HW_NET][a][p];
    double lat = base_latency[a][p];
    if (a == ET_NCCL_RING) {
        const double overhead = n > 1 ? NET_OVERHEAD_US * (p == ET_NCCL_SIMPLE ? 3 : 1) : 0;
        lat += (steps - inter_steps) * fmax(intra, overhead) + inter_steps * inter;
    } else {
        lat += 2 * ((k - 1) * intra + log2i(n) * inter);
    }
    const int log_size = log2i(bytes / 64);
    if (a == ET_NCCL_TREE && log_size < 23) algbw *= tree_correction[p][log_size];
    if (a == ET_NCCL_RING && p == ET_NCCL_SIMPLE && n > 1 && bytes / ((double)ch * N) >= 64)
        lat *= row == 0 ? 1.9 : 1.4; /* below compute capability 8.0 */
    return lat * 1e-6 + bytes / (algbw * 1e9);
}

et_nccl_choice et_nccl_choose_allreduce(const et_nccl_comm *c, double bytes)
{
    et_nccl_choice best = {ET_NCCL_RING, ET_NCCL_SIMPLE, INFINITY};
    for (int a = 0; a < ET_NCCL_ALGORITHMS; a++)
        for (int p = 0; p < ET_NCCL_PROTOCOLS; p++) {
            const double t = et_nccl_allreduce_time(c, (et_nccl_algorithm)a, (et_nccl_protocol)p, bytes);
            if (t < best.seconds) best = (et_nccl_choice){(et_nccl_algorithm)a, (et_nccl_protocol)p, t};
        }
    return best;
}

/* Execution schedules against hand-computed figures: activation memory with sequence parallelism and
 * selective or full recomputation (Korthikanti et al. 2022), the interleaved 1F1B bubble, sequence
 * parallelism's collectives, what selective recomputation repeats, and GEMM tile and wave quantization. */
#include <math.h>
#include <string.h>

#include "analytic.h"
#include "batch.h"
#include "check.h"
#include "collectives.h"
#include "graph.h"
#include "memory.h"
#include "phase_time.h"
#include "scenario_graph.h"

/* A shipped scenario, by its path under scenarios/. */
static int load_shipped(const char *relative, et_scenario *s)
{
    et_error err;
    char path[512];
    snprintf(path, sizeof path, ET_SOURCE_DIR "/scenarios/%s", relative);
    int rc = et_scenario_load(path, s, &err);
    CHECK(rc == 0, "%s loads: %s", path, err.text);
    return rc;
}

/* A validation row: load("22b-full") is scenarios/validation/korthikanti-2022-gpt-22b-full.json. */
static int load(const char *name, et_scenario *s)
{
    char relative[128];
    snprintf(relative, sizeof relative, "validation/korthikanti-2022-gpt-%s.json", name);
    return load_shipped(relative, s);
}

/* Activation bytes of stage 0 of 22B (48 layers, s 2048, b 1, h 6144, a 64, t 8), cut into 2 stages and 4
 * micro-batches by hand: 2 micro-batches in flight on stage 0, 24 layers, 16-bit activations. */
static double stage0_activations(et_scenario *s, et_recompute mode, bool sp)
{
    s->parallel.pipeline = 2;
    s->parallel.virtual_pipeline = 1;
    s->batch.local = 1;
    s->batch.grad_accum = 4;
    s->parallel.recompute = mode;
    s->parallel.sequence_parallel = sp;
    et_graph g;
    et_error err;
    et_graph_options o = et_scenario_graph_options(s, 0);
    if (et_graph_build(&s->model, &o, &g, &err)) return -1;
    et_batch_shape b = {.sequences = 1, .tokens = 2048, .tokens_sq = 2048.0 * 2048, .predictions = 2048};
    et_memory m = et_memory_estimate(s, &g, &b);
    et_graph_free(&g);
    return m.activations;
}

static void test_activation_memory(void)
{
    et_scenario s;
    if (load("22b-selective", &s)) return;
    const double sbh = 2048.0 * 6144, input = sbh * 2; /* the embedding output each micro-batch keeps */
    /* selective + sequence parallelism: s b h 34 / t per layer */
    CHECK_REL(stage0_activations(&s, ET_RECOMPUTE_SELECTIVE, true), 2 * (24 * sbh * 34 / 8 + input), 1e-12,
              "selective + sequence parallel: 2 x (24 x sbh x 34/t + 2sbh)");
    /* sequence parallelism alone: s b h (34 / t + 5 a s / (h t)) */
    CHECK_REL(stage0_activations(&s, ET_RECOMPUTE_NONE, true),
              2 * (24 * sbh * (34.0 / 8 + 5.0 * 64 * 2048 / (6144 * 8)) + input), 1e-12,
              "sequence parallel: sbh (34/t + 5as/(ht)) per layer");
    /* tensor parallelism alone: s b h (10 + 24 / t + 5 a s / (h t)) */
    const double tp_layer = sbh * (10 + 24.0 / 8 + 5.0 * 64 * 2048 / (6144 * 8));
    CHECK_REL(stage0_activations(&s, ET_RECOMPUTE_NONE, false), 2 * (24 * tp_layer + input), 1e-12,
              "tensor parallel: sbh (10 + 24/t + 5as/(ht)) per layer");
    /* full recomputation: each layer's 2sbh input per micro-batch in flight, one layer's full set once */
    CHECK_REL(stage0_activations(&s, ET_RECOMPUTE_FULL, false), 2 * (24 * 2 * sbh + input) + tp_layer, 1e-12,
              "full recomputation: 2 x (24 x 2sbh + 2sbh) + one layer");
    et_scenario_free(&s);
}

static void test_interleaved_bubble(void)
{
    et_scenario s;
    if (load("175b-selective", &s)) return;
    et_error err;
    et_estimate v3, v1;
    CHECK(s.parallel.virtual_pipeline == 3 && s.parallel.pipeline == 8, "175B runs 8 stages x 3 chunks");
    CHECK(et_analytic_estimate(&s, &v3, &err) == 0, "estimate: %s", err.text);
    const et_batch_shape b = et_batch_expected(&s);
    const double send3 = et_pipeline_send_time(&s, &b), m = (double)s.batch.grad_accum;
    s.parallel.virtual_pipeline = 1;
    const double send1 = et_pipeline_send_time(&s, &b);
    CHECK(et_analytic_estimate(&s, &v1, &err) == 0, "estimate: %s", err.text);
    CHECK_REL(send3, 3 * send1, 1e-12, "three chunk boundaries: three sends per micro-batch and direction");
    const double micro = (v3.forward + v3.backward + v3.tp_comm) / m;
    CHECK_REL(v3.bubble, 7.0 / 3 * (micro + 2 * send3), 1e-12, "bubble (p - 1)/v micro-batches");
    CHECK_REL(v1.bubble, 7.0 * (micro + 2 * send1), 1e-12, "plain 1F1B: (p - 1) micro-batches");
    CHECK_REL(v3.pp_comm, 3 * v1.pp_comm, 1e-12, "interleaving triples the pipeline sends");
    et_scenario_free(&s);
}

/* Sum of tensor-parallel communication seconds of the ops of one layer. */
static double layer_tp_seconds(const et_scenario *s, const et_graph *g, int layer, const et_batch_shape *b)
{
    et_comm_group tp = et_tp_group(s);
    double t = 0;
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].layer == layer && et_op_is_comm(g->ops[i].kind) && !g->ops[i].regather)
            t += et_tp_comm_time(&tp, g->ops[i].kind, et_linear_eval(&g->ops[i].bytes, b));
    return t;
}

/* Two graphs of stage 0 of a scenario: one with options `a`, one with `b`; 0 when both built. */
static int build_pair(const et_scenario *s, const et_graph_options *a, const et_graph_options *b,
                      et_graph *ga, et_graph *gb)
{
    et_error err;
    int ok = et_graph_build(&s->model, a, ga, &err) == 0;
    CHECK(ok, "first graph: %s", err.text);
    if (!ok) return -1;
    ok = et_graph_build(&s->model, b, gb, &err) == 0;
    CHECK(ok, "second graph: %s", err.text);
    if (!ok) et_graph_free(ga);
    return ok ? 0 : -1;
}

static void test_sequence_parallel(void)
{
    et_scenario s;
    if (load("22b-selective", &s)) return;
    const et_batch_shape b = et_batch_expected(&s);
    et_graph sp, plain;
    et_graph_options o = et_scenario_graph_options(&s, 0), off = o;
    CHECK(o.sequence_parallel, "the 22B selective row runs sequence parallel");
    off.sequence_parallel = false;
    if (build_pair(&s, &o, &off, &sp, &plain)) return;
    /* a ring all-reduce is a reduce-scatter and an all-gather: the same time, split in two */
    CHECK_REL(layer_tp_seconds(&s, &sp, 3, &b), layer_tp_seconds(&s, &plain, 3, &b), 1e-12,
              "layer 3: all-gathers + reduce-scatters cost the all-reduces they replace (re-gathers aside)");
    int ag = 0, rs = 0, ar = 0, re = 0;
    for (int i = 0; i < sp.n_ops; i++)
        if (sp.ops[i].layer == 3) {
            ag += sp.ops[i].kind == ET_OP_TP_ALLGATHER;
            rs += sp.ops[i].kind == ET_OP_TP_REDUCE_SCATTER;
            ar += sp.ops[i].kind == ET_OP_TP_ALLREDUCE;
            re += sp.ops[i].regather;
        }
    CHECK(ag == 6 && rs == 4 && ar == 0 && re == 2,
          "layer 3: 4 all-gathers and 2 re-gathers, 4 reduce-scatters, no all-reduce (%d, %d, %d, %d)", ag,
          rs, ar, re);
    /* backward all-gathers the q, k, v and first MLP products' inputs again for their weight gradients: the
     * forward all-gather's bytes, just before the input-gradient product; none without sequence parallelism
     */
    const char *const regathers[][3] = {
        {"layer.3.attn.tp_allgather.regather", "layer.3.attn.tp_allgather", "layer.3.attn.qkv.bwd_data"},
        {"layer.3.mlp.tp_allgather.regather", "layer.3.mlp.tp_allgather", "layer.3.mlp.fc1.bwd_data"}};
    for (int k = 0; k < 2; k++) {
        const int r = et_graph_find(&sp, regathers[k][0]), f = et_graph_find(&sp, regathers[k][1]);
        CHECK(r >= 0 && f >= 0 && sp.ops[r].phase == ET_PHASE_BACKWARD && sp.ops[r].regather,
              "%s is a backward re-gather", regathers[k][0]);
        if (r < 0 || f < 0) continue;
        const double moved = et_linear_eval(&sp.ops[r].bytes, &b),
                     forward = et_linear_eval(&sp.ops[f].bytes, &b);
        CHECK(forward > 0 && fabs(moved - forward) <= 1e-12 * forward,
              "%s moves what the forward all-gather does", regathers[k][0]);
        CHECK(r + 1 < sp.n_ops && !strcmp(sp.ops[r + 1].id, regathers[k][2]), "%s precedes %s",
              regathers[k][0], regathers[k][2]);
        CHECK(et_graph_find(&plain, regathers[k][0]) < 0, "no %s without sequence parallelism",
              regathers[k][0]);
    }
    const int a = et_graph_find(&sp, "layer.3.attn.layernorm"),
              p = et_graph_find(&plain, "layer.3.attn.layernorm");
    CHECK(a >= 0 && p >= 0, "layer norms exist");
    if (a >= 0 && p >= 0)
        CHECK_REL(et_linear_eval(&sp.ops[a].bytes, &b), et_linear_eval(&plain.ops[p].bytes, &b) / 8, 1e-12,
                  "a sequence-parallel layer norm moves 1/t of the bytes");
    et_graph_free(&sp);
    et_graph_free(&plain);
    et_scenario_free(&s);
}

static void test_selective_recompute(void)
{
    et_scenario s;
    if (load("22b-selective", &s)) return;
    et_error err;
    et_graph g;
    et_graph_options o = et_scenario_graph_options(&s, 0);
    if (et_graph_build(&s.model, &o, &g, &err)) return;
    static const char *const core[] = {"attn.scores", "attn.softmax", "attn.dropout", "attn.context"};
    int recomputed = 0, found = 0;
    char id[80];
    for (int i = 0; i < g.n_ops; i++)
        recomputed += g.ops[i].layer == 5 && strstr(g.ops[i].id, ".recompute") != NULL;
    for (int k = 0; k < 4; k++) {
        snprintf(id, sizeof id, "layer.5.%s.recompute", core[k]);
        found += et_graph_find(&g, id) >= 0;
    }
    CHECK(recomputed == 4 && found == 4,
          "selective recomputation repeats the attention core only (%d ops, %d of 4)", recomputed, found);
    et_graph_free(&g);
    et_scenario_free(&s);
}

static void test_wave_quantization(void)
{
    et_device_profile d;
    et_error err;
    CHECK(et_device_profile_load(ET_SOURCE_DIR "/scenarios/profiles/a100-sxm4-80gb.json", &d, &err) == 0,
          "A100 profile loads");
    /* 1024 x 1024 on 128 x 128 tiles: 64 tiles, one partial wave of 108 SMs */
    CHECK_REL(et_gemm_wave_efficiency(&d, 1024, 1024), 64.0 / 108, 1e-12, "1024^2: 64 of 108 SMs busy");
    /* 8192 x 8192 on 256 x 128: 2048 tiles, 19 waves of 108 (2052 slots) */
    CHECK_REL(et_gemm_wave_efficiency(&d, 8192, 8192), 2048.0 / 2052, 1e-12, "8192^2: 2048 of 2052 slots");
    /* 8192 x 2304 (22B's q, k, v shard): 128 x 128 gives 1152 tiles in 11 waves */
    CHECK_REL(et_gemm_wave_efficiency(&d, 8192, 2304), 1152.0 / 1188, 1e-12,
              "8192 x 2304: 1152 of 1188 slots");
    /* a skinny product runs on a narrow tile: 4096 x 24 best on 128 x 32 tiles (24 of 32 columns used),
     * 32 tiles in one partial wave of 108 */
    CHECK_REL(et_gemm_wave_efficiency(&d, 4096, 24), 24.0 / 32 * 32 / 108, 1e-12,
              "4096 x 24: narrow tile, partial wave");
}

static void test_host_bound(void)
{
    et_scenario s;
    if (load("22b-full", &s)) return;
    et_error err;
    et_estimate device, host;
    CHECK(s.host.mode == ET_LAUNCH_FRAMEWORK_EAGER && fabs(s.host.per_kernel - 9.8e-6) < 1e-12,
          "default launch: framework eager, 9.8 us per kernel");
    CHECK(et_analytic_estimate(&s, &device, &err) == 0, "estimate: %s", err.text);
    /* a host at 1 ms a kernel is slower than the device: each phase takes kernels x 1 ms */
    s.host.per_kernel = 1e-3;
    CHECK(et_analytic_estimate(&s, &host, &err) == 0, "estimate: %s", err.text);
    et_graph g;
    et_graph_options o = et_scenario_graph_options(&s, 0);
    if (et_graph_build(&s.model, &o, &g, &err)) return;
    const et_batch_shape b = et_batch_expected(&s);
    double fwd = 0, bwd = 0;
    for (int i = 0; i < g.n_ops; i++) {
        const et_op *op = &g.ops[i];
        if (et_op_is_comm(op->kind) || et_op_time(op, &b, &s.cluster.device, s.precision) <= 0) continue;
        if (op->phase == ET_PHASE_FORWARD) fwd += op->kernels;
        if (op->phase == ET_PHASE_BACKWARD) bwd += op->kernels;
    }
    CHECK(device.forward < fwd * 1e-3, "the device alone is faster than such a host");
    CHECK_REL(host.forward, fwd * 1e-3, 1e-12, "host-bound forward: its kernels x 1 ms");
    CHECK_REL(host.backward, bwd * 1e-3, 1e-12, "host-bound backward: its kernels x 1 ms");
    et_graph_free(&g);
    et_scenario_free(&s);
}

static void test_flash_attention(void)
{
    et_scenario s;
    if (load("22b-full", &s)) return;
    const et_batch_shape b = et_batch_expected(&s);
    et_graph std_g, flash_g;
    et_graph_options o = et_scenario_graph_options(&s, 0);
    o.recompute = ET_RECOMPUTE_NONE;
    et_graph_options flash = o;
    flash.attention = ET_ATTENTION_FLASH;
    if (build_pair(&s, &o, &flash, &std_g, &flash_g)) return;
    const int f = et_graph_find(&flash_g, "layer.2.attn.flash"),
              fb = et_graph_find(&flash_g, "layer.2.attn.flash.bwd");
    const int sc = et_graph_find(&std_g, "layer.2.attn.scores"),
              cx = et_graph_find(&std_g, "layer.2.attn.context");
    CHECK(f >= 0 && fb >= 0 && sc >= 0 && cx >= 0, "flash ops replace the attention core");
    CHECK(et_graph_find(&flash_g, "layer.2.attn.softmax") < 0, "no softmax kernel of its own");
    if (f >= 0 && fb >= 0 && sc >= 0 && cx >= 0) {
        const double fwd = et_linear_eval(&flash_g.ops[f].flops, &b);
        /* a decoder's fused kernel is causal: it computes half the l x l products the materialised form does
         */
        CHECK_REL(fwd,
                  0.5 * (et_linear_eval(&std_g.ops[sc].flops, &b) + et_linear_eval(&std_g.ops[cx].flops, &b)),
                  1e-12, "causal flash forward: half the FLOPs of scores and context");
        CHECK_REL(et_linear_eval(&flash_g.ops[fb].flops, &b), 2.5 * fwd, 1e-12,
                  "flash backward: 2.5x forward");
    }
    /* memory: no l x l scores kept, an fp32 log-sum-exp per row and head instead */
    s.parallel.recompute = ET_RECOMPUTE_NONE;
    et_memory ms = et_memory_estimate(&s, &std_g, &b);
    et_memory mf = et_memory_estimate(&s, &flash_g, &b);
    const double T = b.tokens, Q = b.tokens_sq, A = 64, t = 8;
    CHECK_REL(ms.activations - mf.activations, 48 * (5 * A * Q / t - 4 * A * T / t), 1e-9,
              "flash keeps 48 x (5AQ/t - 4AT/t) bytes less");
    et_graph_free(&std_g);
    et_graph_free(&flash_g);
    et_scenario_free(&s);
}

static void test_memory_bound(void)
{
    et_scenario s;
    et_error err;
    if (load_shipped("mlperf-bert-8.json", &s)) return;
    et_estimate a, b;
    CHECK(et_analytic_estimate(&s, &a, &err) == 0, "estimate: %s", err.text);
    s.simulation.seed = 12345;
    CHECK(et_analytic_estimate(&s, &b, &err) == 0, "estimate: %s", err.text);
    CHECK(a.memory.total == b.memory.total, "the memory verdict does not depend on the seed (%.6g, %.6g GiB)",
          a.memory.total / 1073741824.0, b.memory.total / 1073741824.0);
    /* it is the memory of the padded batch of local x seq_len tokens */
    et_graph g;
    et_graph_options o = et_scenario_graph_options(&s, 0);
    if (et_graph_build(&s.model, &o, &g, &err)) return;
    const et_batch_shape w = et_batch_worst_case(&s);
    CHECK(w.tokens == (double)s.batch.local * s.data.seq_len, "worst case: every sequence at seq_len");
    CHECK_REL(a.memory.activations, et_memory_estimate(&s, &g, &w).activations, 1e-12,
              "activations of the worst-case micro-batch");
    et_graph_free(&g);
    et_scenario_free(&s);
}

static void test_uneven_pipeline(void)
{
    et_scenario s;
    et_error err;
    if (load_shipped("bloom-176b-uneven-pipeline.json", &s)) return;
    int first = -1, last = -1, ok = 1, next = 0;
    for (int k = 0; k < s.parallel.pipeline; k++) {
        et_graph g;
        et_graph_options o = et_scenario_graph_options(&s, k);
        if (et_graph_build(&s.model, &o, &g, &err)) return;
        ok &= g.first_layer == next && g.last_layer - g.first_layer + 1 == s.parallel.layers_per_stage[k];
        next = g.last_layer + 1;
        if (k == 0) first = g.last_layer - g.first_layer + 1;
        if (k == s.parallel.pipeline - 1) last = g.last_layer - g.first_layer + 1;
        et_graph_free(&g);
    }
    CHECK(ok && next == 70 && first == 5 && last == 5, "70 layers on 12 stages: 5, 6 x 10, 5 (%d, %d)", first,
          last);
    et_estimate e;
    CHECK(et_analytic_estimate(&s, &e, &err) == 0, "estimate: %s", err.text);
    CHECK_REL(e.params_total, et_model_param_count(&s.model), 1e-12,
              "the whole model's parameters, all 70 layers");
    et_scenario_free(&s);
}

static void test_distributed_optimizer(void)
{
    et_scenario s;
    et_error err;
    if (load_shipped("gpt3-13b-dense-a100.json", &s)) return;
    s.parallel.zero_stage = 0;
    s.parallel.distributed_optimizer = true;
    et_graph g;
    et_graph_options o = et_scenario_graph_options(&s, 0);
    if (et_graph_build(&s.model, &o, &g, &err)) return;
    const et_batch_shape b = et_batch_expected(&s);
    et_memory m = et_memory_estimate(&s, &g, &b);
    const double d = s.parallel.data, P = g.param_count;
    CHECK_REL(m.weights + m.gradients + m.optimizer_states, P * (4 + 16 / d), 1e-12,
              "distributed optimizer: 4 + 16/d bytes per parameter");
    CHECK(o.optimizer_shards == (int)d, "the update runs on 1/d of the parameters");
    CHECK(et_scenario_reduce_scatters_gradients(&s) && et_scenario_gathers_parameters(&s),
          "gradients reduce-scattered, parameters all-gathered");
    et_graph_free(&g);
    et_scenario_free(&s);
}

/* Mixtral 8x7B on 64 H100 with expert parallelism 8: each rank holds one expert of each of 32 layers (3
 * products of 4096 x 14336, no biases), held by the 64 / 8 ranks with the same expert; ZeRO and the
 * distributed optimizer shard those over 8 ranks, the rest over 64. */
static void test_expert_state_sharding(void)
{
    et_scenario s;
    et_error err;
    if (load_shipped("mixtral-8x7b-h100.json", &s)) return;
    et_graph g;
    et_graph_options o = et_scenario_graph_options(&s, 0);
    if (et_graph_build(&s.model, &o, &g, &err)) return;
    const et_batch_shape b = et_batch_expected(&s);
    const double Pe = 32.0 * 3 * 4096 * 14336, Pn = g.param_count - Pe, d = 64, dx = 8;
    CHECK(s.parallel.data == 64 && s.parallel.expert == 8 && s.parallel.distributed_optimizer,
          "the shipped plan: data 64, expert 8, distributed optimizer");
    et_memory m = et_memory_estimate(&s, &g, &b);
    CHECK_REL(m.optimizer_states, 16 * (Pn / d + Pe / dx), 1e-12,
              "distributed optimizer: experts' states over 8 ranks, the rest over 64");
    s.parallel.distributed_optimizer = false;
    s.parallel.zero_stage = 3;
    m = et_memory_estimate(&s, &g, &b);
    CHECK_REL(m.optimizer_states, 12 * (Pn / d + Pe / dx), 1e-12, "ZeRO 3: states");
    CHECK_REL(m.gradients, 2 * (Pn / d + Pe / dx), 1e-12, "ZeRO 3: gradients");
    CHECK_REL(m.weights, 2 * (Pn / d + Pe / dx), 1e-12, "ZeRO 3: weights");
    s.parallel.zero_stage = 0;
    m = et_memory_estimate(&s, &g, &b);
    CHECK_REL(m.optimizer_states, 12 * (Pn + Pe), 1e-12, "no ZeRO: every state on every rank");
    et_graph_free(&g);
    et_scenario_free(&s);
}

/* A collective beside a product, by hand: the SMs it takes slow the product while it runs (NCCL), or for the
 * whole product (Transformer Engine's set_sm_margin); a collective longer than the product shows its excess.
 */
static void test_overlap_blocking(void)
{
    CHECK_REL(et_overlap_blocking(1, 2, 20, 100, false), 0.2, 1e-12, "sharing: 1 s at 20%% of the SMs");
    CHECK_REL(et_overlap_blocking(1, 2, 20, 100, true), 0.5, 1e-12, "margin: 2 s on 80 SMs = 2.5 s");
    CHECK_REL(et_overlap_blocking(3, 2, 20, 100, false), 1, 1e-12, "sharing: the product ends inside");
    CHECK_REL(et_overlap_blocking(3, 2, 20, 100, true), 1, 1e-12, "margin: the collective outlasts it");
    CHECK_REL(et_overlap_blocking(2.5, 2, 20, 100, false), 0.5, 1e-12, "sharing: continuous at 2 / 0.8");
    CHECK_REL(et_overlap_blocking(2.4, 2, 20, 100, false), 0.48, 1e-12,
              "sharing: just inside, 20%% of 2.4 s");
    CHECK_REL(et_overlap_blocking(1, 2, 20, 0, false), 0, 1e-12, "no SM count: hidden, nothing taken");
    CHECK_REL(et_overlap_blocking(3, 2, 20, 0, true), 1, 1e-12, "no SM count: the excess");
}

/* Each collective's blocking seconds, written out for the scenario's mode: exposed, beside its product
 * (async: the backward reduce-scatters and re-gathers on NCCL's SMs), or Transformer Engine's userbuffers. */
static double tp_by_hand(const et_scenario *s, const et_graph *g, const et_batch_shape *b)
{
    const et_comm_group tp = et_tp_group(s);
    const double S = s->cluster.device.multiprocessors;
    double sum = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const et_op *op = &g->ops[i];
        if (!et_op_is_comm(op->kind)) continue;
        double t = et_tp_comm_time(&tp, op->kind, et_linear_eval(&op->bytes, b));
        int j = op->kind == ET_OP_TP_ALLGATHER ? i + 1 : i - 1;
        const double gemm = g->ops[j].kind == ET_OP_GEMM && g->ops[j].phase == op->phase
                                ? et_op_time(&g->ops[j], b, &s->cluster.device, s->precision)
                                : -1;
        if (gemm >= 0 && s->parallel.tp_overlap) {
            if (op->kind == ET_OP_TP_ALLGATHER && !op->regather) /* ring exchange, one SM */
                t = t * (1 - 1 / S) >= gemm ? t - gemm : t / S;
            else { /* pipelined (forward) or bulk, the product on the SMs left */
                const double k = op->phase == ET_PHASE_FORWARD ? 16 : 4;
                t = fmax(t, gemm * S / (S - k)) - gemm;
            }
        } else if (gemm >= 0 && op->async_comm)
            t = t * (1 - 16 / S) >= gemm ? t - gemm : t * 16 / S;
        sum += t;
    }
    return sum;
}

static void test_tp_overlap(void)
{
    et_scenario s;
    if (load("22b-selective", &s)) return;
    et_error err;
    et_estimate plain, async, over;
    CHECK(s.software.tp_comm == ET_TP_COMM_EXPOSED && s.cluster.device.multiprocessors == 108,
          "the 22B row: megatron-lm-2022's exposed collectives on 108 SMs");
    CHECK(et_analytic_estimate(&s, &plain, &err) == 0, "estimate: %s", err.text);
    s.software.tp_comm = ET_TP_COMM_ASYNC;
    CHECK(et_analytic_estimate(&s, &async, &err) == 0, "estimate: %s", err.text);
    et_graph g;
    et_graph_options o = et_scenario_graph_options(&s, 0);
    if (et_graph_build(&s.model, &o, &g, &err)) return;
    const et_batch_shape b = et_batch_expected(&s);
    int marked = 0;
    for (int i = 0; i < g.n_ops; i++)
        if (g.ops[i].async_comm) {
            marked += g.ops[i].phase == ET_PHASE_BACKWARD &&
                      (g.ops[i].regather || g.ops[i].kind == ET_OP_TP_REDUCE_SCATTER);
        }
    const int head = et_graph_find(&g, "head.tp_reduce_scatter.bwd");
    CHECK(marked == 4 * s.model.layers / s.parallel.pipeline + 1 && head >= 0 && g.ops[head].async_comm,
          "async: each layer's 2 backward reduce-scatters and 2 re-gathers, and the output layer's "
          "reduce-scatter, beside their products (%d)",
          marked);
    const double async_hand = tp_by_hand(&s, &g, &b);
    s.parallel.tp_overlap = true;
    CHECK(et_analytic_estimate(&s, &over, &err) == 0, "estimate: %s", err.text);
    const double over_hand = tp_by_hand(&s, &g, &b);
    s.parallel.tp_overlap = false, s.software.tp_comm = ET_TP_COMM_EXPOSED;
    et_graph_free(&g);
    o = et_scenario_graph_options(&s, 0);
    if (et_graph_build(&s.model, &o, &g, &err)) return;
    const double full = tp_by_hand(&s, &g, &b);
    /* one micro-batch's collectives, times the micro-batches of the step */
    const double micro = plain.tp_comm / full;
    CHECK(fabs(micro - floor(micro + 0.5)) < 1e-9, "the step's collectives are whole micro-batches' (%.6f)",
          micro);
    CHECK_REL(async.tp_comm, micro * async_hand, 1e-12,
              "async: what the products do not hide, and their SMs");
    CHECK_REL(over.tp_comm, micro * over_hand, 1e-12, "userbuffers: ring exchange, pipelined and bulk");
    CHECK(async.tp_comm < plain.tp_comm && over.tp_comm < async.tp_comm,
          "exposed %.3g s > async %.3g s > userbuffers %.3g s", plain.tp_comm, async.tp_comm, over.tp_comm);
    et_graph_free(&g);
    et_scenario_free(&s);
}

static void test_target_tokens(void)
{
    /* 300B tokens of 2048-token sequences: the shipped GPT-3 13B target of 146,484,375 samples */
    json_error_t jerr;
    json_t *root = json_load_file(ET_SOURCE_DIR "/scenarios/gpt3-13b-dense-a100.json", 0, &jerr);
    CHECK(root != NULL, "gpt3-13b loads as JSON");
    if (!root) return;
    et_scenario by_samples, by_tokens;
    et_error err;
    const char *path = ET_SOURCE_DIR "/scenarios/gpt3-13b-dense-a100.json";
    int ok = et_scenario_parse(root, path, NULL, &by_samples, &err) == 0;
    CHECK(ok, "parse: %s", err.text);
    json_object_set_new(root, "target", json_pack("{s:f}", "tokens", 300e9));
    int ok2 = et_scenario_parse(root, path, NULL, &by_tokens, &err) == 0;
    CHECK(ok2, "parse with tokens: %s", err.text);
    if (ok && ok2)
        CHECK(by_tokens.target.steps == by_samples.target.steps && by_tokens.target.steps == 143052,
              "target.tokens 300e9 gives the same 143,052 steps (%lld)", by_tokens.target.steps);
    if (ok) et_scenario_free(&by_samples);
    if (ok2) et_scenario_free(&by_tokens);
    json_decref(root);
}

static void test_fp8(void)
{
    et_scenario s;
    if (load_shipped("llama3-8b-h100.json", &s)) return;
    et_error err;
    et_graph bf, f8;
    et_graph_options o = et_scenario_graph_options(&s, 0), o8 = o;
    o8.precision = ET_FP8;
    if (build_pair(&s, &o, &o8, &bf, &f8)) return;
    const et_batch_shape b = et_batch_expected(&s);
    const et_device_profile *d = &s.cluster.device;
    CHECK(d->peak_flops[ET_FP8] > 1.9 * d->peak_flops[ET_BF16], "H100: FP8 peak twice bf16's");
    const int q = et_graph_find(&f8, "layer.0.attn.qkv"), a = et_graph_find(&f8, "layer.0.attn.flash");
    if (q >= 0 && a >= 0) {
        /* the product: FP8 peak, its input cast added (3 bytes an element, one more kernel) */
        const double rows = b.tokens, n_in = s.model.hidden;
        CHECK_REL(et_linear_eval(&f8.ops[q].bytes, &b) - et_linear_eval(&bf.ops[q].bytes, &b),
                  3 * rows * n_in, 1e-12, "FP8 cast: 3 bytes per input element");
        CHECK(f8.ops[q].kernels == bf.ops[q].kernels + 1, "and one more kernel");
        CHECK(et_op_time(&f8.ops[q], &b, d, ET_FP8) < 0.6 * et_op_time(&bf.ops[q], &b, d, ET_BF16),
              "a large product at FP8 takes about half the bf16 time");
        /* attention stays in bf16 */
        CHECK_REL(et_op_time(&f8.ops[a], &b, d, ET_FP8), et_op_time(&bf.ops[a], &b, d, ET_BF16), 1e-12,
                  "attention at the bf16 rate under FP8");
    }
    s.precision = ET_FP8;
    et_memory m8 = et_memory_estimate(&s, &f8, &b);
    s.precision = ET_BF16;
    et_memory mb = et_memory_estimate(&s, &bf, &b);
    CHECK(m8.weights == mb.weights && m8.gradients == mb.gradients &&
              m8.optimizer_states == mb.optimizer_states,
          "FP8 training keeps bf16 copies and fp32 states: the same weights, gradients and states");
    /* the products' inputs kept for backward at a byte (delayed scaling): per token and layer the two
     * norms' outputs (H each, H / t with sequence parallelism), the context H / t and the MLP activation
     * 4 H / t (Korthikanti's widths), a byte fewer each */
    et_linear a8, ab, once8, onceb;
    et_graph_activation_terms(&f8, &a8, &once8);
    et_graph_activation_terms(&bf, &ab, &onceb);
    const double layers = f8.last_layer - f8.first_layer + 1, H = s.model.hidden, t = f8.options.tensor;
    const double in_ln = f8.options.sequence_parallel ? H / t : H; /* the norms' outputs, on t ranks or one */
    CHECK_REL(ab.per_token - a8.per_token, layers * (2 * in_ln + 5 * H / t), 1e-12,
              "FP8: a byte fewer for each product input kept");
    CHECK(m8.activations < mb.activations, "and fewer activation bytes in all");
    (void)err;
    et_graph_free(&bf);
    et_graph_free(&f8);
    et_scenario_free(&s);
}

int main(void)
{
    test_fp8();
    test_target_tokens();
    test_overlap_blocking();
    test_tp_overlap();
    test_distributed_optimizer();
    test_expert_state_sharding();
    test_uneven_pipeline();
    test_memory_bound();
    test_flash_attention();
    test_host_bound();
    test_activation_memory();
    test_interleaved_bubble();
    test_sequence_parallel();
    test_selective_recompute();
    test_wave_quantization();
    return check_summary("test_schedule");
}

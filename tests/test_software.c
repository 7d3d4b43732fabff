/* The software stack's terms (model/software.h, phase_time.h) on hand-computed cases: the accumulation
 * passes' bytes and launches, the optimizer's extra passes, the fp32 cross-entropy's bytes a logit, the
 * host synchronisations the schedule places and what they cost, launches that block; and the presets,
 * which differ only in the terms their stacks' code differs in (docs/cost-model.md, "The software stack"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "batch.h"
#include "check.h"
#include "collectives.h"
#include "moe.h"
#include "phase_time.h"
#include "scenario_graph.h"
#include "software.h"
#include "step_schedule.h"

static int load(const char *relative, et_scenario *s)
{
    et_error err;
    char path[512];
    snprintf(path, sizeof path, ET_SOURCE_DIR "/scenarios/%s", relative);
    const int rc = et_scenario_load(path, s, &err);
    CHECK(rc == 0, "%s loads: %s", path, err.text);
    return rc;
}

/* The terms in which two presets differ, as a comma-separated list. */
static void differences(const char *a, const char *b, char *out, size_t size)
{
    et_software x, y;
    CHECK(!et_software_preset(a, &x) && !et_software_preset(b, &y), "presets %s and %s exist", a, b);
    out[0] = '\0';
#define DIFF(field)                                                                                          \
    if (x.field != y.field) snprintf(out + strlen(out), size - strlen(out), "%s%s", out[0] ? "," : "", #field)
    DIFF(grad_accumulation);
    DIFF(accumulate_bytes);
    DIFF(optimizer);
    DIFF(cross_entropy);
    DIFF(syncs_per_micro_batch);
    DIFF(p2p_sync);
    DIFF(syncs_per_step);
    DIFF(loss_scale_sync);
    DIFF(launch_blocking);
    DIFF(pipeline_sends);
    DIFF(p2p_overlap);
    DIFF(attention_kernel);
    DIFF(attention_unpad);
    DIFF(residual_kernels);
    DIFF(tp_comm);
    DIFF(overlap_sms);
    DIFF(bulk_overlap_sms);
    DIFF(bias_kernels);
    DIFF(grouped_gemm);
    DIFF(moe_dispatch);
    DIFF(recompute_early_stop);
#undef DIFF
}

static void test_presets(void)
{
    /* each pair: what their code differs in (shared/data/software-stacks.md, the per-stack tables) */
    static const char *const pairs[][3] = {
        /* v3 fused the accumulation into the weight-gradient GEMM over an fp32 main_grad (2022-02); both
         * expose the backward collectives (v3's asynchronous ones unreliable before 2022-10) */
        {"megatron-lm-2021", "megatron-lm-2022", "grad_accumulation,accumulate_bytes"},
        /* Megatron's biases: the q, k, v add and every gradient's column sums apart; eager PyTorch's more */
        {"megatron-lm-2021", "megatron-deepspeed",
         "grad_accumulation,accumulate_bytes,optimizer,syncs_per_micro_batch,p2p_sync,syncs_per_step,"
         "loss_scale_sync,launch_blocking"},
        /* llm-foundry and torchtitan: nothing confirmed beyond the fused passes (PyTorch sends whole
         * tensors, were they pipelined) */
        {"fused", "pytorch-fsdp", "pipeline_sends,residual_kernels,tp_comm,recompute_early_stop"},
        /* MCore: the distributed optimizer's copy back, the norm's .item(), whole activations sent (its
         * backward collectives beside their products, as the fused preset's) */
        {"fused", "megatron-core",
         "optimizer,syncs_per_step,loss_scale_sync,pipeline_sends,p2p_overlap,attention_kernel,"
         "residual_kernels,grouped_gemm,moe_dispatch"},
        /* BLOOM against v3: DeepSpeed's accumulation and optimizer, no timers, launches that block */
        {"megatron-lm-2022", "megatron-deepspeed",
         "grad_accumulation,optimizer,syncs_per_micro_batch,p2p_sync,syncs_per_step,loss_scale_sync,"
         "launch_blocking"},
        /* apex amp against SC21: no pipeline timers nor norm read, no scatter-gather */
        {"megatron-lm-2021", "pytorch-apex",
         "syncs_per_micro_batch,p2p_sync,syncs_per_step,pipeline_sends,bias_kernels"},
        /* Megatron-core against v3: the collectives beside their products */
        {"megatron-lm-2022", "megatron-core",
         "optimizer,cross_entropy,syncs_per_micro_batch,p2p_sync,pipeline_sends,p2p_overlap,attention_kernel,"
         "tp_comm,bias_kernels,grouped_gemm,moe_dispatch"},
        /* llm-foundry's 2023 tables: flash-attn 1.0.9 through the unpadded interface, PyTorch before 2.1 */
        {"pytorch-fsdp", "llm-foundry", "attention_kernel,attention_unpad,recompute_early_stop"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        char got[256];
        differences(pairs[i][0], pairs[i][1], got, sizeof got);
        CHECK(!strcmp(got, pairs[i][2]), "%s against %s differ in {%s}, want {%s}", pairs[i][0], pairs[i][1],
              got, pairs[i][2]);
    }
    et_software w;
    CHECK(et_software_preset("tensorflow", &w) == -1, "an unknown stack is refused");
}

/* The accumulation and optimizer passes against their bytes, written out. */
static void test_passes(void)
{
    et_scenario s;
    if (load("validation/korthikanti-2022-gpt-22b-full.json", &s)) return;
    const et_device_profile *d = &s.cluster.device;
    const double N = 1e9, P = 200, h = s.host.per_kernel, e = 2;
    s.precision = ET_BF16;
    et_software_preset("megatron-lm-2021", &s.software); /* add, a = 2 */
    CHECK_REL(et_accumulate_time(&s, N, P),
              fmax(et_kernel_time(d, ET_FP32, 0, N, (e + 2 * 2) * N, 0, 0, 0), P * h), 1e-12,
              "add: (e + 2a) N bytes, P launches");
    s.software.grad_accumulation = ET_ACCUMULATE_CAST_ADD, s.software.accumulate_bytes = 4;
    CHECK_REL(et_accumulate_time(&s, N, P),
              fmax(et_kernel_time(d, ET_FP32, 0, N, (e + 16) * N, 0, 0, 0), 2 * P * h), 1e-12,
              "cast_add: (e + 4 + 12) N bytes, 2P launches");
    s.software.grad_accumulation = ET_ACCUMULATE_FUSED;
    CHECK(et_accumulate_time(&s, N, P) == 0, "fused: no pass");
    /* the optimizer: fp16_master with 16-bit accumulation copies the gradients (2 + 4 bytes) and copies back
     * the shard (4 bytes) */
    s.software.optimizer = ET_OPTIMIZER_FP16_MASTER, s.software.accumulate_bytes = 2;
    const double shard = N / 8;
    CHECK_REL(et_optimizer_stack_time(&s, N, shard, 0),
              fmax(et_kernel_time(d, ET_FP32, 0, 0, 4 * shard + 6 * N, 0, 0, 0), 2 * h), 1e-12,
              "fp16_master: 4 shard + (a + 4) N bytes");
    s.software.accumulate_bytes = 4;
    CHECK_REL(et_optimizer_stack_time(&s, N, shard, 0),
              fmax(et_kernel_time(d, ET_FP32, 0, 0, 4 * shard, 0, 0, 0), h), 1e-12,
              "fp16_master over fp32 main grads: the copy back alone");
    s.software.optimizer = ET_OPTIMIZER_BF16_SHARDS;
    CHECK_REL(et_optimizer_stack_time(&s, N, shard, 0),
              fmax(et_kernel_time(d, ET_FP32, 0, 0, 4 * shard + 2 * N, 0, 0, 0), 2 * h), 1e-12,
              "bf16_shards: the copy back and the norm's extra (4 - e) N bytes");
    /* FP8 parameters: an amax pass over the shard's quantized weights (4 bytes each) beside the copy back */
    s.software.optimizer = ET_OPTIMIZER_COPY_BACK, s.precision = ET_FP8, s.software.fp8_param_gather = true;
    CHECK_REL(et_optimizer_stack_time(&s, N, shard, 0.9 * shard),
              fmax(et_kernel_time(d, ET_FP32, 0, 0, 4 * shard, 0, 0, 0), h) +
                  fmax(et_kernel_time(d, ET_FP32, 0, 0, 4 * 0.9 * shard, 0, 0, 0), h),
              1e-12, "fp8_param_gather: the copy back and an amax pass of 4 bytes a quantized weight");
    s.software.fp8_param_gather = false;
    s.precision = ET_FP32;
    CHECK(et_optimizer_stack_time(&s, N, shard, 0) == 0, "fp32 training keeps one copy of the weights");
    /* launches that block: host and device times add */
    s.software.launch_blocking = true;
    CHECK_REL(et_host_time(&s, 1e-3, 100), 1e-3 + 100 * h, 1e-12,
              "blocking launches: device + kernels x host");
    s.software.launch_blocking = false;
    CHECK_REL(et_host_time(&s, 1e-3, 100), fmax(1e-3, 100 * h), 1e-12,
              "queued launches: the slower of the two");
}

/* The loss op's bytes: 2e a logit fused, 48 + 2e over fp32 logits. */
static void test_cross_entropy(void)
{
    et_scenario s;
    if (load("validation/korthikanti-2022-gpt-22b-full.json", &s)) return;
    const et_batch_shape b = et_batch_expected(&s);
    double bytes[2];
    for (int fp32 = 0; fp32 <= 1; fp32++) {
        et_graph_options o = et_scenario_graph_options(&s, s.parallel.pipeline - 1);
        o.loss_fp32 = fp32;
        et_graph g;
        et_error err;
        bytes[fp32] = -1;
        if (et_graph_build(&s.model, &o, &g, &err)) continue;
        for (int i = 0; i < g.n_ops; i++)
            if (g.ops[i].kind == ET_OP_LOSS) bytes[fp32] = et_linear_eval(&g.ops[i].bytes, &b);
        et_graph_free(&g);
    }
    const double logits = b.predictions * s.model.vocab / s.parallel.tensor,
                 e = et_precision_bytes(s.precision);
    CHECK_REL(bytes[0], 2 * e * logits, 1e-12, "fused cross-entropy: 2e bytes a logit");
    CHECK_REL(bytes[1], (48 + 2 * e) * logits, 1e-12, "fp32 cross-entropy: 48 + 2e bytes a logit");
}

/* SC21 on 2 stages and 2 micro-batches: 4 timer syncs a micro-batch, one after each of 4 sends, the norm's
 * and fp16's overflow reads: 14 synchronisations, each the host's cost per kernel, in the analytic step. */
static void test_syncs(void)
{
    et_scenario s;
    if (load("validation/korthikanti-2022-gpt-22b-full.json", &s)) return;
    s.parallel.pipeline = 2, s.parallel.data = 1, s.batch.local = 1, s.batch.grad_accum = 2,
    s.batch.global = 2;
    s.precision = ET_FP16;
    et_software_preset("megatron-lm-2021", &s.software);
    et_graph g;
    et_error err;
    et_graph_options o = et_scenario_graph_options(&s, 0);
    if (et_graph_build(&s.model, &o, &g, &err)) {
        CHECK(0, "graph: %s", err.text);
        return;
    }
    et_op_classes c;
    et_step_schedule q;
    if (et_op_classes_build(&g, &c) || et_step_schedule_build(&s, &c, 0, NULL, 0, true, &q, &err)) {
        CHECK(0, "schedule");
        et_graph_free(&g);
        return;
    }
    int syncs = 0, accumulations = 0;
    for (int i = 0; i < q.n_events; i++) {
        syncs += q.events[i].kind == ET_STEP_SYNC ? q.events[i].count : 0;
        accumulations += q.events[i].kind == ET_STEP_ACCUMULATE;
    }
    CHECK(syncs == 2 * 4 + 4 + 1 + 1, "SC21's synchronisations: %d, want 14", syncs);
    /* autograd's add after the second micro-batch's backward: the last, so per bucket (none here) */
    CHECK(accumulations == 0, "no whole-gradient accumulation with 2 micro-batches: %d", accumulations);
    et_step_schedule_free(&q);
    et_op_classes_free(&c);
    et_graph_free(&g);
    et_estimate e;
    if (et_analytic_estimate(&s, &e, &err) == 0)
        CHECK_REL(e.host_sync, 14 * s.host.per_kernel, 1e-12, "the analytic step's synchronisations");
}

/* A pipeline send of 175B's activation (t 8, no sequence parallelism) as each stack sends it: 1/t, 1/t and
 * an all-gather of the whole over the tensor ranks, or the whole; 1/t whatever the stack under sequence
 * parallelism. */
static void test_pipeline_sends(void)
{
    et_scenario s;
    if (load("validation/korthikanti-2022-gpt-175b-full.json", &s)) return;
    const et_batch_shape b = et_batch_expected(&s);
    const double whole = b.tokens * s.model.hidden * et_precision_bytes(s.precision), t = s.parallel.tensor;
    const double v = et_pipeline_sends_per_micro_batch(s.parallel.pipeline, s.parallel.virtual_pipeline);
    double send[3];
    for (int mode = 0; mode < 3; mode++) {
        s.software.pipeline_sends = (et_pipeline_sends)mode;
        send[mode] = et_pipeline_send_time(&s, &b) / v;
    }
    const et_comm_group tp = et_tp_group(&s);
    const double per_byte = (send[ET_SENDS_FULL] - send[ET_SENDS_SHARDED]) / (whole - whole / t);
    CHECK(per_byte > 0, "a whole activation takes longer than a share");
    CHECK_REL(send[ET_SENDS_SCATTER_GATHER] - send[ET_SENDS_SHARDED], et_ring_allgather_time(&tp, whole),
              1e-9, "scatter-gather: the share and an all-gather of the whole over the tensor ranks");
    s.parallel.sequence_parallel = true;
    s.software.pipeline_sends = ET_SENDS_FULL;
    CHECK_REL(et_pipeline_send_time(&s, &b) / v, send[ET_SENDS_SHARDED], 1e-12,
              "sequence-parallel activations go as 1/t shares whatever the stack");
    /* overlapped under the interleaved schedule (three chunks here): the 16 SMs of the A100's 108 the
     * transfers take from the pass beside them, for as long as they last; without interleaving, blocking */
    const double blocking = et_pipeline_send_time(&s, &b);
    s.software.p2p_overlap = true;
    CHECK_REL(et_pipeline_send_time(&s, &b), blocking * 16 / 108, 1e-12, "overlapped: 16 of 108 SMs");
    s.parallel.virtual_pipeline = 1;
    const double one = et_pipeline_send_time(&s, &b);
    s.software.p2p_overlap = false;
    CHECK_REL(one, et_pipeline_send_time(&s, &b), 1e-12, "no interleaving: the sends block");
}

/* One op of a graph by id: its bytes and launches at the batch shape, its time on the profile (-1: absent).
 */
static double op_of(const et_graph *g, const char *id, const et_batch_shape *b, const et_device_profile *d,
                    et_precision p, double *bytes, int *kernels)
{
    const int i = et_graph_find(g, id);
    if (i < 0) return -1;
    if (bytes) *bytes = et_linear_eval(&g->ops[i].bytes, b);
    if (kernels) *kernels = g->ops[i].kernels;
    return et_op_time(&g->ops[i], b, d, p);
}

/* The scenario's first stage's graph; a graph that does not build fails the check. */
static int graph_of(const et_scenario *s, et_graph *g)
{
    const et_graph_options o = et_scenario_graph_options(s, 0);
    et_error err;
    const int rc = et_graph_build(&s->model, &o, g, &err);
    CHECK(rc == 0, "the graph builds: %s", rc ? err.text : "");
    return rc;
}

/* An MPT-125M layer (hidden 768, 12 heads, no dropout, FlashAttention) by hand: the residual adds (3eH a
 * token each, forward without dropout and backward always), llm-foundry's unpad and pad copies (forward
 * 2e(Q + 2KV) and 3eQ bytes a token in 3 and 2 launches, backward 2eQ and 5e(Q + 2KV) in 1 and 7) and
 * FlashAttention 1 at half the fused kernel's time rate: its forward and backward take twice as long. */
static void test_eager_terms(void)
{
    et_scenario s;
    if (load("validation/mpt-125m-a100-80gb-8gpu-seq2048-mbs32-ampbf16.json", &s)) return;
    CHECK(s.software.stack == ET_STACK_LLM_FOUNDRY && s.model.dropout == 0, "an llm-foundry row, dropout 0");
    const et_batch_shape b = et_batch_expected(&s);
    const et_device_profile *d = &s.cluster.device;
    const double T = b.tokens, H = s.model.hidden, e = et_precision_bytes(s.precision);
    double flash[2][2] = {{0}}, bytes = 0;
    int kernels = 0;
    for (int stack = 0; stack < 2; stack++) {
        et_software_preset(stack ? "llm-foundry" : "pytorch-fsdp", &s.software);
        et_graph g;
        if (graph_of(&s, &g)) return;
        static const char *const residuals[] = {"layer.3.attn.residual", "layer.3.mlp.residual",
                                                "layer.3.attn.residual.bwd", "layer.3.mlp.residual.bwd"};
        for (int r = 0; r < 4; r++) {
            CHECK(op_of(&g, residuals[r], &b, d, s.precision, &bytes, NULL) > 0, "%s exists", residuals[r]);
            CHECK(fabs(bytes - 3 * e * H * T) <= 1e-12 * bytes, "%s: %g bytes, want 3eH a token",
                  residuals[r], bytes);
        }
        flash[stack][0] = op_of(&g, "layer.3.attn.flash", &b, d, s.precision, NULL, NULL);
        flash[stack][1] = op_of(&g, "layer.3.attn.flash.bwd", &b, d, s.precision, NULL, NULL);
        static const char *const copy[] = {"layer.3.attn.unpad", "layer.3.attn.pad", "layer.3.attn.pad.bwd",
                                           "layer.3.attn.unpad.bwd"};
        const double want_bytes[] = {2 * e * 3 * H, 3 * e * H, 2 * e * H, 5 * e * 3 * H};
        const int want_kernels[] = {3, 2, 1, 7};
        for (int c = 0; c < 4; c++) {
            const double t = op_of(&g, copy[c], &b, d, s.precision, &bytes, &kernels);
            if (!stack) {
                CHECK(t < 0, "pytorch-fsdp has no %s", copy[c]);
                continue;
            }
            CHECK(t > 0, "llm-foundry has %s", copy[c]);
            CHECK(fabs(bytes - want_bytes[c] * T) <= 1e-12 * bytes, "%s: %g bytes, want %g", copy[c], bytes,
                  want_bytes[c] * T);
            CHECK(kernels == want_kernels[c], "%s: %d launches, want %d", copy[c], kernels, want_kernels[c]);
        }
        et_graph_free(&g);
    }
    for (int dir = 0; dir < 2; dir++)
        CHECK(flash[0][dir] > 0 && flash[1][dir] > 1.9 * flash[0][dir] && flash[1][dir] < 2.0 * flash[0][dir],
              "FlashAttention 1 at half the rate (%s): %g s against %g s (the launch cost stays)",
              dir ? "backward" : "forward", flash[1][dir], flash[0][dir]);
    /* the fused preset (etrun's add-norm) has no residual kernels */
    et_software_preset("fused", &s.software);
    et_graph g;
    if (graph_of(&s, &g)) return;
    CHECK(op_of(&g, "layer.3.attn.residual", &b, d, s.precision, NULL, NULL) < 0 &&
              op_of(&g, "layer.3.mlp.residual.bwd", &b, d, s.precision, NULL, NULL) < 0,
          "fused: the residual adds folded into the layer norms");
    et_graph_free(&g);
    /* a dropout kernel carries the residual add forward; backward still sums the two gradients */
    et_software_preset("llm-foundry", &s.software);
    s.model.dropout = 0.1;
    if (graph_of(&s, &g)) return;
    CHECK(op_of(&g, "layer.3.attn.residual", &b, d, s.precision, NULL, NULL) < 0,
          "no residual add of its own under dropout");
    CHECK(op_of(&g, "layer.3.attn.residual.bwd", &b, d, s.precision, NULL, NULL) > 0,
          "the backward sum under dropout");
    et_graph_free(&g);
}

/* Biases' kernels by hand on a layer of GPT 22B (biases, tensor 8): Megatron's q, k, v add reads and writes
 * its output, every product's bias gradient reads its output gradient once; eager PyTorch adds the
 * attention output's and second MLP product's biases apart too; fused stacks none. */
static void test_bias_kernels(void)
{
    et_scenario s;
    if (load("validation/korthikanti-2022-gpt-22b-full.json", &s)) return;
    CHECK(s.software.bias_kernels == ET_BIAS_MEGATRON && !s.model.no_bias, "the 22B row: biases, megatron");
    const et_batch_shape b = et_batch_expected(&s);
    const et_device_profile *d = &s.cluster.device;
    const double T = b.tokens, H = s.model.hidden, t = s.parallel.tensor, e = et_precision_bytes(s.precision);
    const double F = s.model.ffn;
    static const char *const grads[] = {"layer.3.attn.qkv.bias_grad", "layer.3.attn.out.bias_grad",
                                        "layer.3.mlp.fc1.bias_grad", "layer.3.mlp.fc2.bias_grad"};
    const double outs[] = {3 * H / t, H, F / t, H};
    static const char *const adds[] = {"layer.3.attn.qkv.bias", "layer.3.attn.out.bias",
                                       "layer.3.mlp.fc2.bias"};
    const double add_outs[] = {3 * H / t, H, H};
    for (int mode = 0; mode < 3; mode++) {
        s.software.bias_kernels = (et_bias_kernels)mode;
        et_graph g;
        if (graph_of(&s, &g)) return;
        double bytes = 0;
        int kernels = 0;
        for (int k = 0; k < 4; k++) {
            const double x = op_of(&g, grads[k], &b, d, s.precision, &bytes, &kernels);
            if (mode == ET_BIAS_FUSED) {
                CHECK(x < 0, "fused: no %s", grads[k]);
                continue;
            }
            CHECK(x > 0 && kernels == 1 && fabs(bytes - e * outs[k] * T) <= 1e-12 * bytes,
                  "%s: %g bytes in %d kernel, want e x %g a token", grads[k], bytes, kernels, outs[k]);
            const int i = et_graph_find(&g, grads[k]);
            CHECK(i > 0 && i + 1 < g.n_ops && strstr(g.ops[i - 1].id, ".bwd_data") &&
                      strstr(g.ops[i + 1].id, ".bwd_weight"),
                  "%s between the input- and the weight-gradient products", grads[k]);
        }
        for (int k = 0; k < 3; k++) {
            const double x = op_of(&g, adds[k], &b, d, s.precision, &bytes, &kernels);
            const int want = mode == ET_BIAS_EAGER || (mode == ET_BIAS_MEGATRON && k == 0);
            CHECK((x > 0) == want, "%s %s", adds[k], want ? "a pass of its own" : "fused");
            if (want)
                CHECK(fabs(bytes - 2 * e * add_outs[k] * T) <= 1e-12 * bytes,
                      "%s: %g bytes, want 2e x %g a token", adds[k], bytes, add_outs[k]);
        }
        CHECK(op_of(&g, "layer.3.mlp.fc1.bias", &b, d, s.precision, NULL, NULL) < 0,
              "the first MLP product's bias stays in the fused bias-GELU");
        et_graph_free(&g);
    }
}

/* PyTorch's early stop on an MPT-7B row under full recomputation (hidden H, MLP width F = 4H, T tokens a
 * micro-batch, no dropout): with it a layer's recomputation ends at the MLP's activation, so its second
 * product (2 T F H FLOPs) and the residual add after it (3 e H bytes a token) are not rebuilt, and the
 * micro-batch's time falls by exactly those ops' times a layer; everything before them is recomputed as
 * before. A dropout kernel after the product (its mask saved for backward) makes the recomputation go on. */
static void test_recompute_early_stop(void)
{
    et_scenario s;
    if (load("validation/mpt-7b-a100-80gb-8gpu-seq1024-mbs64-ampbf16.json", &s)) return;
    CHECK(s.parallel.recompute == ET_RECOMPUTE_FULL && s.model.dropout == 0 &&
              !s.software.recompute_early_stop,
          "a checkpointed llm-foundry row, dropout 0, no early stop in its preset");
    const et_batch_shape b = et_batch_expected(&s);
    const et_device_profile *d = &s.cluster.device;
    const double T = b.tokens, H = s.model.hidden, F = s.model.ffn, e = et_precision_bytes(s.precision);
    et_graph whole, early;
    if (graph_of(&s, &whole)) return;
    s.software.recompute_early_stop = true;
    if (graph_of(&s, &early)) return;
    double bytes = 0, skipped = 0;
    const double fc2 = op_of(&whole, "layer.3.mlp.fc2.recompute", &b, d, s.precision, NULL, NULL);
    const int i = et_graph_find(&whole, "layer.3.mlp.fc2.recompute");
    CHECK(fc2 > 0 && fabs(et_linear_eval(&whole.ops[i].flops, &b) - 2 * T * F * H) <= 1e-9 * 2 * T * F * H,
          "without early stop the second product is recomputed: 2TFH FLOPs");
    const double add = op_of(&whole, "layer.3.mlp.residual.recompute", &b, d, s.precision, &bytes, NULL);
    CHECK(add > 0 && fabs(bytes - 3 * e * H * T) <= 1e-12 * bytes,
          "and the residual add after it: 3eH a token");
    CHECK(et_graph_find(&early, "layer.3.mlp.fc2.recompute") < 0 &&
              et_graph_find(&early, "layer.3.mlp.residual.recompute") < 0,
          "early stop: neither is recomputed");
    static const char *const kept[] = {"layer.3.attn.qkv.recompute", "layer.3.attn.flash.recompute",
                                       "layer.3.attn.out.recompute", "layer.3.mlp.fc1.recompute",
                                       "layer.3.mlp.gelu.recompute"};
    for (size_t k = 0; k < sizeof kept / sizeof *kept; k++)
        CHECK(et_graph_find(&early, kept[k]) >= 0, "early stop still recomputes %s", kept[k]);
    CHECK(whole.n_ops - early.n_ops == 2 * s.model.layers, "two ops fewer a layer: %d",
          whole.n_ops - early.n_ops);
    double t_whole = 0, t_early = 0;
    for (int k = 0; k < whole.n_ops; k++)
        t_whole += et_op_time(&whole.ops[k], &b, d, s.precision);
    for (int k = 0; k < early.n_ops; k++)
        t_early += et_op_time(&early.ops[k], &b, d, s.precision);
    skipped = s.model.layers * (fc2 + add);
    CHECK(fabs(t_whole - t_early - skipped) <= 1e-9 * t_whole, "the micro-batch is %g s shorter, want %g",
          t_whole - t_early, skipped);
    et_graph_free(&early);
    s.model.dropout = 0.1;
    if (graph_of(&s, &early)) return;
    CHECK(et_graph_find(&early, "layer.3.mlp.fc2.recompute") >= 0,
          "with a dropout after the product the recomputation goes on through it");
    et_graph_free(&early);
    et_graph_free(&whole);
}

/* The experts' products by hand on Mixtral 8x7B (8 experts, 2 expert ranks: 4 a rank): one
 * kernel each under `single`; under `per_expert` one launch per local expert (Transformer Engine's
 * GroupedLinear), the same FLOPs and bytes, and each launch's device overhead and host cost. */
static void test_grouped_gemm(void)
{
    et_scenario s;
    if (load("mixtral-8x7b-h100.json", &s)) return;
    s.parallel.expert = 2; /* four experts a rank (the shipped plan keeps one) */
    const et_batch_shape b = et_batch_expected(&s);
    const et_device_profile *d = &s.cluster.device;
    const int local = s.model.moe.experts / s.parallel.expert;
    static const char *const ids[] = {"layer.0.moe.experts.fc1", "layer.0.moe.experts.fc2.bwd_data",
                                      "layer.0.moe.experts.fc1.bwd_weight"};
    double t[2][3], bytes[2][3];
    for (int mode = 0; mode < 2; mode++) {
        s.software.grouped_gemm = (et_grouped_gemm)mode;
        et_graph g;
        if (graph_of(&s, &g)) return;
        for (int k = 0; k < 3; k++) {
            int kernels = 0;
            t[mode][k] = op_of(&g, ids[k], &b, d, s.precision, &bytes[mode][k], &kernels);
            CHECK(t[mode][k] > 0 && kernels == (mode ? local : 1), "%s: %d launches under %s, want %d",
                  ids[k], kernels, et_grouped_gemm_names[mode], mode ? local : 1);
        }
        et_graph_free(&g);
    }
    for (int k = 0; k < 3; k++) {
        CHECK(bytes[0][k] == bytes[1][k], "%s: the same bytes either way", ids[k]);
        CHECK(t[1][k] > t[0][k], "%s: per-expert launches cost their overhead (%g > %g s)", ids[k], t[1][k],
              t[0][k]);
    }
}

/* Megatron-Core's all-to-all dispatcher by hand on Mixtral 8x7B (8 experts, top 2, hidden 4096): with two
 * expert ranks (four experts a rank) the received rows are copied into local-expert order after the
 * dispatch and back before the combine, and the same in backward: four passes of 2 e H k T bytes (read
 * and write), each one launch, none under `direct`, none with one expert a rank (8 ranks). */
static void test_moe_dispatch(void)
{
    et_scenario s;
    if (load("mixtral-8x7b-h100.json", &s)) return;
    const et_batch_shape b = et_batch_expected(&s);
    const double e = et_precision_bytes(s.precision), H = s.model.hidden, k = s.model.moe.top_k;
    static const char *const ids[] = {"layer.0.moe.experts.sort", "layer.0.moe.experts.unsort",
                                      "layer.0.moe.experts.unsort.bwd", "layer.0.moe.experts.sort.bwd"};
    for (int expert = 2; expert <= 8; expert *= 4)
        for (int mode = 0; mode < 2; mode++) {
            s.parallel.expert = expert;
            s.software.moe_dispatch = (et_moe_dispatch)mode;
            et_graph g;
            if (graph_of(&s, &g)) return;
            const bool want = mode == ET_MOE_DISPATCH_SORT_CHUNKS && expert == 2;
            for (int i = 0; i < 4; i++) {
                double bytes = 0;
                int kernels = 0;
                const double t = op_of(&g, ids[i], &b, &s.cluster.device, s.precision, &bytes, &kernels);
                if (want)
                    CHECK(t > 0 && kernels == 1 && fabs(bytes - 2 * e * H * k * b.tokens) < 1e-6 * bytes,
                          "%s: %.0f bytes in %d launches, want 2 e H k T = %.0f in 1", ids[i], bytes, kernels,
                          2 * e * H * k * b.tokens);
                else
                    CHECK(t < 0, "%s: no pass under %s with %d experts a rank", ids[i],
                          et_moe_dispatch_names[mode], 8 / expert);
            }
            et_graph_free(&g);
        }
}

/* The experts' all-to-alls beside a partner micro-batch (software.ep_overlap) on Mixtral 8x7B (64 H100, 4
 * micro-batches of 1, no pipeline): the first forward's and the last backward's keep their seconds (one
 * micro-batch's worth a of the 4), the other pairs' run beside their computation c, costing
 * et_overlap_blocking(a, c, 16 of the profile's S multiprocessors), here its sharing form a 16 / S since a
 * micro-batch's all-to-alls are shorter than its compute; the compute itself is unchanged. The unpaired
 * share under pipelining: Megatron's warm-up forwards of the first stage, and the steady phase's first. */
static void test_ep_overlap(void)
{
    et_scenario s;
    if (load("mixtral-8x7b-h100.json", &s)) return;
    et_error err;
    et_estimate off, on;
    int rc = et_analytic_estimate(&s, &off, &err);
    s.software.ep_overlap = true;
    rc = rc || et_analytic_estimate(&s, &on, &err);
    CHECK(rc == 0, "the estimates: %s", rc ? err.text : "");
    if (rc) return;
    const double m = s.batch.grad_accum, S = s.cluster.device.multiprocessors, k = s.software.overlap_sms;
    const double a = off.ep_comm / m, c = (off.forward + off.backward) / m;
    CHECK(m == 4 && S > k && a > 0 && a * (1 - k / S) < c,
          "4 micro-batches whose all-to-alls (%g s) are shorter "
          "than their compute (%g s)",
          a, c);
    CHECK_REL(on.ep_comm, a + (m - 1) * a * k / S, 1e-9,
              "one micro-batch's all-to-alls whole, the rest at k/S");
    CHECK_REL(on.forward + on.backward, off.forward + off.backward, 1e-12, "the compute unchanged");
    /* the report's both figures, whichever is planned */
    CHECK_REL(off.ep_comm_overlapped, on.ep_comm, 1e-12, "without the overlap: what it would leave");
    CHECK_REL(on.ep_comm_alone, off.ep_comm, 1e-12, "with it: what it hides from");
    CHECK_REL(off.ep_comm_alone, off.ep_comm, 1e-12, "without it, the all-to-alls block");
    /* the buckets ready earlier, the gradients' reduce-scatter shows a little more or less */
    CHECK_REL(off.step_time - on.step_time, off.ep_comm - on.ep_comm, 1e-2, "the step gains what is hidden");
    static const struct {
        int p, v, m;
        double want;
    } unpaired[] = {
        {1, 1, 8, 1.0 / 8}, {4, 1, 8, 4.0 / 8}, {4, 2, 8, (2 * 3 + 1 * 4 + 1) / 16.0}, {4, 1, 2, 1}};
    for (size_t i = 0; i < sizeof unpaired / sizeof *unpaired; i++) {
        s.parallel.pipeline = unpaired[i].p, s.parallel.virtual_pipeline = unpaired[i].v;
        s.batch.grad_accum = unpaired[i].m;
        const double got = et_step_alltoall_unpaired(&s);
        CHECK(fabs(got - unpaired[i].want) < 1e-12, "unpaired share, p %d v %d m %d: %g, want %g",
              unpaired[i].p, unpaired[i].v, unpaired[i].m, got, unpaired[i].want);
    }
}

/* The experts' all-to-alls that send a token once to each GPU and node it reaches (software.ep_dedup) by
 * hand. With as many experts as expert ranks (Mixtral 8x7B, 8 ranks in a node) a token's k experts are on
 * k distinct GPUs: 7 x (1 - C(7,2)/C(8,2)) = 1.75 other GPUs, what the plain all-to-all sends (2 rows, 7/8
 * of them away): the same time. Across 2 nodes of 4 GPUs on 100 Gb/s NICs (tests/data/moe-a2a-8.json, the
 * fabric the slower side): 1 - C(4,2)/C(8,2) = 22/28 of a token crosses it against the plain all-to-all's
 * 2 rows x 4/8, with 4 GPUs sharing their node's link: 22/28 of the plain crossing's seconds. */
static void test_ep_dedup(void)
{
    et_scenario s;
    if (load("mixtral-8x7b-h100.json", &s)) return;
    const double bytes = 1 << 26;
    double gpus, nodes;
    CHECK(et_moe_alltoall_copies(&s, &gpus, &nodes) == 2 && fabs(gpus - 1.75) < 1e-12 && nodes == 0,
          "Mixtral in a node: 2 rows a token, 1.75 other GPUs, no other node (%g, %g)", gpus, nodes);
    const double plain = et_moe_alltoall_time(&s, bytes);
    s.software.ep_dedup = true;
    CHECK_REL(et_moe_alltoall_time(&s, bytes), plain, 1e-12, "one expert a GPU: nothing to deduplicate");
    et_scenario t;
    et_error err;
    const int rc = et_scenario_load(ET_SOURCE_DIR "/tests/data/moe-a2a-8.json", &t, &err);
    CHECK(rc == 0, "moe-a2a-8 loads: %s", rc ? err.text : "");
    if (rc) return;
    const et_comm_group g = et_ep_group(&t);
    CHECK(g.ranks == 8 && g.nodes == 2 && g.ranks_per_node == 4, "8 expert ranks over 2 nodes of 4");
    const double alpha = et_step_alpha(&g), across = et_moe_alltoall_time(&t, bytes) - alpha;
    t.software.ep_dedup = true;
    CHECK(et_moe_alltoall_copies(&t, &gpus, &nodes) == 2 && fabs(nodes - 22.0 / 28) < 1e-12,
          "a token reaches 22/28 of the other node (%g)", nodes);
    CHECK_REL(et_moe_alltoall_time(&t, bytes) - alpha, across * (22.0 / 28), 1e-9,
              "the fabric carries 22/28 of the plain all-to-all's crossing");
    et_scenario_free(&t);
}

/* The stack's attention kernel reaches the graph: megatron-core's fused attention ops are cuDNN's, and on
 * the H100 (a cuDNN rate of its own) they take 1/2 of FlashAttention 2's time; pytorch-fsdp's are not. */
static void test_attention_kernel(void)
{
    et_scenario s;
    if (load("llama3-8b-h100.json", &s)) return;
    const et_batch_shape b = et_batch_expected(&s);
    double t[2];
    for (int stack = 0; stack < 2; stack++) {
        et_software_preset(stack ? "pytorch-fsdp" : "megatron-core", &s.software);
        et_graph g;
        if (graph_of(&s, &g)) return;
        int fused = 0, cudnn = 0;
        for (int i = 0; i < g.n_ops; i++)
            if (g.ops[i].kind == ET_OP_ATTENTION && g.ops[i].fused) fused++, cudnn += g.ops[i].cudnn_kernel;
        CHECK(fused > 0 && cudnn == (stack ? 0 : fused), "%s: %d of %d fused attention ops cuDNN's",
              stack ? "pytorch-fsdp" : "megatron-core", cudnn, fused);
        double bytes;
        int kernels;
        t[stack] = op_of(&g, "layer.0.attn.flash", &b, &s.cluster.device, s.precision, &bytes, &kernels) -
                   s.cluster.device.kernel_overhead_s;
        et_graph_free(&g);
    }
    CHECK_REL(t[0] / t[1],
              s.cluster.device.flash_attention_efficiency / s.cluster.device.cudnn_attention_efficiency, 1e-9,
              "cuDNN's kernel at the profile's own rate");
}

int main(void)
{
    test_attention_kernel();
    test_recompute_early_stop();
    test_ep_overlap();
    test_ep_dedup();
    test_eager_terms();
    test_moe_dispatch();
    test_bias_kernels();
    test_grouped_gemm();
    test_pipeline_sends();
    test_presets();
    test_passes();
    test_cross_entropy();
    test_syncs();
    return check_summary("test_software");
}

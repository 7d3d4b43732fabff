/* Cost-model checks: parameter counts, FLOPs per token against independent formulas, op and gradient
 * order, buckets, memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "batch.h"
#include "buckets.h"
#include "check.h"
#include "graph.h"
#include "memory.h"
#include "model_config.h"
#include "op_classes.h"
#include "quantile.h"
#include "quantization.h"

static et_graph build(const char *preset, int tensor, int pipeline, int stage, et_error *err)
{
    et_model_config m;
    et_model_preset(preset, &m);
    et_graph_options o = {.tensor = tensor,
                          .pipeline = pipeline,
                          .stage = stage,
                          .precision = ET_FP16,
                          .optimizer = ET_OPT_ADAM,
                          .optimizer_shards = 1};
    et_graph g;
    if (et_graph_build(&m, &o, &g, err)) memset(&g, 0, sizeof g);
    return g;
}

static double graph_flops(const et_graph *g, const et_batch_shape *b)
{
    double f = 0;
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].phase != ET_PHASE_OPTIMIZER) f += et_linear_eval(&g->ops[i].flops, b);
    return f;
}

/* The optimizer's update: 28 bytes a parameter in fp32 (gradient, weight, m and v read; weight, m and v
 * written) and under fp16 (2-byte gradient, the fp32 master, m and v, and the 2-byte weight copy written);
 * its moments (16 bytes) cold, so that on a profile with a cache level a small update still reads them
 * from memory; GPU profiles (no cache level) cost it as before. */
static void test_optimizer_bytes(void)
{
    et_model_config m;
    et_model_preset("bert-base", &m);
    for (int fp32 = 0; fp32 <= 1; fp32++) {
        et_graph_options o = {.tensor = 1,
                              .pipeline = 1,
                              .precision = fp32 ? ET_FP32 : ET_FP16,
                              .optimizer = ET_OPT_ADAMW,
                              .optimizer_shards = 1};
        et_graph g;
        et_error err = {0};
        CHECK(et_graph_build(&m, &o, &g, &err) == 0, "graph builds: %s", err.text);
        const int i = et_graph_find(&g, "optimizer.step");
        CHECK(i >= 0, "an optimizer.step op");
        if (i < 0) continue;
        double params = 0;
        for (int p = 0; p < g.n_params; p++)
            params += g.params[p].count;
        const et_op *op = &g.ops[i];
        CHECK_REL(op->bytes.fixed, 28 * params, 1e-12,
                  fp32 ? "fp32 update: 28 bytes a parameter" : "fp16 update: 28 bytes a parameter");
        CHECK_REL(op->cold_bytes.fixed, 16 * params, 1e-12, "its moments, 16 bytes a parameter, are cold");
        /* its footprint: its own state (gradients, fp32 weights, m and v: 16 bytes a parameter in fp32, and
         * in fp16 too, 2-byte gradients and the 16-bit copy) and one micro-batch's activations */
        CHECK_REL(op->footprint.fixed, 16 * params, 1e-12, "the update's own state");
        et_linear acts, once;
        et_graph_activation_terms(&g, &acts, &once);
        CHECK(op->footprint.per_token == acts.per_token + once.per_token && op->footprint.per_token > 0 &&
                  op->footprint.per_prediction == once.per_prediction,
              "and the step's activations");
        /* two cache levels: the update's non-cold 12 bytes a parameter fit the second; its moments come
         * back from the level that holds the step's footprint */
        et_device_profile d = {.kind = ET_DEVICE_CPU,
                               .memory_bandwidth = 20e9,
                               .memory_efficiency = 1,
                               .optimizer_flops = 1e15,
                               .cache_levels = 2,
                               .cache_bytes = {1e3, 1e13},
                               .cache_bandwidth = {500e9, 100e9}};
        const et_batch_shape b = {
            .sequences = 8, .tokens = 1024, .tokens_sq = 8 * 128 * 128, .predictions = 150};
        CHECK_REL(et_op_time(op, &b, &d, o.precision), 12 * params / 100e9 + 16 * params / 100e9, 1e-9,
                  "a footprint the second level holds: cold moments from there too");
        d.cache_bytes[1] = 0.99 * et_linear_eval(&op->footprint, &b);
        CHECK_REL(et_op_time(op, &b, &d, o.precision), 12 * params / 100e9 + 16 * params / 20e9, 1e-9,
                  "a footprint past the last level: cold moments from memory, the rest from the cache");
        et_graph_free(&g);
    }
}

static void test_param_counts(void)
{
    et_model_config m;
    CHECK(et_model_preset("bert-large", &m) == 0, "bert-large preset exists");
    CHECK(et_model_param_count(&m) == 336232258.0,
          "BERT-large (vocab 30528, pooler, tied MLM head, NSP) has "
          "336,232,258 parameters, got %.0f",
          et_model_param_count(&m));
    /* independent count: embeddings + 24 layers + pooler + MLM transform/LN/bias + NSP */
    double H = 1024, V = 30528, L = 24;
    double expect = V * H + 512 * H + 2 * H + 2 * H + L * (4 * H * H + 4 * H + 8 * H * H + 5 * H + 4 * H) +
                    (H * H + H) + (H * H + H + 2 * H + V) + (2 * H + 2);
    CHECK(expect == 336232258.0, "independent BERT-large formula gives %.0f", expect);
    CHECK(et_model_preset("gpt3-13b", &m) == 0, "gpt3-13b preset exists");
    CHECK_REL(et_model_param_count(&m), 12.85e9, 0.01, "gpt3-13b parameters");
    CHECK(et_model_preset("bert-base", &m) == 0, "bert-base preset");
    CHECK_REL(et_model_param_count(&m), 110.1e6, 0.005, "bert-base parameters (~110M)");
    CHECK(et_model_preset("no-such-model", &m) != 0, "unknown preset rejected");
    /* the parameters alone (et_graph_params, no ops) are the full build's, parameter for parameter, on
     * dense, mixture-of-experts and tensor-parallel, pipelined graphs */
    const char *names[] = {"bert-large", "gpt3-13b", "llama3-8b", "mixtral-8x7b"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        CHECK(et_model_preset(names[i], &m) == 0, "%s preset", names[i]);
        for (int tp = 1; tp <= 2; tp++)
            for (int stage = 0; stage < 2; stage++) {
                et_graph_options o = {
                    .tensor = tp, .pipeline = 2, .stage = stage, .precision = ET_BF16, .optimizer_shards = 1};
                et_graph full, params;
                et_error err;
                if (et_graph_build(&m, &o, &full, &err) || et_graph_params(&m, &o, &params, &err)) {
                    CHECK(0, "%s: %s", names[i], err.text);
                    continue;
                }
                int same = params.n_ops == 0 && params.n_params == full.n_params &&
                           params.param_count == full.param_count && params.param_dense == full.param_dense &&
                           params.grad_elems == full.grad_elems && params.weight_bytes == full.weight_bytes;
                for (int k = 0; same && k < full.n_params; k++)
                    same = params.params[k].count == full.params[k].count &&
                           params.params[k].expert == full.params[k].expert &&
                           !strcmp(params.params[k].id, full.params[k].id);
                CHECK(same,
                      "%s, tensor %d, stage %d: the parameters alone are the full build's (%d against %d)",
                      names[i], tp, stage, params.n_params, full.n_params);
                et_graph_free(&full);
                et_graph_free(&params);
            }
    }
}

static void test_flops_per_token(void)
{
    et_error err;
    /* GPT-3 13B: 6N plus the attention term 12*L*S*H per token (scores and context, forward and backward,
     * full S x S as dense kernels compute it). */
    et_graph g = build("gpt3-13b", 1, 1, 0, &err);
    double S = 2048, H = 5120, L = 40, N = et_model_param_count(&g.model);
    et_batch_shape b = {.sequences = 4, .tokens = 4 * S, .tokens_sq = 4 * S * S, .predictions = 4 * S};
    double per_token = graph_flops(&g, &b) / b.tokens;
    CHECK_REL(per_token, 6 * N + 12 * L * S * H, 0.01, "gpt3-13b training FLOPs per token vs 6N + 12LSH");
    et_graph_free(&g);

    /* BERT-large, padded 512, 76 predictions per sequence: the encoder's matrix parameters see every token,
     * the MLM head only the predictions and the pooler/NSP only one row per sequence. */
    g = build("bert-large", 1, 1, 0, &err);
    double Sb = 512, Hb = 1024, Lb = 24, V = 30528, B = 8, P = 76 * B;
    et_batch_shape bb = {.sequences = B, .tokens = B * Sb, .tokens_sq = B * Sb * Sb, .predictions = P};
    double T = B * Sb;
    double expect = 6 * Lb * 12 * Hb * Hb + 12 * Lb * Sb * Hb + 6 * (P / T) * (Hb * Hb + V * Hb) +
                    6 * (B / T) * (Hb * Hb + 2 * Hb);
    CHECK_REL(graph_flops(&g, &bb) / T, expect, 0.01, "bert-large training FLOPs per token");
    /* unpadded: linear ops scale with T, attention with the sum of squared lengths */
    et_batch_shape half = {.sequences = B, .tokens = B * 256, .tokens_sq = B * 256.0 * 256, .predictions = P};
    CHECK(graph_flops(&g, &half) < 0.5 * graph_flops(&g, &bb) + 1e12, "shorter sequences cost less");
    et_graph_free(&g);
}

static void test_order(void)
{
    et_error err;
    for (int tp = 1; tp <= 2; tp++) {
        et_graph g = build("bert-large", tp, 1, 0, &err);
        CHECK(g.n_ops > 0, "graph built");
        /* every parameter finalised exactly once, ids unique */
        int covered = 0;
        for (int i = 0; i < g.n_ops; i++)
            covered += g.ops[i].grad_count;
        CHECK(covered == g.n_params, "each parameter's gradient produced once (%d of %d)", covered,
              g.n_params);
        int dup = 0;
        for (int i = 0; i < g.n_params; i++)
            for (int j = i + 1; j < g.n_params; j++)
                dup += strcmp(g.params[i].id, g.params[j].id) == 0;
        CHECK(dup == 0, "parameter ids are unique (%d duplicates)", dup);
        int ranges_ok = 1;
        for (int i = 1; i < g.n_ops; i++)
            if (g.ops[i].grad_first != g.ops[i - 1].grad_first + g.ops[i - 1].grad_count) ranges_ok = 0;
        CHECK(ranges_ok, "op gradient ranges tile the parameter list in op order");
        /* reverse layer order in backward */
        int last_layer = 1 << 30, monotone = 1;
        for (int p = 0; p < g.n_params; p++) {
            if (g.params[p].layer < 0) continue;
            if (g.params[p].layer > last_layer) monotone = 0;
            last_layer = g.params[p].layer;
        }
        CHECK(monotone, "backward finalises layer gradients in reverse layer order");
        CHECK(strcmp(g.params[g.n_params - 1].id, "embed.token_type_embeddings") == 0,
              "embeddings are the last gradients, got %s", g.params[g.n_params - 1].id);
        int fwd_end = 0, bwd_start = -1, phases_ok = 1;
        for (int i = 0; i < g.n_ops; i++) {
            if (g.ops[i].phase == ET_PHASE_FORWARD) {
                fwd_end = i;
                if (bwd_start >= 0) phases_ok = 0;
            }
            if (g.ops[i].phase == ET_PHASE_BACKWARD && bwd_start < 0) bwd_start = i;
        }
        CHECK(phases_ok && fwd_end < bwd_start, "forward ops precede backward ops");
        CHECK(et_graph_find(&g, "layer.3.attn.qkv.bwd_weight") >= 0,
              "stable op id layer.3.attn.qkv.bwd_weight");
        CHECK((et_graph_find(&g, "layer.3.mlp.tp_allreduce") >= 0) == (tp > 1),
              "TP all-reduce only with t > 1");
        et_graph_free(&g);
    }
    /* pipeline stages split layers and own embeddings / head */
    et_graph s0 = build("gpt3-13b", 1, 4, 0, &err), s3 = build("gpt3-13b", 1, 4, 3, &err);
    CHECK(s0.first_layer == 0 && s0.last_layer == 9 && s3.first_layer == 30 && s3.last_layer == 39,
          "4 stages of 10 layers");
    CHECK(et_graph_find(&s0, "embed.lookup") >= 0 && et_graph_find(&s0, "head.loss") < 0, "stage 0 embeds");
    CHECK(et_graph_find(&s3, "head.loss") >= 0 && et_graph_find(&s3, "embed.lookup") < 0,
          "last stage has the head");
    et_graph_free(&s0);
    et_graph_free(&s3);
}

static void test_buckets(void)
{
    et_error err;
    et_graph g = build("bert-large", 1, 1, 0, &err);
    et_bucket *b;
    int n;
    double cap = 25 * 1048576.0;
    CHECK(et_buckets_build(&g, cap, 2, &b, &n, &err) == 0, "buckets built");
    double total = 0;
    int sizes_ok = 1, order_ok = 1, next = 0;
    for (int k = 0; k < n; k++) {
        total += b[k].bytes;
        if (k < n - 1 && b[k].bytes < cap) sizes_ok = 0;
        if (b[k].param_first != next) order_ok = 0;
        next = b[k].param_first + b[k].param_count;
        if (k && b[k].ready_op < b[k - 1].ready_op) order_ok = 0;
    }
    CHECK(total == 2 * g.param_count, "buckets hold every gradient byte once");
    CHECK(sizes_ok, "every bucket but the last reaches the cap");
    CHECK(order_ok && next == g.n_params, "buckets follow backward order");
    CHECK(n >= 20 && n <= 30, "BERT-large fp16 cut into ~25 MiB buckets: %d", n);
    free(b);
    et_graph_free(&g);
}

static void test_tensor_parallel_flops(void)
{
    et_error err;
    et_graph g1 = build("gpt3-13b", 1, 1, 0, &err), g8 = build("gpt3-13b", 8, 1, 0, &err);
    et_batch_shape b = {.sequences = 1, .tokens = 2048, .tokens_sq = 2048.0 * 2048, .predictions = 2048};
    CHECK_REL(graph_flops(&g8, &b) * 8, graph_flops(&g1, &b), 0.01, "TP 8 splits the FLOPs 8 ways");
    et_graph_free(&g1);
    et_graph_free(&g8);
}

/* Op classes give every op exactly its own et_op_time, with far fewer evaluations on repeated layers. */
static void test_op_classes(void)
{
    et_error err;
    const char *presets[] = {"bert-large", "gpt3-13b", "encoder-6x768"};
    et_device_profile d;
    CHECK(et_device_profile_load(ET_SOURCE_DIR "/scenarios/profiles/a100-sxm4-80gb.json", &d, &err) == 0,
          "a100 profile: %s", err.text);
    et_batch_shape shapes[] = {
        {.sequences = 16, .tokens = 3000, .tokens_sq = 7e5, .predictions = 300},
        {.sequences = 1, .tokens = 2048, .tokens_sq = 2048.0 * 2048, .predictions = 2048}};
    for (int i = 0; i < 3; i++) {
        et_graph g = build(presets[i], i == 1 ? 2 : 1, 1, 0, &err);
        et_op_classes c;
        CHECK(et_op_classes_build(&g, &c) == 0, "op classes of %s", presets[i]);
        CHECK(c.n_classes * 4 < g.n_ops, "%s: %d classes for %d ops", presets[i], c.n_classes, g.n_ops);
        double *t = malloc((size_t)g.n_ops * sizeof *t);
        for (int k = 0; k < 2 && t; k++) {
            et_op_classes_times(&c, &shapes[k], &d, ET_FP16, t);
            int same = 1;
            for (int j = 0; j < g.n_ops; j++)
                same = same && t[j] == et_op_time(&g.ops[j], &shapes[k], &d, ET_FP16);
            CHECK(same, "%s: class times equal et_op_time for every op (shape %d)", presets[i], k);
        }
        free(t);
        et_op_classes_free(&c);
        et_graph_free(&g);
    }
}

/* Llama-family presets against the published parameter counts and an independent formula: embeddings and
 * an untied output (V H each), per layer q and o (H^2 each), k and v (H x kv D each), three SwiGLU
 * matrices (3 H F), two RMSNorm weights (2 H), and the final norm (H); no biases, no position table. */
static void test_llama_presets(void)
{
    static const struct {
        const char *name;
        double published; /* 0: the formula only */
    } presets[] = {{"llama2-7b", 6738415616.0},   {"llama2-13b", 13015864320.0},
                   {"llama2-70b", 68976648192.0}, {"llama3-8b", 8030261248.0},
                   {"llama3-70b", 70553706496.0}, {"llama3-405b", 405853388800.0},
                   {"mistral-7b", 7241732096.0}};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        et_model_config m;
        CHECK(et_model_preset(presets[i].name, &m) == 0, "%s preset exists", presets[i].name);
        const double H = m.hidden, F = m.ffn, V = m.vocab, L = m.layers, D = H / m.heads, kv = m.kv_heads;
        const double formula = 2 * V * H + L * (2 * H * H + 2 * H * kv * D + 3 * H * F + 2 * H) + H;
        const double counted = et_model_param_count(&m);
        CHECK(counted == formula, "%s: %.0f parameters, the formula %.0f", presets[i].name, counted, formula);
        CHECK(counted == presets[i].published, "%s: %.0f parameters, published %.0f", presets[i].name,
              counted, presets[i].published);
    }
}

/* Qwen3's mixtures against an independent count from their published configurations (Megatron-Bridge's
 * Qwen3MoEModelProvider, as the NeMo rows cite it): per layer q and the output H x A D, k and v H x kv D,
 * each head's query and key norm D, two RMSNorms, the router H E and E SwiGLU experts 3 H Fe; embeddings
 * and output V H each, the final norm. The Qwen team publishes 30.5B total / 3.3B active and 235B / 22B. */
/* 1 when got equals want (and a failed check otherwise). */
static int equal_checked(double got, double want)
{
    CHECK(got == want, "got %.9g, want %.9g", got, want);
    return got == want;
}

static void test_qwen3(void)
{
    static const struct {
        const char *name;
        double total_b, active_b, digit; /* billions as published, truncated to the digit they give */
    } models[] = {{"qwen3-30b-a3b", 30.5, 3.3, 0.1}, {"qwen3-235b-a22b", 235, 22, 1}};
    for (int i = 0; i < 2; i++) {
        et_model_config m;
        if (et_model_preset(models[i].name, &m)) {
            CHECK(0, "%s preset exists", models[i].name);
            continue;
        }
        const double H = m.hidden, V = m.vocab, L = m.layers, D = 128, A = m.heads, kv = m.kv_heads;
        const double E = m.moe.experts, k = m.moe.top_k, Fe = m.moe.ffn;
        const double attention = 2 * H * A * D + 2 * H * kv * D + 2 * D;
        const double layer = attention + 2 * H + H * E + E * 3 * H * Fe;
        const double formula = 2 * V * H + L * layer + H;
        const double total = et_model_param_count(&m), active = et_model_active_param_count(&m);
        CHECK(et_model_head_dim(&m) == 128 && m.qk_norm, "%s: heads of 128 with query and key norms",
              models[i].name);
        CHECK(total == formula, "%s: %.0f parameters, the formula %.0f", models[i].name, total, formula);
        CHECK(active == formula - L * (E - k) * 3 * H * Fe, "%s: %.0f active parameters, the formula %.0f",
              models[i].name, active, formula - L * (E - k) * 3 * H * Fe);
        const double t = total / 1e9 - models[i].total_b, a = active / 1e9 - models[i].active_b;
        CHECK(t >= 0 && t < models[i].digit && a >= 0 && a < models[i].digit,
              "%s: %.2fB total and %.2fB active, as published (%.1fB, %.1fB)", models[i].name, total / 1e9,
              active / 1e9, models[i].total_b, models[i].active_b);
        /* on 2 tensor ranks: q, k, v of (A + 2 kv) D / 2 outputs, the output product's A D / 2 inputs, the
         * norms over (A + kv) D / 2 values a token */
        et_graph_options o = {.tensor = 2,
                              .pipeline = 1,
                              .expert = 1,
                              .precision = ET_BF16,
                              .optimizer = ET_OPT_ADAMW,
                              .optimizer_shards = 1};
        et_graph g;
        et_error err;
        if (et_graph_build(&m, &o, &g, &err)) {
            CHECK(0, "%s graph: %s", models[i].name, err.text);
            continue;
        }
        const et_batch_shape b = {.sequences = 1, .tokens = 1, .tokens_sq = 1, .predictions = 1};
        int seen = 0;
        for (int j = 0; j < g.n_ops; j++) {
            const et_op *op = &g.ops[j];
            if (!strcmp(op->id, "layer.0.attn.qkv"))
                seen += equal_checked(et_linear_eval(&op->n, &b), (A + 2 * kv) * D / 2);
            if (!strcmp(op->id, "layer.0.attn.out"))
                seen += equal_checked(et_linear_eval(&op->k, &b), A * D / 2);
            if (!strcmp(op->id, "layer.0.attn.qk_norm"))
                seen += equal_checked(et_linear_eval(&op->bytes, &b), 2 * 2 * (A + kv) * D / 2);
        }
        CHECK(seen == 3, "%s: the q, k, v product, the output product and the norms at heads x 128 (%d of 3)",
              models[i].name, seen);
        et_graph_free(&g);
    }
}

/* Mixtral 8x7B against its published configuration (32 layers, hidden 4096, 32 heads of which 8 key/value,
 * 8 SwiGLU experts of width 14336 per layer, top-2, vocabulary 32000, untied): per layer attention
 * 2 H^2 + 2 H kv D, router H E, experts E 3 H F, two norms; embeddings and output V H each, the final norm.
 * Mistral AI gives 46.7B total and 12.9B active parameters. And the graph of one expert-parallel rank:
 * four all-to-alls per MoE layer (dispatch, combine and their gradients) of k H e bytes per token, experts'
 * FLOPs those of k experts per token. */
static void test_moe(void)
{
    et_model_config m;
    CHECK(et_model_preset("mixtral-8x7b", &m) == 0, "mixtral-8x7b preset exists");
    const double H = m.hidden, F = m.ffn, V = m.vocab, L = m.layers, D = H / m.heads, kv = m.kv_heads;
    const double E = m.moe.experts, k = m.moe.top_k;
    const double layer = 2 * H * H + 2 * H * kv * D + H * E + E * 3 * H * F + 2 * H;
    const double formula = 2 * V * H + L * layer + H;
    const double total = et_model_param_count(&m), active = et_model_active_param_count(&m);
    CHECK(total == formula, "mixtral: %.0f parameters, the formula %.0f", total, formula);
    CHECK(total == 46702792704.0, "mixtral: %.0f parameters, 46,702,792,704 from the published configuration",
          total);
    CHECK(active == formula - L * (E - k) * 3 * H * F && active == 12879925248.0,
          "mixtral: %.0f active parameters, 12,879,925,248 from the published configuration", active);
    CHECK(fabs(total / 1e9 - 46.7) < 0.05 && fabs(active / 1e9 - 12.9) < 0.05,
          "mixtral: %.1fB total and %.1fB active, as published", total / 1e9, active / 1e9);
    et_model_config dense;
    CHECK(et_model_preset("mistral-7b", &dense) == 0 &&
              et_model_active_param_count(&dense) == et_model_param_count(&dense),
          "a dense model's active parameters are all of them");

    et_graph g;
    et_error err;
    et_graph_options o = {
        .tensor = 1, .expert = 8, .pipeline = 1, .precision = ET_BF16, .optimizer_shards = 1};
    CHECK(et_graph_build(&m, &o, &g, &err) == 0, "mixtral graph with expert parallelism 8");
    et_batch_shape b = {.sequences = 1, .tokens = 4096, .tokens_sq = 4096.0 * 4096, .predictions = 4096};
    int a2a = 0;
    double expert_flops = 0, expert_params = 0;
    for (int i = 0; i < g.n_ops; i++) {
        const et_op *op = &g.ops[i];
        if (op->kind == ET_OP_EP_ALLTOALL) {
            a2a++;
            CHECK(et_linear_eval(&op->bytes, &b) == 4096 * k * H * 2, "%s: k H e bytes per token", op->id);
        }
        if (op->expert && op->kind == ET_OP_GEMM && op->phase == ET_PHASE_FORWARD)
            expert_flops += et_linear_eval(&op->flops, &b);
    }
    for (int i = 0; i < g.n_params; i++)
        if (strstr(g.params[i].id, ".experts.")) expert_params += g.params[i].count;
    CHECK(a2a == 4 * m.layers, "%d all-to-alls, four per MoE layer", a2a);
    CHECK(fabs(expert_flops - L * 2 * 4096 * k * 3 * H * F) < 1, "experts' forward FLOPs %.4g, 2 T k 3 H F L",
          expert_flops);
    CHECK(expert_params == L * (E / 8) * 3 * H * F, "one expert per layer on each of 8 expert ranks");
    et_graph_free(&g);
}

/* GaLore on the 6x768 encoder at rank 128: the projected matrices and their states by hand. Per layer the
 * fused q, k, v (2304 x 768), the output (768 x 768), fc1 (3072 x 768) and fc2 (768 x 3072); states
 * 2 r max(m, n) (Adam's m and v) + r min(m, n) (the projector) each; optimizer memory 8 bytes per plain
 * parameter and 4 per state element in fp32. */
static void test_galore(void)
{
    et_model_config m;
    CHECK(et_model_preset("encoder-6x768", &m) == 0, "encoder-6x768 preset");
    et_graph g;
    et_error err;
    et_graph_options o = {.tensor = 1,
                          .pipeline = 1,
                          .precision = ET_FP32,
                          .optimizer_shards = 1,
                          .galore = {.rank = 128, .update_interval = 200}};
    CHECK(et_graph_build(&m, &o, &g, &err) == 0, "graph with GaLore");
    const double r = 128, H = 768, F = 3072;
    const double projected = 6 * (3 * H * H + H * H + 2 * H * F);
    const double states = 6 * ((2 * r * 3 * H + r * H) + (2 * r * H + r * H) + 2 * (2 * r * F + r * H));
    CHECK(g.galore_projected == projected, "%.0f parameters projected, by hand %.0f", g.galore_projected,
          projected);
    CHECK(g.galore_state_elems == states, "%.0f state elements, by hand %.0f", g.galore_state_elems, states);
    int svd = 0;
    for (int i = 0; i < g.n_ops; i++)
        svd += strncmp(g.ops[i].id, "optimizer.galore.svd.", 21) == 0;
    CHECK(svd == 24, "%d SVDs amortised, one per projected matrix", svd);
    et_graph_free(&g);
}

/* The roofline's special-function and cache terms, by hand: added to the arithmetic on a CPU, beside it on
 * a GPU; a kernel whose bytes fit in the cache level streams at its bandwidth. */
static void test_roofline_terms(void)
{
    et_device_profile d = {.kind = ET_DEVICE_CPU,
                           .memory_bandwidth = 20e9,
                           .memory_efficiency = 0.5,
                           .special_rate = 1e9,
                           .cache_levels = 2,
                           .cache_bytes = {1 << 16, 1 << 20},
                           .cache_bandwidth = {200e9, 80e9}};
    const double rate = 10e9, flops = 4e6, special = 1e6;
    /* 4e6 / 1e10 + 1e6 / 1e9 = 1.4 ms of compute against 2 MB / 10 GB/s = 0.2 ms from memory */
    CHECK_REL(et_roofline_time(&d, rate, flops, special, 2e6, 0, 0, 0), 4e-4 + 1e-3, 1e-12, "CPU: exps add");
    d.kind = ET_DEVICE_GPU;
    CHECK_REL(et_roofline_time(&d, rate, flops, special, 2e6, 0, 0, 0), 1e-3, 1e-12,
              "GPU: the SFUs run beside");
    CHECK_REL(et_roofline_time(&d, rate, 0, 0, 1 << 16, 0, 0, 0), (1 << 16) / 200e9, 1e-12,
              "in the first cache level");
    CHECK_REL(et_roofline_time(&d, rate, 0, 0, (1 << 16) + 1, 0, 0, 0), ((1 << 16) + 1) / 80e9, 1e-12,
              "past the first: the second");
    CHECK_REL(et_roofline_time(&d, rate, 0, 0, (1 << 20) + 1, 0, 0, 0), ((1 << 20) + 1) / 10e9, 1e-12,
              "past the last cache level: memory");
    /* cold bytes (an optimizer's moments) come from the level holding the footprint, not the op's bytes */
    CHECK_REL(et_roofline_time(&d, rate, 0, 0, 1 << 16, 1 << 15, 0, 0), (1 << 15) / 200e9 + (1 << 15) / 10e9,
              1e-12, "cold bytes of an unknown footprint from memory, the rest from the first level");
    CHECK_REL(et_roofline_time(&d, rate, 0, 0, 1 << 16, 1 << 15, 1 << 19, 0),
              (1 << 15) / 200e9 + (1 << 15) / 80e9, 1e-12, "a footprint the second level holds: from there");
    CHECK_REL(et_roofline_time(&d, rate, 0, 0, 1 << 16, 1 << 15, 1 << 21, 0),
              (1 << 15) / 200e9 + (1 << 15) / 10e9, 1e-12, "a footprint past the last level: from memory");
    d.special_rate = 0;
    CHECK_REL(et_roofline_time(&d, rate, flops, special, 0, 0, 0, 0), 4e-4, 1e-12,
              "no special rate: not costed");
    /* the op graph counts an exp per score of the softmax and a tanh per GELU input */
    et_model_config m;
    et_graph g;
    et_error err;
    if (et_model_preset("bert-large", &m)) return;
    et_graph_options o = {
        .tensor = 1, .pipeline = 1, .precision = ET_FP16, .optimizer = ET_OPT_ADAM, .optimizer_shards = 1};
    if (et_graph_build(&m, &o, &g, &err)) return;
    const et_batch_shape b = {.sequences = 2, .tokens = 256, .tokens_sq = 2 * 128 * 128, .predictions = 40};
    int softmax = 0, gelu = 0;
    for (int i = 0; i < g.n_ops; i++) {
        if (strcmp(g.ops[i].id, "layer.0.attn.softmax") == 0)
            softmax = et_linear_eval(&g.ops[i].special, &b) == 16.0 * 2 * 128 * 128;
        if (strcmp(g.ops[i].id, "layer.0.mlp.gelu") == 0)
            gelu = et_linear_eval(&g.ops[i].special, &b) == 256.0 * 4096;
    }
    CHECK(softmax && gelu, "an exp per score (16 heads x 2 x 128^2), a tanh per GELU input (256 x 4096)");
    et_graph_free(&g);
}

/* A fused attention op at the shape of the public FlashAttention 2 rows (head dimension 64 on the A100,
 * 128 on the H100; 2 sequences of 8192 tokens, 2048 wide): the shipped profiles give the measured rates.
 * cuDNN's kernel (software.attention_kernel cudnn) at the profile's own rate: on the H100 twice the
 * FlashAttention 2 row (0.674 against 0.337 of the peak); on a profile without a cuDNN rate (the A100's:
 * Transformer Engine runs FlashAttention there) FlashAttention 2's measured 179.5. */
static void test_flash_attention_rows(void)
{
    static const struct {
        const char *profile;
        double D;
        bool cudnn;
        double tflops;
    } rows[] = {{"a100-sxm4-80gb", 64, false, 179.5},
                {"h100-sxm", 128, false, 327.9},
                {"h200", 128, false, 329.3},
                {"h100-sxm", 128, true, 2 * 327.9},
                {"a100-sxm4-80gb", 64, true, 179.5}};
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/scenarios/profiles/%s.json", ET_SOURCE_DIR, rows[r].profile);
        et_device_profile d;
        et_error err;
        if (et_device_profile_load(path, &d, &err)) {
            CHECK(0, "profile loads: %s", err.text);
            continue;
        }
        const double l = 8192, D = rows[r].D, heads = 2048 / D, flops = 4 * l * l * D * heads * 2;
        et_op op = {.kind = ET_OP_ATTENTION,
                    .fused = true,
                    .cudnn_kernel = rows[r].cudnn,
                    .kernels = 1,
                    .time_scale = 1};
        op.k.fixed = D;
        op.flops.per_token_sq = 4 * D * heads;
        op.bytes.per_token = 4 * 2 * 2048;
        op.special.per_token_sq = heads;
        const et_batch_shape b = {.sequences = 2, .tokens = 2 * l, .tokens_sq = 2 * l * l};
        const double t = et_op_time(&op, &b, &d, ET_BF16) - d.kernel_overhead_s;
        CHECK_REL(flops / t / 1e12, rows[r].tflops, 0.005,
                  rows[r].cudnn ? "cuDNN's kernel at its own rate" : rows[r].profile);
    }
}

/* A causal fused kernel's diagonal blocks (graph.h's tile_keys): at sequence 512 with 64 keys a row
 * beyond the 256 live ones on average, the kernel takes (256 + 64) / 256 = 1.25x the time of one that
 * computed only the live blocks; its FLOPs (the model's) stay the same. A windowed layer's blocks
 * (window_keys) likewise, and on a profile that prices the kernel as batched products. */
static void test_flash_diagonal_blocks(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/scenarios/profiles/h100-sxm.json", ET_SOURCE_DIR);
    et_device_profile d;
    et_error err;
    if (et_device_profile_load(path, &d, &err)) {
        CHECK(0, "profile loads: %s", err.text);
        return;
    }
    const double l = 512, D = 128, heads = 16;
    et_op op = {.kind = ET_OP_ATTENTION, .fused = true, .kernels = 1, .time_scale = 1};
    op.k.fixed = D;
    op.flops.per_token_sq = 4 * D * heads / 2;
    op.bytes.per_token = 2 * 128; /* few bytes: the arithmetic bounds it */
    const et_batch_shape b = {.sequences = 64, .tokens = 64 * l, .tokens_sq = 64 * l * l};
    const double whole = et_op_time(&op, &b, &d, ET_BF16) - d.kernel_overhead_s;
    op.tile_keys = 64;
    const double tiled = et_op_time(&op, &b, &d, ET_BF16) - d.kernel_overhead_s;
    CHECK_REL(tiled / whole, 1.25, 1e-9, "diagonal blocks at sequence 512");
    /* a window of 128 keys at sequence 4096, the same FLOPs: a block of 128 rows runs through 256 keys for
     * each row's 128 live ones (half computed in vain), and to the kernel 256 keys are a short sequence:
     * the fused rate's length term at 256, not 4096 (h: the profile's flash_half_len) */
    const double L = 4096, h = d.flash_half_len;
    const et_batch_shape long_b = {.sequences = 8, .tokens = 8 * L, .tokens_sq = 8 * L * L};
    op.tile_keys = 0, op.window_keys = 0;
    const double open = et_op_time(&op, &long_b, &d, ET_BF16) - d.kernel_overhead_s;
    op.tile_keys = 128, op.window_keys = 128;
    const double windowed = et_op_time(&op, &long_b, &d, ET_BF16) - d.kernel_overhead_s;
    CHECK(h > 0, "the H100 profile has a fused-attention half length");
    CHECK_REL(windowed / open, (L / (L + h)) / (256 / (256 + h) * 0.5), 1e-9, "a window of 128 at 4096");
    /* a profile without a fused-attention rate (the GB200's: the kernel as batched products) pays the
     * diagonal blocks the same 1.25x */
    snprintf(path, sizeof path, "%s/scenarios/profiles/gb200.json", ET_SOURCE_DIR);
    if (et_device_profile_load(path, &d, &err)) {
        CHECK(0, "profile loads: %s", err.text);
        return;
    }
    CHECK(!(d.flash_attention_efficiency > 0), "no fused-attention rate in the GB200's profile");
    op.tile_keys = 0, op.window_keys = 0;
    const double batched = et_op_time(&op, &b, &d, ET_BF16) - d.kernel_overhead_s;
    op.tile_keys = 64;
    CHECK_REL((et_op_time(&op, &b, &d, ET_BF16) - d.kernel_overhead_s) / batched, 1.25, 1e-9,
              "batched products: diagonal blocks at sequence 512");
}

/* ALiBi (model.position_embedding alibi) on materialised scores, by hand: GPT-3 13B's layer at tensor 2 (20
 * of its 40 heads a rank) in fp16, one sequence of 2048 tokens: a copy kernel writing the bias into the
 * scores' buffer, 2 x 20 x 2048^2 bytes, and the score product reading those bytes again, in forward and
 * in the recomputed forward only; the fused kernel takes the slopes in its loop: no op, no byte. */
static void test_alibi(void)
{
    et_model_config m;
    et_model_preset("gpt3-13b", &m);
    const et_batch_shape b = {
        .sequences = 1, .tokens = 2048, .tokens_sq = 2048.0 * 2048, .predictions = 2048};
    const double scores = 2.0 * (m.heads / 2) * 2048 * 2048;
    for (int flash = 0; flash < 2; flash++) {
        double bytes[2] = {0, 0}, copy[2] = {0, 0};
        int copies = 0;
        for (int alibi = 0; alibi < 2; alibi++) {
            m.position = alibi ? ET_POSITION_ALIBI : ET_POSITION_LEARNED;
            et_graph_options o = {.tensor = 2,
                                  .pipeline = 1,
                                  .precision = ET_FP16,
                                  .optimizer = ET_OPT_ADAM,
                                  .optimizer_shards = 1,
                                  .recompute = ET_RECOMPUTE_FULL,
                                  .attention = flash ? ET_ATTENTION_FLASH : ET_ATTENTION_STANDARD};
            et_graph g;
            et_error err;
            if (et_graph_build(&m, &o, &g, &err)) {
                CHECK(0, "graph builds: %s", err.text);
                return;
            }
            int i = et_graph_find(&g, flash ? "layer.0.attn.flash" : "layer.0.attn.scores");
            if (i >= 0) bytes[alibi] = et_linear_eval(&g.ops[i].bytes, &b);
            for (int k = 0; k < g.n_ops; k++)
                if (strstr(g.ops[k].id, ".attn.alibi") && strncmp(g.ops[k].id, "layer.0.", 8) == 0) {
                    copies++;
                    copy[alibi] += et_linear_eval(&g.ops[k].bytes, &b);
                    CHECK(g.ops[k].kernels == 1, "%s: one launch", g.ops[k].id);
                }
            et_graph_free(&g);
        }
        if (flash)
            CHECK(copies == 0 && bytes[1] == bytes[0], "fused: no copy (%d), the same bytes", copies);
        else {
            CHECK(copies == 2, "a copy in forward and in the recomputed forward, got %d", copies);
            CHECK_REL(copy[1], 2 * scores, 1e-12, "the two copies' bytes");
            CHECK_REL(bytes[1] - bytes[0], scores, 1e-12, "the score product reads the bias back");
        }
    }
}

/* Failures and checkpoints against hand computations of Daly's formulas (model/resilience.h). */
static void test_resilience(void)
{
    et_resilience r = et_resilience_defaults();
    CHECK_REL(r.interruptions_per_gpu_hour, 419.0 / (54 * 24 * 16384), 1e-12, "Llama 3's interruption rate");
    CHECK_REL(et_checkpoint_bytes(175e9, 2), 175e9 * 14, 1e-12,
              "a bf16 checkpoint: 2 + 12 bytes a parameter");
    CHECK_REL(et_checkpoint_bytes(1e6, 4), 1e6 * 12, 1e-12, "an fp32 checkpoint: 4 + 8 bytes a parameter");
    /* M = 10,000 s (0.36 interruptions a GPU-hour on one GPU), a synchronous write of 100 s (500 GB at 5
     * GB/s on one node), no fixed restart: Daly's tau = sqrt(2 x 100 x 10^4) (1 + sqrt(0.005) / 3 + 0.005 /
     * 9) - 100 = 1348.3326 s; factor = M e^(R/M) (e^((tau + delta)/M) - 1) / tau with R the 100 s read back
     */
    r.interruptions_per_gpu_hour = 0.36;
    r.restart_s = 0;
    et_goodput g;
    et_goodput_estimate(&r, 1, 1, 500e9, 1e6, &g);
    CHECK_REL(g.mtbf_s, 1e4, 1e-12, "MTBF");
    CHECK_REL(g.write_s, 100, 1e-12, "write time");
    CHECK_REL(g.interval_s, 1348.332569907747, 1e-9, "Daly's interval");
    CHECK_REL(g.factor, 1e4 * exp(100 / 1e4) * expm1((1348.332569907747 + 100) / 1e4) / 1348.332569907747,
              1e-9, "Daly's expected wall time factor");
    CHECK_REL(g.interruptions, 1e6 * g.factor / 1e4, 1e-12, "interruptions over the run");
    /* a fixed restart of 550 s: R = 550 + the 100 s read back = 650 s, factor 1.2334742 */
    r.restart_s = 550;
    et_goodput_estimate(&r, 1, 1, 500e9, 1e6, &g);
    CHECK_REL(g.factor, 1.2334742128269016, 1e-9, "the factor with a 650 s restart");
    /* a fixed interval is kept; no failures: only the checkpoints' stalls */
    r.interval_s = 3600;
    r.interruptions_per_gpu_hour = 0;
    et_goodput_estimate(&r, 8, 1, 500e9, 1e6, &g);
    CHECK(isinf(g.mtbf_s) && g.interval_s == 3600, "no failures: no MTBF, the given interval");
    CHECK_REL(g.factor, 1 + 100.0 / 3600, 1e-12, "no failures: one stall an interval");
    /* asynchronous: the step pays the copy to host (500 GB / 8 GPUs / 25 GB/s = 2.5 s), the write delays the
     * rollback point (R gains another write) */
    r.asynchronous = true;
    r.interval_s = 0;
    r.interruptions_per_gpu_hour = 0.36 / 8;
    et_goodput_estimate(&r, 8, 1, 500e9, 1e6, &g);
    CHECK_REL(g.stall_s, 2.5, 1e-12, "asynchronous stall");
    CHECK_REL(g.restart_s, 550 + 200, 1e-12, "asynchronous restart: the read and the write in flight");
    CHECK(g.interval_s >= g.write_s, "one asynchronous write at a time");
}

/* Low-precision recipes (quantization.h), by hand: each quantized operand element costs delayed 2 + 1,
 * current 2 + 2 + 1, mxfp8 2 + 1 + 1 + 2/32, nvfp4 2 + 2 + 2 (0.5 + 1/16) bytes; current and nvfp4 launch
 * two kernels, the others one. Every product of a Llama 3 8B graph moves its bf16 bytes plus that, so the
 * difference to bf16 scales with the recipe's bytes and kernels, product by product. */
static void test_quantization(void)
{
    CHECK(et_quantize_bytes(ET_SCALING_DELAYED) == 3 && et_quantize_bytes(ET_SCALING_CURRENT) == 5 &&
              et_quantize_bytes(ET_SCALING_MXFP8) == 4.0625 && et_quantize_bytes(ET_SCALING_NVFP4) == 5.125,
          "bytes an element: %g, %g, %g, %g", et_quantize_bytes(ET_SCALING_DELAYED),
          et_quantize_bytes(ET_SCALING_CURRENT), et_quantize_bytes(ET_SCALING_MXFP8),
          et_quantize_bytes(ET_SCALING_NVFP4));
    CHECK(et_scaling_allowed(ET_FP8, ET_SCALING_MXFP8) && !et_scaling_allowed(ET_FP8, ET_SCALING_NVFP4) &&
              et_scaling_allowed(ET_FP4, ET_SCALING_NVFP4) &&
              !et_scaling_allowed(ET_BF16, ET_SCALING_DELAYED),
          "fp8 takes delayed, current and mxfp8; fp4 nvfp4; bf16 none");
    et_model_config m;
    CHECK(et_model_preset("llama3-8b", &m) == 0, "llama3-8b preset");
    const struct {
        et_precision p;
        et_scaling s;
    } recipes[] = {{ET_BF16, ET_SCALING_DELAYED},
                   {ET_FP8, ET_SCALING_DELAYED},
                   {ET_FP8, ET_SCALING_CURRENT},
                   {ET_FP8, ET_SCALING_MXFP8},
                   {ET_FP4, ET_SCALING_NVFP4}};
    enum { N = sizeof recipes / sizeof *recipes };
    et_graph g[N];
    et_error err;
    int built = 0;
    for (int i = 0; i < N; i++) {
        et_graph_options o = {.tensor = 1,
                              .pipeline = 1,
                              .precision = recipes[i].p,
                              .scaling = recipes[i].s,
                              .optimizer_shards = 1,
                              .attention = ET_ATTENTION_FLASH};
        built += et_graph_build(&m, &o, &g[i], &err) == 0;
    }
    CHECK(built == N, "five graphs build");
    if (built != N) return;
    const et_batch_shape b = {
        .sequences = 2, .tokens = 4096, .tokens_sq = 2 * 2048.0 * 2048, .predictions = 4096};
    int products = 0, bad = 0, plain_products = 0;
    for (int k = 0; k < g[0].n_ops; k++) {
        const et_op *op = &g[0].ops[k];
        if (op->kind != ET_OP_GEMM || op->weight_bytes <= 0) continue;
        products++;
        const double bf16 = et_linear_eval(&op->bytes, &b);
        const double delayed = et_linear_eval(&g[1].ops[k].bytes, &b) - bf16;
        /* the output layer and the router stay in 16 bits under every recipe: no quantize pass */
        const bool plain = g[1].ops[k].unquantized;
        plain_products += plain;
        for (int i = 2; i < N; i++) {
            const double extra = et_linear_eval(&g[i].ops[k].bytes, &b) - bf16;
            const double want = plain ? 0 : delayed * et_quantize_bytes(recipes[i].s) / 3;
            const int kernels = g[i].ops[k].kernels - op->kernels;
            if (fabs(extra - want) > 1e-9 * want ||
                kernels != (plain ? 0 : et_quantize_kernels(recipes[i].s)) ||
                g[i].ops[k].unquantized != plain || strcmp(g[i].ops[k].id, op->id)) {
                if (!bad++)
                    CHECK(0, "%s under %s: %.0f bytes more than bf16, by hand %.0f; %d kernels more", op->id,
                          et_scaling_names[recipes[i].s], extra, want, kernels);
            }
        }
        if ((plain ? delayed != 0 : delayed <= 0) && !bad++)
            CHECK(0, "%s: delayed FP8 moves %s than bf16", op->id, plain ? "other bytes" : "no more");
    }
    CHECK(products > 0 && bad == 0, "%d products of each recipe as counted by hand (%d off)", products, bad);
    CHECK(plain_products == 3, "the output layer's three products stay in 16 bits (%d)", plain_products);
    for (int i = 0; i < N; i++)
        et_graph_free(&g[i]);
}

/* Student's t 0.9 quantile: the table's ends, its join to the expansion, its fall to the normal's. */
static void test_student_t90(void)
{
    CHECK(fabs(et_student_t90(1) - 3.078) < 1e-9 && fabs(et_student_t90(2) - 1.886) < 1e-9 &&
              fabs(et_student_t90(30) - 1.310) < 1e-9,
          "t(0.9) at 1, 2, 30 degrees: %.4f %.4f %.4f (3.078, 1.886, 1.310)", et_student_t90(1),
          et_student_t90(2), et_student_t90(30));
    CHECK(fabs(et_student_t90(31) - 1.309) < 1e-3 && fabs(et_student_t90(60) - 1.296) < 1e-3 &&
              fabs(et_student_t90(120) - 1.289) < 1e-3,
          "t(0.9) at 31, 60, 120 degrees: %.4f %.4f %.4f (1.309, 1.296, 1.289)", et_student_t90(31),
          et_student_t90(60), et_student_t90(120));
    int falls = 1;
    for (int df = 1; df < 200; df++)
        falls &= et_student_t90(df + 1) < et_student_t90(df);
    CHECK(falls && fabs(et_student_t90(1000000) - 1.2815515655446004) < 1e-6,
          "t(0.9) falls with the degrees of freedom to the normal's 1.2816");
}

int main(void)
{
    test_student_t90();
    test_resilience();
    test_roofline_terms();
    test_optimizer_bytes();
    test_flash_attention_rows();
    test_flash_diagonal_blocks();
    test_alibi();
    test_galore();
    test_quantization();
    test_moe();
    test_qwen3();
    test_llama_presets();
    test_op_classes();
    test_param_counts();
    test_flops_per_token();
    test_order();
    test_buckets();
    test_tensor_parallel_flops();
    return check_summary("test_model");
}

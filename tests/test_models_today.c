/* Today's models (issue 37): DeepSeek-V3 (latent attention, shared experts, dense first layers, multi-token
 * prediction) and gpt-oss (sliding windows, sinks, biased experts) against their published parameter counts
 * through formulas written here apart from the graph; their ops' shapes; each validated model's training
 * FLOPs per token against the model TFLOP/s the NeMo rows publish; selective recomputation's modules and
 * the memory FP8 recipes save. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "check.h"
#include "collectives.h"
#include "graph.h"
#include "memory.h"
#include "model_config.h"
#include "scenario.h"
#include "scenario_graph.h"

static et_graph graph_of(const et_model_config *m, int tensor, et_recompute rc, unsigned modules,
                         et_precision p, et_scaling scaling)
{
    et_graph_options o = {.tensor = tensor,
                          .pipeline = 1,
                          .expert = 1,
                          .precision = p,
                          .scaling = scaling,
                          .recompute = rc,
                          .recompute_modules = modules,
                          .attention = ET_ATTENTION_FLASH,
                          .optimizer = ET_OPT_ADAMW,
                          .optimizer_shards = 1};
    et_graph g;
    et_error err;
    if (et_graph_build(m, &o, &g, &err)) {
        CHECK(0, "%s graph: %s", m->name, err.text);
        memset(&g, 0, sizeof g);
    }
    return g;
}

/* Builds the graph of (m, o) into *g; 0, or -1 after a failed check naming `what`. */
static int build(const et_model_config *m, const et_graph_options *o, et_graph *g, const char *what)
{
    et_error err;
    if (et_graph_build(m, o, g, &err) == 0) return 0;
    CHECK(0, "%s graph: %s", what, err.text);
    return -1;
}

static const et_op *find(const et_graph *g, const char *id)
{
    int i = et_graph_find(g, id);
    CHECK(i >= 0, "%s: op %s exists", g->model.name, id);
    return i >= 0 ? &g->ops[i] : NULL;
}

static double at(const et_linear *l, double tokens, double tokens_sq)
{
    const et_batch_shape b = {
        .sequences = 1, .tokens = tokens, .tokens_sq = tokens_sq, .predictions = tokens};
    return et_linear_eval(l, &b);
}

/* DeepSeek-V3's counts from its config.json: per layer MLA q_a H Lq, its norm Lq, q_b Lq A (D + R), kv_a
 * H (Lkv + R), its norm Lkv, kv_b Lkv A (D + Dv), o A Dv H; two norms; the first 3 layers a dense SwiGLU of
 * 18,432, the other 58 a router H E, 256 routed and 1 shared SwiGLU experts of 2,048; embeddings and output
 * V H; the final norm. The prediction module: its layer (an MoE one), eh_proj 2H H, its three norms.
 * DeepSeek-AI publish 671B total and 37B active (the input table not counted, as gpt-oss's card does not
 * either), and 685B on Hugging Face with the module (14B: its layer and its own copies of the two tables). */
static void test_deepseek_v3(void)
{
    et_model_config m;
    CHECK(et_model_preset("deepseek-v3", &m) == 0, "deepseek-v3 preset exists");
    const double H = 7168, A = 128, D = 128, R = 64, Dv = 128, Lq = 1536, Lkv = 512, V = 129280;
    const double E = 256, k = 8, Fe = 2048, F = 18432;
    const double attention =
        H * Lq + Lq + Lq * A * (D + R) + H * (Lkv + R) + Lkv + Lkv * A * (D + Dv) + A * Dv * H;
    const double expert = 3 * H * Fe;
    const double dense_layer = attention + 2 * H + 3 * H * F;
    const double moe_layer = attention + 2 * H + H * E + (E + 1) * expert;
    const double main = 3 * dense_layer + 58 * moe_layer + 2 * V * H + H;
    const double module = moe_layer + 2 * H * H + 3 * H;
    m.mtp_layers = 0;
    const double total = et_model_param_count(&m), active = et_model_active_param_count(&m);
    CHECK(total == main, "deepseek-v3: %.0f parameters without the module, the formula %.0f", total, main);
    CHECK(active == main - 58 * (E - k) * expert, "deepseek-v3: %.0f active, the formula %.0f", active,
          main - 58 * (E - k) * expert);
    CHECK(total / 1e9 >= 670.5 && total / 1e9 < 671.5, "deepseek-v3: %.2fB, published 671B", total / 1e9);
    CHECK((active - V * H) / 1e9 >= 36.5 && (active - V * H) / 1e9 < 37.5,
          "deepseek-v3: %.2fB active without the input table, published 37B", (active - V * H) / 1e9);
    m.mtp_layers = 1;
    const double with = et_model_param_count(&m);
    CHECK(with == main + module, "deepseek-v3 with its module: %.0f, the formula %.0f", with, main + module);
    /* 685B - 671B, each rounded to a billion: 14 +- 1 */
    CHECK(fabs((with - total + 2 * V * H) / 1e9 - 14) <= 1,
          "the module with its tables' copies: %.2fB, published 14B", (with - total + 2 * V * H) / 1e9);

    /* the graph: the latents' products on every tensor rank, the heads' split; attention at 192 for q.k and
     * 128 for the values; layers 0-2 dense, 3 on MoE with the shared expert beside the routed ones; the
     * module's layer numbered 61 and its head's loss */
    et_graph g = graph_of(&m, 2, ET_RECOMPUTE_NONE, 0, ET_BF16, ET_SCALING_DELAYED);
    const et_op *op;
    if ((op = find(&g, "layer.0.attn.q_down")))
        CHECK(at(&op->n, 1, 1) == Lq, "q_down: %g outputs", at(&op->n, 1, 1));
    if ((op = find(&g, "layer.0.attn.kv_down")))
        CHECK(at(&op->n, 1, 1) == Lkv + R, "kv_down: Lkv + R outputs");
    if ((op = find(&g, "layer.0.attn.q_up")))
        CHECK(at(&op->n, 1, 1) == A * (D + R) / 2, "q_up: split over 2 ranks");
    if ((op = find(&g, "layer.0.attn.kv_up"))) CHECK(at(&op->n, 1, 1) == A * (D + Dv) / 2, "kv_up: split");
    if ((op = find(&g, "layer.0.attn.out"))) CHECK(at(&op->k, 1, 1) == A * Dv / 2, "out: the values' width");
    if ((op = find(&g, "layer.0.attn.flash")))
        CHECK(fabs(at(&op->flops, 0, 1) - 0.5 * (2 * A * (D + R) / 2 + 2 * A * Dv / 2)) < 1e-6,
              "flash: causal half of 2 l^2 (D + R) + 2 l^2 Dv per head: %g", at(&op->flops, 0, 1));
    if ((op = find(&g, "layer.2.mlp.fc1"))) CHECK(at(&op->n, 1, 1) == 2 * F / 2, "layer 2 dense");
    CHECK(et_graph_find(&g, "layer.2.moe.router") < 0 && et_graph_find(&g, "layer.3.moe.router") >= 0,
          "the first 3 layers dense, the fourth MoE");
    if ((op = find(&g, "layer.3.moe.shared.fc1"))) CHECK(at(&op->n, 1, 1) == 2 * Fe / 2, "the shared expert");
    CHECK(et_graph_find(&g, "mtp.0.eh_proj") >= 0 && et_graph_find(&g, "layer.61.moe.router") >= 0 &&
              et_graph_find(&g, "mtp.0.head.loss") >= 0 &&
              et_graph_find(&g, "layer.61.moe.router.bwd_weight") >= 0,
          "the prediction module: its projection, layer 61 forward and backward, its loss");
    et_graph_free(&g);
}

/* gpt-oss's counts from its config.json: per layer q, k, v (A + 2 kv) D H with biases, o A D H with bias,
 * a sink per head, two norms, a router H E with bias, E experts each gate-up 2 F H + 2 F and down F H + H;
 * embeddings and output V H, the final norm. OpenAI's card: 116.83B and 20.91B total, 5.13B and 3.61B
 * active ("active" without the input table). */
static void test_gpt_oss(void)
{
    static const struct {
        const char *name;
        double layers, experts, total_b, active_b;
    } models[] = {{"gpt-oss-120b", 36, 128, 116.83, 5.13}, {"gpt-oss-20b", 24, 32, 20.91, 3.61}};
    for (int i = 0; i < 2; i++) {
        et_model_config m;
        CHECK(et_model_preset(models[i].name, &m) == 0, "%s preset exists", models[i].name);
        const double H = 2880, A = 64, kv = 8, D = 64, F = 2880, V = 201088, E = models[i].experts, k = 4;
        const double expert = 2 * F * H + 2 * F + F * H + H;
        const double layer = (A + 2 * kv) * D * (H + 1) + A * D * H + H + A + 2 * H + H * E + E + E * expert;
        const double formula = models[i].layers * layer + 2 * V * H + H;
        const double total = et_model_param_count(&m), active = et_model_active_param_count(&m);
        CHECK(total == formula, "%s: %.0f parameters, the formula %.0f", models[i].name, total, formula);
        CHECK(active == formula - models[i].layers * (E - k) * expert, "%s: %.0f active", models[i].name,
              active);
        CHECK(fabs(total / 1e9 - models[i].total_b) < 0.005, "%s: %.3fB, published %.2fB", models[i].name,
              total / 1e9, models[i].total_b);
        CHECK(fabs((active - V * H) / 1e9 - models[i].active_b) < 0.005, "%s: %.3fB active, published %.2fB",
              models[i].name, (active - V * H) / 1e9, models[i].active_b);
    }
    /* windows: layer 0 attends to 128 keys a query (128 T pairs, whatever the length), layer 1 to its whole
     * causal prefix (Q / 2) */
    et_model_config m;
    et_model_preset("gpt-oss-120b", &m);
    et_graph g = graph_of(&m, 1, ET_RECOMPUTE_NONE, 0, ET_BF16, ET_SCALING_DELAYED);
    const double per_pair = 2 * 64 * 64 + 2 * 64 * 64;
    const et_op *op;
    if ((op = find(&g, "layer.0.attn.flash")))
        CHECK(at(&op->flops, 1, 0) == 128 * per_pair && at(&op->flops, 0, 1) == 0,
              "layer 0: a window of 128");
    if ((op = find(&g, "layer.1.attn.flash")))
        CHECK(at(&op->flops, 1, 0) == 0 && at(&op->flops, 0, 1) == per_pair / 2, "layer 1: full causal");
    if ((op = find(&g, "layer.0.attn.flash.bwd")))
        CHECK(at(&op->flops, 1, 0) == 128 * 2.5 * per_pair, "layer 0's backward: 2.5x, in the window");
    /* a causal kernel's diagonal blocks: half of a 128-row query block a row, forward and backward; a
     * windowed layer's block runs through its window and the block itself, a block a row beyond the 128
     * live keys */
    for (int i = 0; i < 4; i++) {
        static const char *const ids[] = {"layer.1.attn.flash", "layer.1.attn.flash.bwd",
                                          "layer.0.attn.flash", "layer.0.attn.flash.bwd"};
        if ((op = find(&g, ids[i])))
            CHECK(op->tile_keys == (i < 2 ? 64 : 128) && op->window_keys == (i < 2 ? 0 : 128),
                  "%s: %g keys a row beyond the live ones, window %g", ids[i], op->tile_keys,
                  op->window_keys);
    }
    et_graph_free(&g);
}

/* Training FLOPs per token (forward and backward, no recomputation) of each validated model against the
 * model TFLOP/s over tokens/s the NeMo rows publish (scenarios/data/validation/nemo-megatron-bridge-
 * performance.csv: model_tflops_per_gpu x 10^12 / tokens_per_s_per_gpu, the first row of each model at
 * its sequence): Megatron-Bridge's own FLOPs formulas, which count causal attention at half. */
static void test_published_flops(void)
{
    static const struct {
        const char *preset;
        double seq, published; /* GFLOP a token */
        double tolerance;
    } rows[] = {{"llama3-8b", 8192, 51.470, 0.01},        {"llama3-70b", 8192, 447.409, 0.01},
                {"llama3-405b", 8192, 2524.809, 0.01},    {"qwen3-30b-a3b", 4096, 23.101, 0.01},
                {"qwen3-235b-a22b", 4096, 148.140, 0.01}, {"deepseek-v3", 4096, 260.019, 0.01},
                {"gpt-oss-120b", 4096, 32.613, 0.01}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        et_model_config m;
        et_model_preset(rows[i].preset, &m);
        et_graph g = graph_of(&m, 1, ET_RECOMPUTE_NONE, 0, ET_BF16, ET_SCALING_DELAYED);
        const double S = rows[i].seq;
        const et_batch_shape b = {.sequences = 1, .tokens = S, .tokens_sq = S * S, .predictions = S};
        double f = 0; /* model FLOPs: the fused attention's backward without its recomputed scores */
        for (int j = 0; j < g.n_ops; j++)
            if (g.ops[j].phase != ET_PHASE_OPTIMIZER)
                f += et_op_model_share(&g, &g.ops[j]) * et_linear_eval(&g.ops[j].flops, &b);
        const double per_token = f / S / 1e9;
        CHECK(fabs(per_token / rows[i].published - 1) <= rows[i].tolerance,
              "%s at %g: %.1f GFLOP a token, published %.1f (%+.1f%%)", rows[i].preset, S, per_token,
              rows[i].published, 100 * (per_token / rows[i].published - 1));
        et_graph_free(&g);
    }
}

/* Selective recomputation's modules: each one's forward ops again in backward, and the memory it frees
 * counted by hand (16-bit bytes a token a layer, tensor rank 1); an FP8 recipe keeps the products' inputs
 * at a byte (plus MXFP8's scale per 32). */
static void test_recompute_modules(void)
{
    et_model_config m;
    et_model_preset("deepseek-v3", &m);
    m.mtp_layers = 0;
    const unsigned all = (1u << ET_RECOMPUTE_LAYERNORM) | (1u << ET_RECOMPUTE_MLA_UP_PROJ) |
                         (1u << ET_RECOMPUTE_MLP) | (1u << ET_RECOMPUTE_MOE_ACT) |
                         (1u << ET_RECOMPUTE_SHARED_EXPERTS);
    et_graph none = graph_of(&m, 1, ET_RECOMPUTE_NONE, 0, ET_BF16, ET_SCALING_DELAYED);
    et_graph some = graph_of(&m, 1, ET_RECOMPUTE_SELECTIVE, all, ET_BF16, ET_SCALING_DELAYED);
    static const char *const again[] = {
        "layer.0.mlp.layernorm.recompute", "layer.0.attn.layernorm.recompute",
        "layer.0.attn.q_up.recompute",     "layer.0.attn.kv_up.recompute",
        "layer.0.mlp.fc1.recompute",       "layer.3.moe.experts.act.recompute",
        "layer.3.moe.shared.fc1.recompute"};
    for (size_t i = 0; i < sizeof again / sizeof again[0]; i++) {
        CHECK(et_graph_find(&none, again[i]) < 0, "no %s without the module", again[i]);
        const et_op *op = find(&some, again[i]);
        if (op) CHECK(op->phase == ET_PHASE_BACKWARD, "%s runs in backward", again[i]);
    }
    CHECK(et_graph_find(&some, "layer.3.mlp.fc1.recompute") < 0,
          "\"mlp\" rebuilds the dense layers' MLPs only");
    et_linear a0, a1, o0, o1;
    et_graph_activation_terms(&none, &a0, &o0);
    et_graph_activation_terms(&some, &a1, &o1);
    const double H = 7168, A = 128, Qt = A * 192, Vt = A * 128, Fe = 2048, k = 8;
    /* per layer: the two norms' outputs 4 H, q, k, v 2 (2 Qt + Vt); dense layers their MLP's 16 H; MoE
     * layers the experts' activation 2 k Fe and the shared expert's 2 (2 Fe + Fe) */
    const double freed = 61 * (4 * H + 2 * (2 * Qt + Vt)) + 3 * 16 * H + 58 * (2 * k * Fe + 2 * 3 * Fe);
    CHECK_REL(a0.per_token - a1.per_token, freed, 1e-9, "the bytes a token the modules free");
    et_graph_free(&some);
    /* MXFP8: the products' inputs at 1 + 1/32 bytes: the norms' outputs 2 H, the context Vt, the latents
     * Lq + Lkv; dense layers the activation 4 H; MoE layers the k routed rows' H + Fe and the shared Fe */
    et_graph fp8 = graph_of(&m, 1, ET_RECOMPUTE_NONE, 0, ET_FP8, ET_SCALING_MXFP8);
    et_graph_activation_terms(&fp8, &a1, &o1);
    const double q = 61 * (2 * H + Vt + 1536 + 512) + 3 * 4 * H + 58 * (k * (H + Fe) + Fe);
    CHECK_REL(a0.per_token - a1.per_token, q * (2 - (1 + 1.0 / 32)), 1e-9, "the bytes a token MXFP8 saves");
    et_graph_free(&fp8);
    et_graph_free(&none);
}

/* LoRA on Llama-3 8B (rank 16 on the four targets): the model frozen (no weight gradients, no parameters
 * to reduce or update), each target's two adapters forward and backward; trainable values r (n_in + n_out)
 * a target and layer; memory by hand: the frozen weights and the adapters at 2 bytes, the adapters'
 * gradients at 2 and their optimizer states at 16 over the data ranks (the distributed optimizer); the
 * step's FLOPs without the frozen weight gradients. */
static void test_lora(void)
{
    static const char json[] =
        "{\"name\": \"lora\", \"model\": {\"preset\": \"llama3-8b\"}, \"data\": {\"seq_len\": 4096},"
        " \"batch\": {\"global\": 8, \"local\": 1}, \"optimizer\": {\"name\": \"adamw\"},"
        " \"method\": {\"kind\": \"lora\", \"lora\": {\"rank\": 16}}, \"precision\": \"bf16\","
        " \"parallelism\": {\"attention\": \"flash\", \"distributed_optimizer\": true},"
        " \"cluster\": {\"device\": \"h100-sxm\", \"nodes\": 1, \"gpus_per_node\": 8}, \"target\": "
        "{\"steps\": 1}}";
    et_scenario s;
    et_error err;
    json_t *root = json_loads(json, 0, NULL);
    const int bad = !root || et_scenario_parse(root, "lora.json", NULL, &s, &err);
    json_decref(root);
    if (bad) {
        CHECK(0, "lora scenario: %s", root ? err.text : "not JSON");
        return;
    }
    CHECK(s.method.kind == ET_METHOD_LORA && s.method.lora_rank == 16 && s.method.lora_alpha == 16 &&
              s.method.lora_targets == 15,
          "rank 16, alpha the rank, the four targets by default");
    et_graph_options o = {.tensor = 1,
                          .pipeline = 1,
                          .expert = 1,
                          .precision = ET_BF16,
                          .attention = ET_ATTENTION_FLASH,
                          .optimizer = ET_OPT_ADAMW,
                          .optimizer_shards = 1,
                          .method = &s.method};
    et_graph g, dense;
    if (et_graph_build(&s.model, &o, &g, &err)) {
        CHECK(0, "lora graph: %s", err.text);
        et_scenario_free(&s);
        return;
    }
    o.method = NULL;
    et_graph_build(&s.model, &o, &dense, &err);
    const double r = 16, H = 4096, QKV = 4096 + 2 * 1024, F = 14336, L = 32;
    const double per_layer = r * (H + QKV) + r * (H + H) + r * (H + 2 * F) + r * (F + H);
    CHECK(g.param_count == L * per_layer, "adapters: %.0f trainable values, by hand %.0f", g.param_count,
          L * per_layer);
    CHECK(g.frozen_count == dense.param_count, "the model's %.0f values frozen", g.frozen_count);
    CHECK(g.weight_bytes == 2 * dense.param_count + 2 * g.param_count,
          "weights: frozen and adapters at 2 bytes");
    CHECK(g.grad_elems == g.param_count, "gradients: the adapters' only");
    CHECK(et_graph_find(&g, "layer.0.mlp.fc1.bwd_weight") < 0 &&
              et_graph_find(&g, "layer.0.mlp.fc1.bwd_data") >= 0 &&
              et_graph_find(&g, "embed.lookup.bwd") < 0 &&
              et_graph_find(&g, "head.lm.decoder.bwd_weight") < 0,
          "no weight gradient of a frozen product, no scatter into the frozen table");
    static const char *const adapters[] = {"layer.0.attn.qkv.lora_a", "layer.0.attn.out.lora_b",
                                           "layer.0.mlp.fc1.lora_a.bwd_weight",
                                           "layer.31.mlp.fc2.lora_b.bwd_data"};
    for (size_t i = 0; i < 4; i++)
        CHECK(et_graph_find(&g, adapters[i]) >= 0, "%s exists", adapters[i]);
    /* FLOPs: the dense step less every frozen weight gradient (2 T n_in n_out a product) plus the adapters'
     * six products of 2 T r (n_in + n_out) a target (forward, both gradients) */
    const double T = 4096;
    const et_batch_shape b = {.sequences = 1, .tokens = T, .tokens_sq = T * T, .predictions = T};
    double fl = 0, fd = 0, wgrad = 0;
    for (int i = 0; i < g.n_ops; i++)
        if (g.ops[i].phase != ET_PHASE_OPTIMIZER) fl += et_linear_eval(&g.ops[i].flops, &b);
    for (int i = 0; i < dense.n_ops; i++) {
        const et_op *op = &dense.ops[i];
        if (op->phase == ET_PHASE_OPTIMIZER) continue;
        fd += et_linear_eval(&op->flops, &b);
        const size_t n = strlen(op->id);
        if (op->kind == ET_OP_GEMM && n > 11 && !strcmp(op->id + n - 11, ".bwd_weight"))
            wgrad += et_linear_eval(&op->flops, &b);
    }
    /* ... and the frozen table's scatter (T H) gone */
    CHECK_REL(fl, fd - wgrad + 3 * 2 * T * L * per_layer - T * H, 1e-12, "the LoRA step's FLOPs");
    /* memory: one GPU's share of 8 data ranks */
    et_memory m = et_memory_estimate(&s, &g, &b);
    CHECK_REL(m.weights, 2 * (dense.param_count + g.param_count), 1e-12, "frozen weights kept whole");
    CHECK_REL(m.gradients, 2 * g.param_count, 1e-12, "the adapters' gradients");
    CHECK_REL(m.optimizer_states, g.param_count * 16 / 8, 1e-12,
              "the adapters' optimizer states: 16 bytes a value over the 8 data ranks");
    /* under an FP8 recipe the adapters stay in 16 bits (Megatron-Bridge's ParallelLinearAdapter is built
     * of megatron.core.tensor_parallel layers, outside Transformer Engine's FP8 autocast): unquantized, the
     * BF16 graph's bytes; the frozen product beside them quantized */
    o.method = &s.method;
    o.precision = ET_FP8;
    o.scaling = ET_SCALING_CURRENT;
    et_graph q;
    if (!et_graph_build(&s.model, &o, &q, &err)) {
        static const char *const plain[] = {"layer.0.attn.qkv.lora_a", "layer.0.attn.qkv.lora_b",
                                            "layer.5.mlp.fc2.lora_a.bwd_data",
                                            "layer.5.mlp.fc1.lora_b.bwd_weight"};
        for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
            const int a = et_graph_find(&q, plain[i]), h = et_graph_find(&g, plain[i]);
            CHECK(a >= 0 && h >= 0 && q.ops[a].unquantized &&
                      et_linear_eval(&q.ops[a].bytes, &b) == et_linear_eval(&g.ops[h].bytes, &b) &&
                      q.ops[a].kernels == g.ops[h].kernels,
                  "FP8 LoRA: %s in 16 bits, no quantize pass", plain[i]);
        }
        const int a = et_graph_find(&q, "layer.0.attn.qkv"), h = et_graph_find(&g, "layer.0.attn.qkv");
        CHECK(a >= 0 && h >= 0 && !q.ops[a].unquantized &&
                  et_linear_eval(&q.ops[a].bytes, &b) > et_linear_eval(&g.ops[h].bytes, &b),
              "FP8 LoRA: the frozen product is quantized");
        et_graph_free(&q);
    } else
        CHECK(0, "fp8 lora graph: %s", err.text);
    et_graph_free(&g);
    et_graph_free(&dense);
    et_scenario_free(&s);
}

/* An interior stage costs what the first interior stage does only when the same kinds of layer fall at the
 * same places: gpt-oss's windows every other layer on 9-layer stages do not, on 6-layer ones they do; dense
 * first layers reaching past the first stage do not. */
static void test_stage_twins(void)
{
    et_model_config m;
    et_model_preset("gpt-oss-120b", &m);
    et_graph_options o = {
        .tensor = 1, .pipeline = 4, .stage = 2, .precision = ET_BF16, .optimizer_shards = 1};
    CHECK(et_graph_stage_twin(&m, &o) == 2, "9 layers a stage, windows every other: stage 2 its own");
    o.pipeline = 6;
    CHECK(et_graph_stage_twin(&m, &o) == 1, "6 layers a stage: stage 2 is stage 1's twin");
    m.moe.first_dense = 8;
    CHECK(et_graph_stage_twin(&m, &o) == 2, "dense layers into stage 1: stage 2 its own");
}

/* The distributed optimizer shards the experts' states over the ranks holding the same experts (d / x), the
 * rest over every data rank: gpt-oss 120B on 64 GPUs with expert parallelism 64 updates all its 2 experts a
 * layer itself. The step's bytes by hand: 28 a parameter of the shard (the bf16 gradient, the fp32 weight, m
 * and v read and written, the bf16 copy written: et_adam_step_costs), over the shard memory.c keeps. */
static void test_expert_optimizer_shards(void)
{
    et_model_config m;
    et_model_preset("gpt-oss-120b", &m);
    et_graph_options o = {.tensor = 1,
                          .pipeline = 1,
                          .expert = 64,
                          .precision = ET_BF16,
                          .attention = ET_ATTENTION_FLASH,
                          .optimizer = ET_OPT_ADAMW,
                          .optimizer_shards = 64,
                          .expert_optimizer_shards = 1};
    et_graph g;
    et_error err;
    if (et_graph_build(&m, &o, &g, &err)) {
        CHECK(0, "gpt-oss graph: %s", err.text);
        return;
    }
    double experts = 0;
    for (int i = 0; i < g.n_params; i++)
        if (g.params[i].expert) experts += g.params[i].count;
    /* 36 layers x 2 of 128 experts x (fc1 2 x 2880 x 2880 + its bias 5760 + fc2 2880 x 2880 + its bias 2880)
     */
    const double by_hand = 36.0 * 2 * (2.0 * 2880 * 2880 + 5760 + 2880.0 * 2880 + 2880);
    CHECK(fabs(experts - by_hand) < 0.5, "this GPU's expert parameters: %.0f, by hand %.0f", experts,
          by_hand);
    const double shard = (g.param_count - experts) / 64 + experts;
    CHECK(fabs(et_graph_optimizer_params(&g) - shard) < 1, "the optimizer's shard: %.0f, by hand %.0f",
          et_graph_optimizer_params(&g), shard);
    const et_op *up = find(&g, "optimizer.step");
    if (up)
        CHECK(fabs(at(&up->bytes, 1, 1) - 28 * shard) < 28, "the step's bytes: %.4g, by hand %.4g",
              at(&up->bytes, 1, 1), 28 * shard);
    o.expert_optimizer_shards = 0; /* unset: as the rest (the old figure, 1/64 of the experts) */
    et_graph g2;
    if (et_graph_build(&m, &o, &g2, &err) == 0) {
        CHECK(et_graph_optimizer_params(&g2) < shard / 10, "unset, the experts shard like the rest");
        et_graph_free(&g2);
    }
    et_graph_free(&g);
}

/* Layers kept in 16 bits under FP8 (bf16_layers, Megatron-Core's --first-last-layers-bf16): Llama 3 8B under
 * MXFP8 with the first and last layers in 16 bits. Their products carry no quantize pass (bytes as the BF16
 * graph's) and run at the 16-bit peak; the layers between are quantized. Memory: each such layer keeps its
 * products' inputs at 2 bytes instead of 1 + 1/32, Korthikanti's 7 H elements a token (the qkv, output and
 * fc1 inputs, H each, and fc2's 4 H): 2 x 7 H x (2 - 1 - 1/32) bytes a token more than with none. */
static void test_bf16_layers(void)
{
    et_model_config m;
    et_model_preset("llama3-8b", &m);
    et_graph q = graph_of(&m, 1, ET_RECOMPUTE_NONE, 0, ET_FP8, ET_SCALING_MXFP8),
             h = graph_of(&m, 1, ET_RECOMPUTE_NONE, 0, ET_BF16, ET_SCALING_DELAYED);
    et_graph_options o = q.options;
    o.bf16_first = 1, o.bf16_last = 1;
    et_graph g;
    if (build(&m, &o, &g, "bf16 layers")) {
        et_graph_free(&q), et_graph_free(&h);
        return;
    }
    static const char *const plain[] = {"layer.0.attn.qkv", "layer.0.mlp.fc2.bwd_weight", "layer.31.mlp.fc1",
                                        "layer.31.attn.out.bwd_data"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        const et_op *a = find(&g, plain[i]), *b = find(&h, plain[i]);
        if (a && b)
            CHECK(a->unquantized && at(&a->bytes, 4096, 4096.0 * 4096) == at(&b->bytes, 4096, 4096.0 * 4096),
                  "%s stays in 16 bits", plain[i]);
    }
    const et_op *mid = find(&g, "layer.1.attn.qkv"), *midq = find(&q, "layer.1.attn.qkv");
    if (mid && midq)
        CHECK(!mid->unquantized && at(&mid->bytes, 4096, 0) == at(&midq->bytes, 4096, 0),
              "layer 1 stays quantized");
    et_linear with, without, once;
    et_graph_activation_terms(&g, &with, &once);
    et_graph_activation_terms(&q, &without, &once);
    const double H = 4096, by_hand = 2 * 7 * H * (2 - 1 - 1.0 / 32);
    CHECK(fabs(with.per_token - without.per_token - by_hand) < 1e-6,
          "two layers in 16 bits keep %.6g bytes a token more, by hand %.6g",
          with.per_token - without.per_token, by_hand);
    /* FP8 parameter gathers move the quantized products' weights at a byte: per layer qkv H (H + 2 KV), the
     * output H H, fc1 H 2F and fc2 F H (KV = 8 x 128, F = 14336); the embeddings, the output layer and the
     * norms at 2 bytes. The two 16-bit layers' weights are not quantized. */
    const double KV = 1024, F = 14336, per_layer = H * (H + 2 * KV) + H * H + H * 2 * F + F * H;
    CHECK(fabs(et_graph_param_gather_bytes(&q, true) - (2 * q.param_count - 32 * per_layer)) < 1 &&
              fabs(et_graph_param_gather_bytes(&g, true) - (2 * g.param_count - 30 * per_layer)) < 1 &&
              et_graph_param_gather_bytes(&q, false) == 2 * q.param_count,
          "FP8 parameter gathers: %.6g bytes, by hand %.6g (16-bit: %.6g)",
          et_graph_param_gather_bytes(&q, true), 2 * q.param_count - 32 * per_layer,
          et_graph_param_gather_bytes(&q, false));
    et_graph_free(&g), et_graph_free(&q), et_graph_free(&h);
}

/* Full recomputation of some layers (parallelism.recompute_layers, Megatron's --recompute-method block
 * --recompute-num-layers N): Llama 3 8B's 32 layers on one stage with N = 5, then as 4 chunks of 8
 * (virtual_pipeline 4) with N = 2. The first N layers of each chunk rebuild their forward in backward, the
 * others do not; the activations a micro-batch keeps are the recomputed layers' share of full
 * recomputation's and the others' share of none's (both less the layers' input, held once). */
static void test_recompute_layers(void)
{
    et_model_config m;
    et_model_preset("llama3-8b", &m);
    et_graph none = graph_of(&m, 1, ET_RECOMPUTE_NONE, 0, ET_BF16, ET_SCALING_DELAYED),
             full = graph_of(&m, 1, ET_RECOMPUTE_FULL, 0, ET_BF16, ET_SCALING_DELAYED);
    et_graph_options o = full.options;
    o.recompute_layers = 5;
    et_graph part, chunks;
    if (build(&m, &o, &part, "recompute_layers")) {
        et_graph_free(&none), et_graph_free(&full);
        return;
    }
    o.recompute_layers = 2, o.virtual_pipeline = 4;
    if (build(&m, &o, &chunks, "recompute_layers")) {
        et_graph_free(&none), et_graph_free(&full), et_graph_free(&part);
        return;
    }
    CHECK(et_graph_find(&part, "layer.4.attn.qkv.recompute") >= 0 &&
              et_graph_find(&part, "layer.5.attn.qkv.recompute") < 0 &&
              et_graph_find(&part, "layer.31.attn.qkv.recompute") < 0,
          "N = 5: layers 0-4 recomputed, 5-31 not");
    int rebuilt = 0;
    for (int i = 0; i < 32; i++) {
        char id[64];
        snprintf(id, sizeof id, "layer.%d.attn.qkv.recompute", i);
        const int expected = i % 8 < 2;
        rebuilt += et_graph_find(&chunks, id) >= 0;
        CHECK((et_graph_find(&chunks, id) >= 0) == expected, "4 chunks of 8, N = 2: layer %d %s", i,
              expected ? "recomputed" : "kept");
    }
    CHECK(rebuilt == 8, "4 chunks of 8, N = 2: 8 layers recomputed (%d)", rebuilt);
    et_linear a[3], once;
    et_graph_activation_terms(&none, &a[0], &once);
    et_graph_activation_terms(&full, &a[1], &once);
    et_graph_activation_terms(&part, &a[2], &once);
    const double input = 4096.0 * 2; /* the layers' input, H e, held once whatever the mode */
    const double by_hand = input + 5.0 / 32 * (a[1].per_token - input) + 27.0 / 32 * (a[0].per_token - input);
    CHECK(fabs(a[2].per_token - by_hand) < 1e-6 &&
              fabs(a[2].per_token_sq - 27.0 / 32 * a[0].per_token_sq) < 1e-6,
          "activations with 5 of 32 recomputed: %.6g bytes a token, by hand %.6g", a[2].per_token, by_hand);
    et_graph_free(&none), et_graph_free(&full), et_graph_free(&part), et_graph_free(&chunks);
}

/* Megatron's MoE parallel folding (parallelism.expert_tensor 1 with tensor 2): Qwen3-30B-A3B (H 2048, 128
 * experts of 768, top 8, no shared expert) on 16 GPUs, tensor 2, data 8, expert 8. Folded, each rank routes
 * its sequence-parallel half of a micro-batch's T tokens over whole experts: T k / 2 rows, 16 experts of
 * 768; split (expert_tensor 2, Megatron's default), it routes all T tokens over experts split in two: T k
 * rows of 384. The same FLOPs a rank either way; folded, no tensor-parallel collective around the MoE layer,
 * half the all-to-all bytes, the router on T / 2 tokens, twice the expert parameters; an expert group spans
 * 4 data ranks x 2 tensor ranks, so each expert is held by 2 ranks (every 4th data rank) instead of 1. */
static void test_folded_experts(void)
{
    static const char json[] =
        "{\"name\": \"folded\", \"model\": {\"preset\": \"qwen3-30b-a3b\"}, \"data\": {\"seq_len\": 4096},"
        " \"batch\": {\"global\": 64, \"local\": 1}, \"optimizer\": {\"name\": \"adamw\"},"
        " \"precision\": \"bf16\", \"parallelism\": {\"tensor\": 2, \"sequence_parallel\": true,"
        " \"attention\": \"flash\", \"distributed_optimizer\": true, \"expert\": 8, \"expert_tensor\": %d},"
        " \"cluster\": {\"device\": \"h100-sxm\", \"nodes\": 2, \"gpus_per_node\": 8, \"nics_per_node\": 8,"
        " \"nic_Gbps\": 400},"
        " \"target\": {\"steps\": 1}}";
    et_scenario s[2];
    et_graph g[2];
    for (int f = 0; f < 2; f++) {
        char text[1024];
        snprintf(text, sizeof text, json, f ? 1 : 2);
        et_error err;
        json_t *root = json_loads(text, 0, NULL);
        const int bad = !root || et_scenario_parse(root, "folded.json", NULL, &s[f], &err);
        json_decref(root);
        if (bad) {
            CHECK(0, "folding scenario: %s", root ? err.text : "not JSON");
            if (f) et_scenario_free(&s[0]), et_graph_free(&g[0]);
            return;
        }
        et_graph_options o = et_scenario_graph_options(&s[f], 0);
        if (et_graph_build(&s[f].model, &o, &g[f], &err)) {
            CHECK(0, "folding graph: %s", err.text);
            et_scenario_free(&s[f]);
            if (f) et_scenario_free(&s[0]), et_graph_free(&g[0]);
            return;
        }
    }
    CHECK(!et_scenario_experts_folded(&s[0]) && et_scenario_experts_folded(&s[1]) &&
              et_scenario_expert_tensor(&s[0]) == 2,
          "expert_tensor 2 splits the experts, 1 folds them");
    const double T = 4096, H = 2048, k = 8, Fe = 768, E = 128;
    const et_op *fc1[2] = {find(&g[0], "layer.0.moe.experts.fc1"), find(&g[1], "layer.0.moe.experts.fc1")};
    if (fc1[0] && fc1[1]) {
        const double flops = 2 * (T * k / 2) * H * 2 * Fe; /* = 2 (T k) H (2 Fe / 2) */
        CHECK(fabs(at(&fc1[1]->flops, T, T * T) - flops) < 1 &&
                  fabs(at(&fc1[0]->flops, T, T * T) - flops) < 1,
              "the first expert product: %.6g and %.6g FLOPs a rank, by hand %.6g both",
              at(&fc1[0]->flops, T, T * T), at(&fc1[1]->flops, T, T * T), flops);
        CHECK(at(&fc1[1]->m, T, 0) == T * k / 2 / 16 && at(&fc1[1]->n, T, 0) == 2 * Fe &&
                  at(&fc1[0]->m, T, 0) == T * k / 16 && at(&fc1[0]->n, T, 0) == Fe,
              "an expert's rows and width: folded %.0f x %.0f (by hand 1024 x 1536), split %.0f x %.0f "
              "(2048 x 768)",
              at(&fc1[1]->m, T, 0), at(&fc1[1]->n, T, 0), at(&fc1[0]->m, T, 0), at(&fc1[0]->n, T, 0));
    }
    const et_op *a2a[2] = {find(&g[0], "layer.0.moe.dispatch"), find(&g[1], "layer.0.moe.dispatch")};
    if (a2a[0] && a2a[1])
        CHECK(at(&a2a[1]->bytes, T, 0) == 2 * H * k * T / 2 && at(&a2a[0]->bytes, T, 0) == 2 * H * k * T,
              "the dispatch's bytes a rank: folded %.6g (by hand %.6g), split %.6g", at(&a2a[1]->bytes, T, 0),
              2 * H * k * T / 2, at(&a2a[0]->bytes, T, 0));
    const et_op *router = find(&g[1], "layer.0.moe.router");
    if (router) CHECK(at(&router->flops, T, 0) == 2 * (T / 2) * H * E, "folded, the router on T / 2 tokens");
    CHECK(et_graph_find(&g[1], "layer.0.mlp.tp_allgather") < 0 &&
              et_graph_find(&g[1], "layer.0.mlp.tp_reduce_scatter.bwd") < 0 &&
              et_graph_find(&g[1], "layer.0.attn.tp_allgather") >= 0 &&
              et_graph_find(&g[0], "layer.0.mlp.tp_allgather") >= 0,
          "folded, no tensor-parallel collective around the MoE layer (attention keeps its own)");
    double experts[2] = {0, 0};
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < g[f].n_params; i++)
            if (g[f].params[i].expert) experts[f] += g[f].params[i].count;
    const double by_hand = 48 * 16 * (H * 2 * Fe + Fe * H);
    CHECK(fabs(experts[1] - by_hand) < 0.5 && fabs(experts[0] - by_hand / 2) < 0.5,
          "this GPU's expert parameters: folded %.0f (by hand %.0f), split %.0f", experts[1], by_hand,
          experts[0]);
    /* activations a token at 16 bits, by hand from activations.c's MoE terms: the router's fp32
     * probabilities (4 E) and the permuted input and second product's output (4 H k) halve, the products'
     * outputs (2 Fc1 k + 2 Fe k) keep their size, so folding saves 2 E + 2 H k a token a layer */
    et_linear per[2], once;
    et_graph_activation_terms(&g[0], &per[0], &once);
    et_graph_activation_terms(&g[1], &per[1], &once);
    CHECK(fabs(per[0].per_token - per[1].per_token - 48 * (2 * E + 2 * H * k)) < 1e-6,
          "activations saved by folding: %.6g bytes a token, by hand %.6g",
          per[0].per_token - per[1].per_token, 48 * (2 * E + 2 * H * k));
    const et_comm_group ep[2] = {et_ep_group(&s[0]), et_ep_group(&s[1])},
                        edp[2] = {et_ep_data_group(&s[0]), et_ep_data_group(&s[1])};
    CHECK(ep[0].ranks == 8 && ep[0].nodes == 2 && ep[1].ranks == 8 && ep[1].nodes == 1,
          "the expert group: split, 8 data ranks over %d nodes (2); folded, 8 ranks of one node (%d)",
          ep[0].nodes, ep[1].nodes);
    CHECK(edp[0].ranks == 1 && edp[1].ranks == 2,
          "the ranks holding the same experts: split %d (1), folded %d (2)", edp[0].ranks, edp[1].ranks);
    for (int f = 0; f < 2; f++) {
        et_graph_free(&g[f]);
        et_scenario_free(&s[f]);
    }
}

/* Under FP8 and FP4 recipes the output layer and the router stay in 16 bits (Megatron-Core runs them outside
 * Transformer Engine's FP8 autocast): their products are marked unquantized and carry no quantize pass,
 * their bytes those of the BF16 graph; the experts' and the layers' products are quantized. */
static void test_unquantized_products(void)
{
    et_model_config m;
    et_model_preset("qwen3-30b-a3b", &m);
    et_graph q = graph_of(&m, 1, ET_RECOMPUTE_NONE, 0, ET_FP8, ET_SCALING_MXFP8),
             h = graph_of(&m, 1, ET_RECOMPUTE_NONE, 0, ET_BF16, ET_SCALING_DELAYED);
    static const char *const plain[] = {"head.lm.decoder", "head.lm.decoder.bwd_data",
                                        "head.lm.decoder.bwd_weight", "layer.3.moe.router",
                                        "layer.3.moe.router.bwd_weight"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        const et_op *a = find(&q, plain[i]), *b = find(&h, plain[i]);
        if (a && b)
            CHECK(a->unquantized && at(&a->bytes, 4096, 4096.0 * 4096) == at(&b->bytes, 4096, 4096.0 * 4096),
                  "%s stays in 16 bits: no quantize pass (%.4g bytes against BF16's %.4g)", plain[i],
                  at(&a->bytes, 4096, 4096.0 * 4096), at(&b->bytes, 4096, 4096.0 * 4096));
    }
    static const char *const quantized[] = {"layer.3.attn.qkv", "layer.3.moe.experts.fc1",
                                            "layer.3.attn.out"};
    for (size_t i = 0; i < sizeof quantized / sizeof quantized[0]; i++) {
        const et_op *a = find(&q, quantized[i]), *b = find(&h, quantized[i]);
        if (a && b)
            CHECK(!a->unquantized && at(&a->bytes, 4096, 4096.0 * 4096) > at(&b->bytes, 4096, 4096.0 * 4096),
                  "%s is quantized (its input's cast charged)", quantized[i]);
    }
    et_graph_free(&q);
    et_graph_free(&h);
}

int main(void)
{
    test_folded_experts();
    test_recompute_layers();
    test_bf16_layers();
    test_unquantized_products();
    test_expert_optimizer_shards();
    test_stage_twins();
    test_lora();
    test_deepseek_v3();
    test_gpt_oss();
    test_published_flops();
    test_recompute_modules();
    return check_summary("test_models_today");
}

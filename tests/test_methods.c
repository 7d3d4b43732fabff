/* Sparse and tensor-train methods: TT parameter counts, contraction orders against brute force and a
 * hand-derived count, sparse costs at density 1 and scaling with density, plans that are slower than dense.
 */
#include <math.h>
#include <string.h>

#include "analytic.h"
#include "batch.h"
#include "check.h"
#include "check_scenario.h"
#include "json_reader.h"
#include "scenario.h"
#include "tensor_train.h"

#define SCEN(name) ET_SOURCE_DIR "/scenarios/" name

static void test_tt_params(void)
{
    et_tt_shape t;
    et_error err;
    int a[] = {12, 8, 8}, b[] = {8, 8, 12}, c[] = {12, 16, 16}, rc[] = {16, 16, 12};
    CHECK(et_tt_linear(&t, a, 3, b, 3, 30, &err) == 0, "et_tt_linear: %s", err.text);
    int want[] = {1, 12, 30, 30, 30, 12, 1}, ok = 1;
    for (int k = 0; k < 7; k++)
        ok &= t.rank[k] == want[k];
    CHECK(ok, "768x768 ranks 1,12,30,30,30,12,1");
    CHECK(et_tt_params(&t) == 20448, "768x768 at rank 30: %.0f parameters, want 20,448", et_tt_params(&t));
    CHECK(et_tt_linear(&t, a, 3, c, 3, 30, &err) == 0, "et_tt_linear: %s", err.text);
    CHECK(t.rank[5] == 16, "768x3072 ranks end 30,16,1");
    CHECK(et_tt_params(&t) == 28960, "768x3072: %.0f, want 28,960", et_tt_params(&t));
    CHECK(et_tt_linear(&t, rc, 3, b, 3, 30, &err) == 0, "et_tt_linear: %s", err.text);
    CHECK(et_tt_params(&t) == 28960, "its transpose 3072x768 (16x16x12 by 8x8x12): %.0f, want 28,960",
          et_tt_params(&t));
    int rows[] = {16, 20, 10, 10}, cols[] = {4, 4, 8, 6};
    et_tt_embedding(&t, rows, cols, 4, 32, &err);
    CHECK(t.rank[1] == 32 && t.rank[2] == 32 && t.rank[3] == 32, "embedding ranks 1,32,32,32,1");
    CHECK(et_tt_params(&t) == 167808, "embedding 16x20x10x10 by 4x4x8x6: %.0f, want 167,808",
          et_tt_params(&t));
}

/* Brute force: every pairwise contraction sequence of the network (a recursive enumeration, independent
 * of the subset dynamic programming), each tensor given by its index bit set. */
static double sizes[32];
static unsigned output;

static double brute(unsigned *tensors, int n)
{
    if (n == 1) return 0;
    double best = 1e300;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            unsigned others = output;
            for (int k = 0; k < n; k++)
                if (k != i && k != j) others |= tensors[k];
            unsigned all = tensors[i] | tensors[j];
            double cost = 2;
            for (int x = 0; x < 32; x++)
                if (all >> x & 1) cost *= sizes[x];
            unsigned next[12];
            int m = 0;
            for (int k = 0; k < n; k++)
                if (k != i && k != j) next[m++] = tensors[k];
            next[m++] = all & others;
            double c = cost + brute(next, m);
            if (c < best) best = c;
        }
    return best;
}

static void test_orders(void)
{
    et_error err;
    struct {
        int in[3], d_in, out[3], d_out, rank;
        double tokens;
    } cases[] = {
        {{4, 3, 0}, 2, {2, 5, 0}, 2, 3, 7},    {{4, 3, 2}, 3, {2, 5, 0}, 2, 4, 1},
        {{2, 3, 0}, 2, {3, 2, 0}, 2, 2, 1000}, {{5, 0, 0}, 1, {3, 4, 0}, 2, 6, 11},
        {{3, 3, 3}, 3, {3, 3, 0}, 2, 5, 64},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        et_tt_shape t;
        CHECK(et_tt_linear(&t, cases[c].in, cases[c].d_in, cases[c].out, cases[c].d_out, cases[c].rank,
                           &err) == 0,
              "et_tt_linear: %s", err.text);
        int d = t.d_in + t.d_out;
        /* the same network, written out independently: T, modes, ranks */
        memset(sizes, 0, sizeof sizes);
        sizes[0] = cases[c].tokens;
        unsigned tensors[12];
        tensors[0] = 1u;
        for (int k = 0; k < d; k++)
            sizes[1 + k] = t.dims[k];
        for (int k = 1; k < d; k++)
            sizes[d + k] = t.rank[k];
        for (int k = 0; k < t.d_in; k++)
            tensors[0] |= 1u << (1 + k);
        for (int k = 0; k < d; k++)
            tensors[k + 1] =
                (1u << (1 + k)) | (k > 0 ? 1u << (d + k) : 0) | (k < d - 1 ? 1u << (d + k + 1) : 0);
        output = 1u;
        for (int k = t.d_in; k < d; k++)
            output |= 1u << (1 + k);
        double optimum = brute(tensors, d + 1);
        et_tt_plan best, naive;
        et_tt_plan_best(&t, cases[c].tokens, &best);
        et_tt_plan_naive(&t, &naive);
        CHECK_REL(et_tt_plan_flops(&best, cases[c].tokens), optimum, 1e-12,
                  "DP order equals the brute-force optimum");
        CHECK(et_tt_plan_flops(&best, cases[c].tokens) <= et_tt_plan_flops(&naive, cases[c].tokens),
              "chosen order never worse than left to right");
        /* hand count of left to right: input cores shrink X, output cores grow Y */
        double T = cases[c].tokens, hand = 0, rest = 1;
        for (int k = 0; k < t.d_in; k++)
            rest *= t.dims[k];
        for (int k = 0; k < t.d_in; k++) {
            rest /= t.dims[k];
            hand += 2 * T * t.rank[k] * t.dims[k] * t.rank[k + 1] * rest;
        }
        double grown = 1;
        for (int k = t.d_in; k < d; k++) {
            hand += 2 * T * grown * t.rank[k] * t.dims[k] * t.rank[k + 1];
            grown *= t.dims[k];
        }
        CHECK_REL(et_tt_plan_flops(&naive, T), hand, 1e-12, "left-to-right FLOPs match the hand count");
    }
    /* the shipped layer: the chosen order beats left to right by a wide margin at 4096 tokens */
    et_tt_shape t;
    int a[] = {12, 8, 8}, b[] = {12, 16, 16};
    CHECK(et_tt_linear(&t, a, 3, b, 3, 30, &err) == 0, "et_tt_linear: %s", err.text);
    et_tt_plan best, naive;
    et_tt_plan_best(&t, 4096, &best);
    et_tt_plan_naive(&t, &naive);
    CHECK(et_tt_plan_flops(&best, 4096) < et_tt_plan_flops(&naive, 4096), "768x3072: best %.3g < naive %.3g",
          et_tt_plan_flops(&best, 4096), et_tt_plan_flops(&naive, 4096));
}

static double weight_gemm_flops(const et_graph *g, const et_batch_shape *b)
{
    double f = 0;
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].kind == ET_OP_GEMM && g->ops[i].layer >= 0) f += et_linear_eval(&g->ops[i].flops, b);
    return f;
}

static void test_sparse(void)
{
    et_scenario s;
    et_error err;
    if (check_scenario_load(SCEN("gpt3-13b-sparse75-a100.json"), &s)) return;
    et_batch_shape b = et_batch_expected(&s);
    et_graph_options o = et_scenario_graph_options(&s, 0);
    et_method sparse = s.method, dense = {.kind = ET_METHOD_DENSE};
    et_graph gd, gs, g1;
    o.method = &dense;
    CHECK(et_graph_build(&s.model, &o, &gd, &err) == 0, "et_graph_build: %s", err.text);
    o.method = &sparse;
    CHECK(et_graph_build(&s.model, &o, &gs, &err) == 0, "et_graph_build: %s", err.text);
    /* density 1 for every group: exactly the dense costs */
    et_method full = sparse;
    for (int k = 0; k < ET_GROUP_COUNT; k++)
        full.sparse[k] = (et_sparse_spec){1.0, ET_PATTERN_UNSTRUCTURED, 0};
    o.method = &full;
    CHECK(et_graph_build(&s.model, &o, &g1, &err) == 0, "et_graph_build: %s", err.text);
    int same = gd.n_ops == g1.n_ops;
    for (int i = 0; same && i < gd.n_ops; i++)
        same = et_op_time(&gd.ops[i], &b, &s.cluster.device, s.precision) ==
               et_op_time(&g1.ops[i], &b, &s.cluster.device, s.precision);
    CHECK(same, "sparse at density 1.0 costs exactly what dense does, op by op");
    CHECK(gd.param_count == g1.param_count && gd.weight_bytes == g1.weight_bytes, "and stores the same");
    CHECK_REL(weight_gemm_flops(&gs, &b), 0.25 * weight_gemm_flops(&gd, &b), 1e-9,
              "layer FLOPs scale with density (0.25)");
    /* every sparse weight keeps a quarter of its values, each with a 4-byte CSR column index: in bf16 that is
     * 0.25 x 2 + 0.25 x 4 = 1.5 bytes per dense element against 2, so 75% sparsity saves only a quarter */
    int sparse_params = 0, consistent = 1;
    double stored = 0;
    for (int i = 0; i < gs.n_params; i++) {
        const et_param *p = &gs.params[i];
        stored += p->count * 2 + p->meta_bytes;
        if (p->count == p->dense) continue;
        sparse_params++;
        consistent &= p->count == 0.25 * p->dense && p->meta_bytes == 4 * p->count;
    }
    int layers = gs.last_layer - gs.first_layer + 1; /* this pipeline stage's */
    CHECK(sparse_params == 4 * layers && consistent,
          "4 sparse weights per layer at density 0.25 with CSR indices "
          "(%d for %d layers)",
          sparse_params, layers);
    CHECK_REL(gs.weight_bytes, stored, 1e-12, "stored weight bytes add up");
    CHECK(gs.weight_bytes < 0.8 * gd.weight_bytes, "weights plus CSR indices: %.3g vs %.3g bytes dense",
          gs.weight_bytes, gd.weight_bytes);
    et_graph_free(&gd);
    et_graph_free(&gs);
    et_graph_free(&g1);

    /* unstructured sparsity is slower than dense on A100 and faster on the dataflow device */
    et_estimate e_sparse, e_dense;
    CHECK(et_analytic_estimate(&s, &e_sparse, &err) == 0, "et_analytic_estimate: %s", err.text);
    s.method = dense;
    CHECK(et_analytic_estimate(&s, &e_dense, &err) == 0, "et_analytic_estimate: %s", err.text);
    CHECK(e_sparse.step_time > e_dense.step_time,
          "75%% unstructured on A100 is slower than dense: %.3g > %.3g s", e_sparse.step_time,
          e_dense.step_time);
    et_scenario_free(&s);
    et_scenario df_sparse, df_dense;
    if (!check_scenario_load(SCEN("gpt3-13b-sparse75-dataflow.json"), &df_sparse) &&
        !check_scenario_load(SCEN("gpt3-13b-dense-dataflow.json"), &df_dense)) {
        CHECK(et_analytic_estimate(&df_sparse, &e_sparse, &err) == 0, "et_analytic_estimate: %s", err.text);
        CHECK(et_analytic_estimate(&df_dense, &e_dense, &err) == 0, "et_analytic_estimate: %s", err.text);
        CHECK(e_sparse.step_time < 0.5 * e_dense.step_time,
              "75%% sparse on the dataflow device: %.3g s < dense %.3g s", e_sparse.step_time,
              e_dense.step_time);
        CHECK(e_sparse.memory.total < e_dense.memory.total, "and needs less memory");
        et_scenario_free(&df_sparse);
        et_scenario_free(&df_dense);
    }
}

static void test_tt_scenario(void)
{
    et_scenario dense, tt;
    et_error err;
    if (check_scenario_load(SCEN("encoder-6x768-dense.json"), &dense) ||
        check_scenario_load(SCEN("encoder-6x768-tt.json"), &tt))
        return;
    et_estimate ed, et;
    CHECK(et_analytic_estimate(&dense, &ed, &err) == 0, "et_analytic_estimate: %s", err.text);
    CHECK(et_analytic_estimate(&tt, &et, &err) == 0, "et_analytic_estimate: %s", err.text);
    CHECK(et.params_total < 0.05 * ed.params_total, "TT stores %.4g parameters against %.4g dense",
          et.params_total, ed.params_total);
    CHECK(et.memory.weights + et.memory.gradients + et.memory.optimizer_states <
              0.05 * (ed.memory.weights + ed.memory.gradients + ed.memory.optimizer_states),
          "no dense weight, gradient or optimizer state is kept");
    CHECK(et.n_phases == 3, "three rank phases");
    int shrinking = 1;
    for (int i = 1; i < et.n_phases; i++)
        shrinking &= et.phases[i].step_time < et.phases[i - 1].step_time &&
                     et.phases[i].params < et.phases[i - 1].params;
    CHECK(shrinking, "lower ranks: fewer parameters and shorter steps (%.4g, %.4g, %.4g ms)",
          et.phases[0].step_time * 1e3, et.phases[1].step_time * 1e3, et.phases[2].step_time * 1e3);
    long long steps = 0;
    double train = 0;
    for (int i = 0; i < et.n_phases; i++) {
        steps += et.phases[i].steps;
        train += et.phases[i].steps * et.phases[i].step_time;
    }
    CHECK(steps == et.steps, "phases cover every step (%lld of %lld)", steps, et.steps);
    CHECK_REL(et.train_time, train, 1e-12, "training time adds the phases up");
    et_scenario_free(&dense);
    et_scenario_free(&tt);
}

/* Loads a shipped scenario at global and local batch 1 (CoMERA's single-batch training). */
static int load_batch1(const char *path, et_scenario *s)
{
    json_t *root;
    et_error err;
    if (et_json_load_file(path, &root, &err)) {
        CHECK(0, "%s loads: %s", path, err.text);
        return -1;
    }
    json_t *batch = json_object_get(root, "batch");
    json_object_set_new(batch, "global", json_integer(1));
    json_object_set_new(batch, "local", json_integer(1));
    const int rc = et_scenario_parse(root, path, NULL, s, &err);
    json_decref(root);
    CHECK(rc == 0, "%s at batch 1 parses: %s", path, rc ? err.text : "");
    return rc;
}

/* Estimates two shipped scenarios (at batch 1 when `batch1`) into *ea and *eb; 0 when both did. */
static int estimate_pair(const char *a, const char *b, int batch1, et_estimate *ea, et_estimate *eb)
{
    et_scenario sa, sb;
    et_error err;
    if (batch1 ? load_batch1(a, &sa) : check_scenario_load(a, &sa)) return -1;
    if (batch1 ? load_batch1(b, &sb) : check_scenario_load(b, &sb)) {
        et_scenario_free(&sa);
        return -1;
    }
    const int ok = et_analytic_estimate(&sa, ea, &err) == 0 && et_analytic_estimate(&sb, eb, &err) == 0;
    CHECK(ok, "%s and %s estimate: %s", a, b, ok ? "" : err.text);
    et_scenario_free(&sa);
    et_scenario_free(&sb);
    return ok ? 0 : -1;
}

/* CoMERA against GaLore on the six-encoder transformer at batch 1, memory part by part, by hand (issue
 * 38's check of the "9x less memory" claim against the part it is about). fp32: 4 bytes a weight and a
 * gradient; Adam 8 bytes of state a parameter, GaLore's projected matrices 4 bytes a state element instead
 * (test_model's test_galore counts them: 2 r max(m, n) + r min(m, n) each). The TT model replaces every
 * linear weight (q, k, v, out: 768 x 768; fc1 768 x 3072; fc2 3072 x 768) and the word embedding (30,522 x
 * 768) by cores of 20,448, 28,960, 28,960 at rank 30 and the embedding by
 * 1*64*30 + 30*80*30 + 30*80*30 + 30*60 (cores m_k n_k: 16x4, 20x4, 10x8, 10x6). */
static void test_tt_galore_memory(void)
{
    et_estimate eg, et;
    if (estimate_pair(SCEN("encoder-6x768-galore.json"), SCEN("encoder-6x768-tt.json"), 1, &eg, &et) == 0) {
        const double H = 768, F = 3072, V = 30522, r = 128, layers = 6;
        const double P = eg.params_total; /* the dense count, checked against a closed formula elsewhere */
        const double embedding_tt = 1 * 64 * 30 + 30 * 80 * 30 + 30 * 80 * 30 + 30 * 60 * 1;
        const double Pt =
            P - layers * (4 * H * H + 2 * H * F) - V * H + layers * (4 * 20448 + 2 * 28960) + embedding_tt;
        CHECK(fabs(et.params_total - Pt) < 0.5, "TT parameters %.0f, by hand %.0f", et.params_total, Pt);
        const double projected = layers * (3 * H * H + H * H + 2 * H * F);
        const double states =
            layers * ((2 * r * 3 * H + r * H) + (2 * r * H + r * H) + 2 * (2 * r * F + r * H));
        const struct {
            const char *part;
            double galore, tt, galore_hand, tt_hand;
        } parts[] = {
            {"weights", eg.memory.weights, et.memory.weights, 4 * P, 4 * Pt},
            {"gradients", eg.memory.gradients, et.memory.gradients, 4 * P, 4 * Pt},
            {"optimizer states", eg.memory.optimizer_states, et.memory.optimizer_states,
             8 * (P - projected) + 4 * states, 8 * Pt},
        };
        for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
            const double ratio = parts[i].galore / parts[i].tt,
                         hand = parts[i].galore_hand / parts[i].tt_hand;
            CHECK(fabs(parts[i].galore - parts[i].galore_hand) <= 1e-9 * parts[i].galore_hand &&
                      fabs(parts[i].tt - parts[i].tt_hand) <= 1e-9 * parts[i].tt_hand,
                  "%s: GaLore %.0f B (by hand %.0f), TT %.0f B (by hand %.0f)", parts[i].part,
                  parts[i].galore, parts[i].galore_hand, parts[i].tt, parts[i].tt_hand);
            CHECK(fabs(ratio - hand) <= 1e-9 * hand, "%s: GaLore / TT %.3fx, by hand %.3fx", parts[i].part,
                  ratio, hand);
        }
        CHECK(eg.memory.activations == et.memory.activations,
              "activations: the same micro-batch through the same layer shapes (%.0f, %.0f B)",
              eg.memory.activations, et.memory.activations);
        CHECK(eg.memory.reserved == et.memory.reserved, "the framework reserve is the profile's either way");
    }
}

/* CoMERA's BERT-like code model: the last rank phase compresses the whole model 4.23x (the paper's ratio;
 * the scenario's rank 90 is chosen for it). */
static void test_codebert_compression(void)
{
    et_estimate ed, et;
    if (estimate_pair(SCEN("codebert-large-dense.json"), SCEN("codebert-large-tt.json"), 0, &ed, &et) == 0) {
        const double ratio = ed.params_total / et.phases[et.n_phases - 1].params;
        CHECK(fabs(ratio - 4.23) < 0.01, "whole-model compression in the last phase %.3fx, the paper's 4.23x",
              ratio);
    }
}

int main(void)
{
    test_tt_params();
    test_orders();
    test_sparse();
    test_tt_scenario();
    test_tt_galore_memory();
    test_codebert_compression();
    return check_summary("test_methods");
}

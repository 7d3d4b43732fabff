/* Scenario loading, length distributions, memory and the analytic step on shipped scenarios. */
#include <math.h>
#include <string.h>

#include "analytic.h"
#include "batch.h"
#include "check.h"
#include "check_scenario.h"
#include "collectives.h"
#include "json_reader.h"
#include "length_dist.h"
#include "phase_time.h"
#include "run_timing.h"
#include "scenario.h"

#define SCEN(name) ET_SOURCE_DIR "/scenarios/" name

static void test_histogram(void)
{
    et_length_dist d;
    et_error err;
    CHECK(et_length_dist_load_histogram(SCEN("data/wikipedia-bert-seqlen-512.csv"), 512, &d, &err) == 0,
          "shipped histogram loads");
    CHECK(d.total_count == 16279552, "16,279,552 sequences, got %.0f", d.total_count);
    double pad = et_length_padding_fraction(&d, 512);
    CHECK(fabs(pad - 0.500) < 0.0005, "padding fraction at 512 is 0.500 to 3 digits, got %.4f", pad);
    double shares[4] = {et_length_share(&d, 1, 128), et_length_share(&d, 129, 256),
                        et_length_share(&d, 257, 384), et_length_share(&d, 385, 512)};
    double want[4] = {0.369, 0.197, 0.117, 0.316};
    for (int i = 0; i < 4; i++)
        CHECK(fabs(shares[i] - want[i]) < 0.0005, "bin %d share %.4f, want %.3f", i, shares[i], want[i]);
    CHECK(fabs(shares[0] + shares[1] + shares[2] + shares[3] - 1) < 1e-12, "bins cover the distribution");
    et_length_dist_free(&d);
    CHECK(et_length_dist_load_histogram(SCEN("data/wikipedia-bert-seqlen-512.csv"), 256, &d, &err) != 0,
          "lengths above seq_len are an error");
    CHECK(err.line > 0 && strstr(err.text, "outside 1..256"), "error names the line: %d %s", err.line,
          err.text);
    et_length_dist u;
    CHECK(et_length_dist_uniform(1, 100, &u, &err) == 0, "uniform");
    CHECK(fabs(et_length_mean(&u) - 50.5) < 1e-9, "uniform mean 50.5");
    et_length_dist_free(&u);
}

static void test_load(void)
{
    et_scenario s;
    et_error err;
    if (check_scenario_load(SCEN("mlperf-bert-1024-samsung.json"), &s)) return;
    CHECK(et_scenario_gpus(&s) == 1024 && s.parallel.data == 1024, "1024 data-parallel GPUs");
    CHECK(s.batch.grad_accum == 1, "grad_accum derived as 1");
    CHECK(s.target.steps == 179, "179 steps");
    CHECK(s.cluster.nic_bandwidth == 25e9, "HDR 200 Gb/s = 25 GB/s per NIC");
    CHECK(s.cluster.intra_node_bandwidth == 300e9,
          "NVSwitch 600 GB/s bidirectional = 300 GB/s per direction");
    CHECK(s.parallel.bucket_bytes == 25 * 1048576.0, "25 MiB buckets");
    et_batch_shape b = et_batch_expected(&s);
    /* stratified 6/3/2/5 over bins of 128: expected tokens = sum_b count_b * E[L | bin b] */
    double want = 0;
    int counts[4] = {6, 3, 2, 5};
    for (int bin = 0; bin < 4; bin++) {
        double w = 0, sum = 0;
        for (int l = 128 * bin + 1; l <= 128 * (bin + 1); l++) {
            w += s.data.lengths.pmf[l];
            sum += s.data.lengths.pmf[l] * l;
        }
        want += counts[bin] * sum / w;
    }
    CHECK_REL(b.tokens, want, 1e-12, "unpadded stratified tokens = sum of count x E[L | bin]");

    et_estimate with, without;
    CHECK(et_analytic_estimate(&s, &with, &err) == 0, "estimate");
    s.parallel.overlap = false;
    CHECK(et_analytic_estimate(&s, &without, &err) == 0, "estimate without overlap");
    CHECK(with.dp_comm_exposed >= 0 && with.dp_comm_exposed <= without.dp_comm_exposed,
          "overlap exposes no more communication than none: %g vs %g", with.dp_comm_exposed,
          without.dp_comm_exposed);
    CHECK_REL(without.dp_comm_exposed, without.dp_comm, 1e-12, "without overlap everything is exposed");
    CHECK(with.step_time < without.step_time, "overlap shortens the step");
    CHECK(with.mfu > 0.05 && with.mfu < 0.87, "MFU plausible: %.3f", with.mfu);
    CHECK_REL(with.time_to_train, with.steps * with.step_time + with.eval_time, 1e-12,
              "time-to-train adds up");

    /* padded costs more than unpadded on the same data */
    s.parallel.overlap = true;
    s.data.unpadded = false;
    et_estimate padded;
    CHECK(et_analytic_estimate(&s, &padded, &err) == 0, "padded estimate");
    CHECK(padded.forward > 1.5 * with.forward, "padding to 512 costs much more forward time (%.4g vs %.4g)",
          padded.forward, with.forward);
    et_scenario_free(&s);
}

static void test_memory(void)
{
    et_scenario s;
    et_error err;
    if (check_scenario_load(SCEN("gpt3-13b-dense-a100.json"), &s)) return;
    et_estimate e;
    CHECK(et_analytic_estimate(&s, &e, &err) == 0, "estimate");
    CHECK(e.memory.fits, "13B with TP 8 x PP 2 and ZeRO-1 fits in 80 GB (%.1f GiB)",
          e.memory.total / 1073741824.0);
    /* without model parallelism 13B needs 16 bytes/parameter = 208 GB > 80 GB */
    s.parallel.tensor = 1;
    s.parallel.pipeline = 1;
    s.parallel.zero_stage = 0;
    s.parallel.data = 512;
    s.batch.grad_accum = 2;
    CHECK(et_analytic_estimate(&s, &e, &err) == 0, "estimate");
    CHECK(!e.memory.fits, "13B on one GPU's memory does not fit (%.1f GiB)", e.memory.total / 1073741824.0);
    CHECK_REL(e.memory.weights + e.memory.gradients + e.memory.optimizer_states, 16 * e.params_total, 1e-9,
              "mixed-precision Adam keeps 16 bytes per parameter");
    s.parallel.zero_stage = 3;
    et_estimate z3;
    CHECK(et_analytic_estimate(&s, &z3, &err) == 0, "estimate");
    CHECK_REL(z3.memory.weights + z3.memory.gradients + z3.memory.optimizer_states, 16 * e.params_total / 512,
              1e-9, "ZeRO-3 shards all 16 bytes over 512 ranks");
    et_scenario_free(&s);
}

static void test_collectives(void)
{
    et_comm_group g = {.ranks = 64,
                       .nodes = 8,
                       .ranks_per_node = 8,
                       .intra_bw = 300e9,
                       .inter_bw = 100e9,
                       .alpha_intra = 5e-6,
                       .alpha_inter = 8e-6};
    double S = 1e9;
    CHECK_REL(et_ring_allreduce_time(&g, S), 2 * 63 * 8e-6 + 2.0 * 63 / 64 * S / 100e9, 1e-12,
              "ring closed form");
    CHECK(et_tree_allreduce_time(&g, 1e3) < et_ring_allreduce_time(&g, 1e3), "tree wins for small messages");
    /* for large messages both move ~2S per node: equal bandwidth terms; ring pays 2(N-1) latencies (~1 ms
     * here) */
    CHECK_REL(et_tree_allreduce_time(&g, S) - 2 * (7 * 5e-6 + 3 * 8e-6),
              et_ring_allreduce_time(&g, S) - 2 * 63 * 8e-6, 0.02, "tree ~ ring at 1 GB");
    et_coll_algo chosen;
    et_allreduce_time(&g, ET_COLL_AUTO, 1e3, &chosen);
    CHECK(chosen == ET_COLL_TREE, "auto picks tree for 1 kB");
    double t_fastest = et_allreduce_time(&g, ET_COLL_FASTEST, S, &chosen);
    CHECK(t_fastest == fmin(et_ring_allreduce_time(&g, S), et_tree_allreduce_time(&g, S)),
          "fastest takes the faster");
    g.nodes = 1;
    g.ranks = g.ranks_per_node = 8;
    et_allreduce_time(&g, ET_COLL_AUTO, S, &chosen);
    CHECK(chosen == ET_COLL_RING, "auto picks ring for 1 GB inside one node");
    for (int n = 2; n <= 1024; n *= 2) {
        int roots = 0;
        for (int t = 0; t < 2; t++)
            for (int i = 0; i < n; i++)
                roots += et_tree_parent(n, t, i) < 0;
        CHECK(roots == 2, "each of the two trees over %d nodes has one root", n);
        int consistent = 1;
        for (int t = 0; t < 2; t++)
            for (int i = 0; i < n; i++) {
                int ch[2], c = et_tree_children(n, t, i, ch);
                for (int j = 0; j < c; j++)
                    consistent &= et_tree_parent(n, t, ch[j]) == i;
            }
        CHECK(consistent, "tree children and parents agree (n=%d)", n);
        CHECK(et_tree_max_nic_load(n) <= 1.0 + 1e-12, "double binary tree loads a NIC at most S (n=%d: %.2f)",
              n, et_tree_max_nic_load(n));
    }
    CHECK_REL(et_busbw_factor_allreduce(8), 1.75, 1e-12, "busbw factor 2(N-1)/N");
}

/* NVLink per GPU: the scenario's cluster.nvlink_GBps, else the device profile's (H100 900, B200 1800 GB/s
 * both directions), half of it each way. */
static void test_nvlink_from_profile(void)
{
    static const struct {
        const char *device;
        double nvlink_GBps; /* 0: not given */
        double per_direction;
    } cases[] = {
        {"h100-sxm", 0, 450e9}, {"b200", 0, 900e9}, {"a100-sxm4-80gb", 0, 300e9}, {"h100-sxm", 600, 300e9}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *root;
        et_error err;
        et_scenario s;
        const int loaded = et_json_load_file(SCEN("llama3-8b-h100.json"), &root, &err) == 0;
        CHECK(loaded, "the scenario loads: %s", loaded ? "" : err.text);
        if (!loaded) return;
        json_t *cluster = json_object_get(root, "cluster");
        json_object_set_new(cluster, "device", json_string(cases[i].device));
        json_object_del(cluster, "nvlink_GBps");
        if (cases[i].nvlink_GBps > 0)
            json_object_set_new(cluster, "nvlink_GBps", json_real(cases[i].nvlink_GBps));
        const int parsed = et_scenario_parse(root, SCEN("llama3-8b-h100.json"), NULL, &s, &err) == 0;
        CHECK(parsed, "%s parses: %s", cases[i].device, parsed ? "" : err.text);
        if (parsed) {
            CHECK(s.cluster.intra_node_bandwidth == cases[i].per_direction,
                  "%s, nvlink_GBps %g: %g B/s each way, want %g", cases[i].device, cases[i].nvlink_GBps,
                  s.cluster.intra_node_bandwidth, cases[i].per_direction);
            et_scenario_free(&s);
        }
        json_decref(root);
    }
}

/* The Samsung scenario (global 16384, an evaluation every 325,000 samples of 10,000) under each timing
 * rule, counted by hand. */
static void test_run_timing(void)
{
    static const struct {
        const char *timing;
        long long steps;
        int initial_eval;
        long long warm_steps;
        double warm_s;
        long long want_steps;
        double want_evals, want_warm;
    } cases[] = {
        /* steps: floor(179 x 16384 / 325000) = floor(9.02) = 9 evaluations */
        {"steps", 179, 0, 0, 0, 179, 9, 0},
        /* mlperf: the 9th evaluation ends step ceil(9 x 325000 / 16384) = ceil(178.5) = 179 */
        {"mlperf", 179, 0, 0, 0, 179, 9, 0},
        /* a target at step 170 is seen at the next evaluation, the same 9th at step 179 */
        {"mlperf", 170, 1, 0, 0, 179, 10, 0},
        /* at step 180 the 10th, at ceil(3,250,000 / 16384) = ceil(198.4) = 199 */
        {"mlperf", 180, 0, 2, 0.5, 199, 10, 1.0},
        /* warm-up is clamped to the steps run */
        {"steps", 3, 0, 10, 0.25, 3, 0, 0.75},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *root;
        et_error err;
        et_scenario s;
        if (et_json_load_file(SCEN("mlperf-bert-1024-samsung.json"), &root, &err)) {
            CHECK(0, "the scenario loads: %s", err.text);
            return;
        }
        json_t *target = json_object_get(root, "target");
        json_object_set_new(target, "timing", json_string(cases[i].timing));
        json_object_set_new(target, "steps", json_integer(cases[i].steps));
        json_object_set_new(target, "initial_eval", json_boolean(cases[i].initial_eval));
        if (cases[i].warm_steps)
            json_object_set_new(
                target, "warmup",
                json_pack("{s:I, s:f}", "steps", cases[i].warm_steps, "extra_s", cases[i].warm_s));
        const int parsed =
            et_scenario_parse(root, SCEN("mlperf-bert-1024-samsung.json"), NULL, &s, &err) == 0;
        json_decref(root);
        CHECK(parsed, "case %zu parses: %s", i, parsed ? "" : err.text);
        if (!parsed) continue;
        et_run_count run;
        et_run_count_of(&s, &run);
        CHECK(run.steps == cases[i].want_steps && run.evals == cases[i].want_evals &&
                  fabs(run.warmup_s - cases[i].want_warm) < 1e-12,
              "%s, target %lld steps: %lld steps, %.0f evaluations, warm-up %g s; by hand %lld, %.0f, %g",
              cases[i].timing, cases[i].steps, run.steps, run.evals, run.warmup_s, cases[i].want_steps,
              cases[i].want_evals, cases[i].want_warm);
        /* an evaluation: ceil(10000 / (16 x 1024)) = 1 forward micro-batch, the metric's all-reduce over
         * the 1024 ranks and one host read */
        const et_comm_group g = et_dp_group(&s);
        const double one = 0.01 + et_allreduce_time(&g, s.parallel.allreduce, 16, NULL) + et_sync_time(&s);
        CHECK(fabs(et_eval_time(&s, 3, 0.01) - 3 * one) < 1e-12, "three evaluations %g s, by hand %g s",
              et_eval_time(&s, 3, 0.01), 3 * one);
        et_estimate e;
        if (et_analytic_estimate(&s, &e, &err) == 0)
            CHECK(e.steps == run.steps &&
                      fabs(e.train_time - (run.steps * e.step_time + run.warmup_s)) <= 1e-9 * e.train_time,
                  "the estimate trains %lld steps in %g s", e.steps, e.train_time);
        et_scenario_free(&s);
    }
}

int main(void)
{
    test_histogram();
    test_load();
    test_memory();
    test_collectives();
    test_nvlink_from_profile();
    test_run_timing();
    return check_summary("test_scenario");
}

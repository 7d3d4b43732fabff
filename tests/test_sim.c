/* The SimGrid simulator against the analytic model: equal without overlap or stragglers, exposed
 * communication bounded with overlap, deterministic output, stragglers cost time; mirrored flows and the
 * most contended link change nothing on randomly drawn clusters. */
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "atomic_file.h"
#include "check.h"
#include "check_scenario.h"
#include "check_sim.h"
#include "scenario.h"
#include "step_sim.h"

#define SCEN(name) ET_SOURCE_DIR "/scenarios/" name

static double field(const json_t *sim, const char *key)
{
    return json_number_value(json_object_get(sim, key));
}

static void check_scenario(const char *path, int steps)
{
    et_scenario s;
    et_error err;
    if (check_scenario_load(path, &s)) return;
    /* no overlap, no stragglers (padded batches cost the same on every rank): the simulated step equals
     * the analytic step */
    s.parallel.overlap = false;
    s.data.unpadded = false;
    et_estimate e;
    CHECK(et_analytic_estimate(&s, &e, &err) == 0, "analytic estimate");
    json_t *flat = check_simulate(&s, steps, 1);
    if (flat) CHECK_REL(check_step_mean(flat), e.step_time, 0.02, s.name);
    /* overlap: exposed communication never negative and never above the no-overlap case */
    s.parallel.overlap = true;
    json_t *over = check_simulate(&s, steps, 0);
    if (flat && over) {
        CHECK(field(over, "exposed_comm_s") >= 0, "%s: exposed communication %g >= 0", s.name,
              field(over, "exposed_comm_s"));
        CHECK(field(over, "exposed_comm_s") <= field(flat, "exposed_comm_s") * (1 + 1e-9),
              "%s: overlap exposes %g s <= %g s without", s.name, field(over, "exposed_comm_s"),
              field(flat, "exposed_comm_s"));
        CHECK(check_step_mean(over) <= check_step_mean(flat) * (1 + 1e-9), "%s: overlap is no slower",
              s.name);
        et_estimate eo;
        CHECK(et_analytic_estimate(&s, &eo, &err) == 0, "et_analytic_estimate: %s", err.text);
        CHECK_REL(check_step_mean(over), eo.step_time, 0.02, "with overlap, simulated step vs analytic");
    }
    json_decref(flat);
    json_decref(over);
    et_scenario_free(&s);
}

/* Presorted BERT: balanced batches shorten the simulated step, and clipping per bucket exposes no more
 * communication than clipping after the all-reduce. */
static void check_presorted_bert(void)
{
    et_scenario s;
    if (check_scenario_load(SCEN("mlperf-bert-1024-samsung.json"), &s)) return;
    et_sampling presorted = s.data.sampling;
    json_t *balanced = check_simulate(&s, 2, 0);
    s.data.sampling.scheme = ET_SAMPLING_RANDOM;
    s.data.sampling.presort_group = 0;
    json_t *random = check_simulate(&s, 2, 0);
    if (balanced && random) {
        CHECK(check_step_mean(balanced) < check_step_mean(random),
              "stratified + presort step %.4g s < random %.4g s", check_step_mean(balanced),
              check_step_mean(random));
        CHECK(field(balanced, "idle_s") < field(random, "idle_s"), "less idle time: %.4g < %.4g",
              field(balanced, "idle_s"), field(random, "idle_s"));
    }
    s.data.sampling = presorted;
    s.optimizer.clip = ET_CLIP_AFTER_ALLREDUCE;
    json_t *after = check_simulate(&s, 2, 0);
    if (balanced && after)
        CHECK(field(balanced, "exposed_comm_s") <= field(after, "exposed_comm_s"),
              "per-bucket clipping exposes %.4g s <= %.4g s clipping after the all-reduce",
              field(balanced, "exposed_comm_s"), field(after, "exposed_comm_s"));
    json_decref(balanced);
    json_decref(random);
    json_decref(after);
    et_scenario_free(&s);
}

static void check_determinism_and_stragglers(void)
{
    et_scenario s;
    if (check_scenario_load(SCEN("mlperf-bert-8.json"), &s)) return;
    s.data.unpadded = false; /* equal batches: only the noise below makes stragglers */
    s.simulation.straggler_sigma = 0.05;
    json_t *a = check_simulate(&s, 4, 0), *b = check_simulate(&s, 4, 0);
    if (a && b) {
        char *ta = json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(17));
        char *tb = json_dumps(b, JSON_COMPACT | JSON_REAL_PRECISION(17));
        CHECK(ta && tb && strcmp(ta, tb) == 0, "same scenario and seed give identical output");
        free(ta);
        free(tb);
    }
    s.simulation.seed = 12345;
    json_t *c = check_simulate(&s, 4, 0);
    s.simulation.straggler_sigma = 0;
    json_t *calm = check_simulate(&s, 4, 0);
    if (a && c && calm) {
        CHECK(check_step_mean(a) != check_step_mean(c), "another seed draws other stragglers");
        CHECK(check_step_mean(a) > check_step_mean(calm), "stragglers slow the step: %g > %g",
              check_step_mean(a), check_step_mean(calm));
        CHECK(field(a, "idle_s") > 0 && field(calm, "idle_s") == 0, "stragglers make others idle (%g, %g)",
              field(a, "idle_s"), field(calm, "idle_s"));
    }
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(calm);
    et_scenario_free(&s);
}

/* Draws from a fixed splitmix64 stream, so the cases are the same on every run. */
static unsigned long long draw_state = 20261129;
static int draw(int n)
{
    unsigned long long z = (draw_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (int)((z ^ (z >> 31)) % (unsigned long long)n);
}

/* The simulation sections as etsim writes them are the same text (doubles to 12 significant digits:
 * SimGrid's solver may round a few ulps differently when it shares links among more flows). */
static void same_report(const json_t *a, const json_t *b, int c, const char *scenario)
{
    char *x = json_dumps(a, ET_JSON_FILE_FLAGS), *y = json_dumps(b, ET_JSON_FILE_FLAGS);
    CHECK(x && y && strcmp(x, y) == 0, "random case %d: the same report with every flow played\n%s", c,
          scenario);
    free(x);
    free(y);
}

/* A drawn scenario (root, taken) simulated with options x and with options y gives the same report. A
 * scenario the rules refuse fails the check with `must_parse`, else it is skipped (a drawn plan the rules
 * may refuse); with `cut_off_ok` a simulation may fail because drawn faults cut a node off. */
static void same_report_for(json_t *root, const char *label, int c, const sim_options *x,
                            const sim_options *y, int must_parse, int cut_off_ok)
{
    char *text = json_dumps(root, JSON_COMPACT);
    et_scenario s;
    et_error err;
    int parsed = et_scenario_parse(root, label, NULL, &s, &err) == 0;
    json_decref(root);
    if (must_parse) CHECK(parsed, "%s %d parses: %s\n%s", label, c, parsed ? "" : err.text, text);
    if (!parsed) {
        free(text);
        return;
    }
    json_t *a = NULL, *b = NULL;
    if (!(a = check_simulate_with(&s, x, &err)) || !(b = check_simulate_with(&s, y, &err)))
        CHECK(cut_off_ok && strstr(err.text, "cut off") != NULL, "%s %d simulates: %s\n%s", label, c,
              err.text, text);
    else
        same_report(a, b, c, text);
    json_decref(a);
    json_decref(b);
    et_scenario_free(&s);
    free(text);
}

/* Mirroring and the most contended link are exact: on clusters drawn at random (nodes, GPUs per node,
 * NICs, leaves, oversubscription, algorithm, ZeRO, tensor parallelism, stragglers, calibration factors),
 * the simulation gives the same report whether flows are mirrored or all played. */
static void check_mirroring_random(int cases)
{
    static const char *const algos[] = {"auto", "ring", "tree", "hierarchical"};
    static const int nodes[] = {2, 3, 5, 8, 12, 16}, gpus[] = {2, 4, 8}, leaf[] = {1, 2, 3, 4, 8, 16};
    static const double oversub[] = {1, 1, 1.5, 2, 4}, bw[] = {1, 1, 0.83}, lat[] = {1, 1, 1.7};
    for (int c = 0; c < cases; c++) {
        /* drawn one by one: the order of a call's arguments is unspecified */
        const char *clip = draw(2) ? "per_bucket" : "after_allreduce";
        const char *algo = algos[draw(4)];
        int zero = draw(3) == 0 ? 1 + draw(3) : 0;
        int tensor = draw(4) == 0 ? 2 : 1;
        int n = nodes[draw(6)];
        int g = gpus[draw(3)];
        int nics = 1 + draw(4);
        double bandwidth_factor = bw[draw(3)];
        double latency_factor = lat[draw(3)];
        int per_leaf = leaf[draw(6)];
        double ratio = oversub[draw(5)];
        int seed = 1 + draw(1000);
        double sigma = draw(3) * 0.05;
        json_t *root = json_pack(
            "{s:s, s:{s:s}, s:{s:i}, s:{s:i}, s:{s:s, s:s}, s:s, s:{s:s, s:i, s:i},"
            " s:{s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:{s:i, s:f}}, s:{s:i}, s:{s:i, s:i, s:f}}",
            "name", "random", "model", "preset", "bert-base", "data", "seq_len", 128, "batch", "local", 4,
            "optimizer", "name", "adam", "clip", clip, "precision", "fp16", "parallelism", "allreduce", algo,
            "zero_stage", zero, "tensor", tensor, "cluster", "device", "a100-sxm4-80gb", "nodes", n,
            "gpus_per_node", g, "nics_per_node", nics, "nic_Gbps", 200, "bandwidth_factor", bandwidth_factor,
            "latency_factor", latency_factor, "fabric", "nodes_per_leaf", per_leaf, "oversubscription", ratio,
            "target", "steps", 1, "simulation", "steps", 2, "seed", seed, "straggler_sigma", sigma);
        sim_options mirrored = {.steps = 2}, all = {.steps = 2, .all_flows = true};
        same_report_for(root, "random case", c, &mirrored, &all, 1, 0);
    }
}

/* The same on the other fabrics and with broken parts: three-tier and rail fabrics, core
 * oversubscription, and faults listed (an up-link bundle, a slow NVLink port) and drawn (NICs slow or
 * failed, slow GPUs). */
static void check_fabrics_random(int cases)
{
    static const char *const algos[] = {"auto", "ring", "tree", "hierarchical"};
    static const char *const parts[] = {"nic", "gpu", "nvlink"};
    static const int nodes[] = {4, 6, 9, 16}, gpus[] = {2, 4, 8}, leaf[] = {1, 2, 3, 4};
    for (int c = 0; c < cases; c++) {
        const char *algo = algos[draw(4)];
        int zero = draw(3) == 0 ? 1 : 0;
        int n = nodes[draw(4)];
        int g = gpus[draw(3)];
        int nics = 1 + draw(4);
        int per_leaf = leaf[draw(4)];
        int rail = draw(2);
        int tiers = 2 + draw(2);
        int per_pod = 1 + draw(3);
        double core = tiers == 3 ? 1 + draw(4) : 1;
        double ratio = 1 + draw(3);
        const char *part = parts[draw(3)];
        double fraction = 0.05 * draw(5);
        int failed = !strcmp(part, "nic") && draw(2);
        double factor = 0.25 + 0.25 * draw(3);
        int listed = draw(3);
        int seed = 1 + draw(1000);
        json_t *fabric = json_pack("{s:s, s:i, s:f, s:i}", "topology", rail ? "rail" : "fat_tree",
                                   "nodes_per_leaf", per_leaf, "oversubscription", ratio, "tiers", tiers);
        if (tiers == 3) {
            json_object_set_new(fabric, "leaves_per_pod", json_integer(per_pod));
            json_object_set_new(fabric, "core_oversubscription", json_real(core));
        }
        json_t *cluster =
            json_pack("{s:s, s:i, s:i, s:i, s:i, s:o}", "device", "a100-sxm4-80gb", "nodes", n,
                      "gpus_per_node", g, "nics_per_node", nics, "nic_Gbps", 200, "fabric", fabric);
        json_t *random = json_pack("{s:s, s:f, s:i}", "part", part, "fraction", fraction, "seed", seed);
        json_object_set_new(random, failed ? "failed" : "factor", failed ? json_true() : json_real(factor));
        json_object_set_new(cluster, "random_faults", random);
        if (listed == 1)
            json_object_set_new(cluster, "faults",
                                json_pack("[{s:s, s:i, s:f}]", "part", "uplink", "leaf", 0, "factor", 0.5));
        if (listed == 2)
            json_object_set_new(cluster, "faults",
                                json_pack("[{s:s, s:i, s:i, s:f}]", "part", "nvlink", "node", n - 1, "gpu", 0,
                                          "factor", 0.3));
        json_t *root = json_pack("{s:s, s:{s:s}, s:{s:i}, s:{s:i}, s:{s:s}, s:s, s:{s:s, s:i}, s:o, s:{s:i},"
                                 " s:{s:i, s:i}}",
                                 "name", "random fabric", "model", "preset", "bert-base", "data", "seq_len",
                                 128, "batch", "local", 4, "optimizer", "name", "adam", "precision", "fp16",
                                 "parallelism", "allreduce", algo, "zero_stage", zero, "cluster", cluster,
                                 "target", "steps", 1, "simulation", "steps", 2, "seed", seed);
        sim_options mirrored = {.steps = 2}, all = {.steps = 2, .all_flows = true};
        same_report_for(root, "random fabric", c, &mirrored, &all, 1, 1);
    }
}

/* Identical communicators merged into one actor (sim_world.h) change nothing: on drawn clusters with
 * tensor parallelism (and pipelines), the same report as one actor per communicator. */
static void check_merged_groups_random(int cases)
{
    static const char *const algos[] = {"auto", "ring", "tree", "hierarchical"};
    static const int nodes[] = {2, 4, 6, 8}, gpus[] = {4, 8}, leaf[] = {1, 2, 4};
    for (int c = 0; c < cases; c++) {
        const char *algo = algos[draw(4)];
        int zero = draw(3) == 0 ? 1 + draw(3) : 0;
        int n = nodes[draw(4)];
        int g = gpus[draw(2)];
        int tensor = draw(2) ? 2 : 4;
        int pipeline = draw(3) == 0 ? 2 : 1;
        int nics = 1 + draw(4);
        int per_leaf = leaf[draw(3)];
        double ratio = 1 + draw(3);
        int seed = 1 + draw(1000);
        json_t *root =
            json_pack("{s:s, s:{s:s}, s:{s:i}, s:{s:i}, s:{s:s}, s:s, s:{s:s, s:i, s:i, s:i},"
                      " s:{s:s, s:i, s:i, s:i, s:i, s:{s:i, s:f}}, s:{s:i}, s:{s:i, s:i}}",
                      "name", "merged groups", "model", "preset", "bert-base", "data", "seq_len", 128,
                      "batch", "local", 4, "optimizer", "name", "adam", "precision", "fp16", "parallelism",
                      "allreduce", algo, "zero_stage", zero, "tensor", tensor, "pipeline", pipeline,
                      "cluster", "device", "a100-sxm4-80gb", "nodes", n, "gpus_per_node", g, "nics_per_node",
                      nics, "nic_Gbps", 200, "fabric", "nodes_per_leaf", per_leaf, "oversubscription", ratio,
                      "target", "steps", 1, "simulation", "steps", 2, "seed", seed);
        sim_options merged = {.steps = 2}, apart = {.steps = 2, .all_groups = true};
        same_report_for(root, "merged groups", c, &merged, &apart, 0, 0);
    }
}

int main(void)
{
    check_scenario(SCEN("mlperf-bert-8.json"), 2);
    check_scenario(SCEN("bert-base-8-padded.json"), 2);
    check_scenario(SCEN("mlperf-bert-1024-nvidia.json"), 1);
    check_scenario(SCEN("gpt3-13b-dense-a100.json"), 1);
    check_determinism_and_stragglers();
    check_presorted_bert();
    check_mirroring_random(48);
    check_fabrics_random(40);
    check_merged_groups_random(24);
    return check_summary("test_sim");
}

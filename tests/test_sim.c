#define _POSIX_C_SOURCE 200809L
/* The SimGrid simulator against the analytic model: equal without overlap or stragglers, exposed
 * communication bounded with overlap, deterministic output, stragglers cost time; mirrored flows and the
 * most contended link change nothing on randomly drawn clusters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analytic.h"
#include "check.h"
#include "scenario.h"
#include "step_sim.h"

#define SCEN(name) ET_SOURCE_DIR "/scenarios/" name

static double step_mean(const json_t *sim)
{
    return json_number_value(json_object_get(json_object_get(sim, "step_time_s"), "mean"));
}

static double field(const json_t *sim, const char *key)
{
    return json_number_value(json_object_get(sim, key));
}

static json_t *simulate(et_scenario *s, int steps, int no_overlap)
{
    sim_options o = {.steps = steps, .force_no_overlap = no_overlap};
    json_t *out = NULL;
    et_error err;
    if (sim_run(s, &o, &out, &err)) {
        CHECK(0, "simulation of %s failed: %s", s->name, err.text);
        return NULL;
    }
    return out;
}

static void check_scenario(const char *path, int steps)
{
    et_scenario s;
    et_error err;
    if (et_scenario_load(path, &s, &err)) {
        CHECK(0, "%s loads: %s", path, err.text);
        return;
    }
    /* no overlap, no stragglers (padded batches cost the same on every rank): the simulated step equals
     * the analytic step */
    s.parallel.overlap = false;
    s.data.unpadded = false;
    et_estimate e;
    CHECK(et_analytic_estimate(&s, &e, &err) == 0, "analytic estimate");
    json_t *flat = simulate(&s, steps, 1);
    if (flat) CHECK_REL(step_mean(flat), e.step_time, 0.02, s.name);
    /* overlap: exposed communication never negative and never above the no-overlap case */
    s.parallel.overlap = true;
    json_t *over = simulate(&s, steps, 0);
    if (flat && over) {
        CHECK(field(over, "exposed_comm_s") >= 0, "%s: exposed communication %g >= 0", s.name,
              field(over, "exposed_comm_s"));
        CHECK(field(over, "exposed_comm_s") <= field(flat, "exposed_comm_s") * (1 + 1e-9),
              "%s: overlap exposes %g s <= %g s without", s.name, field(over, "exposed_comm_s"),
              field(flat, "exposed_comm_s"));
        CHECK(step_mean(over) <= step_mean(flat) * (1 + 1e-9), "%s: overlap is no slower", s.name);
        et_estimate eo;
        et_analytic_estimate(&s, &eo, &err);
        CHECK_REL(step_mean(over), eo.step_time, 0.02, "with overlap, simulated step vs analytic");
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
    et_error err;
    if (et_scenario_load(SCEN("mlperf-bert-1024-samsung.json"), &s, &err)) {
        CHECK(0, "samsung scenario loads: %s", err.text);
        return;
    }
    et_sampling presorted = s.data.sampling;
    json_t *balanced = simulate(&s, 2, 0);
    s.data.sampling.scheme = ET_SAMPLING_RANDOM;
    s.data.sampling.presort_group = 0;
    json_t *random = simulate(&s, 2, 0);
    if (balanced && random) {
        CHECK(step_mean(balanced) < step_mean(random), "stratified + presort step %.4g s < random %.4g s",
              step_mean(balanced), step_mean(random));
        CHECK(field(balanced, "idle_s") < field(random, "idle_s"), "less idle time: %.4g < %.4g",
              field(balanced, "idle_s"), field(random, "idle_s"));
    }
    s.data.sampling = presorted;
    s.optimizer.clip = ET_CLIP_AFTER_ALLREDUCE;
    json_t *after = simulate(&s, 2, 0);
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
    et_error err;
    if (et_scenario_load(SCEN("mlperf-bert-8.json"), &s, &err)) return;
    s.data.unpadded = false; /* equal batches: only the noise below makes stragglers */
    s.simulation.straggler_sigma = 0.05;
    json_t *a = simulate(&s, 4, 0), *b = simulate(&s, 4, 0);
    if (a && b) {
        char *ta = json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(17));
        char *tb = json_dumps(b, JSON_COMPACT | JSON_REAL_PRECISION(17));
        CHECK(ta && tb && strcmp(ta, tb) == 0, "same scenario and seed give identical output");
        free(ta);
        free(tb);
    }
    s.simulation.seed = 12345;
    json_t *c = simulate(&s, 4, 0);
    s.simulation.straggler_sigma = 0;
    json_t *calm = simulate(&s, 4, 0);
    if (a && c && calm) {
        CHECK(step_mean(a) != step_mean(c), "another seed draws other stragglers");
        CHECK(step_mean(a) > step_mean(calm), "stragglers slow the step: %g > %g", step_mean(a),
              step_mean(calm));
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

/* Mirroring and the most contended link are exact: on clusters drawn at random (nodes, GPUs per node,
 * NICs, leaves, oversubscription, algorithm, ZeRO, tensor parallelism, stragglers, calibration factors),
 * the simulation gives the same JSON whether flows are mirrored or all played. */
static void check_mirroring_random(int cases)
{
    static const char *const algos[] = {"auto", "ring", "tree", "hierarchical"};
    static const int nodes[] = {2, 3, 5, 8, 12, 16}, gpus[] = {2, 4, 8}, leaf[] = {1, 2, 3, 4, 8, 16};
    static const double oversub[] = {1, 1, 1.5, 2, 4}, bw[] = {1, 1, 0.83}, lat[] = {1, 1, 1.7};
    for (int c = 0; c < cases; c++) {
        int g = gpus[draw(3)], tensor = draw(4) == 0 ? 2 : 1;
        char text[1024], path[] = "/tmp/et-test-mirroring-XXXXXX";
        snprintf(
            text, sizeof text,
            "{\"name\": \"random-%d\", \"model\": {\"preset\": \"bert-base\"}, \"data\": {\"seq_len\": 128},"
            " \"batch\": {\"local\": 4}, \"optimizer\": {\"name\": \"adam\", \"clip\": \"%s\"},"
            " \"precision\": \"fp16\", \"parallelism\": {\"allreduce\": \"%s\", \"zero_stage\": %d, "
            "\"tensor\": %d},"
            " \"cluster\": {\"device\": \"a100-sxm4-80gb\", \"nodes\": %d, \"gpus_per_node\": %d,"
            " \"nics_per_node\": %d, \"nic_Gbps\": 200, \"bandwidth_factor\": %g, \"latency_factor\": %g,"
            " \"fabric\": {\"nodes_per_leaf\": %d, \"oversubscription\": %g}},"
            " \"target\": {\"steps\": 1}, \"simulation\": {\"steps\": 2, \"seed\": %d, \"straggler_sigma\": "
            "%g}}",
            c, draw(2) ? "per_bucket" : "after_allreduce", algos[draw(4)], draw(3) == 0 ? 1 + draw(3) : 0,
            tensor, nodes[draw(6)], g, 1 + draw(4), bw[draw(3)], lat[draw(3)], leaf[draw(6)],
            oversub[draw(5)], 1 + draw(1000), draw(3) * 0.05);
        int fd = mkstemp(path);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f || fputs(text, f) < 0 || fclose(f)) {
            CHECK(0, "cannot write a scenario to %s", path);
            return;
        }
        et_scenario s;
        et_error err;
        int loaded = et_scenario_load(path, &s, &err) == 0;
        unlink(path);
        CHECK(loaded, "random case %d loads: %s\n%s", c, loaded ? "" : err.text, text);
        if (!loaded) continue;
        sim_options mirrored = {.steps = 2}, all = {.steps = 2, .all_flows = true};
        json_t *a = NULL, *b = NULL;
        if (sim_run(&s, &mirrored, &a, &err) || sim_run(&s, &all, &b, &err))
            CHECK(0, "random case %d simulates: %s", c, err.text);
        else
            CHECK(json_equal(a, b), "random case %d: the same simulation with every flow played\n%s", c,
                  text);
        json_decref(a);
        json_decref(b);
        et_scenario_free(&s);
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
    check_mirroring_random(16);
    return check_summary("test_sim");
}

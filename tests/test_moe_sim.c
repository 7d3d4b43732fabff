/* Mixture of experts in the simulator: the experts' all-to-all played as flows equals its closed form on a
 * uniform network when nothing else is on the links; it slows down when the data-parallel all-reduce
 * shares its links (a figure that would be 1.000 if contention were ignored); an uneven routing makes the
 * busiest expert rank everyone's straggler; the simulation is deterministic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "check.h"
#include "check_scenario.h"
#include "check_sim.h"
#include "scenario.h"
#include "step_sim.h"

#define DATA(name) ET_SOURCE_DIR "/tests/data/" name

static double a2a(const json_t *sim, const char *key)
{
    return json_number_value(json_object_get(json_object_get(sim, "alltoall"), key));
}

int main(void)
{
    et_scenario s;
    if (check_scenario_load(DATA("moe-a2a-8.json"), &s)) return check_summary("test_moe_sim");
    et_error err;
    et_estimate e;

    /* nothing else on the links (buckets reduced after backward): flows = closed form, and the step equals
     * the analytic one */
    s.parallel.overlap = false;
    CHECK(et_analytic_estimate(&s, &e, &err) == 0, "analytic estimate: %s", err.text);
    json_t *alone = check_simulate(&s, 2, 0);
    if (alone) {
        CHECK(a2a(alone, "per_step") == 4 * s.model.layers * s.batch.grad_accum, "%g all-to-alls a step",
              a2a(alone, "per_step"));
        CHECK_REL(a2a(alone, "time_s"), a2a(alone, "closed_form_s"), 1e-6,
                  "across nodes, alone: all-to-all flows vs the closed form");
        CHECK_REL(a2a(alone, "time_s"), e.ep_comm, 1e-6, "all-to-all time vs the analytic estimate's");
        CHECK_REL(check_step_mean(alone), e.step_time, 0.02, "simulated step vs analytic, no overlap");
    }
    /* inside one node (expert parallelism 4 of 4 GPUs): NVLink ports only; the expert buckets are then
     * reduced over the 2 ranks holding the same experts (one per node), as flows equal to their closed form
     */
    s.parallel.expert = 4;
    json_t *intra = check_simulate(&s, 1, 0);
    if (intra) {
        CHECK_REL(a2a(intra, "time_s"), a2a(intra, "closed_form_s"), 1e-6, "inside a node, alone");
        const json_t *buckets = json_object_get(intra, "buckets");
        for (size_t k = 0; k < json_array_size(buckets); k++) {
            const json_t *bk = json_array_get(buckets, k);
            double t = json_number_value(json_object_get(bk, "time_s"));
            double closed = json_number_value(json_object_get(bk, "closed_form_s"));
            CHECK(fabs(t - closed) <= 1e-6 * closed, "bucket %zu: %.6g s simulated, %.6g s closed form", k, t,
                  closed);
        }
    }
    json_decref(intra);
    s.parallel.expert = 8;

    /* the all-to-alls beside a partner micro-batch (software.ep_overlap): with one micro-batch there is no
     * partner and nothing is hidden; with four, both engines charge the exposed share of the closed form, so
     * their steps agree, and less is exposed */
    s.software.ep_overlap = true;
    et_estimate hidden;
    CHECK(et_analytic_estimate(&s, &hidden, &err) == 0, "analytic estimate: %s", err.text);
    CHECK_REL(hidden.ep_comm, e.ep_comm, 1e-12, "ep_overlap with one micro-batch: nothing to pair");
    s.batch.grad_accum = 4;
    CHECK(et_analytic_estimate(&s, &hidden, &err) == 0, "analytic estimate: %s", err.text);
    json_t *paired = check_simulate(&s, 1, 0);
    if (paired) {
        CHECK_REL(check_step_mean(paired), hidden.step_time, 0.02, "ep_overlap: simulated step vs analytic");
        /* across 100 Gb/s NICs a pair's all-to-alls outlast its compute: what is hidden is the compute's
         * length */
        CHECK(hidden.ep_comm < 4 * e.ep_comm,
              "ep_overlap hides some of 4 micro-batches' all-to-alls: %g s of %g", hidden.ep_comm,
              4 * e.ep_comm);
    }
    json_decref(paired);
    s.software.ep_overlap = false;
    s.batch.grad_accum = 1;
    /* a token once to each GPU and node it reaches (software.ep_dedup): both engines by the closed form,
     * 22/28 of a token across the NICs instead of one */
    s.software.ep_dedup = true;
    et_estimate dedup;
    CHECK(et_analytic_estimate(&s, &dedup, &err) == 0, "analytic estimate: %s", err.text);
    json_t *once = check_simulate(&s, 1, 0);
    if (once) {
        CHECK_REL(check_step_mean(once), dedup.step_time, 0.02, "ep_dedup: simulated step vs analytic");
        CHECK(dedup.ep_comm < e.ep_comm, "ep_dedup sends less: %g < %g s", dedup.ep_comm, e.ep_comm);
    }
    json_decref(once);
    s.software.ep_dedup = false;

    /* overlap: the last backward's all-to-alls share the NICs with the bucket all-reduces */
    s.parallel.overlap = true;
    json_t *shared = check_simulate(&s, 2, 0);
    if (shared && alone) {
        double slowdown = a2a(shared, "time_s") / a2a(shared, "closed_form_s");
        printf("contention: all-to-all %.3f ms with the all-reduce on its links, %.3f ms alone (x%.3f)\n",
               a2a(shared, "time_s") * 1e3, a2a(alone, "time_s") * 1e3, slowdown);
        CHECK(slowdown > 1.01, "the all-reduce slows the all-to-all down: x%.4f", slowdown);
        json_t *again = check_simulate(&s, 2, 0);
        char *x = json_dumps(shared, JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
        char *y = again ? json_dumps(again, JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
        CHECK(x && y && strcmp(x, y) == 0, "the same scenario and seed simulate byte-identically");
        free(x);
        free(y);
        json_decref(again);
    }

    /* dropless, Zipf-skewed routing: the busiest expert rank sets the pace at every all-to-all */
    s.model.moe.capacity_factor = 0;
    json_t *uniform = check_simulate(&s, 2, 0);
    s.model.moe.routing = ET_ROUTING_ZIPF;
    s.model.moe.skew = 1;
    json_t *skewed = check_simulate(&s, 2, 0);
    CHECK(et_analytic_estimate(&s, &e, &err) == 0, "analytic estimate: %s", err.text);
    if (uniform && skewed) {
        printf("routing: uniform %.3f ms a step, zipf(1) %.3f ms, imbalance E[max/mean] %.3f\n",
               check_step_mean(uniform) * 1e3, check_step_mean(skewed) * 1e3, e.moe_imbalance);
        CHECK(e.moe_imbalance > 1.5, "zipf(1) over 8 experts: imbalance %.3f", e.moe_imbalance);
        CHECK(check_step_mean(skewed) > check_step_mean(uniform) * 1.05, "a skewed routing costs time");
        CHECK(a2a(skewed, "wait_s") > a2a(uniform, "wait_s"), "ranks wait longer for the busiest");
        CHECK(a2a(skewed, "time_s") > a2a(uniform, "time_s"), "the busiest rank receives more");
    }
    json_decref(alone);
    json_decref(shared);
    json_decref(uniform);
    json_decref(skewed);
    et_scenario_free(&s);
    return check_summary("test_moe_sim");
}

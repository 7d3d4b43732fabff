/* etcalib's fit on synthetic data with known answers: measured.json files whose op times are the cost
 * model's predictions under a known profile (the host CPU profile with every fitted term changed by a known
 * factor), for a decoder and an encoder plan; fitted back from the unchanged profile, every op class and the
 * step must be predicted within 1%, and the identifiable terms recovered within 1%. Also: a run from
 * another plan and a run from another kind of device are refused with the file and the reason. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "calib_fit.h"
#include "check.h"
#include "checksum.h"
#include "scenario_graph.h"

/* Writes a measured.json for `plan_path` whose op times are `truth`'s predictions. */
static int write_synthetic(const char *plan_path, const et_device_profile *truth, const char *out)
{
    et_plan plan;
    et_error err;
    if (et_plan_load(plan_path, &plan, &err)) return -1;
    et_graph_options o = et_plan_graph_options(&plan.s);
    et_graph g;
    if (et_graph_build(&plan.s.model, &o, &g, &err)) return -1;
    const int steps = 3, micro = (int)(plan.s.batch.global / plan.s.batch.local);
    json_t *ops = json_array(), *shapes = json_array();
    et_batch_shape base = et_batch_expected(&plan.s);
    et_batch_shape b[3][8];
    for (int s = 0; s < steps; s++) {
        json_t *m = json_array();
        for (int k = 0; k < micro && k < 8; k++) { /* batches of a few sizes, as real steps have */
            b[s][k] = base;
            const double f = 0.8 + 0.1 * ((s + k) % 4);
            b[s][k].tokens *= f, b[s][k].tokens_sq *= f * f, b[s][k].predictions *= f;
            json_array_append_new(m, json_pack("[f, f, f, f]", b[s][k].sequences, b[s][k].tokens,
                                               b[s][k].tokens_sq, b[s][k].predictions));
        }
        json_array_append_new(shapes, m);
    }
    double step = 0, *per_step = malloc(3 * (size_t)g.n_ops * sizeof *per_step);
    for (int s = 0; s < steps; s++)
        et_step_op_times(&g, b[s], micro, truth, plan.s.precision, per_step + (size_t)s * g.n_ops);
    for (int i = 0; i < g.n_ops; i++) { /* the median of three steps */
        const double a = per_step[i], c = per_step[g.n_ops + i], d = per_step[2 * g.n_ops + i];
        const double med = fmax(fmin(a, c), fmin(fmax(a, c), d));
        step += med;
        json_array_append_new(
            ops, json_pack("{s:s, s:[{s:i, s:f}]}", "id", g.ops[i].id, "ranks", "rank", 0, "median_s", med));
    }
    free(per_step);
    unsigned long long h = 0;
    char hex[17];
    et_file_xxh64(plan_path, &h, &err);
    et_xxh64_hex(h, hex);
    json_t *j = json_pack("{s:s, s:i, s:s, s:s, s:s, s:i, s:{s:f}, s:o, s:o}", "tool", "etrun",
                          "format_version", 2, "plan_file", plan_path, "plan_xxh64", hex, "backend", "cpu",
                          "ranks", 1, "step_time_s", "median", step, "ops", ops, "batch_shapes", shapes);
    int rc = json_dump_file(j, out, 0);
    json_decref(j);
    et_graph_free(&g);
    et_plan_free(&plan);
    return rc;
}

static void check_fit(void)
{
    et_error err;
    et_device_profile base, truth, fit;
    if (et_device_profile_load(ET_SOURCE_DIR "/scenarios/profiles/host-cpu.json", &base, &err)) {
        CHECK(0, "profile loads: %s", err.text);
        return;
    }
    /* cache levels of 16 and 64 KiB, so that the tiny plans' ops stream from every level and memory */
    base.cache_levels = 2;
    base.cache_bytes[0] = 16384, base.cache_bytes[1] = 65536;
    base.cache_bandwidth[1] = 0.4 * base.cache_bandwidth[0];
    truth = base;
    calib_terms t = calib_terms_of(&base, ET_FP32);
    t.gemm_rate *= 0.62, t.gemm_half *= 2.5, t.bandwidth *= 1.8, t.vector_rate *= 0.4, t.overhead *= 3;
    t.special_rate *= 1.5, t.cache_bandwidth[0] *= 0.7, t.cache_bandwidth[1] *= 1.3, t.attention *= 0.6;
    calib_terms_apply(&t, ET_FP32, &truth);
    const char *plans[] = {ET_SOURCE_DIR "/tests/data/tiny-gpt-plan.json",
                           ET_SOURCE_DIR "/tests/data/tiny-bert-plan.json"};
    char files[2][64];
    et_measured_run runs[2];
    int loaded = 0;
    for (int i = 0; i < 2; i++) {
        snprintf(files[i], sizeof files[i], "synthetic-%d.json", i);
        CHECK(write_synthetic(plans[i], &truth, files[i]) == 0, "synthetic run %d written", i);
        if (et_measured_run_load(files[i], &base, &runs[i], &err) == 0)
            loaded++;
        else
            CHECK(0, "synthetic run loads: %s", err.text);
    }
    if (loaded < 2) return;
    int it;
    const calib_data data = {runs, 2, NULL, 0, ET_FP32};
    const double before = calib_objective(&data, &base), after = calib_fit(&data, &base, &fit, &it, NULL);
    printf("fit: objective %.3g -> %.3g in %d iterations\n", before, after, it);
    CHECK(after < 1e-6 * before, "the fit reaches the known profile (objective %.3g from %.3g)", after,
          before);
    for (int r = 0; r < 2; r++) {
        const int n = runs[r].graph.n_ops;
        double *pred = calloc((size_t)n, sizeof *pred), m[CALIB_CLASS_COUNT] = {0},
               p[CALIB_CLASS_COUNT] = {0};
        et_measured_run_predict(&runs[r], &fit, pred);
        double ms = 0, ps = 0;
        for (int i = 0; i < n; i++) {
            const calib_class c = calib_class_of(runs[r].graph.ops[i].kind);
            m[c] += runs[r].measured[i], p[c] += pred[i], ms += runs[r].measured[i], ps += pred[i];
        }
        CHECK_REL(ps, ms, 0.01, "fitted step of the synthetic run");
        for (int c = 0; c < CALIB_CLASS_COUNT; c++)
            if (m[c] > 0) CHECK_REL(p[c], m[c], 0.01, calib_class_names[c]);
        free(pred);
    }
    calib_terms f = calib_terms_of(&fit, ET_FP32), want = calib_terms_of(&truth, ET_FP32);
    CHECK_REL(f.gemm_rate, want.gemm_rate, 0.01, "GEMM rate recovered");
    CHECK_REL(f.gemm_half, want.gemm_half, 0.01, "GEMM half dimension recovered");
    CHECK_REL(f.bandwidth, want.bandwidth, 0.01, "bandwidth recovered");
    CHECK_REL(f.cache_bandwidth[0], want.cache_bandwidth[0], 0.01, "first cache level's bandwidth recovered");
    CHECK_REL(f.cache_bandwidth[1], want.cache_bandwidth[1], 0.01,
              "second cache level's bandwidth recovered");
    CHECK_REL(f.special_rate, want.special_rate, 0.01, "special-function rate recovered");
    CHECK_REL(f.attention, want.attention, 0.01, "attention products' efficiency recovered");
    for (int r = 0; r < 2; r++)
        et_measured_run_free(&runs[r]);

    /* refusals: another plan's ops, another kind of device */
    et_measured_run other;
    FILE *fin = fopen(files[0], "r");
    json_t *j = json_loadf(fin, 0, NULL);
    fclose(fin);
    json_object_set_new(j, "plan_file", json_string(plans[1]));
    json_dump_file(j, "other-plan.json", 0);
    CHECK(et_measured_run_load("other-plan.json", &base, &other, &err) != 0 &&
              strstr(err.text, "another plan"),
          "a run from another plan is refused: %s", err.text);
    json_object_set_new(j, "plan_file", json_string(plans[0]));
    json_object_set_new(j, "backend", json_string("cuda"));
    json_dump_file(j, "other-device.json", 0);
    CHECK(et_measured_run_load("other-device.json", &base, &other, &err) != 0 &&
              strstr(err.text, "describes a cpu device"),
          "a run on another kind of device is refused: %s", err.text);
    json_decref(j);
}

int main(void)
{
    check_fit();
    return check_summary("test_calib");
}

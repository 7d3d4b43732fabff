/* report: etsim's outputs: the human summary (units in every header) and the JSON report.
 *
 * Contract: report_json_analytic() returns a new Jansson object (caller decrefs) holding the scenario
 * summary and the estimate; report_print_analytic() writes the human summary. Neither fails except on out
 * of memory (NULL). */
#ifndef ET_REPORT_H
#define ET_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "analytic.h"
#include "scenario.h"
#include "sim_result.h"

json_t *report_json_scenario(const et_scenario *s);
json_t *report_json_estimate(const et_estimate *e);
json_t *report_json_analytic(const et_scenario *s, const et_estimate *e);
json_t *report_json_analytic_core(const et_scenario *s, const et_estimate *e);
/* What the prediction leaves out (model/caveats.h): a JSON array, and the text report's "left out" line. */
json_t *report_json_caveats(const et_scenario *s);
/* The simulated run's headline figures (what the text prints), and them as a new JSON object: step_s, mfu,
 * tflops_per_gpu, samples_per_second, tokens_per_second, train_s, eval_s, time_to_train_s, gpu_hours,
 * time_to_train_with_failures_s. */
typedef struct report_headline {
    double step, mfu, tflops_per_gpu, samples_per_second, tokens_per_second, train, eval, time_to_train,
        gpu_hours, time_to_train_with_failures;
} report_headline;
report_headline report_sim_headline(const et_scenario *s, const et_estimate *e, const sim_result *sim);
json_t *report_headline_json(const report_headline *h);
/* The JSON report's "simulation" section: what the simulation measured (sim_result_json) and its headline
 * figures; NULL when out of memory. */
json_t *report_json_simulation(const et_scenario *s, const et_estimate *e, const sim_result *sim);

/* Version of the JSON reports' layout (docs/report-format.md); raised when a key changes meaning. */
#define REPORT_FORMAT_VERSION 1
void report_print_caveats(FILE *out, const et_scenario *s);
/* Tensor-train layers (factors, ranks, parameters, chosen contraction order); prints when out != NULL. */
json_t *report_tensor_train(FILE *out, const et_scenario *s);
void report_print_header(FILE *out, const et_scenario *s, const et_estimate *e, const char *engine);
void report_print_memory(FILE *out, const et_memory *m);
void report_print_analytic(FILE *out, const et_scenario *s, const et_estimate *e);
/* Human summary of a simulated run: `sim` is what sim_run() measured. */
void report_print_simulated(FILE *out, const et_scenario *s, const et_estimate *e, const sim_result *sim);
/* The `count` most expensive ops of one micro-batch on stage 0 (time, FLOPs, bytes, share of the step). */
/* The `count` most expensive ops of one micro-batch of stage 0 (the optimizer apart), each op or, with
 * `by_layer`, each op summed over the layers; shares of the micro-batch's forward + backward. */
void report_print_top_ops(FILE *out, const et_scenario *s, int count, int by_layer);
/* Training time from a simulation: steps x mean simulated step, phase by phase under a rank schedule. */
double report_sim_train_time(const et_estimate *e, const sim_result *sim);
/* A number member of a JSON object (0 when absent). */
double report_num(const json_t *o, const char *key);
/* Writes a duration with a unit chosen for readability (s, min, h, days). */
void report_format_duration(char *buf, size_t size, double seconds);
/* Failures and checkpoints (model/resilience.h) for `work_s` seconds of failure-free training: the report's
 * "failures" line, and its JSON (estimate.goodput). */
void report_print_goodput(FILE *out, const et_scenario *s, const et_goodput *g, double work_s);
json_t *report_json_goodput(const et_goodput *g, double work_s);
/* The energy line: a step's and the run's (with failures and the PUE), emissions with a carbon intensity;
 * "not estimated" when the profile gives no power. */
void report_print_energy(FILE *out, const et_scenario *s, const et_estimate *e);

/* How far to trust a figure (model/error_band.h): the band of the published runs of the scenario's family
 * around `step_s` and `time_to_train_s`, or why there is none; as a report line and as JSON
 * (estimate.error_band). */
void report_print_band(FILE *out, const et_scenario *s, double step_s, double time_to_train_s);
json_t *report_json_band(const et_scenario *s, double step_s, double time_to_train_s);

#endif

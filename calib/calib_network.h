/* calib_network: the all-reduce closed forms (model/collectives.h) fitted to nccl-tests measurements. A
 * sample is one all-reduce of `bytes` over `nodes` x `per_node` GPUs taking `seconds`; the fit finds the
 * scenario cluster's `bandwidth_factor` (achieved over nominal link bandwidth, at most 1) and
 * `collective_latency_us` (NCCL's per-step software latency) minimising the squared log error, the
 * algorithm picked as NCCL's tuner does (auto: the faster of ring and tree). Samples of other sizes of
 * cluster than the scenario's are predicted on the scenario's cluster resized to them. */
#ifndef ET_CALIB_NETWORK_H
#define ET_CALIB_NETWORK_H

#include "et_error.h"
#include "scenario.h"

typedef struct calib_coll_sample {
    int nodes, per_node;
    double bytes, seconds;
} calib_coll_sample;

/* Rows of a calibset nccl.csv: all_reduce, value_type "measured", `gpu` naming one of the '|'-separated
 * names, numeric nodes, gpus_per_node and size_bytes, and time_us (or busbw_GBps). */
int calib_nccl_load(const char *path, const char *gpu_filter, calib_coll_sample **out, int *n, et_error *err);

/* nccl-tests' own output (all_reduce_perf's log as it prints it): the '#  Rank' lines give the GPUs
 * (their name checked against `gpu_filter` unless it is "any") and nodes (distinct hosts), each result row
 * a sample (the out-of-place time). calib_nccl_tests_is_log() tells such a file by its first lines
 * ("# nThread ..." or "# Collective test starting"). Another collective's run, rows that are not results
 * (line named) or fewer than two ranks are refused. */
int calib_nccl_tests_is_log(const char *path);
int calib_nccl_tests_load(const char *path, const char *gpu_filter, calib_coll_sample **out, int *n,
                          et_error *err);

/* The closed form's time of a sample on the scenario's cluster with the two terms. */
double calib_coll_predict(const et_scenario *s, const calib_coll_sample *x, double bandwidth_factor,
                          double step_latency_s);

/* Fits both terms; returns the mean squared log error. */
double calib_fit_network(const et_scenario *s, const calib_coll_sample *x, int n, double *bandwidth_factor,
                         double *step_latency_s);

#endif

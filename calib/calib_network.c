#include "calib_network.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib_csv.h"
#include "collectives.h"

double calib_coll_predict(const et_scenario *s, const calib_coll_sample *x, double bandwidth_factor,
                          double step_latency_s)
{
    et_scenario c = *s; /* a shallow copy, resized: nothing of it is freed */
    c.cluster.nodes = x->nodes;
    c.cluster.gpus_per_node = x->per_node;
    c.parallel.tensor = c.parallel.pipeline = 1;
    c.parallel.data = x->nodes * x->per_node;
    c.cluster.bandwidth_factor = bandwidth_factor;
    c.cluster.collective_step_latency = step_latency_s;
    et_comm_group g = et_dp_group(&c);
    return et_allreduce_time(&g, ET_COLL_AUTO, x->bytes, NULL);
}

static double objective(const et_scenario *s, const calib_coll_sample *x, int n, double bf, double lat)
{
    double f = 0;
    for (int i = 0; i < n; i++) {
        const double e = log(calib_coll_predict(s, &x[i], bf, lat)) - log(x[i].seconds);
        f += e * e;
    }
    return f / n;
}

double calib_fit_network(const et_scenario *s, const calib_coll_sample *x, int n, double *bandwidth_factor,
                         double *step_latency_s)
{
    /* a grid in log space, then a pattern search from its best point: two terms, a smooth objective */
    double best_bf = 1, best_lat = 4e-6, best = INFINITY;
    for (int i = 0; i <= 40; i++)
        for (int j = 0; j <= 40; j++) {
            const double bf = pow(10, -2 + 2.0 * i / 40), lat = pow(10, -7 + 4.0 * j / 40);
            const double f = objective(s, x, n, bf, lat);
            if (f < best) best = f, best_bf = bf, best_lat = lat;
        }
    for (double step = 0.05; step > 1e-7; step /= 2) {
        int moved = 1;
        while (moved) {
            moved = 0;
            const double tries[4][2] = {{step, 0}, {-step, 0}, {0, step}, {0, -step}};
            for (int t = 0; t < 4; t++) {
                const double bf = fmin(1, best_bf * exp(tries[t][0])), lat = best_lat * exp(tries[t][1]);
                const double f = objective(s, x, n, bf, lat);
                if (f < best - 1e-15) best = f, best_bf = bf, best_lat = lat, moved = 1;
            }
        }
    }
    *bandwidth_factor = best_bf;
    *step_latency_s = best_lat;
    return best;
}

int calib_nccl_load(const char *path, const char *gpu_filter, calib_coll_sample **out, int *n, et_error *err)
{
    *out = NULL, *n = 0;
    calib_csv *t = calib_csv_open(path, err);
    if (!t) return -1;
    char **head = t->head, **fl = t->row;
    const int nh = t->n_head;
    const int gpu = calib_csv_column(head, nh, "gpu"), coll = calib_csv_column(head, nh, "collective"),
              nodes = calib_csv_column(head, nh, "nodes"), per = calib_csv_column(head, nh, "gpus_per_node"),
              size = calib_csv_column(head, nh, "size_bytes"), time = calib_csv_column(head, nh, "time_us"),
              busbw = calib_csv_column(head, nh, "busbw_GBps"),
              kind = calib_csv_column(head, nh, "value_type");
    if (nh <= 0 || gpu < 0 || coll < 0 || nodes < 0 || per < 0 || size < 0 || time < 0 || busbw < 0 ||
        kind < 0) {
        calib_csv_close(t);
        return et_error_set(
            err, path, 1, 0, NULL,
            "not a calibset nccl.csv (gpu, collective, nodes, gpus_per_node, size_bytes, time_us, "
            "busbw_GBps, value_type expected)");
    }
    int cap = 64;
    calib_coll_sample *x = malloc((size_t)cap * sizeof *x);
    while (x && calib_csv_next(t)) {
        if (t->n_row < nh || strcmp(fl[coll], "all_reduce") != 0 || strcmp(fl[kind], "measured") != 0 ||
            !calib_csv_gpu_matches(fl[gpu], gpu_filter))
            continue;
        calib_coll_sample s = {(int)calib_csv_number(fl[nodes]), (int)calib_csv_number(fl[per]),
                               calib_csv_number(fl[size]), calib_csv_number(fl[time]) * 1e-6};
        const int ranks = s.nodes * s.per_node;
        if (s.seconds <= 0 && calib_csv_number(fl[busbw]) > 0 && ranks > 1) /* busbw = 2(N-1)/N bytes / t */
            s.seconds = 2.0 * (ranks - 1) / ranks * s.bytes / (calib_csv_number(fl[busbw]) * 1e9);
        if (s.nodes < 1 || s.per_node < 1 || ranks < 2 || s.bytes <= 0 || s.seconds <= 0) continue;
        if (*n == cap) {
            calib_coll_sample *grown = realloc(x, (size_t)(cap *= 2) * sizeof *grown);
            if (!grown) break;
            x = grown;
        }
        x[(*n)++] = s;
    }
    calib_csv_close(t);
    if (!x) return et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
    if (*n == 0) {
        free(x);
        return et_error_set(err, path, 0, 0, NULL, "no measured all_reduce row matches GPU \"%s\"",
                            gpu_filter);
    }
    *out = x;
    return 0;
}

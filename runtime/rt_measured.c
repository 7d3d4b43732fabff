#define _POSIX_C_SOURCE 200809L
#include "rt_measured.h"

#include "rt_blas.h"
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "checksum.h"
#include "quantile.h"

#include "et_git_commit.h" /* generated at build time: ET_GIT_COMMIT */

int rt_run_log_init(rt_run_log *log, const rt_model *m, int steps, int micro, long long first_step,
                    et_error *err)
{
    memset(log, 0, sizeof *log);
    log->n_ops = m->graph.n_ops, log->n_buckets = m->n_buckets, log->steps = steps;
    log->first_step = first_step;
    const size_t S = (size_t)(steps > 0 ? steps : 1);
    log->step_s = calloc(S, sizeof(double));
    log->loss = calloc(S, sizeof(double));
    log->grad_norm = calloc(S, sizeof(double));
    log->op_s = calloc(S * (size_t)log->n_ops, sizeof(double));
    log->op_predicted_s = calloc(S * (size_t)log->n_ops, sizeof(double));
    log->buckets = calloc(S * (size_t)(log->n_buckets > 0 ? log->n_buckets : 1), sizeof *log->buckets);
    log->micro = micro > 0 ? micro : 1;
    log->shapes = calloc(S * (size_t)log->micro, sizeof *log->shapes);
    if (!log->shapes || !log->step_s || !log->loss || !log->grad_norm || !log->op_s || !log->op_predicted_s ||
        !log->buckets) {
        rt_run_log_free(log);
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                 "out of memory for the run's records (%d steps)", steps);
    }
    return 0;
}

void rt_run_log_free(rt_run_log *log)
{
    free(log->step_s), free(log->loss), free(log->grad_norm), free(log->op_s), free(log->op_predicted_s);
    free(log->buckets), free(log->shapes);
    memset(log, 0, sizeof *log);
}

enum { STAT_MEDIAN, STAT_MIN, STAT_MAX, STAT_P10, STAT_P90, STAT_PREDICTED, N_STATS };

/* This rank's statistics per op over the measured steps. */
static void op_stats(const rt_run_log *log, double *stats, double *col)
{
    const int M = log->measured, n = log->n_ops;
    for (int i = 0; i < n; i++) {
        double *x = stats + (size_t)i * N_STATS;
        for (int k = 0; k < M; k++)
            col[k] = log->op_predicted_s[(size_t)k * n + i];
        x[STAT_PREDICTED] = et_quantile(col, M, 0.5);
        for (int k = 0; k < M; k++)
            col[k] = log->op_s[(size_t)k * n + i];
        x[STAT_MEDIAN] = et_quantile(col, M, 0.5);
        x[STAT_MIN] = M ? col[0] : 0;
        x[STAT_MAX] = M ? col[M - 1] : 0;
        x[STAT_P10] = et_quantile(col, M, 0.1);
        x[STAT_P90] = et_quantile(col, M, 0.9);
    }
}

rt_step_stats rt_run_log_step_stats(const rt_run_log *log)
{
    rt_step_stats st = {0, 0, 0};
    const int n = log->measured;
    double *v = n > 0 ? malloc((size_t)n * sizeof *v) : NULL;
    if (!v) return st;
    memcpy(v, log->step_s + (log->steps - n), (size_t)n * sizeof *v);
    st.median = et_quantile(v, n, 0.5); /* sorts v */
    st.min = v[0], st.max = v[n - 1];
    free(v);
    return st;
}

static void cpu_model(char *out, size_t size)
{
    snprintf(out, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            const char *v = strchr(line, ':');
            if (v) {
                v++;
                while (*v == ' ')
                    v++;
                snprintf(out, size, "%s", v);
                out[strcspn(out, "\n")] = 0;
            }
            break;
        }
    fclose(f);
}

static json_t *provenance(const rt_model *m, const rt_comm *comm)
{
    char host[256] = "unknown", cpu[256], date[32];
    gethostname(host, sizeof host - 1);
    cpu_model(cpu, sizeof cpu);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s}", "host", host, "cpu", cpu, "date", date,
                     "git_commit", ET_GIT_COMMIT, "backend", m->be->name, "communicator", comm->name, "ranks",
                     comm->size, "blas_threads", rt_blas_thread_count(), "blas_core", rt_cpu_blas_core());
}

/* One value a step; null where a value is not finite (JSON has no infinity: an fp16 step whose gradient
 * overflowed and was skipped), so the array stays aligned with the steps. */
static json_t *doubles(const double *v, int n)
{
    json_t *a = json_array();
    for (int k = 0; k < n; k++)
        json_array_append_new(a, isfinite(v[k]) ? json_real(v[k]) : json_null());
    return a;
}

/* Rank 0's buckets: bytes, parameters, and per measured step start, end and clipping norms. */
static json_t *communication(const rt_model *m, const rt_run_log *log)
{
    json_t *out = json_array();
    const int M = log->measured, nb = log->n_buckets;
    double *col = malloc((size_t)(M > 0 ? M : 1) * sizeof *col);
    for (int k = 0; k < nb && col; k++) {
        const et_bucket *b = &m->buckets[k];
        json_t *start = json_array(), *end = json_array(), *before = json_array(), *after = json_array();
        for (int s = 0; s < M; s++) {
            const rt_bucket_record *r = &log->buckets[(size_t)s * nb + k];
            json_array_append_new(start, json_real(r->start_s));
            json_array_append_new(end, json_real(r->end_s));
            json_array_append_new(before, json_real(r->norm_before));
            json_array_append_new(after, json_real(r->norm_after));
            col[s] = r->end_s - r->start_s;
        }
        size_t values = 0; /* the bucket's gradients, without the slices' alignment padding */
        for (int p = b->param_first; p < b->param_first + b->param_count; p++)
            values += (size_t)m->graph.params[p].dense;
        json_t *j =
            json_pack("{s:i, s:I, s:s, s:s, s:s, s:f, s:o, s:o}", "bucket", k, "bytes",
                      (json_int_t)(values * sizeof(float)), "first_param", m->graph.params[b->param_first].id,
                      "last_param", m->graph.params[b->param_first + b->param_count - 1].id, "ready_op",
                      m->graph.ops[b->ready_op].id, "median_duration_s", et_quantile(col, M, 0.5), "start_s",
                      start, "end_s", end);
        if (m->s->optimizer.clip == ET_CLIP_PER_BUCKET) {
            json_object_set_new(j, "norm_before_clip", before);
            json_object_set_new(j, "norm_after_clip", after);
        } else {
            json_decref(before), json_decref(after);
        }
        json_array_append_new(out, j);
    }
    free(col);
    return out;
}

/* Rank 0's batches per measured step: [[B, T, Q, P] per micro-batch], what etcalib re-predicts from. */
static json_t *batch_shapes(const rt_run_log *log)
{
    json_t *steps = json_array();
    for (int s = 0; s < log->measured; s++) {
        json_t *micro = json_array();
        for (int k = 0; k < log->micro; k++) {
            const et_batch_shape *b = &log->shapes[(size_t)s * log->micro + k];
            json_array_append_new(
                micro, json_pack("[f, f, f, f]", b->sequences, b->tokens, b->tokens_sq, b->predictions));
        }
        json_array_append_new(steps, micro);
    }
    return steps;
}

int rt_measured_write(const char *path, const char *plan_path, const et_plan *p, const rt_model *m,
                      rt_comm *comm, const rt_run_log *log, et_error *err)
{
    const int n_ops = log->n_ops, M = log->measured, world = comm->size;
    double *stats = calloc((size_t)n_ops * N_STATS, sizeof *stats), *all = NULL;
    double *col = malloc((size_t)(M > 0 ? M : 1) * sizeof *col);
    if (comm->rank == 0) all = malloc((size_t)world * n_ops * N_STATS * sizeof *all);
    int rc = (!stats || !col || (comm->rank == 0 && !all)) ? -1 : 0;
    if (!rc) op_stats(log, stats, col);
    if (comm->gather_doubles(comm, stats ? stats : col, stats ? n_ops * N_STATS : 0, all)) rc = -1;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double peak_rss = ru.ru_maxrss / 1024.0;
    comm->max_double(comm, &peak_rss);
    if (comm->rank == 0 && !rc) {
        json_t *ops = json_array();
        for (int i = 0; i < n_ops; i++) {
            const et_op *op = &m->graph.ops[i];
            json_t *ranks = json_array();
            for (int r = 0; r < world; r++) {
                const double *x = all + ((size_t)r * n_ops + i) * N_STATS;
                json_array_append_new(ranks, json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f}", "rank", r,
                                                       "median_s", x[STAT_MEDIAN], "min_s", x[STAT_MIN],
                                                       "max_s", x[STAT_MAX], "p10_s", x[STAT_P10], "p90_s",
                                                       x[STAT_P90], "predicted_s", x[STAT_PREDICTED]));
            }
            json_array_append_new(ops, json_pack("{s:s, s:s, s:s, s:f, s:o}", "id", op->id, "kind",
                                                 et_op_kind_names[op->kind], "phase",
                                                 et_phase_names[op->phase], "predicted_s",
                                                 all[(size_t)i * N_STATS + STAT_PREDICTED], "ranks", ranks));
        }
        const rt_step_stats st = rt_run_log_step_stats(log);
        const double med = st.median;
        json_t *j = json_pack(
            "{s:s, s:s, s:o, s:s, s:i, s:i, s:I, s:i, s:{s:f, s:f, s:f, s:f}, s:o, s:f, s:f, s:f, s:o, s:o, "
            "s:f, "
            "s:I, s:o, s:o}",
            "tool", "etrun", "plan", p->s.name, "provenance", provenance(m, comm), "backend", m->be->name,
            "ranks", world, "steps", log->steps, "first_step", (json_int_t)log->first_step, "warmup_steps",
            p->warmup_steps, "step_time_s", "median", med, "min", st.min, "max", st.max, "predicted_compute",
            log->predicted_step_s, "step_times_s", doubles(log->step_s, log->steps), "tokens_per_second",
            med > 0 ? log->tokens_per_step / med : 0, "model_flops_per_step", log->flops_per_step,
            "tflops_per_device", med > 0 ? log->flops_per_step / med / 1e12 : 0, "loss",
            doubles(log->loss, log->steps), "grad_norm", doubles(log->grad_norm, log->steps),
            "peak_memory_MiB", peak_rss, "parameters", (json_int_t)m->n_values, "ops", ops, "communication",
            communication(m, log));
        char *real = realpath(plan_path, NULL);
        if (j) {
            json_object_set_new(j, "format_version", json_integer(RT_MEASURED_FORMAT_VERSION));
            json_object_set_new(j, "plan_file", json_string(real ? real : plan_path));
            unsigned long long h;
            char hex[17];
            et_error herr;
            if (et_file_xxh64(plan_path, &h, &herr) == 0) {
                et_xxh64_hex(h, hex);
                json_object_set_new(j, "plan_xxh64", json_string(hex));
            }
            json_object_set_new(j, "device_profile", json_string(p->s.cluster.device.name));
            json_object_set_new(j, "batch_shapes", batch_shapes(log));
            json_object_set_new(j, "host_waits_per_step", json_integer((json_int_t)log->host_waits));
            if (log->stopped[0]) json_object_set_new(j, "stopped", json_string(log->stopped));
            if (p->s.precision ==
                ET_FP16) /* the dynamic loss scale: where it ended, the updates it skipped */
                json_object_set_new(j, "loss_scale",
                                    json_pack("{s:f, s:f, s:I}", "initial", p->hyper.loss_scale, "final",
                                              m->loss_scale, "skipped_steps", (json_int_t)m->skipped_steps));
        }
        free(real);
        rc = j ? et_atomic_write_json(path, j, err)
               : et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL, "out of memory");
        json_decref(j);
    } else if (rc) {
        et_error_set_code(err, ET_ERROR_MEMORY, path, 0, 0, NULL,
                          "out of memory collecting the measurements");
    }
    free(stats), free(all), free(col);
    comm->broadcast_int(comm, &rc);
    if (rc && comm->rank != 0) et_error_set(err, path, 0, 0, NULL, "rank 0 could not write the measurements");
    return rc;
}

/* etrun: trains a plan for real, one MPI rank per device (CPU backend: OpenBLAS + Open MPI), timing every
 * op of the cost model's graph. Only this file prints and exits. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "atomic_file.h"
#include "rt_checkpoint.h"
#include "rt_data.h"
#include "rt_model.h"
#include "rt_plan.h"
#include "wall_clock.h"

#define EXIT_INPUT 2

typedef struct options {
    const char *plan, *out, *save, *resume;
    int quiet;
} options;

static int rank = 0, world = 1;

static void fail_message(const et_error *err)
{
    if (rank != 0) return;
    fputs("etrun: error: ", stderr);
    et_error_print(stderr, err);
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->out = "measured.json";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = strcmp(a, "--out") == 0      ? &o->out
                            : strcmp(a, "--save") == 0   ? &o->save
                            : strcmp(a, "--resume") == 0 ? &o->resume
                                                         : NULL;
        if (slot) {
            if (++i >= argc) {
                if (!rank) fprintf(stderr, "etrun: %s needs a value\n", a);
                return -1;
            }
            *slot = argv[i];
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
        } else if (strcmp(a, "--help") == 0) {
            if (!rank)
                puts("usage: [mpirun -np N] etrun [--out measured.json] [--save DIR] [--resume DIR] "
                     "[--quiet] plan.json\n"
                     "  trains the plan (etsim --plan-out writes one) and writes per-op timings, losses and "
                     "step\n"
                     "  times to measured.json; --save writes a checkpoint every run.checkpoint_every steps "
                     "and at\n"
                     "  the end; --resume continues from one.");
            return 1;
        } else if (a[0] == '-') {
            if (!rank) fprintf(stderr, "etrun: unknown option %s\n", a);
            return -1;
        } else if (o->plan) {
            if (!rank) fprintf(stderr, "etrun: more than one plan given\n");
            return -1;
        } else {
            o->plan = a;
        }
    }
    if (!o->plan) {
        if (!rank) fprintf(stderr, "usage: etrun [options] plan.json (--help for more)\n");
        return -1;
    }
    return 0;
}

/* Gradient buckets: all-reduced (non-blocking, in backward order) as soon as backward finalises them. */
typedef struct reducer {
    rt_model *m;
    const rt_plan *plan;
    MPI_Request *req;
    int next;   /* next bucket to start */
    int active; /* only during the last micro-batch */
} reducer;

static size_t bucket_first(const rt_model *m, int k)
{
    return m->param_offset[m->buckets[k].param_first];
}

static size_t bucket_count(const rt_model *m, int k)
{
    const et_bucket *b = &m->buckets[k];
    int last = b->param_first + b->param_count - 1;
    return m->param_offset[last] + (size_t)m->graph.params[last].dense - bucket_first(m, k);
}

static void on_grad_ready(void *ctx, int op_index)
{
    reducer *r = ctx;
    if (!r->active) return;
    rt_model *m = r->m;
    while (r->next < m->n_buckets && m->buckets[r->next].ready_op == op_index) {
        int k = r->next++;
        size_t first = bucket_first(m, k), count = bucket_count(m, k);
        if (r->plan->s.optimizer.clip == ET_CLIP_PER_BUCKET) {
            /* clip this bucket by its own local norm before it is reduced: no wait for the last bucket */
            double norm = sqrt(rt_model_grad_sq(m, first, count)), max = r->plan->s.optimizer.max_grad_norm;
            if (norm > max) rt_model_scale_grads(m, first, count, max / (norm + 1e-6));
        }
        if (world > 1)
            MPI_Iallreduce(MPI_IN_PLACE, m->grads + first, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                           &r->req[k]);
        else
            r->req[k] = MPI_REQUEST_NULL;
    }
    if (world > 1 && r->next > 0) { /* let MPI progress the reductions under the rest of backward */
        int done;
        MPI_Testall(r->next, r->req, &done, MPI_STATUSES_IGNORE);
    }
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, compare_double);
    int i = (int)floor(q * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* measured.json on rank 0: per op and rank, median and spread of the per-step times after warm-up. */
static int write_measured(const options *o, const rt_plan *p, const rt_model *m, const double *op_steps,
                          int measured_steps, const double *step_times, const double *losses, int n_steps,
                          double tokens_per_step, et_error *err)
{
    const int n_ops = m->graph.n_ops, M = measured_steps;
    double *stats = calloc((size_t)n_ops * 5, sizeof *stats), *all = NULL;
    double *col = malloc((size_t)(M > 0 ? M : 1) * sizeof *col);
    for (int i = 0; i < n_ops && M > 0 && stats && col; i++) {
        for (int k = 0; k < M; k++)
            col[k] = op_steps[(size_t)k * n_ops + i];
        stats[i * 5 + 0] = quantile(col, M, 0.5);
        stats[i * 5 + 1] = col[0];
        stats[i * 5 + 2] = col[M - 1];
        stats[i * 5 + 3] = quantile(col, M, 0.1);
        stats[i * 5 + 4] = quantile(col, M, 0.9);
    }
    if (rank == 0) all = malloc((size_t)world * n_ops * 5 * sizeof *all);
    MPI_Gather(stats, n_ops * 5, MPI_DOUBLE, all, n_ops * 5, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss = ru.ru_maxrss / 1024.0, peak_rss;
    MPI_Reduce(&rss, &peak_rss, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int rc = 0;
    if (rank == 0) {
        json_t *ops = json_array(), *loss = json_array();
        for (int i = 0; i < n_ops; i++) {
            const et_op *op = &m->graph.ops[i];
            json_t *ranks = json_array();
            for (int r = 0; r < world; r++) {
                const double *x = all + ((size_t)r * n_ops + i) * 5;
                json_array_append_new(ranks,
                                      json_pack("{s:i, s:f, s:f, s:f, s:f, s:f}", "rank", r, "median_s", x[0],
                                                "min_s", x[1], "max_s", x[2], "p10_s", x[3], "p90_s", x[4]));
            }
            json_array_append_new(ops, json_pack("{s:s, s:s, s:s, s:o}", "id", op->id, "kind",
                                                 et_op_kind_names[op->kind], "phase",
                                                 et_phase_names[op->phase], "ranks", ranks));
        }
        double *st = malloc((size_t)(n_steps > 0 ? n_steps : 1) * sizeof *st);
        int ms = 0;
        for (int k = 0; k < n_steps; k++) {
            json_array_append_new(loss, json_real(losses[k]));
            if (k >= p->warmup_steps) st[ms++] = step_times[k];
        }
        double med = ms ? quantile(st, ms, 0.5) : 0;
        json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:{s:f, s:f, s:f}, s:f, s:o, s:f, s:I, s:o}",
                              "tool", "etrun", "plan", p->s.name, "backend", "cpu", "ranks", world, "steps",
                              n_steps, "warmup_steps", p->warmup_steps, "step_time_s", "median", med, "min",
                              ms ? st[0] : 0, "max", ms ? st[ms - 1] : 0, "tokens_per_second",
                              med > 0 ? tokens_per_step / med : 0, "loss", loss, "peak_memory_MiB", peak_rss,
                              "parameters", (json_int_t)m->n_params, "ops", ops);
        rc = et_atomic_write_json(o->out, j, err);
        json_decref(j);
        free(st);
    }
    free(stats);
    free(all);
    free(col);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    options o;
    int a = parse_args(argc, argv, &o);
    if (a) {
        MPI_Finalize();
        return a > 0 ? 0 : EXIT_INPUT;
    }
    et_error err;
    rt_plan plan;
    rt_token_file file = {0};
    rt_data data;
    rt_model model;
    memset(&model, 0, sizeof model);
    int status = 0;
    if (rt_plan_load(o.plan, &plan, &err)) {
        fail_message(&err);
        MPI_Finalize();
        return EXIT_INPUT;
    }
    if ((plan.data_from_file &&
         rt_token_file_load(plan.data_file, plan.s.model.vocab, plan.s.data.seq_len, &file, &err)) ||
        rt_data_init(&data, &plan.s, world, rank, plan.seed, plan.data_from_file ? &file : NULL, &err) ||
        rt_model_init(&model, &plan.s, plan.seed, &err)) {
        fail_message(&err);
        rt_plan_free(&plan);
        MPI_Finalize();
        return EXIT_INPUT;
    }
    long long start = 0;
    if (o.resume && rt_checkpoint_load(o.resume, &model, &start, &err)) {
        fail_message(&err);
        status = EXIT_INPUT;
        goto finish;
    }
    const int steps = plan.steps, n_ops = model.graph.n_ops;
    double *op_steps = calloc((size_t)steps * n_ops, sizeof *op_steps);
    double *step_times = calloc((size_t)steps, sizeof *step_times),
           *losses = calloc((size_t)steps, sizeof *losses);
    reducer red = {&model, &plan, calloc((size_t)model.n_buckets + 1, sizeof(MPI_Request)), 0, 0};
    rt_batch batch = {0};
    double tokens_per_step = 0;
    int progress = !o.quiet && rank == 0 && isatty(2), measured = 0;
    for (long long step = start; step < steps; step++) {
        double t0 = et_wall_seconds();
        rt_model_begin_step(&model);
        double norm = rt_data_global_predictions(&data, (int)step), tokens = 0;
        red.next = 0;
        for (int micro = 0; micro < data.accum; micro++) {
            red.active = micro == data.accum - 1;
            if (rt_data_batch(&data, (int)step, micro, &batch) ||
                rt_model_step_micro(&model, &batch, norm, on_grad_ready, &red)) {
                et_error_set(&err, o.plan, 0, 0, NULL, "out of memory at step %lld", step);
                fail_message(&err);
                status = 1;
                goto done;
            }
            tokens += batch.T;
        }
        if (world > 1) MPI_Waitall(red.next, red.req, MPI_STATUSES_IGNORE);
        double loss = model.loss_sum, all_tokens = tokens;
        if (world > 1) {
            MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            MPI_Allreduce(MPI_IN_PLACE, &all_tokens, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
        if (plan.s.optimizer.clip == ET_CLIP_AFTER_ALLREDUCE) {
            /* every rank holds the same reduced gradient: the global norm needs no further communication */
            double total = sqrt(rt_model_grad_sq(&model, 0, model.n_params)),
                   max = plan.s.optimizer.max_grad_norm;
            if (total > max) rt_model_scale_grads(&model, 0, model.n_params, max / (total + 1e-6));
        }
        rt_model_update(&model, &plan.hyper);
        step_times[step] = et_wall_seconds() - t0;
        losses[step] = loss / norm;
        tokens_per_step = all_tokens;
        if (step >= plan.warmup_steps)
            memcpy(op_steps + (size_t)measured++ * n_ops, model.op_time, (size_t)n_ops * sizeof *op_steps);
        if (progress)
            fprintf(stderr, "etrun: step %lld/%d  loss %.4f  %.1f ms  %.0f tokens/s\n", step + 1, steps,
                    losses[step], step_times[step] * 1e3, all_tokens / step_times[step]);
        if (o.save &&
            ((plan.checkpoint_every > 0 && (step + 1) % plan.checkpoint_every == 0) || step + 1 == steps)) {
            int rc = rank == 0 ? rt_checkpoint_save(o.save, &model, step + 1, &err) : 0;
            MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (rc) {
                fail_message(&err);
                status = 1;
                goto done;
            }
        }
    }
    if (write_measured(&o, &plan, &model, op_steps, measured, step_times + start, losses + start,
                       (int)(steps - start), tokens_per_step, &err)) {
        fail_message(&err);
        status = 1;
    }
done:
    rt_batch_free(&batch);
    free(op_steps), free(step_times), free(losses), free(red.req);
finish:
    rt_model_free(&model);
    rt_data_free(&data);
    rt_token_file_free(&file);
    rt_plan_free(&plan);
    MPI_Finalize();
    return status;
}

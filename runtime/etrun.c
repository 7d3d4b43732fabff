/* etrun: trains a plan for real, one MPI rank per device, on a backend (rt_backend.h; CPU: OpenBLAS) with
 * a communicator (rt_comm.h; MPI), timing every op of the cost model's graph. Only this file prints and
 * exits. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "quantile.h"
#include "rt_checkpoint.h"
#include "rt_comm.h"
#include "rt_data.h"
#include "rt_measured.h"
#include "rt_model.h"
#include "rt_reducer.h"
#include "wall_clock.h"

#define EXIT_INPUT 2
#define EXIT_DIVERGED 4

typedef struct options {
    const char *plan, *out, *save, *resume, *backend;
    int quiet, log_every, steps; /* steps: --steps N (0: the plan's run.steps) */
} options;

static int rank = 0;

static void fail_message(const et_error *err)
{
    if (rank != 0) return;
    fputs("etrun: error: ", stderr);
    et_error_print(stderr, err);
}

static const char usage[] =
    "usage: [mpirun -np N] etrun [--out measured.json] [--backend auto|cpu|cuda] [--log-every N]\n"
    "                            [--steps N] [--save DIR] [--resume DIR] [--quiet] plan.json | --info\n"
    "  trains the plan (etsim --plan-out writes one) and writes per-op timings beside the cost model's\n"
    "  predictions, losses, step times and communication timings to measured.json. Rank 0 prints a\n"
    "  progress line every N steps (default: run.log_every, else about ten a run) and a summary.\n"
    "  --steps N runs N steps instead of the plan's run.steps (its warm-up steps stay, fewer if N is "
    "small).\n"
    "  --save DIR writes a checkpoint every run.checkpoint_every steps (DIR/step-N) and at the end\n"
    "  (DIR); --resume DIR continues from one.\n"
    "exit status: 0 ok, 2 bad input (nothing run), 4 training diverged (a NaN or inf loss or gradient\n"
    "  norm: the run stops, measured.json keeps the steps before), 1 other errors";

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->out = "measured.json";
    o->log_every = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = strcmp(a, "--out") == 0       ? &o->out
                            : strcmp(a, "--save") == 0    ? &o->save
                            : strcmp(a, "--resume") == 0  ? &o->resume
                            : strcmp(a, "--backend") == 0 ? &o->backend
                                                          : NULL;
        if (slot || strcmp(a, "--log-every") == 0 || strcmp(a, "--steps") == 0) {
            if (++i >= argc) {
                if (!rank) fprintf(stderr, "etrun: %s needs a value\n", a);
                return -1;
            }
            if (slot) {
                *slot = argv[i];
                continue;
            }
            char *end;
            long v = strtol(argv[i], &end, 10);
            const int steps = a[2] == 's'; /* --steps: at least 1, as run.steps */
            if (*end || end == argv[i] || v < steps || v > (steps ? 10000000 : 100000000)) {
                if (!rank)
                    fprintf(stderr, "etrun: %s expects a whole number >= %d, got \"%s\"\n", a, steps,
                            argv[i]);
                return -1;
            }
            if (steps)
                o->steps = (int)v;
            else
                o->log_every = (int)v;
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
        } else if (strcmp(a, "--help") == 0) {
            if (!rank) puts(usage);
            return 1;
        } else if (strcmp(a, "--info") == 0) {
            return 2;
        } else if (a[0] == '-') {
            if (!rank) fprintf(stderr, "etrun: unknown option %s (--help lists them)\n", a);
            return -1;
        } else if (o->plan) {
            if (!rank) fprintf(stderr, "etrun: more than one plan given\n");
            return -1;
        } else {
            o->plan = a;
        }
    }
    if (!o->plan) {
        if (!rank)
            fprintf(stderr, "etrun: no plan given (usage: etrun [options] plan.json; --help for more)\n");
        return -1;
    }
    return 0;
}

/* The backend the user asked for, else the plan's ("auto": CUDA where built and a device answers). */
static const char *backend_name(const options *o, const et_plan *p)
{
    return o->backend ? o->backend : p->backend;
}

static void print_progress(long long step, int steps, double step_s, double tokens, double flops, double loss)
{
    fprintf(stderr,
            "etrun: step %7lld/%d | %9.1f ms/step | %10.0f tokens/s | %7.3f TFLOP/s per device | loss %.4f\n",
            step, steps, step_s * 1e3, tokens / step_s, flops / step_s / 1e12, loss);
}

static void print_summary(const options *o, const et_plan *p, const rt_model *m, const rt_comm *comm,
                          const rt_run_log *log)
{
    const double med = rt_run_log_step_stats(log).median;
    if (log->measured == 0 || med <= 0) {
        fprintf(stderr, "etrun: done: %d steps, none measured after %d warm-up steps; wrote %s\n", log->steps,
                p->warmup_steps, o->out);
        return;
    }
    fprintf(
        stderr,
        "etrun: done: %d steps on %d rank%s (%s backend), median %.1f ms/step over %d steps after warm-up, "
        "%.0f tokens/s, %.3f TFLOP/s per device, loss %.4f -> %.4f; wrote %s\n",
        log->steps, comm->size, comm->size == 1 ? "" : "s", m->be->name, med * 1e3, log->measured,
        log->tokens_per_step / med, log->flops_per_step / med / 1e12, log->loss[0], log->loss[log->steps - 1],
        o->out);
    if (p->s.precision == ET_FP16)
        fprintf(stderr, "etrun: fp16 loss scale %g -> %g, %lld update%s skipped for a non-finite gradient\n",
                p->hyper.loss_scale, m->loss_scale, m->skipped_steps, m->skipped_steps == 1 ? "" : "s");
}

int main(int argc, char **argv)
{
    rt_cpu_blas_select(argv); /* OpenBLAS's kernels for this CPU where it chose older ones: a restart */
    rt_comm_init(&argc, &argv);
    rank = rt_comm_world_rank();
    options o;
    int a = parse_args(argc, argv, &o);
    if (a == 2) { /* --info */
        char hint[512];
        rt_cpu_blas_hint(hint, sizeof hint);
        const char *from = rt_cpu_blas_selected_from();
        if (!rank) {
            fputs("backends:", stdout);
            for (int i = 0; rt_backend_names[i]; i++)
                printf(" %s", rt_backend_names[i]);
            printf("\nblas_core: %s\nblas_threads: %d\n", rt_cpu_blas_core(), rt_cpu_blas_threads());
            for (int i = 0; rt_backend_names[i]; i++) { /* each GPU backend's device, or why there is none */
                if (strcmp(rt_backend_names[i], "cpu") == 0) continue;
                et_error berr;
                rt_backend *gpu = rt_backend_create(rt_backend_names[i], &berr);
                char about[256];
                if (gpu) gpu->describe(gpu, about, sizeof about), gpu->destroy(gpu);
                printf("%s_device: %s\n", rt_backend_names[i], gpu ? about : berr.text);
            }
            if (from) printf("blas_core_detected: %s (OPENBLAS_CORETYPE set by etrun)\n", from);
            if (hint[0]) printf("warning: %s\n", hint);
        }
        rt_comm_finalize();
        return 0;
    }
    if (a) {
        rt_comm_finalize();
        return a > 0 ? 0 : EXIT_INPUT;
    }
    et_error err;
    et_plan plan;
    rt_token_file file = {0};
    rt_data data = {0};
    rt_model model;
    rt_reducer red = {0};
    rt_run_log log = {0};
    rt_batch batch = {0};
    rt_backend *be = NULL;
    rt_comm *comm = NULL;
    double *op_pred = NULL;
    et_batch_shape *shapes = NULL; /* this step's micro-batches */
    memset(&model, 0, sizeof model);
    et_error diverged;
    memset(&diverged, 0, sizeof diverged);
    int status = EXIT_INPUT, saved_failed = 0, completed = 0;
    if (et_plan_load(o.plan, &plan, &err)) {
        fail_message(&err);
        rt_comm_finalize();
        return EXIT_INPUT;
    }
    if (o.steps > 0) { /* --steps: the plan's warm-up stays, fewer when the run is shorter */
        plan.steps = o.steps;
        if (plan.warmup_steps >= plan.steps) plan.warmup_steps = plan.steps - 1;
    }
    if (!(comm = rt_comm_create(&err))) goto fail;
    {
        /* outputs checked before any work: none is an input, each can be written */
        char resumed[4400] = "";
        const char *inputs[] = {o.plan, plan.data_from_file ? plan.data_file : NULL,
                                o.resume ? resumed : NULL};
        int bad = rank == 0 && ((o.resume && rt_checkpoint_find(o.resume, resumed, sizeof resumed, &err)) ||
                                et_output_check(o.out, "--out", inputs, 3, &err) ||
                                (o.save && rt_checkpoint_prepare(o.save, &err)));
        comm->broadcast_int(comm, &bad);
        if (bad) goto fail;
    }
    if ((plan.data_from_file &&
         rt_token_file_load(plan.data_file, plan.s.model.vocab, plan.s.data.seq_len, &file, &err)) ||
        rt_data_init(&data, &plan.s, comm->size, comm->rank, plan.seed, plan.data_from_file ? &file : NULL,
                     &err))
        goto fail;
    if (!(be = rt_backend_create_local(backend_name(&o, &plan), comm->local_rank, &err))) goto fail;
    if (strcmp(be->name, "cuda") == 0 && comm->size > 1) {
#ifdef ET_HAVE_NCCL
        /* the gradients' reductions on the device's communication stream: NCCL, bootstrapped over comm (one
         * rank has nothing to reduce: no NCCL; tests/test_comm.c drives its communicator on one rank) */
        rt_comm *nccl = rt_comm_nccl_create(comm, be, &err);
        if (!nccl) goto fail;
        comm = nccl;
#else
        et_error_set(&err, NULL, 0, 0, NULL,
                     "the cuda backend reduces gradients over more than one rank with NCCL, and this build "
                     "found none (%d ranks; configure with -DET_NCCL_ROOT=..., or --backend cpu)",
                     comm->size);
        goto fail;
#endif
    }
    if (rank == 0 && strcmp(be->name, "cpu") == 0) {
        char hint[512];
        rt_cpu_blas_hint(hint, sizeof hint);
        if (hint[0]) fprintf(stderr, "etrun: warning: %s\n", hint);
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        const int threads = rt_cpu_blas_threads();
        if (cores > 0 && (long)threads * comm->size > cores)
            fprintf(stderr,
                    "etrun: warning: %d ranks x %d BLAS threads on %ld cores: the threads oversubscribe the "
                    "cores and the timings will show it (set OPENBLAS_NUM_THREADS=%ld)\n",
                    comm->size, threads, cores, cores / comm->size > 0 ? cores / comm->size : 1);
        const char *from = rt_cpu_blas_selected_from();
        if (from && !o.quiet)
            fprintf(
                stderr,
                "etrun: OpenBLAS chose its %s kernels on this CPU (it does not know the model); running with "
                "OPENBLAS_CORETYPE=%s (ET_BLAS_AS_DETECTED=1 keeps OpenBLAS's choice)\n",
                from, rt_cpu_blas_core());
    }
    if (rt_model_init_comm(&model, &plan.s, be, plan.seed, comm, &err)) goto fail;
    rt_model_set_loss_scale(&model, plan.s.precision == ET_FP16 ? plan.hyper.loss_scale : 1);
    if (rank == 0 && !o.quiet) { /* after the model set the products' arithmetic */
        char about[256];
        be->describe(be, about, sizeof about);
        fprintf(stderr, "etrun: backend %s: %s\n", be->name, about);
    }
    long long start = 0;
    if (o.resume && rt_checkpoint_load(o.resume, &model, &start, &err)) goto fail;
    const int steps = plan.steps, n_ops = model.graph.n_ops;
    if (start > steps) {
        et_error_set(
            &err, o.resume, 0, 0, NULL,
            "the checkpoint continues at step %lld, past the plan's %d steps (raise run.steps to go on)",
            start, steps);
        goto fail;
    }
    if (rt_reducer_init(&red, &model, comm, &err) ||
        rt_run_log_init(&log, &model, (int)(steps - start), data.accum, start, &err))
        goto fail;
    status = 1;
    const int log_every = o.log_every >= 0     ? o.log_every
                          : plan.log_every > 0 ? plan.log_every
                                               : (steps >= 10 ? steps / 10 : 1);
    const int progress = !o.quiet && rank == 0 && log_every > 0;
    op_pred = calloc((size_t)n_ops, sizeof *op_pred);
    shapes = calloc((size_t)data.accum, sizeof *shapes);
    if (!op_pred || !shapes) {
        et_error_set_code(&err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory");
        goto fail;
    }
    for (long long step = start; step < steps; step++) {
        const int k = (int)(step - start);
        double t0 = et_wall_seconds();
        const long long waits0 = be->host_waits;
        rt_model_begin_step(&model);
        rt_reducer_begin_step(&red);
        double norm = rt_data_global_predictions(&data, (int)step), sums[2] = {0, 0};
        for (int micro = 0; micro < data.accum; micro++) {
            red.active = micro == data.accum - 1;
            if (rt_data_batch(&data, (int)step, micro, &batch) ||
                rt_model_step_micro(&model, &batch, norm, rt_reducer_on_grad_ready, &red)) {
                if (be->failure(be))
                    et_error_set_code(&err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL,
                                      "the %s backend failed at step %lld: %s", be->name, step + 1,
                                      be->failure(be));
                else if (model.comm_failed)
                    et_error_set_code(&err, ET_ERROR_INTERNAL, o.plan, 0, 0, NULL,
                                      "an experts' all-to-all failed at step %lld%s%s", step + 1,
                                      rt_comm_why(comm) ? ": " : "",
                                      rt_comm_why(comm) ? rt_comm_why(comm) : "");
                else
                    et_error_set_code(&err, ET_ERROR_MEMORY, o.plan, 0, 0, NULL, "out of memory at step %lld",
                                      step);
                goto fail;
            }
            shapes[micro] = rt_batch_shape(&batch);
            sums[1] += batch.T;
        }
        /* the cost model's prediction for the batches just run, beside the measurement */
        const double flops = et_step_op_times(&model.graph, shapes, data.accum, &plan.s.cluster.device,
                                              plan.s.precision, op_pred);
        if (rt_reducer_finish(&red)) {
            const char *why = rt_comm_why(comm);
            et_error_set_code(&err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL,
                              "a gradient all-reduce failed at step %lld%s%s", step + 1, why ? ": " : "",
                              why ? why : "");
            goto fail;
        }
        /* the update decides on the device whether it happens (a non-finite gradient norm or loss skips
         * it); the step's one read of the device follows */
        const bool scaled = model.step_loss_scale != 1;
        rt_model_update(&model, &plan.hyper);
        const int skipped = rt_model_end_step(&model); /* fp16: an overflow skips the update */
        rt_reducer_end_step(&red);
        if (be->failure(be)) { /* a device error: every backend call since has returned at once */
            et_error_set_code(&err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL,
                              "the %s backend failed at step %lld: %s", be->name, step + 1, be->failure(be));
            goto fail;
        }
        sums[0] = model.loss_sum;
        comm->allreduce_sum_doubles(comm, sums, 2);
        if (!isfinite(sums[0])) {
            /* a diverged run stops here; the gate kept this rank's weights from the update */
            et_error_set(&diverged, o.plan, 0, 0, NULL,
                         "training diverged at step %lld: the loss is %g (op head.loss); lower "
                         "run.learning_rate or check "
                         "the data",
                         step + 1, sums[0]);
            break;
        }
        if (skipped && !scaled) {
            et_error_set(
                &diverged, o.plan, 0, 0, NULL,
                "training diverged at step %lld: the gradient norm is %g (op optimizer.grad_norm); lower "
                "run.lr or check the data",
                step + 1, model.last_grad_norm);
            break;
        }
        log.step_s[k] = et_wall_seconds() - t0;
        log.loss[k] = sums[0] / norm;
        log.grad_norm[k] = model.last_grad_norm;
        log.tokens_per_step = sums[1];
        log.host_waits = be->host_waits - waits0;
        log.flops_per_step = flops;
        if (step >= plan.warmup_steps) {
            const size_t at = (size_t)log.measured * n_ops;
            memcpy(log.op_s + at, model.op_time, (size_t)n_ops * sizeof *log.op_s);
            memcpy(log.op_predicted_s + at, op_pred, (size_t)n_ops * sizeof *op_pred);
            memcpy(log.shapes + (size_t)log.measured * log.micro, shapes, (size_t)log.micro * sizeof *shapes);
            memcpy(log.buckets + (size_t)log.measured * model.n_buckets, red.rec,
                   (size_t)model.n_buckets * sizeof *red.rec);
            log.predicted_step_s = 0;
            for (int i = 0; i < n_ops; i++)
                log.predicted_step_s += op_pred[i];
            log.measured++;
        }
        completed = k + 1;
        if (progress && ((step + 1) % log_every == 0 || step + 1 == steps))
            print_progress(step + 1, steps, log.step_s[k], sums[1], flops, log.loss[k]);
        const int interval = plan.checkpoint_every > 0 && (step + 1) % plan.checkpoint_every == 0;
        if (o.save && (interval || step + 1 == steps)) {
            /* interval checkpoints each in SAVE/step-N, the last one in SAVE itself */
            char dir[4096];
            if (step + 1 == steps)
                snprintf(dir, sizeof dir, "%s", o.save);
            else
                snprintf(dir, sizeof dir, "%s/step-%lld", o.save, step + 1);
            int rc = rank == 0 ? rt_checkpoint_save(dir, &model, step + 1, &err) : 0;
            comm->broadcast_int(comm, &rc);
            if (rc) {
                /* what was measured is still written */
                saved_failed = 1;
                break;
            }
        }
    }
    {
        et_error werr;
        if (diverged.text[0] || saved_failed) {
            /* the steps that ran, and why the others did not */
            log.steps = completed;
            snprintf(log.stopped, sizeof log.stopped, "%s", diverged.text[0] ? diverged.text : err.text);
        }
        const int wrote = rt_measured_write(o.out, o.plan, &plan, &model, comm, &log, &werr) == 0;
        if (diverged.text[0]) {
            err = diverged;
            status = EXIT_DIVERGED;
            if (rank == 0 && wrote) fprintf(stderr, "etrun: the steps before are in %s\n", o.out);
            goto fail;
        }
        if (saved_failed) {
            if (rank == 0 && wrote)
                fprintf(stderr, "etrun: the checkpoint failed; measurements are in %s\n", o.out);
            goto fail;
        }
        if (!wrote) {
            err = werr;
            goto fail;
        }
    }
    if (!o.quiet && rank == 0) print_summary(&o, &plan, &model, comm, &log);
    status = 0;
    goto finish;
fail:
    fail_message(&err);
    if (status != EXIT_DIVERGED) status = et_error_exit_status(&err); /* 2 bad input, else 1 (err.code) */
finish:
    free(op_pred), free(shapes);
    rt_batch_free(&batch);
    rt_run_log_free(&log);
    rt_reducer_free(&red);
    rt_model_free(&model);
    if (comm) comm->destroy(comm); /* NCCL's before the device it runs on */
    if (be) be->destroy(be);
    rt_data_free(&data);
    rt_token_file_free(&file);
    et_plan_free(&plan);
    rt_comm_finalize();
    return status;
}

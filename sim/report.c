#include "report.h"

#include "error_band.h"

#include "caveats.h"
#include "fabric.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"

#define GIB 1073741824.0

void report_format_duration(char *buf, size_t size, double s)
{
    if (!(s >= 0) || isinf(s)) /* never from validated input; said rather than printed as "-nan days" */
        snprintf(buf, size, "n/a");
    else if (s < 120)
        snprintf(buf, size, "%.1f s", s);
    else if (s < 7200)
        snprintf(buf, size, "%.1f min", s / 60);
    else if (s < 172800)
        snprintf(buf, size, "%.2f h", s / 3600);
    else if (s < 3.15576e8) /* up to 10 years: at most "3652.50 days" */
        snprintf(buf, size, "%.2f days", s / 86400);
    else /* "1.23e+45 years" at most 15 characters: no buffer cuts the unit */
        snprintf(buf, size, "%.3g years", s / 3.15576e7);
}

static json_t *software_json(const et_software *w);

json_t *report_json_scenario(const et_scenario *s)
{
    const et_model_config *m = &s->model;
    const et_cluster *c = &s->cluster;
    const int pad_multiple = s->data.sampling.pad_multiple > 1 ? s->data.sampling.pad_multiple : 1;
    json_t *j = json_pack(
        "{s:s, s:s, s:{s:s, s:i, s:i, s:i, s:i, s:i, s:s, s:s}, s:{s:i, s:s, s:b, s:s, s:i, s:f, s:f}, "
        "s:{s:I, "
        "s:I, "
        "s:I},"
        " s:s, s:s, s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:b, s:s, s:f, s:s, s:b}, s:{s:s, s:i, "
        "s:i, "
        "s:i}}",
        "name", s->name, "source", s->source, "model", "name", m->name, "layers", m->layers, "hidden",
        m->hidden, "heads", m->heads, "ffn", m->ffn, "vocab", m->vocab, "architecture",
        et_arch_names[m->arch], "loss_head", et_loss_head_names[m->head], "data", "seq_len", s->data.seq_len,
        "distribution", et_length_kind_names[s->data.lengths.kind], "unpadded", s->data.unpadded, "pad_to",
        et_pad_to_names[s->data.sampling.pad_to], "pad_multiple", pad_multiple, "mean_length",
        et_length_mean(&s->data.lengths), "padding_fraction", et_batch_padding_fraction(s), "batch", "global",
        s->batch.global, "local", s->batch.local, "grad_accum", s->batch.grad_accum, "precision",
        et_precision_names[s->precision], "optimizer", et_optimizer_names[s->optimizer.name], "clip",
        et_clip_mode_names[s->optimizer.clip], "parallelism", "data", s->parallel.data, "tensor",
        s->parallel.tensor, "context", s->parallel.context, "expert", s->parallel.expert, "pipeline",
        s->parallel.pipeline, "virtual_pipeline", s->parallel.virtual_pipeline, "zero_stage",
        s->parallel.zero_stage, "recompute", et_recompute_names[s->parallel.recompute], "sequence_parallel",
        s->parallel.sequence_parallel, "attention", et_attention_names[s->parallel.attention], "bucket_MiB",
        s->parallel.bucket_bytes / 1048576.0, "allreduce", et_coll_algo_names[s->parallel.allreduce],
        "overlap", s->parallel.overlap, "cluster", "device", c->device.name, "nodes", c->nodes,
        "gpus_per_node", c->gpus_per_node, "gpus", et_scenario_gpus(s));
    if (j) {
        json_t *par = json_object_get(j, "parallelism");
        json_object_set_new(par, "expert_tensor", json_integer(et_scenario_expert_tensor(s)));
        json_object_set_new(par, "recompute_layers", json_integer(s->parallel.recompute_layers));
        json_object_set_new(j, "software", software_json(&s->software));
    }
    if (j && et_precision_quantized(s->precision)) {
        json_object_set_new(j, "scaling", json_string(et_scaling_names[s->scaling]));
        json_object_set_new(
            j, "bf16_layers",
            json_pack("{s:i, s:i}", "first", s->bf16_layers.first, "last", s->bf16_layers.last));
    }
    return j;
}

/* The scenario's software stack as the report echoes it (scenario.software). */
static json_t *software_json(const et_software *w)
{
    return json_pack(
        "{s:s, s:s, s:f, s:s, s:s, s:i, s:b, s:i, s:b, s:b, s:s, s:b, s:b, s:s, s:b, s:b, s:s, s:f, s:f, "
        "s:s, s:s, s:s, s:b, s:b, s:b}",
        "stack", et_stack_names[w->stack], "grad_accumulation",
        et_grad_accumulation_names[w->grad_accumulation], "grad_accumulation_bytes", w->accumulate_bytes,
        "optimizer", et_optimizer_path_names[w->optimizer], "cross_entropy",
        et_cross_entropy_names[w->cross_entropy], "syncs_per_micro_batch", w->syncs_per_micro_batch,
        "p2p_sync", w->p2p_sync, "syncs_per_step", w->syncs_per_step, "loss_scale_sync", w->loss_scale_sync,
        "launch_blocking", w->launch_blocking, "pipeline_sends", et_pipeline_sends_names[w->pipeline_sends],
        "p2p_overlap", w->p2p_overlap, "fp8_param_gather", w->fp8_param_gather, "attention_kernel",
        et_attention_kernel_names[w->attention_kernel], "attention_unpad", w->attention_unpad,
        "residual_kernels", w->residual_kernels, "tp_comm", et_tp_comm_names[w->tp_comm], "overlap_sms",
        w->overlap_sms, "bulk_overlap_sms", w->bulk_overlap_sms, "bias_kernels",
        et_bias_kernels_names[w->bias_kernels], "grouped_gemm", et_grouped_gemm_names[w->grouped_gemm],
        "moe_dispatch", et_moe_dispatch_names[w->moe_dispatch], "ep_overlap", w->ep_overlap, "ep_dedup",
        w->ep_dedup, "recompute_early_stop", w->recompute_early_stop);
}

static json_t *memory_json(const et_memory *m)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b}", "weights_GiB", m->weights / GIB,
                     "gradients_GiB", m->gradients / GIB, "optimizer_states_GiB", m->optimizer_states / GIB,
                     "activations_GiB", m->activations / GIB, "reserved_GiB", m->reserved / GIB, "total_GiB",
                     m->total / GIB, "capacity_GiB", m->capacity / GIB, "fits", m->fits);
}

json_t *report_json_estimate(const et_estimate *e)
{
    json_t *step =
        json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
                  "forward_s", e->forward, "backward_s", e->backward, "clip_s", e->clip, "tp_comm_s",
                  e->tp_comm, "pp_comm_s", e->pp_comm, "bubble_s", e->bubble, "compute_s", e->compute,
                  "dp_comm_s", e->dp_comm, "dp_comm_exposed_s", e->dp_comm_exposed, "zero_gather_s",
                  e->zero_gather, "clip_allreduce_s", e->clip_allreduce, "cp_comm_s", e->cp_comm, "ep_comm_s",
                  e->ep_comm, "optimizer_s", e->optimizer, "balanced_step_s", e->step_time_balanced, "step_s",
                  e->step_time, "busiest_stage", (double)e->busiest_stage);
    if (step) {
        json_object_set_new(step, "accumulate_s", json_real(e->accumulate));
        json_object_set_new(step, "host_sync_s", json_real(e->host_sync));
    }
    json_t *j = json_pack(
        "{s:f, s:f, s:f, s:f, s:f, s:o, s:o, s:{s:i, s:f, s:s}, s:f, s:f, s:f, s:{s:I, s:f, s:f, s:f}}",
        "params_total", e->params_total, "params_per_gpu", e->params_per_gpu, "model_flops_per_step",
        e->model_flops_per_step, "flops_per_token", e->flops_per_token, "tokens_per_step", e->tokens_per_step,
        "memory_per_gpu", memory_json(&e->memory), "step", step, "buckets", "count", e->n_buckets,
        "largest_MiB", e->bucket_bytes_max / 1048576.0, "algorithm", et_coll_algo_names[e->algo], "mfu",
        e->mfu, "samples_per_second", e->samples_per_second, "tokens_per_second", e->tokens_per_second,
        "time_to_train", "steps", e->steps, "train_s", e->train_time, "eval_s", e->eval_time, "total_s",
        e->time_to_train);
    if (j && e->params_frozen > 0) json_object_set_new(j, "params_frozen", json_real(e->params_frozen));
    if (j && e->n_phases > 1) {
        json_t *phases = json_array();
        for (int i = 0; i < e->n_phases; i++)
            json_array_append_new(phases,
                                  json_pack("{s:f, s:i, s:I, s:f, s:f}", "from", e->phases[i].from, "rank",
                                            e->phases[i].rank, "steps", (json_int_t)e->phases[i].steps,
                                            "step_s", e->phases[i].step_time, "params", e->phases[i].params));
        json_object_set_new(j, "rank_phases", phases);
    }
    json_t *ttt = j ? json_object_get(j, "time_to_train") : NULL;
    if (ttt) {
        json_object_set_new(ttt, "evaluations", json_real(e->evals));
        json_object_set_new(ttt, "warmup_s", json_real(e->warmup_time));
    }
    if (j) json_object_set_new(j, "goodput", report_json_goodput(&e->goodput, e->time_to_train));
    if (j)
        json_object_set_new(j, "energy",
                            json_pack("{s:f, s:f, s:f}", "step_J", e->energy_step_j, "run_kWh",
                                      e->energy_run_kwh, "co2_kg", e->co2_kg));
    if (j && e->moe_imbalance > 0 && e->params_active < e->params_total)
        json_object_set_new(j, "moe",
                            json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "params_active", e->params_active,
                                      "imbalance", e->moe_imbalance, "dropped_fraction", e->moe_dropped,
                                      "alltoall_s", e->ep_comm, "alltoall_blocking_s", e->ep_comm_alone,
                                      "alltoall_overlapped_s", e->ep_comm_overlapped));
    if (j)
        json_object_set_new(j, "stragglers",
                            json_pack("{s:f, s:f, s:{s:f, s:f, s:f, s:f}}", "factor", e->straggler_factor,
                                      "added_s", e->straggler_delay, "largest_micro_batch", "sequences",
                                      e->largest_batch.sequences, "tokens", e->largest_batch.tokens,
                                      "tokens_sq", e->largest_batch.tokens_sq, "predictions",
                                      e->largest_batch.predictions));
    return j;
}

json_t *report_json_analytic(const et_scenario *s, const et_estimate *e)
{
    json_t *tt = report_tensor_train(NULL, s);
    if (tt) {
        json_t *j = report_json_analytic_core(s, e);
        json_object_set_new(j, "tensor_train", tt);
        return j;
    }
    return report_json_analytic_core(s, e);
}

json_t *report_json_caveats(const et_scenario *s)
{
    const char *c[ET_CAVEATS_MAX];
    int n = et_caveats(s, c, ET_CAVEATS_MAX);
    json_t *a = json_array();
    for (int i = 0; i < n && a; i++)
        json_array_append_new(a, json_string(c[i]));
    return a;
}

void report_print_caveats(FILE *out, const et_scenario *s)
{
    const char *c[ET_CAVEATS_MAX];
    int n = et_caveats(s, c, ET_CAVEATS_MAX);
    fprintf(out, "left out     ");
    for (int i = 0; i < n; i++)
        fprintf(out, "%s%s", i ? "; " : "", c[i]);
    fprintf(out, "\n");
}

/* JSON has no infinity: a run without failures says null for its MTBF and interval */
static json_t *finite_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

json_t *report_json_goodput(const et_goodput *g, double work_s)
{
    json_t *j = json_object();
    if (!j) return NULL;
    json_object_set_new(j, "mtbf_s", finite_or_null(g->mtbf_s));
    json_object_set_new(j, "checkpoint_GiB", json_real(g->checkpoint_bytes / 1073741824.0));
    json_object_set_new(j, "checkpoint_write_s", json_real(g->write_s));
    json_object_set_new(j, "checkpoint_stall_s", json_real(g->stall_s));
    json_object_set_new(j, "restart_s", json_real(g->restart_s));
    json_object_set_new(j, "checkpoint_interval_s", finite_or_null(g->interval_s));
    json_object_set_new(j, "interruptions", json_real(g->interruptions));
    json_object_set_new(j, "factor", json_real(g->factor));
    json_object_set_new(j, "time_to_train_s", json_real(work_s * g->factor));
    return j;
}

void report_print_energy(FILE *out, const et_scenario *s, const et_estimate *e)
{
    const et_device_profile *d = &s->cluster.device;
    if (!(d->power_busy_w > 0)) {
        fprintf(out, "energy       not estimated: the profile %s gives no power_W\n", d->name);
        return;
    }
    const int mwh = e->energy_run_kwh >= 1000; /* MWh for large runs, kWh below */
    fprintf(out,
            "energy       %.4g kJ a step on %d GPUs (%.0f W computing, %.0f W idle); %.4g %s for the run "
            "with failures at PUE %.2f",
            e->energy_step_j / 1e3, et_scenario_gpus(s), d->power_busy_w, d->power_idle_w,
            mwh ? e->energy_run_kwh / 1e3 : e->energy_run_kwh, mwh ? "MWh" : "kWh", s->energy.pue);
    if (s->energy.carbon_g_per_kwh > 0)
        fprintf(out, "; %.4g t CO2e at %.0f g a kWh", e->co2_kg / 1e3, s->energy.carbon_g_per_kwh);
    fputc('\n', out);
}

void report_print_band(FILE *out, const et_scenario *s, double step_s, double time_to_train_s)
{
    et_error_band b;
    et_error_band_of(s, &b);
    fprintf(out, "error band   ");
    const char *others = b.held_out ? ", its own model's left out" : "";
    if (b.rows == 0) {
        fprintf(out, "no published run of family %s was checked%s: how far to trust this figure is unknown\n",
                b.family, others);
        return;
    }
    if (b.band) {
        char lo[32], hi[32];
        report_format_duration(lo, sizeof lo, time_to_train_s * b.low);
        report_format_duration(hi, sizeof hi, time_to_train_s * b.high);
        char widened[96] = "";
        if (b.widening > 1)
            snprintf(widened, sizeof widened, " widened x%.2f for a model outside them, from %d models",
                     b.widening, b.models);
        fprintf(
            out,
            "runs measured %.2f-%.2fx ET's figure on the %d published runs of %d model%s of %s%s (p10-p90%s; "
            "ET's mean error %+.1f%%): step %.4g-%.4g s, time-to-train %s-%s; nearest: ",
            b.low, b.high, b.rows, b.models, b.models == 1 ? "" : "s", b.rows_family, others, widened,
            100 * b.mean_error, step_s * b.low, step_s * b.high, lo, hi);
    } else {
        fprintf(out,
                "none: %d published run%s of %d model%s of family %s%s (%d runs of %d models, or of its own, "
                "make a band; ET's error there %+.1f%%): ",
                b.rows, b.rows == 1 ? "" : "s", b.models, b.models == 1 ? "" : "s", b.family, others,
                ET_BAND_ROWS, ET_BAND_MODELS, 100 * b.mean_error);
    }
    for (int i = 0; i < b.n_nearest; i++)
        fprintf(out, "%s%s", i ? ", " : "", b.nearest[i]);
    fputc('\n', out);
}

json_t *report_json_band(const et_scenario *s, double step_s, double time_to_train_s)
{
    et_error_band b;
    et_error_band_of(s, &b);
    json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:s, s:b}", "family", b.family, "rows_family", b.rows_family,
                          "rows", b.rows, "models", b.models, "model", b.model, "held_out", b.held_out);
    if (!j) return NULL;
    json_t *near = json_array();
    for (int i = 0; i < b.n_nearest && near; i++)
        json_array_append_new(near, json_string(b.nearest[i]));
    json_object_set_new(j, "nearest", near ? near : json_null());
    if (b.rows > 0) json_object_set_new(j, "mean_error", json_real(b.mean_error));
    if (b.band) {
        json_object_set_new(j, "low", json_real(b.low));
        json_object_set_new(j, "high", json_real(b.high));
        json_object_set_new(j, "widening", json_real(b.widening));
        json_object_set_new(j, "step_low_s", json_real(step_s * b.low));
        json_object_set_new(j, "step_high_s", json_real(step_s * b.high));
        json_object_set_new(j, "time_to_train_low_s", json_real(time_to_train_s * b.low));
        json_object_set_new(j, "time_to_train_high_s", json_real(time_to_train_s * b.high));
    }
    return j;
}

void report_print_goodput(FILE *out, const et_scenario *s, const et_goodput *g, double work_s)
{
    char total[32], mtbf[32], every[32];
    report_format_duration(total, sizeof total, work_s * g->factor);
    if (!isfinite(g->mtbf_s)) {
        fprintf(out, "failures     none (resilience.interruptions_per_gpu_hour 0): %s\n", total);
        return;
    }
    report_format_duration(mtbf, sizeof mtbf, g->mtbf_s);
    report_format_duration(every, sizeof every, g->interval_s);
    fprintf(out,
            "failures     an interruption every %s on %d GPUs (%.3g expected); checkpoint %.1f GiB, %.1f s a "
            "write (%s), every %s of work%s; restart %.0f s: x%.3f, %s with failures\n",
            mtbf, et_scenario_gpus(s), g->interruptions, g->checkpoint_bytes / 1073741824.0, g->write_s,
            s->resilience.asynchronous ? "asynchronous" : "synchronous", every,
            s->resilience.interval_s > 0 ? "" : " (Daly's optimum)", g->restart_s, g->factor, total);
}

json_t *report_json_analytic_core(const et_scenario *s, const et_estimate *e)
{
    json_t *est = report_json_estimate(e);
    if (est) {
        json_object_set_new(est, "tflops_per_gpu",
                            json_real(et_tflops_per_gpu(s, e->model_flops_per_step, e->step_time)));
        json_object_set_new(est, "error_band", report_json_band(s, e->step_time, e->time_to_train));
        json_t *ttt = json_object_get(est, "time_to_train");
        json_object_set_new(ttt, "gpu_hours", json_real(et_gpu_hours(s, e->time_to_train)));
        json_object_set_new(ttt, "rule", json_string(et_timing_rule_names[s->target.timing]));
    }
    const char *w[8];
    json_t *warnings = json_array();
    for (int i = 0, n = et_fabric_warnings(&s->cluster, w, 8); i < n; i++)
        json_array_append_new(warnings, json_string(w[i]));
    return json_pack("{s:s, s:i, s:s, s:o, s:o, s:o, s:o}", "tool", "etsim", "format_version",
                     REPORT_FORMAT_VERSION, "engine", "analytic", "scenario", report_json_scenario(s),
                     "estimate", est, "caveats", report_json_caveats(s), "warnings", warnings);
}

report_headline report_sim_headline(const et_scenario *s, const et_estimate *e, const sim_result *sim)
{
    const double mean = sim->step.mean;
    const int gpus = et_scenario_gpus(s);
    const double train = report_sim_train_time(e, sim), total = train + e->eval_time;
    const double flops_rate = mean > 0 ? e->model_flops_per_step / mean : 0;
    return (report_headline){.step = mean,
                             .mfu = flops_rate / (gpus * s->cluster.device.peak_flops[s->precision]),
                             .tflops_per_gpu = et_tflops_per_gpu(s, e->model_flops_per_step, mean),
                             .samples_per_second = mean > 0 ? s->batch.global / mean : 0,
                             .tokens_per_second = mean > 0 ? e->tokens_per_step / mean : 0,
                             .train = train,
                             .eval = e->eval_time,
                             .time_to_train = total,
                             .gpu_hours = et_gpu_hours(s, total),
                             .time_to_train_with_failures = total * e->goodput.factor};
}

json_t *report_headline_json(const report_headline *h)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "step_s", h->step, "mfu", h->mfu,
                     "tflops_per_gpu", h->tflops_per_gpu, "samples_per_second", h->samples_per_second,
                     "tokens_per_second", h->tokens_per_second, "train_s", h->train, "eval_s", h->eval,
                     "time_to_train_s", h->time_to_train, "gpu_hours", h->gpu_hours,
                     "time_to_train_with_failures_s", h->time_to_train_with_failures);
}

json_t *report_json_simulation(const et_scenario *s, const et_estimate *e, const sim_result *sim)
{
    json_t *section = sim_result_json(s, sim);
    const report_headline h = report_sim_headline(s, e, sim);
    if (section) json_object_set_new(section, "headline", report_headline_json(&h));
    return section;
}

void report_print_header(FILE *out, const et_scenario *s, const et_estimate *e, const char *engine)
{
    const et_model_config *m = &s->model;
    fprintf(out, "scenario     %s (%s), engine %s\n", s->name, s->source, engine);
    fprintf(out, "model        %s: %d layers, hidden %d, %d heads, ffn %d, vocab %d; ", m->name, m->layers,
            m->hidden, m->heads, m->ffn, m->vocab);
    if (e->params_frozen > 0) {
        fprintf(out, "%.0f parameters frozen, %.0f adapter parameters trained (LoRA rank %d, alpha %g:",
                e->params_frozen, e->params_total, s->method.lora_rank, s->method.lora_alpha);
        for (int t = 0; t < ET_LORA_TARGETS; t++)
            if (s->method.lora_targets >> t & 1u) fprintf(out, " %s", et_lora_target_names[t]);
        fprintf(out, ")\n");
    } else {
        fprintf(out, "%.0f parameters\n", e->params_total);
    }
    if (m->mla.kv_lora > 0 || m->window > 0 || m->sinks || m->mtp_layers > 0) {
        fprintf(out, "attention    ");
        const char *sep = "";
        if (m->mla.kv_lora > 0) {
            fprintf(out, "latent (query %d, key-value %d, heads of %d + %d rotary, values %d)", m->mla.q_lora,
                    m->mla.kv_lora, et_model_head_dim(m), m->mla.rope_dim, m->mla.v_dim);
            sep = "; ";
        }
        if (m->window > 0) {
            int windowed = 0;
            for (int i = 0; i < m->layers; i++)
                windowed += et_model_layer_windowed(m, i);
            fprintf(out, "%swindows of %d tokens on %d of %d layers", sep, m->window, windowed, m->layers);
            sep = "; ";
        }
        if (m->sinks) fprintf(out, "%ssinks", sep), sep = "; ";
        if (m->mtp_layers > 0)
            fprintf(out, "%s%d multi-token prediction module%s", sep, m->mtp_layers,
                    m->mtp_layers > 1 ? "s" : "");
        fputc('\n', out);
    }
    const int gpus = et_scenario_gpus(s);
    const char *unit = s->cluster.device.kind == ET_DEVICE_CPU        ? (gpus == 1 ? "CPU rank" : "CPU ranks")
                       : s->cluster.device.kind == ET_DEVICE_DATAFLOW ? (gpus == 1 ? "device" : "devices")
                       : gpus == 1                                    ? "GPU"
                                                                      : "GPUs";
    char context[32] = "";
    if (s->parallel.context > 1) snprintf(context, sizeof context, " x context %d", s->parallel.context);
    fprintf(out, "cluster      %d node(s) x %d %s = %d %s; data %d%s x tensor %d x pipeline %d, %s %d\n",
            s->cluster.nodes, s->cluster.gpus_per_node, s->cluster.device.name, gpus, unit, s->parallel.data,
            context, s->parallel.tensor, s->parallel.pipeline,
            s->parallel.distributed_optimizer ? "distributed optimizer, ZeRO" : "ZeRO",
            s->parallel.zero_stage);
    if (s->parallel.virtual_pipeline > 1 || s->parallel.sequence_parallel ||
        s->parallel.recompute != ET_RECOMPUTE_NONE || m->dropout > 0 ||
        s->parallel.attention != ET_ATTENTION_STANDARD) {
        fprintf(out, "schedule     ");
        if (s->parallel.virtual_pipeline > 1)
            fprintf(out, "interleaved 1F1B, %d chunks per stage; ", s->parallel.virtual_pipeline);
        else if (s->parallel.pipeline > 1)
            fprintf(out, "1F1B; ");
        char some[64] = "";
        if (s->parallel.recompute == ET_RECOMPUTE_FULL && s->parallel.recompute_layers > 0)
            snprintf(some, sizeof some, " (the first %d layers of each chunk)", s->parallel.recompute_layers);
        fprintf(out, "recomputation %s%s; sequence parallelism %s; dropout %g; attention %s\n",
                et_recompute_names[s->parallel.recompute], some, s->parallel.sequence_parallel ? "on" : "off",
                m->dropout, et_attention_names[s->parallel.attention]);
    }
    char padded[80] = "padded";
    if (s->data.unpadded)
        snprintf(padded, sizeof padded, "unpadded");
    else if (s->data.sampling.pad_to == ET_PAD_LONGEST)
        snprintf(padded, sizeof padded, "padded to each micro-batch's longest%s",
                 s->data.sampling.pad_multiple > 1 ? " (rounded up to a multiple of " : "");
    if (!s->data.unpadded && s->data.sampling.pad_to == ET_PAD_LONGEST && s->data.sampling.pad_multiple > 1)
        snprintf(padded + strlen(padded), sizeof padded - strlen(padded), "%d)",
                 s->data.sampling.pad_multiple);
    fprintf(out,
            "batch        global %lld = local %lld x %d data-parallel x %lld accumulation; seq_len %d, %s %s "
            "(mean %.1f tokens, padding %.3f)\n",
            s->batch.global, s->batch.local, s->parallel.data, s->batch.grad_accum, s->data.seq_len,
            et_length_kind_names[s->data.lengths.kind], padded, et_length_mean(&s->data.lengths),
            et_batch_padding_fraction(s));
    if (s->data.answer_fraction > 0 && s->data.answer_fraction < 1)
        fprintf(out,
                "fine-tuning  the loss on each sequence's last %.0f%% of tokens (its answer; the prompt's "
                "predictions masked, at no cost)\n",
                100 * s->data.answer_fraction);
    fprintf(out,
            "training     %s%s%s %s, %s clipping, %d gradient bucket%s (largest %.1f MiB), all-reduce %s\n",
            et_precision_names[s->precision], et_precision_quantized(s->precision) ? " " : "",
            et_precision_quantized(s->precision) ? et_scaling_names[s->scaling] : "",
            et_optimizer_names[s->optimizer.name], et_clip_mode_names[s->optimizer.clip], e->n_buckets,
            e->n_buckets == 1 ? "" : "s", e->bucket_bytes_max / 1048576.0, et_coll_algo_names[e->algo]);
    if (s->optimizer.galore.rank > 0)
        fprintf(
            out,
            "optimizer    GaLore: Adam's states of %.0f of %.0f parameters projected on rank %d, projectors "
            "recomputed by SVD every %d steps; optimizer states %.3f GiB\n",
            e->galore_projected, e->params_per_gpu, s->optimizer.galore.rank,
            s->optimizer.galore.update_interval, e->memory.optimizer_states / 1073741824.0);
    const et_moe *moe = &m->moe;
    if (moe->experts > 0) {
        const int moe_layers = et_model_moe_layers(m, 0, m->layers - 1);
        char capacity[64];
        if (moe->capacity_factor > 0)
            snprintf(capacity, sizeof capacity, "capacity %g (%.2f%% of routed rows dropped)",
                     moe->capacity_factor, 100 * e->moe_dropped);
        else
            snprintf(capacity, sizeof capacity, "dropless");
        char shared[48] = "";
        if (moe->shared_experts > 0) snprintf(shared, sizeof shared, " + %d shared", moe->shared_experts);
        char tensor[64] = "";
        if (et_scenario_experts_folded(s))
            snprintf(tensor, sizeof tensor, ", folded over the %d tensor ranks", s->parallel.tensor);
        else if (s->parallel.tensor > 1)
            snprintf(tensor, sizeof tensor, ", each split over the %d tensor ranks", s->parallel.tensor);
        fprintf(out,
                "experts      %d%s per MoE layer (%d of %d layers), top-%d, %s, %s routing; expert "
                "parallelism %d "
                "(%d per GPU%s); %.0f parameters active per token; expert ranks' imbalance E[max/mean] "
                "%.3f\n",
                moe->experts, shared, moe_layers, m->layers, moe->top_k, capacity,
                et_routing_names[moe->routing], s->parallel.expert, moe->experts / s->parallel.expert, tensor,
                e->params_active, e->moe_imbalance);
        if (s->parallel.expert > 1)
            fprintf(out,
                    "all-to-alls  %.2f ms a step blocking the compute stream, %.2f ms beside a partner "
                    "micro-batch's computation (software.ep_overlap, %s)\n",
                    e->ep_comm_alone * 1e3, e->ep_comm_overlapped * 1e3,
                    s->software.ep_overlap ? "as planned" : "not planned");
    }
    if (s->parallel.context > 1)
        fprintf(
            out,
            "context      ring attention over %d ranks: each layer's keys and values pass %d steps in "
            "forward, again with their gradients in backward; %.2f ms a step not hidden behind attention\n",
            s->parallel.context, s->parallel.context - 1, e->cp_comm * 1e3);
    fprintf(out, "FLOPs        %.4g per step, %.4g per token\n", e->model_flops_per_step, e->flops_per_token);
    const et_sampling *smp = &s->data.sampling;
    fprintf(out, "sampling     %s", et_sampling_scheme_names[smp->scheme]);
    if (smp->scheme == ET_SAMPLING_STRATIFIED) {
        fprintf(out, " (bins");
        for (int b = 0; b < smp->n_bins; b++)
            fprintf(out, "%s%d:%d", b ? ", " : " ", smp->bin_upper[b], smp->bin_count[b]);
        fprintf(out, ")");
    }
    if (smp->scheme == ET_SAMPLING_BINNED) {
        fprintf(out, " (each micro-batch from one bin, every GPU the same; bins up to");
        for (int b = 0; b < smp->n_bins; b++)
            fprintf(out, "%s%d", b ? ", " : " ", smp->bin_upper[b]);
        fprintf(out, ")");
    }
    if (smp->presort_group > 1) fprintf(out, ", presorted in groups of %d", smp->presort_group);
    fprintf(out, "; straggler factor E[max/mean] %.3f\n", e->straggler_factor);
}

void report_print_memory(FILE *out, const et_memory *m)
{
    fprintf(out,
            "\nmemory per GPU  weights[GiB] gradients[GiB] optimizer[GiB] activations[GiB] reserved[GiB] "
            "total[GiB] capacity[GiB]\n");
    fprintf(out, "                %12.2f %14.2f %14.2f %16.2f %13.2f %10.2f %14.2f\n", m->weights / GIB,
            m->gradients / GIB, m->optimizer_states / GIB, m->activations / GIB, m->reserved / GIB,
            m->total / GIB, m->capacity / GIB);
}

/* What the time-to-train counted beyond steps and evaluations, when the scenario says (run_timing.h). */
static void print_timing(FILE *out, const et_scenario *s, const et_estimate *e)
{
    if (s->target.timing == ET_TIMING_MLPERF)
        fprintf(
            out,
            "timed as MLPerf: run_start (initialisation excluded) to the evaluation that sees the target, "
            "%.0f evaluations%s, the target's %lld steps run to %lld\n",
            e->evals, s->target.initial_eval ? " with the initial one" : "", s->target.steps, e->steps);
    else if (s->target.initial_eval)
        fprintf(out, "evaluations  %.0f, the initial one included\n", e->evals);
    if (e->warmup_time > 0) {
        char w[32];
        report_format_duration(w, sizeof w, e->warmup_time);
        fprintf(out, "warm-up      %s in the training time (the first %lld steps, as target.warmup states)\n",
                w, e->warmup_steps);
    }
}

void report_print_analytic(FILE *out, const et_scenario *s, const et_estimate *e)
{
    report_print_header(out, s, e, "analytic");
    report_print_memory(out, &e->memory);
    const int moe = s->model.moe.experts > 0 && s->parallel.expert > 1, cp = s->parallel.context > 1;
    fprintf(out,
            "\nstep         forward[ms] backward[ms] clip[ms] %s bubble[ms] dp_comm[ms] exposed[ms] "
            "optimizer[ms] step[ms]\n",
            moe  ? "tp+ep+pp[ms]"
            : cp ? "tp+cp+pp[ms]"
                 : "tp+pp[ms]");
    fprintf(out, "             %11.2f %12.2f %8.2f %*.2f %10.2f %11.2f %11.2f %13.2f %8.2f\n",
            e->forward * 1e3, e->backward * 1e3, e->clip * 1e3, moe || cp ? 12 : 9,
            (e->tp_comm + e->ep_comm + e->cp_comm + e->pp_comm) * 1e3, e->bubble * 1e3, e->dp_comm * 1e3,
            (e->dp_comm_exposed + e->zero_gather + e->clip_allreduce) * 1e3, e->optimizer * 1e3,
            e->step_time_balanced * 1e3);
    if (s->software.stack != ET_STACK_FUSED)
        fprintf(out,
                "stack        %s: gradient accumulation %.2f ms, host synchronisations %.2f ms (in the step "
                "above; docs/cost-model.md, \"The software stack\")\n",
                et_stack_names[s->software.stack], e->accumulate * 1e3, e->host_sync * 1e3);
    char train[32], eval[32], total[32];
    report_format_duration(train, sizeof train, e->train_time);
    report_format_duration(eval, sizeof eval, e->eval_time);
    report_format_duration(total, sizeof total, e->time_to_train);
    if (e->n_phases > 1) {
        fprintf(out, "\nrank phases  from[%%]  rank  steps  step[ms]  parameters\n");
        for (int i = 0; i < e->n_phases; i++)
            fprintf(out, "             %7.1f %5d %6lld %9.3f %11.4g\n", 100 * e->phases[i].from,
                    e->phases[i].rank, e->phases[i].steps, e->phases[i].step_time * 1e3, e->phases[i].params);
    }
    if (e->straggler_factor > 1.0005)
        fprintf(
            out,
            "stragglers   step %.2f ms: %+.2f ms waiting for the slowest rank's compute (first order; the "
            "simulator plays it)\n",
            e->step_time * 1e3, e->straggler_delay * 1e3);
    fprintf(out, "\nthroughput   MFU %.1f%%, %.0f samples/s, %.0f tokens/s\n", 100 * e->mfu,
            e->samples_per_second, e->tokens_per_second);
    fprintf(out, "time-to-train %lld steps: %s training + %s evaluation = %s\n", e->steps, train, eval,
            total);
    print_timing(out, s, e);
    report_print_band(out, s, e->step_time, e->time_to_train);
    report_print_goodput(out, s, &e->goodput, e->time_to_train);
    report_print_energy(out, s, e);
    report_print_caveats(out, s);
}

double report_num(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

double report_sim_train_time(const et_estimate *e, const sim_result *sim)
{
    if (sim->n_phases != e->n_phases || sim->n_phases == 0) return e->steps * sim->step.mean + e->warmup_time;
    double t = e->warmup_time;
    for (int i = 0; i < e->n_phases; i++)
        t += e->phases[i].steps * sim->phases[i].step.mean;
    return t;
}

void report_print_simulated(FILE *out, const et_scenario *s, const et_estimate *e, const sim_result *sim)
{
    report_print_header(out, s, e, "simgrid");
    report_print_memory(out, &e->memory);
    const double mean = sim->step.mean;
    /* a 99th percentile of fewer than 100 steps is their maximum: say so */
    fprintf(out, "\nsimulated    steps  mean[ms]  p50[ms]  %s  compute[ms]  exposed_comm[ms]  idle[ms]\n",
            sim->simulated_steps >= 100 ? "p99[ms]" : "max[ms]");
    fprintf(out, "             %5d %9.2f %8.2f %8.2f %12.2f %17.2f %9.2f\n", sim->simulated_steps, mean * 1e3,
            sim->step.p50 * 1e3, sim->step.p99 * 1e3, sim->compute * 1e3, sim->exposed_comm * 1e3,
            sim->idle * 1e3);
    fprintf(
        out,
        "balance      straggler factor max/mean compute %.3f simulated, %.3f sampled by the analytic model\n",
        sim->straggler_factor, e->straggler_factor);
    fprintf(out,
            "analytic     step %.2f ms: compute %.2f ms, exposed communication %.2f ms, optimizer %.2f ms, "
            "stragglers %.2f ms\n",
            e->step_time * 1e3, e->compute * 1e3,
            (e->dp_comm_exposed + e->zero_gather + e->clip_allreduce) * 1e3, e->optimizer * 1e3,
            e->straggler_delay * 1e3);
    if (sim->has_alltoall && (s->software.ep_overlap || s->software.ep_dedup))
        fprintf(
            out, "experts      all-to-alls by the closed form (%s%s%s): %.2f ms a step (no flows played)\n",
            s->software.ep_overlap ? "software.ep_overlap: beside a partner micro-batch's computation" : "",
            s->software.ep_overlap && s->software.ep_dedup ? "; " : "",
            s->software.ep_dedup ? "software.ep_dedup: a token once to each GPU and node it reaches" : "",
            e->ep_comm * 1e3);
    else if (sim->has_alltoall)
        fprintf(
            out,
            "experts      %.0f all-to-alls a step: %.2f ms per rank (closed form %.2f ms: balanced, nothing "
            "else on the links), waiting for expert peers %.2f ms (analytic %.2f ms in all)\n",
            sim->alltoall.per_step, sim->alltoall.time * 1e3, sim->alltoall.closed_form * 1e3,
            sim->alltoall.wait * 1e3, e->ep_comm * 1e3);
    if (sim->n_collectives && s->parallel.data > 1) {
        /* the largest bucket's collective, nccl-tests style */
        const sim_collective_record *big = &sim->collectives[0];
        for (int i = 1; i < sim->n_collectives; i++)
            if (sim->collectives[i].bytes > big->bytes) big = &sim->collectives[i];
        fprintf(
            out,
            "\ncollective   size[MiB]  algorithm      time[us]  algbw[GB/s]  busbw[GB/s]  closed_form[us]\n");
        fprintf(out, "             %9.1f  %-12s %10.1f %12.1f %12.1f %16.1f\n", big->bytes / 1048576.0,
                big->algorithm, big->time * 1e6, big->algbw_GBps, big->busbw_GBps, big->closed_form * 1e6);
    }
    const report_headline headline = report_sim_headline(s, e, sim);
    if (sim->n_phases) {
        fprintf(out,
                "\nrank phases  from[%%]  rank  steps  simulated_step[ms]  analytic_step[ms]  parameters\n");
        for (int i = 0; i < sim->n_phases && i < e->n_phases; i++)
            fprintf(out, "             %7.1f %5d %6lld %19.3f %18.3f %11.4g\n", 100 * e->phases[i].from,
                    e->phases[i].rank, e->phases[i].steps, sim->phases[i].step.mean * 1e3,
                    e->phases[i].step_time * 1e3, e->phases[i].params);
    }
    char a[32], b[32], c[32];
    report_format_duration(a, sizeof a, headline.train);
    report_format_duration(b, sizeof b, e->eval_time);
    report_format_duration(c, sizeof c, headline.time_to_train);
    fprintf(out, "\nthroughput   MFU %.1f%%, %.0f samples/s, %.0f tokens/s\n", 100 * headline.mfu,
            headline.samples_per_second, headline.tokens_per_second);
    fprintf(out, "time-to-train %lld steps: %s training + %s evaluation = %s\n", e->steps, a, b, c);
    print_timing(out, s, e);
    report_print_band(out, s, mean, headline.time_to_train);
    report_print_goodput(out, s, &e->goodput, headline.time_to_train);
    report_print_energy(out, s, e);
    report_print_caveats(out, s);
}

typedef struct op_cost {
    int index;
    double time;
} op_cost;

static int by_time_desc(const void *a, const void *b)
{
    double x = ((const op_cost *)a)->time, y = ((const op_cost *)b)->time;
    return (x < y) - (x > y);
}

/* An op's id with its layer index written as *, so that the same op of every layer sums into one row. */
static void layer_pattern(const char *id, char *out, size_t size)
{
    int n = 0;
    if (sscanf(id, "layer.%*d.%n", &n) == 0 && n > 0)
        snprintf(out, size, "layer.*.%s", id + n);
    else
        snprintf(out, size, "%s", id);
}

void report_print_top_ops(FILE *out, const et_scenario *s, int count, int by_layer)
{
    et_graph g;
    et_error err;
    et_graph_options o = et_scenario_graph_options(s, 0);
    if (et_graph_build(&s->model, &o, &g, &err)) return;
    et_batch_shape b = et_batch_expected(s);
    op_cost *c = malloc((size_t)g.n_ops * sizeof *c);
    char(*name)[96] = malloc((size_t)g.n_ops * sizeof *name);
    double *flops = calloc((size_t)g.n_ops, sizeof *flops), *bytes = calloc((size_t)g.n_ops, sizeof *bytes);
    int *ops = calloc((size_t)g.n_ops, sizeof *ops), rows = 0;
    et_op_kind *kind = malloc((size_t)g.n_ops * sizeof *kind);
    double micro = 0, optimizer = 0;
    const int ready = c && name && flops && bytes && ops && kind;
    for (int i = 0; ready && i < g.n_ops; i++) {
        const et_op *op = &g.ops[i];
        const double t = et_op_time(op, &b, &s->cluster.device, s->precision);
        if (op->phase == ET_PHASE_OPTIMIZER) {
            optimizer += t; /* once a step, not part of a micro-batch */
            continue;
        }
        micro += t;
        char key[96];
        if (by_layer)
            layer_pattern(op->id, key, sizeof key);
        else
            snprintf(key, sizeof key, "%s", op->id);
        int r = by_layer ? 0 : rows; /* op ids are unique: only a layer pattern can repeat */
        while (r < rows && strcmp(name[r], key) != 0)
            r++;
        if (r == rows) {
            snprintf(name[rows], sizeof name[rows], "%s", key);
            kind[rows] = op->kind;
            c[rows] = (op_cost){rows, 0};
            rows++;
        }
        c[r].time += t;
        flops[r] += et_linear_eval(&op->flops, &b);
        bytes[r] += et_linear_eval(&op->bytes, &b);
        ops[r]++;
    }
    if (ready) {
        qsort(c, (size_t)rows, sizeof *c, by_time_desc);
        fprintf(out, "\ntop ops: one micro-batch of stage 0 (forward + backward %.2f ms)%s\n", micro * 1e3,
                by_layer ? ", each op summed over its layers" : "");
        fprintf(out, "%-44s %-12s %5s %12s %12s %10s %8s\n", "id", "kind", "ops", "time[ms]", "GFLOP", "GB",
                "share");
        for (int i = 0; i < count && i < rows; i++) {
            const int r = c[i].index;
            fprintf(out, "%-44s %-12s %5d %12.4f %12.3f %10.4f %7.1f%%\n", name[r], et_op_kind_names[kind[r]],
                    ops[r], c[i].time * 1e3, flops[r] / 1e9, bytes[r] / 1e9,
                    micro > 0 ? 100 * c[i].time / micro : 0);
        }
        fprintf(out, "optimizer (once a step, not in the shares above): %.4f ms\n", optimizer * 1e3);
    }
    free(c), free(name), free(flops), free(bytes), free(ops), free(kind);
    et_graph_free(&g);
}

/* Tensor-train layers of a scenario: factors, ranks, parameters, chosen contraction order and its FLOPs
 * against left to right, for the expected micro-batch. Returns a JSON array (NULL when not TT); prints
 * the same when `out` is not NULL. */
json_t *report_tensor_train(FILE *out, const et_scenario *s)
{
    const et_method *m = &s->method;
    if (m->kind != ET_METHOD_TENSOR_TRAIN) return NULL;
    json_t *rows = json_array();
    double T = et_batch_expected(s).tokens;
    if (out) fprintf(out, "\ntensor train (rank %d, %.0f tokens per micro-batch)\n", m->tt_rank, T);
    for (int i = 0; i < m->n_factors; i++) {
        const et_tt_factors *f = &m->factors[i];
        et_tt_shape tt;
        et_error err;
        if (et_tt_linear(&tt, f->in, f->d_in, f->out, f->d_out, m->tt_rank, &err)) continue;
        et_tt_plan best, naive;
        et_tt_plan_best(&tt, T, &best);
        et_tt_plan_naive(&tt, &naive);
        char order[512], ranks[128] = "";
        et_tt_plan_describe(&best, &tt, order, sizeof order);
        for (int k = 0; k <= f->d_in + f->d_out; k++) {
            size_t used = strlen(ranks);
            snprintf(ranks + used, sizeof ranks - used, "%s%d", k ? "," : "", tt.rank[k]);
        }
        double fb = et_tt_plan_flops(&best, T), fn = et_tt_plan_flops(&naive, T);
        if (out)
            fprintf(out,
                    "  %5d x %-5d ranks %-22s %8.0f parameters (dense %.0f); order %s: %.4g FLOPs, left to "
                    "right %.4g (%.2fx)\n",
                    f->n_in, f->n_out, ranks, et_tt_params(&tt), (double)f->n_in * f->n_out, order, fb, fn,
                    fn / fb);
        json_array_append_new(rows,
                              json_pack("{s:i, s:i, s:s, s:f, s:s, s:f, s:f}", "inputs", f->n_in, "outputs",
                                        f->n_out, "ranks", ranks, "parameters", et_tt_params(&tt), "order",
                                        order, "flops", fb, "flops_left_to_right", fn));
    }
    if (m->tt_embedding) {
        et_tt_shape tt;
        et_error err;
        if (!et_tt_embedding(&tt, m->emb_rows, m->emb_cols, m->emb_d, m->emb_rank, &err)) {
            if (out)
                fprintf(out,
                        "  embedding %d cores, rank %d: %.0f parameters (dense %.0f), %.0f FLOPs per token "
                        "lookup\n",
                        m->emb_d, m->emb_rank, et_tt_params(&tt), (double)s->model.vocab * s->model.hidden,
                        et_tt_embedding_flops_per_token(&tt));
            json_array_append_new(rows, json_pack("{s:s, s:f, s:f}", "embedding", "tensor_train",
                                                  "parameters", et_tt_params(&tt), "lookup_flops_per_token",
                                                  et_tt_embedding_flops_per_token(&tt)));
        }
    }
    return rows;
}

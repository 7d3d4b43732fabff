/* The assembled runtime model: its gradients (all ops chained through the graph) against finite differences
 * of the loss, in fp32 with a loose tolerance, for a masked-LM encoder, a causal decoder, its tensor-train
 * form, its Llama forms (RMSNorm, SwiGLU, rotary positions, no biases, untied output; multi-head and
 * grouped-query attention), a mixture of experts (top-2 of 4, dropless), latent attention (with and without a
 * query latent), a DeepSeek-shaped mixture (latent attention, a dense first layer, a shared expert, biased
 * router, a prediction module), the tiny Llama with two prediction modules, a Qwen3-shaped one (wide heads,
 * query and key norms) and gpt-oss's attention (narrow heads, sliding windows, sinks); checkpoints that are
 * well formed but wrong inside. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "plan.h"
#include "rt_checkpoint.h"
#include "rt_data.h"
#include "rt_model.h"
/* a mixture of experts' router: a step of 1e-2 flips some tokens' top-k choice (the loss jumps), 1e-3 does
 * not on these plans */
#define ROUTER_H 1e-3

/* The loss the gradients are of: the main head's, and the prediction modules' averaged and scaled */
static double loss_of(rt_model *m, const rt_batch *b, double norm)
{
    rt_model_begin_step(m);
    rt_model_step_micro(m, b, norm, NULL, NULL);
    rt_model_end_step(m); /* the losses read back */
    const int D = m->s->model.mtp_layers;
    return (m->loss_sum + (D ? m->mtp_loss_sum * et_model_mtp_loss_scale(&m->s->model) / D : 0)) / norm;
}

/* The data's first micro-batch and its loss normaliser (the positions it scores). */
static double first_batch(rt_data *data, rt_batch *b)
{
    rt_data_batch(data, 0, 0, b);
    double norm = 0;
    for (int p = 0; p < b->P; p++)
        norm += b->targets[p] >= 0;
    return norm;
}

/* every_expert: each token routed to every expert (top_k = experts), so that no step of the differences flips
 * a routing choice (biases move every token's logits) and the whole layer is checked to every element */
static void check_plan_opts(const char *path, bool every_expert, double mtp_scale)
{
    et_plan plan;
    et_error err;
    if (et_plan_load(path, &plan, &err)) {
        CHECK(0, "%s loads: %s", path, err.text);
        return;
    }
    if (every_expert) plan.s.model.moe.top_k = plan.s.model.moe.experts;
    if (mtp_scale > 0) plan.s.model.mtp_loss_scale = mtp_scale;
    rt_data data;
    rt_model m;
    rt_batch b = {0};
    rt_backend *be = rt_backend_cpu_create(&err);
    if (!be || rt_data_init(&data, &plan.s, 4, 0, plan.seed, NULL, &err) ||
        rt_model_init(&m, &plan.s, be, plan.seed, &err)) {
        CHECK(0, "init: %s", err.text);
        return;
    }
    const double norm = first_batch(&data, &b);
    float *g = malloc(m.n_params * sizeof(float)), *w = malloc(m.n_params * sizeof(float));
    if (plan.s.method.kind == ET_METHOD_LORA) {
        /* LoRA's B starts at zero (the adapted model is the frozen one, and A's gradient is zero): drawn
         * here so that every adapter has a gradient to check */
        rt_model_get_state(&m, w, NULL, NULL, NULL);
        unsigned long long st = 99;
        for (int i = 0; i < m.graph.n_params; i++)
            if (strstr(m.graph.params[i].id, ".lora_b."))
                for (size_t k = 0; k < (size_t)m.graph.params[i].dense; k++) {
                    st = st * 6364136223846793005ULL + 1442695040888963407ULL;
                    w[m.param_offset[i] + k] = (float)(((st >> 11) / 9007199254740992.0 - 0.5) * 0.2);
                }
        rt_model_set_state(&m, w, NULL, NULL);
    }
    loss_of(&m, &b, norm);
    rt_model_get_state(&m, w, NULL, NULL, g);
    /* probe parameters of every tensor: the largest-gradient element of each quarter (a product's rows in
     * order: a fused product's parts, such as latent attention's latent and rotary key, each probed); with
     * top-k routing the largest of each tensor only (a smaller gradient's step flips routing choices) */
    const int parts =
        plan.s.model.moe.experts > 0 && plan.s.model.moe.top_k < plan.s.model.moe.experts ? 1 : 4;
    int bad = 0, probed = 0;
    for (int i = 0; i < m.graph.n_params; i++)
        for (int part = 0; part < parts; part++) {
            const size_t n = (size_t)m.graph.params[i].dense, off = m.param_offset[i] + n * part / parts;
            const size_t end = m.param_offset[i] + n * (part + 1) / parts;
            if (end <= off) continue;
            size_t best = off;
            for (size_t k = off; k < end; k++)
                if (fabsf(g[k]) > fabsf(g[best])) best = k;
            /* a small analytic gradient is checked too (where no routing choice can flip) */
            if (fabsf(g[best]) < 1e-4 && parts == 1) continue;
            float save = w[best];
            /* a router's smaller step only where its choices can flip (top-k of more experts) */
            double h = parts == 1 && strstr(m.graph.params[i].id, "router") ? ROUTER_H : 1e-2;
            w[best] = (float)(save + h);
            rt_model_set_state(&m, w, NULL, NULL);
            double up = loss_of(&m, &b, norm);
            w[best] = (float)(save - h);
            rt_model_set_state(&m, w, NULL, NULL);
            double down = loss_of(&m, &b, norm);
            w[best] = save;
            rt_model_set_state(&m, w, NULL, NULL);
            /* within 5% and 2e-5: the central difference of an fp32 loss near 4 is good to about 2e-5 at
             * a step of 1e-2 (1e-6 measured on most tensors; a sanitized build's code rounds otherwise) */
            const double num = (up - down) / (2 * h);
            probed++;
            if (fabs(num - g[best]) > 0.05 * fabs(num) + 2e-5) {
                bad++;
                fprintf(stderr, "  %s[%zu]: analytic %.6g numeric %.6g\n", m.graph.params[i].id,
                        best - m.param_offset[i], g[best], num);
            }
        }
    CHECK(probed > 10 && bad == 0, "%s: %d of %d parameter tensors disagree with finite differences",
          plan.s.name, bad, probed);
    free(g), free(w);
    rt_batch_free(&b);
    rt_model_free(&m);
    be->destroy(be);
    rt_data_free(&data);
    et_plan_free(&plan);
}

static void check_plan_routed(const char *path, bool every_expert)
{
    check_plan_opts(path, every_expert, 0);
}

static void check_plan(const char *path)
{
    check_plan_routed(path, false);
}

/* The prediction modules' losses weighted mtp_scale (the default 0.1 leaves their share of a main-model
 * gradient under the 5% the probe resolves) */
static void check_plan_scaled(const char *path, double mtp_scale)
{
    check_plan_opts(path, false, mtp_scale);
}

/* A backend that lacks a kernel family is refused at start-up, naming the op and the family. */
static bool no_tensor_train(const rt_backend *be, rt_kernel_family f)
{
    (void)be;
    return f != RT_FAMILY_TENSOR_TRAIN;
}

static void check_refused(void)
{
    et_plan plan;
    et_error err;
    if (et_plan_load(ET_SOURCE_DIR "/tests/data/tiny-gpt-tt-plan.json", &plan, &err)) {
        CHECK(0, "plan loads: %s", err.text);
        return;
    }
    rt_backend *be = rt_backend_cpu_create(&err);
    be->supports = no_tensor_train;
    rt_model m;
    int rc = rt_model_init(&m, &plan.s, be, plan.seed, &err);
    CHECK(rc != 0, "a backend without tensor-train kernels is refused");
    CHECK(rc != 0 &&
              strstr(err.text, "the cpu backend cannot run op \"layer.0.attn.qkv\": it has no tensor-train "
                               "contraction kernels"),
          "the refusal names the op and the family: %s", rc ? err.text : "(none)");
    rt_model_free(&m);
    be->destroy(be);
    et_plan_free(&plan);
}

/* Checkpoints whose checksum is right but whose content is not: a negative second moment, an optimizer step
 * that is not the step's, NaN weights; and a round trip that restores the state exactly. */
static void check_checkpoints(void)
{
    et_plan plan;
    et_error err;
    if (et_plan_load(ET_SOURCE_DIR "/tests/data/tiny-gpt-plan.json", &plan, &err)) {
        CHECK(0, "plan loads: %s", err.text);
        return;
    }
    rt_backend *be = rt_backend_cpu_create(&err);
    rt_model m;
    if (!be || rt_model_init(&m, &plan.s, be, plan.seed, &err)) {
        CHECK(0, "init: %s", err.text);
        return;
    }
    char dir[] = "/tmp/et-ckpt-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    const size_t n = m.n_params;
    float *w = malloc(n * sizeof *w), *m1 = malloc(n * sizeof *m1), *v = malloc(n * sizeof *v);
    rt_model_get_state(&m, w, m1, v, NULL);
    for (size_t i = 0; i < n; i++)
        m1[i] = 1e-3f * (float)(i % 7), v[i] = 1e-6f * (float)(i % 5);
    long long next = 0;
    struct {
        const char *what, *want;
        long long step, t;
        size_t at;
        float value; /* written into v[at] (at < n) or w[at - n] */
    } cases[] = {
        {"a round trip", NULL, 5, 5, 0, 2e-6f},
        {"a negative second moment", "second moment 17 is -0.001: Adam's second moment is a mean of squares",
         5, 5, 17, -1e-3f},
        {"an optimizer step unlike the step's", "next step 5, optimizer step 3", 5, 3, 0, 0},
        {"a NaN weight", "parameter 3 is nan", 5, 5, n + 3, NAN},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        float *wc = malloc(n * sizeof *wc), *vc = malloc(n * sizeof *vc);
        memcpy(wc, w, n * sizeof *wc), memcpy(vc, v, n * sizeof *vc);
        if (cases[c].at < n)
            vc[cases[c].at] = cases[c].value;
        else
            wc[cases[c].at - n] = cases[c].value;
        rt_model_set_state(&m, wc, m1, vc);
        m.adam_t = cases[c].t;
        CHECK(rt_checkpoint_save(dir, &m, cases[c].step, &err) == 0, "%s: saved: %s", cases[c].what,
              err.text);
        rt_model_set_state(&m, w, m1, v);
        m.adam_t = 0;
        int rc = rt_checkpoint_load(dir, &m, &next, &err);
        if (!cases[c].want) {
            float *back = malloc(n * sizeof *back), *vb = malloc(n * sizeof *vb);
            rt_model_get_state(&m, back, NULL, vb, NULL);
            CHECK(rc == 0 && next == 5 && m.adam_t == 5 && memcmp(back, wc, n * sizeof *back) == 0 &&
                      memcmp(vb, vc, n * sizeof *vb) == 0,
                  "%s restores the state exactly (%s)", cases[c].what, rc ? err.text : "loaded");
            free(back), free(vb);
        } else {
            CHECK(rc != 0 && err.code == ET_ERROR_INPUT && strstr(err.text, cases[c].want),
                  "%s: refused with \"%s\": %s", cases[c].what, cases[c].want, rc ? err.text : "(loaded)");
        }
        free(wc), free(vc);
    }
    char path[64];
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    unlink(path);
    rmdir(dir);
    free(w), free(m1), free(v);
    rt_model_free(&m);
    be->destroy(be);
    et_plan_free(&plan);
}

/* LoRA starts as the frozen model: its first loss equals the dense plan's of the same seed (B = 0, the
 * frozen weights drawn from the dense parameters' streams), and it trains only its adapters: the frozen
 * model's own values are unchanged by an update. */
static void check_lora_start(void)
{
    et_plan lora, dense;
    et_error err;
    if (et_plan_load(ET_SOURCE_DIR "/tests/data/tiny-llama-lora-plan.json", &lora, &err) ||
        et_plan_load(ET_SOURCE_DIR "/tests/data/tiny-llama-plan.json", &dense, &err)) {
        CHECK(0, "plans load: %s", err.text);
        return;
    }
    /* a backend each: a backend's op timers are its model's */
    rt_backend *be = rt_backend_cpu_create(&err), *be_dense = rt_backend_cpu_create(&err);
    rt_data data;
    rt_model ml, md;
    rt_batch b = {0};
    if (!be || !be_dense || rt_data_init(&data, &lora.s, 4, 0, lora.seed, NULL, &err) ||
        rt_model_init(&ml, &lora.s, be, lora.seed, &err) ||
        rt_model_init(&md, &dense.s, be_dense, dense.seed, &err)) {
        CHECK(0, "init: %s", err.text);
        return;
    }
    const double norm = first_batch(&data, &b);
    const double l0 = loss_of(&ml, &b, norm), d0 = loss_of(&md, &b, norm);
    CHECK(l0 == d0, "LoRA's first loss %.9g is the dense model's %.9g", l0, d0);
    CHECK(ml.n_frozen == md.n_params && ml.graph.param_count == (double)ml.n_values,
          "frozen values %zu (the dense model's %zu), %zu trained", ml.n_frozen, md.n_params, ml.n_params);
    float *before = malloc(ml.n_frozen * sizeof(float)), *after = malloc(ml.n_frozen * sizeof(float));
    be->download(be, before, ml.frozen, ml.n_frozen * sizeof(float));
    rt_model_update(&ml, &lora.hyper);
    CHECK(rt_model_end_step(&ml) == 0, "the update runs");
    be->download(be, after, ml.frozen, ml.n_frozen * sizeof(float));
    CHECK(memcmp(before, after, ml.n_frozen * sizeof(float)) == 0,
          "an update leaves the frozen model as it was");
    free(before), free(after);
    rt_batch_free(&b);
    rt_model_free(&ml);
    rt_model_free(&md);
    be->destroy(be);
    be_dense->destroy(be_dense);
    rt_data_free(&data);
    et_plan_free(&lora);
    et_plan_free(&dense);
}

/* The windowed plan's loss differs from the same plan attending to the whole prefix (its sequences are
 * longer than the window), and equals it when the window covers every sequence: the windows reach the
 * kernels, on the layers the model names. */
static double first_loss(et_plan *plan, int window)
{
    et_error err;
    rt_data data;
    rt_model m;
    rt_batch b = {0};
    plan->s.model.window = window;
    rt_backend *be = rt_backend_cpu_create(&err);
    if (!be || rt_data_init(&data, &plan->s, 4, 0, plan->seed, NULL, &err) ||
        rt_model_init(&m, &plan->s, be, plan->seed, &err)) {
        CHECK(0, "init: %s", err.text);
        return -1;
    }
    const double norm = first_batch(&data, &b), loss = loss_of(&m, &b, norm);
    rt_batch_free(&b);
    rt_model_free(&m);
    be->destroy(be);
    rt_data_free(&data);
    return loss;
}

static void check_windows(void)
{
    et_plan plan;
    et_error err;
    if (et_plan_load(ET_SOURCE_DIR "/tests/data/tiny-oss-plan.json", &plan, &err)) {
        CHECK(0, "plan loads: %s", err.text);
        return;
    }
    const double windowed = first_loss(&plan, 8), full = first_loss(&plan, 0),
                 wide = first_loss(&plan, plan.s.data.seq_len);
    CHECK(windowed != full, "a window of 8 changes the loss (%.9f against %.9f)", windowed, full);
    CHECK(wide == full, "a window as long as the sequences changes nothing (%.9f against %.9f)", wide, full);
    et_plan_free(&plan);
}

/* Supervised fine-tuning's loss on answers (data.answer_fraction 0.25): each sequence of l tokens scores the
 * predictions of its last ceil(l / 4) tokens, the prompt's none; the first loss is the mean over those only;
 * a prediction module's targets are masked alike. */
static void check_answers(void)
{
    et_plan plan;
    et_error err;
    if (et_plan_load(ET_SOURCE_DIR "/tests/data/tiny-llama-mtp-plan.json", &plan, &err)) {
        CHECK(0, "plan loads: %s", err.text);
        return;
    }
    plan.s.data.answer_fraction = 0.25;
    rt_data data;
    rt_batch b = {0};
    if (rt_data_init(&data, &plan.s, 4, 0, plan.seed, NULL, &err)) {
        CHECK(0, "init: %s", err.text);
        return;
    }
    rt_data_batch(&data, 0, 0, &b);
    int bad = 0, scored = 0, want = 0;
    for (int s = 0; s < b.B; s++) {
        const int o = b.offsets[s], l = b.offsets[s + 1] - o, answer = (l + 3) / 4;
        want += answer < l - 1 ? answer : l - 1;
        for (int k = 0; k < l; k++) {
            const bool live = b.targets[o + k] >= 0;
            scored += live;
            bad += live != (k + 1 < l && k + 1 >= l - answer);
        }
    }
    CHECK(bad == 0 && scored == want, "answers only: %d scored, %d by hand, %d misplaced", scored, want, bad);
    rt_model m;
    rt_backend *be = rt_backend_cpu_create(&err);
    if (be && rt_model_init(&m, &plan.s, be, plan.seed, &err) == 0) {
        loss_of(&m, &b, scored);
        int *tgt = m.mtp_host + (size_t)m.s->model.mtp_layers * b.T, mismatch = 0;
        for (int j = 0; j < m.s->model.mtp_layers; j++)
            for (int s = 0; s < b.B; s++)
                for (int r = b.offsets[s]; r < b.offsets[s + 1]; r++)
                    mismatch += tgt[(size_t)j * b.T + r] !=
                                (r + j + 1 < b.offsets[s + 1] ? b.targets[r + j + 1] : -1);
        CHECK(mismatch == 0, "the prediction modules' targets masked as the main head's (%d differ)",
              mismatch);
        CHECK(m.loss_sum / scored > 1 && m.loss_sum / scored < 10, "a loss over the answers: %.3f",
              m.loss_sum / scored);
        rt_model_free(&m);
    } else {
        CHECK(0, "init: %s", err.text);
    }
    if (be) be->destroy(be);
    rt_batch_free(&b);
    rt_data_free(&data);
    et_plan_free(&plan);
}

/* Binned batches padded to their longest (data.sampling binned, data.pad_to longest, pad_multiple 8): every
 * sequence of a micro-batch is filled to its longest length rounded up to 8 (at most seq_len 32), and both
 * ranks of a step draw from the same bin (bins 1-16, 17-24, 25-32: padded to 8 or 16, to 24, to 32). */
static void check_padded_longest(void)
{
    et_plan plan;
    et_error err;
    if (et_plan_load(ET_SOURCE_DIR "/tests/data/tiny-llama-mtp-plan.json", &plan, &err)) {
        CHECK(0, "plan loads: %s", err.text);
        return;
    }
    plan.s.data.unpadded = false;
    et_sampling *c = &plan.s.data.sampling;
    memset(c, 0, sizeof *c);
    c->scheme = ET_SAMPLING_BINNED;
    c->n_bins = 3;
    c->bin_upper[0] = 16, c->bin_upper[1] = 24, c->bin_upper[2] = 32;
    c->pad_to = ET_PAD_LONGEST;
    c->pad_multiple = 8;
    rt_data r0 = {0}, r1 = {0};
    rt_batch a = {0}, b = {0};
    if (rt_data_init(&r0, &plan.s, 2, 0, plan.seed, NULL, &err) ||
        rt_data_init(&r1, &plan.s, 2, 1, plan.seed, NULL, &err)) {
        CHECK(0, "init: %s", err.text);
        rt_data_free(&r0);
        rt_data_free(&r1);
        et_plan_free(&plan);
        return;
    }
    int uneven = 0, unaligned = 0, other_bin = 0, shorter = 0;
    for (int step = 0; step < 24; step++) {
        rt_data_batch(&r0, step, 0, &a);
        rt_data_batch(&r1, step, 0, &b);
        const int la = a.offsets[1], lb = b.offsets[1];
        for (int s = 0; s < a.B; s++)
            uneven += a.offsets[s + 1] - a.offsets[s] != la;
        uneven += a.T != a.B * la || b.T != b.B * lb;
        unaligned += la % 8 != 0 || lb % 8 != 0 || la > 32;
        other_bin += (la <= 16 ? 0 : la <= 24 ? 1 : 2) != (lb <= 16 ? 0 : lb <= 24 ? 1 : 2);
        shorter += la < 32;
    }
    CHECK(uneven == 0 && unaligned == 0,
          "each micro-batch at its longest rounded up to 8 (%d uneven, %d not)", uneven, unaligned);
    CHECK(other_bin == 0, "both ranks of a step from one bin (%d steps not)", other_bin);
    CHECK(shorter > 0 && shorter < 24, "some micro-batches shorter than seq_len, some not (%d of 24 shorter)",
          shorter);
    rt_batch_free(&a);
    rt_batch_free(&b);
    rt_data_free(&r0);
    rt_data_free(&r1);
    et_plan_free(&plan);
}

/* One step's device reads: however many micro-batches, buckets and tensors, a step waits for the device
 * twice, both in rt_model_end_step (its scalars, then its op timers), for each way the optimizer decides on
 * the device: no clipping; the global clip; LAMB's per-tensor trust ratios with per-bucket clipping; fp16's
 * loss scale. Then a forced fp16 overflow: the gate skips the update on the device, the step reads as
 * skipped, the scale halves and the weights and the optimizer's step stay. */
/* A tiny plan's model on the CPU backend with its data, for tests that step it by hand. */
typedef struct stepper {
    et_plan plan;
    rt_backend *be;
    rt_model m;
    rt_data data;
    rt_batch b;
} stepper;

/* Loads the plan (the caller then edits st->plan.s); 0, or -1 after a failed check. */
static int stepper_load(stepper *st, const char *path)
{
    et_error err;
    memset(st, 0, sizeof *st);
    if (et_plan_load(path, &st->plan, &err)) {
        CHECK(0, "plan loads: %s", err.text);
        return -1;
    }
    return 0;
}

static int stepper_start(stepper *st, const char *what)
{
    et_error err;
    if (!(st->be = rt_backend_cpu_create(&err)) ||
        rt_model_init(&st->m, &st->plan.s, st->be, st->plan.seed, &err) ||
        rt_data_init(&st->data, &st->plan.s, 1, 0, st->plan.seed, NULL, &err)) {
        CHECK(0, "%s: init: %s", what, err.text);
        return -1;
    }
    return 0;
}

/* One step: every micro-batch, per-bucket clipping where asked, the update; 1 when it was skipped. */
static int stepper_step(stepper *st, int step, bool clip_buckets)
{
    rt_model *m = &st->m;
    rt_model_begin_step(m);
    const double norm = rt_data_global_predictions(&st->data, step);
    for (int micro = 0; micro < st->data.accum; micro++) {
        rt_data_batch(&st->data, step, micro, &st->b);
        rt_model_step_micro(m, &st->b, norm, NULL, NULL);
    }
    for (int k = 0; clip_buckets && k < m->n_buckets; k++)
        rt_model_clip_bucket(m, k, st->plan.s.optimizer.max_grad_norm);
    rt_model_update(m, &st->plan.hyper);
    return rt_model_end_step(m);
}

static void stepper_close(stepper *st)
{
    rt_batch_free(&st->b);
    rt_data_free(&st->data);
    rt_model_free(&st->m);
    if (st->be) st->be->destroy(st->be);
    et_plan_free(&st->plan);
}

static void check_host_waits(void)
{
    struct {
        const char *what;
        et_optimizer opt;
        et_clip_mode clip;
        et_precision precision;
        double loss_scale;
    } cases[] = {
        {"AdamW, no clipping", ET_OPT_ADAMW, ET_CLIP_NONE, ET_FP32, 1},
        {"AdamW, global clipping", ET_OPT_ADAMW, ET_CLIP_AFTER_ALLREDUCE, ET_FP32, 1},
        {"LAMB, per-bucket clipping", ET_OPT_LAMB, ET_CLIP_PER_BUCKET, ET_FP32, 1},
        {"AdamW, fp16 loss scale", ET_OPT_ADAMW, ET_CLIP_AFTER_ALLREDUCE, ET_FP16, 1024},
        {"AdamW, fp16 overflow", ET_OPT_ADAMW, ET_CLIP_NONE, ET_FP16, 0x1p60},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        stepper st;
        if (stepper_load(&st, ET_SOURCE_DIR "/tests/data/tiny-gpt-plan.json")) return;
        st.plan.s.optimizer.name = cases[c].opt;
        st.plan.s.optimizer.clip = cases[c].clip;
        st.plan.s.precision = cases[c].precision;
        if (stepper_start(&st, cases[c].what)) return;
        rt_model *m = &st.m;
        rt_model_set_loss_scale(m, cases[c].loss_scale);
        const bool overflow = cases[c].loss_scale > 1e9;
        float *w0 = malloc(m->n_params * sizeof *w0), *w1 = malloc(m->n_params * sizeof *w1);
        long long waits = 0;
        int skipped = 0;
        for (int step = 0; step < 2; step++) {
            if (step == 1) rt_model_get_state(m, w0, NULL, NULL, NULL);
            const long long t0 = st.be->host_waits, adam_t = m->adam_t;
            skipped = stepper_step(&st, step, cases[c].clip == ET_CLIP_PER_BUCKET);
            waits = st.be->host_waits - t0;
            CHECK(skipped == overflow && m->adam_t == adam_t + !overflow && isfinite(m->loss_sum) &&
                      m->loss_sum > 0,
                  "%s: step %d %s (loss %.3f)", cases[c].what, step, skipped ? "skipped" : "updated",
                  m->loss_sum / rt_data_global_predictions(&st.data, step));
        }
        CHECK(waits == 2 && st.data.accum > 1 && m->n_buckets > 1,
              "%s: %lld waits for the device in a step of %d micro-batches and %d buckets", cases[c].what,
              waits, st.data.accum, m->n_buckets);
        rt_model_get_state(m, w1, NULL, NULL, NULL);
        const bool same = memcmp(w0, w1, m->n_params * sizeof *w0) == 0;
        if (overflow)
            CHECK(same && m->skipped_steps == 2 && m->loss_scale == 0x1p58 && !isfinite(m->last_grad_norm),
                  "an fp16 overflow skips on the device: weights kept, 2 skipped, scale 2^%.0f, norm %g",
                  log2(m->loss_scale), m->last_grad_norm);
        else
            CHECK(!same && (cases[c].clip == ET_CLIP_AFTER_ALLREDUCE) == (m->last_grad_norm > 0),
                  "%s: the update changed the weights; gradient norm %.3g", cases[c].what, m->last_grad_norm);
        free(w0), free(w1);
        stepper_close(&st);
    }
}

/* Every tensor's slice of the flat buffers starts 32-byte aligned (a vocabulary of 97 makes the word
 * embeddings and the head's bias odd sizes): the model's parameter count is the graph's, and the padding
 * between slices stays zero through training, with AdamW and with LAMB (its chunks cover the padding). */
static void check_alignment(void)
{
    for (int lamb = 0; lamb < 2; lamb++) {
        stepper st;
        if (stepper_load(&st, ET_SOURCE_DIR "/tests/data/tiny-bert-plan.json")) return;
        st.plan.s.model.vocab = 97;
        st.plan.s.optimizer.name = lamb ? ET_OPT_LAMB : ET_OPT_ADAMW;
        if (stepper_start(&st, "alignment")) return;
        const rt_model *m = &st.m;
        int aligned = 1, odd = 0;
        for (int i = 0; i < m->graph.n_params; i++)
            aligned &= m->param_offset[i] % RT_ALIGN_FLOATS == 0,
                odd += (long long)m->graph.params[i].dense % RT_ALIGN_FLOATS != 0;
        for (int step = 0; step < 3; step++)
            stepper_step(&st, step, false);
        float *w = malloc(m->n_params * sizeof *w), *g = malloc(m->n_params * sizeof *g);
        rt_model_get_state(m, w, NULL, NULL, g);
        int pads = 0, zero = 1;
        for (int i = 0; i < m->graph.n_params; i++) {
            const size_t end = i + 1 < m->graph.n_params ? m->param_offset[i + 1] : m->n_params;
            for (size_t j = m->param_offset[i] + (size_t)m->graph.params[i].dense; j < end; j++)
                pads++, zero &= w[j] == 0 && g[j] == 0;
        }
        CHECK(aligned && odd > 0 && pads > 0 && zero && m->graph.param_count == (double)m->n_values &&
                  m->n_params >= m->n_values && isfinite(m->loss_sum),
              "%s: %d odd-sized tensors, every slice 32-byte aligned, %d padding values still zero after 3 "
              "steps, %zu parameters in %zu floats",
              lamb ? "LAMB" : "AdamW", odd, pads, m->n_values, m->n_params);
        free(w), free(g);
        stepper_close(&st);
    }
}

int main(void)
{
    check_alignment();
    check_host_waits();
    check_answers();
    check_padded_longest();
    check_windows();
    check_lora_start();
    check_checkpoints();
    check_refused();
    check_plan(ET_SOURCE_DIR "/tests/data/tiny-bert-plan.json");
    check_plan(ET_SOURCE_DIR "/tests/data/tiny-gpt-plan.json");
    check_plan(ET_SOURCE_DIR "/tests/data/tiny-gpt-tt-plan.json");
    check_plan(ET_SOURCE_DIR "/tests/data/tiny-llama-plan.json");
    check_plan(ET_SOURCE_DIR "/tests/data/tiny-llama-gqa-plan.json");
    check_plan(ET_SOURCE_DIR "/tests/data/tiny-moe-plan.json");
    check_plan(ET_SOURCE_DIR "/tests/data/tiny-llama-lora-plan.json");
    check_plan(ET_SOURCE_DIR "/tests/data/tiny-mla-plan.json");
    check_plan(ET_SOURCE_DIR "/tests/data/tiny-mla-direct-q-plan.json");
    check_plan(ET_SOURCE_DIR "/tests/data/tiny-oss-plan.json");
    check_plan(ET_SOURCE_DIR "/tests/data/tiny-llama-mtp-plan.json");
    check_plan_scaled(ET_SOURCE_DIR "/tests/data/tiny-llama-mtp-plan.json",
                      20); /* the modules' paths dominant */
    check_plan_routed(ET_SOURCE_DIR "/tests/data/tiny-deepseek-plan.json", true);
    check_plan_routed(ET_SOURCE_DIR "/tests/data/tiny-qwen3-plan.json", true);
    return check_summary("test_runtime_model");
}

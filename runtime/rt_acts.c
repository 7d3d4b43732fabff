/* Activation layout: one function walks the table of buffers twice, once to size the block and once to
 * hand out the pointers, so the size and the pointers cannot disagree; the second walk checks they do not. */
#include <stdlib.h>

#include "rt_exec.h"

typedef struct cursor {
    float *base; /* NULL while sizing */
    size_t used; /* floats handed out */
} cursor;

static float *take(cursor *c, size_t n)
{
    float *p = c->base ? c->base + c->used : NULL;
    c->used += n;
    return p;
}

static size_t max_of(size_t x, size_t y)
{
    return x > y ? x : y;
}

static void layout(rt_acts *a, cursor *c, size_t T, size_t P)
{
    const size_t H = (size_t)a->H, F = (size_t)a->F, F1 = (size_t)a->F1, V = (size_t)a->V,
                 QKV = (size_t)a->QKV, CW = (size_t)a->CW, Lq = (size_t)a->Lq, Lkv = (size_t)a->Lkv;
    for (int i = 0; i < a->L; i++) {
        rt_layer_acts *l = &a->layers[i];
        l->qkv = take(c, T * QKV), l->ctx = take(c, T * CW), l->y = take(c, T * H), l->res1 = take(c, T * H);
        if (a->qk_norm) {
            const size_t A = (size_t)a->A, KV = (size_t)a->KV, D = (size_t)a->attn.Dqk;
            l->q_pre = take(c, T * A * D), l->k_pre = take(c, T * KV * D);
            l->q_rstd_h = take(c, T * A), l->k_rstd_h = take(c, T * KV);
        }
        if (Lkv) {
            l->cq = Lq ? take(c, T * Lq) : NULL, l->cqn = Lq ? take(c, T * Lq) : NULL;
            l->q_rstd = Lq ? take(c, T) : NULL;
            l->ckv = take(c, T * Lkv), l->ckvn = take(c, T * Lkv), l->kv_rstd = take(c, T);
        }
        l->ln1 = take(c, T * H), l->ln2 = take(c, T * H), l->v = take(c, T * H), l->res2 = take(c, T * H);
        l->out = take(c, T * H), l->u = take(c, T * F1), l->g = take(c, T * F);
        l->probs = take(c, a->probs_cap);
        l->lse = a->flash ? take(c, T * (size_t)a->A) : NULL;
        l->ln1_mean = take(c, T), l->ln1_rstd = take(c, T), l->ln2_mean = take(c, T),
        l->ln2_rstd = take(c, T);
        if (a->E && a->moe_layer[i]) {
            const size_t E = (size_t)a->E, k = (size_t)a->k, R = T * k, RL = R * (size_t)a->ep;
            l->logits = take(c, T * E), l->w = take(c, T * k), l->x = take(c, RL * H);
            l->eu = take(c, RL * (size_t)a->Fe1), l->eg = take(c, RL * (size_t)a->Fe),
            l->ey = take(c, RL * H);
            l->xm = a->ep > 1 ? take(c, R * H) : l->x, l->eym = a->ep > 1 ? take(c, R * H) : l->ey;
            if (a->Fs) {
                l->su = take(c, T * (size_t)a->Fs1), l->sg = take(c, T * (size_t)a->Fs);
                l->sy = take(c, T * H);
            }
            /* device ints in float-sized slots (both 4 bytes; only ever read as ints) */
            l->idx = (int *)take(c, T * k), l->order = (int *)take(c, R), l->pos = (int *)take(c, T * k);
            l->loc_from = (int *)take(c, RL), l->counts_dev = (int *)take(c, E);
        }
        for (int t = 0; t < ET_LORA_TARGETS; t++)
            l->lora_u[t] = a->lora_r && (a->lora_targets >> t & 1u) ? take(c, T * (size_t)a->lora_r) : NULL;
    }
    for (int j = 0; j < a->D; j++) {
        rt_mtp_acts *x = &a->mtp[j];
        x->emb = take(c, T * H), x->e_rstd = take(c, T), x->h_rstd = take(c, T), x->cat = take(c, T * 2 * H);
        x->x0 = take(c, T * H), x->fin = take(c, T * H), x->fin_mean = take(c, T), x->fin_rstd = take(c, T);
        x->dlogits = take(c, P * V);
    }
    if (a->D)
        a->d_cat = take(c, T * 2 * H), a->d_mtp_h = take(c, T * H), a->d_emb = take(c, T * H),
        a->tmp_h = take(c, T * H);
    a->emb = take(c, T * H), a->x0 = take(c, T * H), a->emb_mean = take(c, T), a->emb_rstd = take(c, T);
    a->hs = take(c, P * H), a->t1 = take(c, P * H), a->t2 = take(c, P * H), a->t3 = take(c, P * H);
    a->t3_mean = take(c, P), a->t3_rstd = take(c, P);
    a->fin = take(c, T * H), a->fin_mean = take(c, T), a->fin_rstd = take(c, T);
    a->logits = take(c, P * V), a->dlogits = take(c, P * V);
    a->d_out = take(c, T * H), a->d_res = take(c, T * H), a->d_mid = take(c, T * H),
    a->d_ctx = take(c, T * CW);
    if (a->qk_norm) {
        const size_t qw = (size_t)a->A * (size_t)a->attn.Dqk;
        a->qk_tmp = take(c, T * qw), a->qk_tmp2 = take(c, T * qw);
    }
    if (Lkv) {
        const size_t A = (size_t)a->A, widest = max_of(Lq, Lkv);
        a->mla_q = take(c, T * A * (size_t)a->attn.Dqk),
        a->mla_kvu = take(c, T * A * (size_t)(a->Dn + a->attn.Dv));
        a->mla_kpe = take(c, T * (size_t)a->R);
        a->d_lat1 = take(c, T * widest), a->d_lat2 = take(c, T * widest);
    }
    a->d_qkv = take(c, T * QKV), a->d_ff = take(c, T * F), a->d_ff2 = take(c, T * F1);
    a->d_probs = take(c, a->probs_cap);
    a->d_lse = a->flash ? take(c, T * (size_t)a->A) : NULL;
    a->d_head = take(c, P * H), a->d_head2 = take(c, P * H);
    if (a->E) {
        const size_t R = T * (size_t)a->k, RL = R * (size_t)a->ep;
        a->d_x = take(c, RL * H), a->d_eu = take(c, RL * (size_t)a->Fe1),
        a->d_eg = take(c, RL * (size_t)a->Fe);
        a->d_ey = take(c, RL * H), a->d_logits = take(c, T * (size_t)a->E),
        a->d_w = take(c, T * (size_t)a->k);
        a->d_xm = a->ep > 1 ? take(c, R * H) : a->d_x, a->d_eym = a->ep > 1 ? take(c, R * H) : a->d_ey;
        a->rbuf = a->ep > 1 ? take(c, RL * H) : NULL;
        if (a->Fs) a->d_sg = take(c, T * (size_t)a->Fs), a->d_su = take(c, T * (size_t)a->Fs1);
    }
    if (a->lora_r) {
        /* an adapter's output (its target's outputs); frozen norms' gains and biases, the latents' too */
        a->d_lora = take(c, T * (size_t)a->lora_r), a->lora_tmp = take(c, T * max_of(max_of(QKV, F1), H));
        a->frozen_grad = take(c, 2 * max_of(H, max_of(Lq, Lkv)));
    }
}

int rt_acts_alloc(rt_model *m, et_error *err)
{
    const et_scenario *sc = m->s;
    rt_acts *a = calloc(1, sizeof *a);
    if (!a) return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory");
    m->acts = a;
    a->H = sc->model.hidden, a->F = sc->model.ffn, a->A = sc->model.heads, a->V = sc->model.vocab;
    a->L_main = sc->model.layers, a->D = sc->model.mtp_layers, a->L = a->L_main + a->D;
    a->decoder = sc->model.arch == ET_ARCH_DECODER;
    a->rms = sc->model.norm == ET_NORM_RMSNORM, a->swiglu = sc->model.mlp == ET_MLP_SWIGLU;
    a->F1 = a->swiglu ? 2 * a->F : a->F;
    const et_model_config *mc = &sc->model;
    a->KV = mc->mla.kv_lora > 0 ? a->A : mc->kv_heads ? mc->kv_heads : a->A;
    a->attn = (rt_attn_shape){a->A, a->KV, et_model_qk_dim(mc), et_model_v_dim(mc), 0};
    a->window = mc->window;
    a->qk_norm = mc->qk_norm;
    a->QKV = rt_attn_ld(&a->attn), a->CW = rt_attn_ctx_width(&a->attn);
    if (mc->mla.kv_lora > 0)
        a->Lq = mc->mla.q_lora, a->Lkv = mc->mla.kv_lora, a->R = mc->mla.rope_dim,
        a->Dn = et_model_head_dim(mc);
    if (sc->model.moe.experts > 0) {
        _Static_assert(sizeof(int) == sizeof(float), "routing indices share the float block");
        a->E = sc->model.moe.experts, a->k = sc->model.moe.top_k, a->Fe = et_model_expert_ffn(&sc->model);
        a->Fe1 = a->swiglu ? 2 * a->Fe : a->Fe;
        a->Fs = sc->model.moe.shared_experts * a->Fe, a->Fs1 = a->swiglu ? 2 * a->Fs : a->Fs;
        a->ep = m->ep > 1 ? m->ep : 1;
        a->moe_layer = calloc((size_t)a->L, sizeof *a->moe_layer);
        a->host_idx = malloc((3 * (size_t)m->T_cap * a->k * a->ep + (size_t)a->E + 1) * sizeof *a->host_idx);
        if (!a->moe_layer || !a->host_idx)
            return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory");
        for (int i = 0; i < a->L; i++)
            a->moe_layer[i] = et_model_layer_is_moe(&sc->model, i);
    }
    a->rope_base = sc->model.position == ET_POSITION_ROPE ? sc->model.rope_base : 0;
    if (sc->method.kind == ET_METHOD_LORA) {
        a->lora_r = sc->method.lora_rank, a->lora_targets = sc->method.lora_targets;
        a->lora_scale = (float)(sc->method.lora_alpha / sc->method.lora_rank);
    }
    a->flash = sc->parallel.attention == ET_ATTENTION_FLASH;
    a->probs_cap = a->flash ? 0 : (size_t)a->A * sc->batch.local * sc->data.seq_len * sc->data.seq_len;
    a->layers = calloc((size_t)a->L, sizeof *a->layers);
    a->mtp = a->D ? calloc((size_t)a->D, sizeof *a->mtp) : NULL;
    if (!a->layers || (a->D && !a->mtp))
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory");
    for (int i = 0; a->E && i < a->L; i++)
        if (a->moe_layer[i]) {
            /* host: counts [E] | counts_local [E / x] | sent [x] | received [x] | received_by [E] */
            rt_layer_acts *l = &a->layers[i];
            const int El = a->E / a->ep;
            if (!(l->counts = calloc((size_t)(2 * a->E + El + 2 * a->ep), sizeof(int))))
                return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory");
            l->counts_local = l->counts + a->E, l->sent = l->counts_local + El, l->received = l->sent + a->ep;
            l->received_by = l->received + a->ep;
        }
    cursor size = {NULL, 0};
    layout(a, &size, (size_t)m->T_cap, (size_t)m->P_cap);
    a->block = m->be->alloc(m->be, size.used * sizeof(float));
    if (!a->block)
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                 "out of %s memory for activations (%.1f MiB for a micro-batch of %lld x %d "
                                 "tokens: lower batch.local or data.seq_len)",
                                 m->be->name, size.used * 4.0 / 1048576, (long long)sc->batch.local,
                                 sc->data.seq_len);
    a->floats = size.used;
    cursor hand = {a->block, 0};
    layout(a, &hand, (size_t)m->T_cap, (size_t)m->P_cap);
    if (hand.used != size.used)
        return et_error_set_code(err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL,
                                 "internal: activation layout handed out %zu floats, sized %zu", hand.used,
                                 size.used);
    return 0;
}

void rt_acts_free(rt_model *m)
{
    rt_acts *a = m->acts;
    if (!a) return;
    if (a->block) m->be->free(m->be, a->block);
    for (int i = 0; a->layers && i < a->L; i++)
        free(a->layers[i].counts);
    free(a->moe_layer);
    free(a->host_idx);
    free(a->layers);
    free(a->mtp);
    free(a);
    m->acts = NULL;
}

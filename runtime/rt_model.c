/* rt_model: start-up (checks, graph, parameter layout, buckets, activations, binding, initial state) and the
 * walk of one micro-batch, op by op, through the bound executors. */
#include "rt_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_exec.h"
#include "scenario_graph.h"

static int refuse_unsupported(const et_scenario *s, et_error *err)
{
    if (s->parallel.tensor != 1 || s->parallel.pipeline != 1 || s->parallel.context != 1 ||
        s->parallel.zero_stage != 0)
        return et_error_set(err, s->source, 0, 0, "$.parallelism",
                            "etrun runs data and expert parallelism only: tensor, pipeline and context must "
                            "be 1 and ZeRO 0");
    if (s->method.kind == ET_METHOD_TENSOR_TRAIN && s->method.tt_embedding)
        return et_error_set(
            err, s->source, 0, 0, "$.method.tensor_train.embedding",
            "etrun runs tensor-train linear layers; tensor-train embeddings are not supported yet");
    if (s->method.kind == ET_METHOD_TENSOR_TRAIN && s->method.n_phases > 1)
        return et_error_set(err, s->source, 0, 0, "$.method.tensor_train.rank_schedule",
                            "etrun trains at one rank; rank schedules are costed by etsim only");
    if (s->optimizer.galore.rank > 0)
        return et_error_set(
            err, s->source, 0, 0, "$.optimizer.galore",
            "etrun runs full-rank Adam; GaLore's projected states are costed by etsim only for "
            "now");
    const et_model_config *mc = &s->model;
    if (mc->moe.experts > 0 && mc->moe.capacity_factor > 0)
        return et_error_set(err, s->source, 0, 0, "$.model.moe.capacity_factor",
                            "etrun routes dropless (capacity_factor 0); a fixed capacity is costed and "
                            "simulated by etsim only for now");
    if ((mc->mla.kv_lora > 0 || mc->window > 0 || mc->sinks) && mc->arch != ET_ARCH_DECODER)
        return et_error_set(err, s->source, 0, 0, "$.model.arch",
                            "etrun runs latent attention, sliding windows and attention sinks in decoders "
                            "only");
    if (mc->mtp_layers > 0 && s->method.kind == ET_METHOD_LORA)
        return et_error_set(err, s->source, 0, 0, "$.model.mtp_layers",
                            "etrun trains multi-token prediction with the whole model, not with LoRA");
    if (mc->position == ET_POSITION_ALIBI)
        return et_error_set(
            err, s->source, 0, 0, "$.model.position_embedding",
            "etrun runs learned, rotary or no positions; ALiBi is costed by etsim only for now");
    if (s->software.ep_overlap || s->software.ep_dedup)
        return et_error_set(
            err, s->source, 0, 0, s->software.ep_overlap ? "$.software.ep_overlap" : "$.software.ep_dedup",
            "etrun's all-to-alls send every routed row and block the step; the overlapped and "
            "deduplicated all-to-alls are costed by etsim only");
    if (s->model.head == ET_HEAD_MLM_NSP)
        return et_error_set(
            err, s->source, 0, 0, "$.model.loss_head",
            "etrun runs the \"mlm\" and \"causal_lm\" heads; \"mlm_nsp\" is not supported yet");
    return 0;
}

/* The products' arithmetic from the plan's precision (rt_gemm_math): fp32 and tf32 as named, bf16 and fp16
 * as 16-bit product inputs with everything else fp32; fp8 is refused. */
static int choose_gemm_math(const et_scenario *s, rt_backend *be, et_error *err)
{
    const rt_gemm_math math = rt_gemm_math_for(s->precision);
    if (math == RT_GEMM_MATH_COUNT || be->set_gemm_math(be, math))
        return et_error_set(err, s->source, 0, 0, "$.precision", "the %s backend cannot train in %s (%s)",
                            be->name, et_precision_names[s->precision],
                            "its products run fp32, tf32, bf16 and fp16");
    return 0;
}

/* The parameters the embedding and head executors reach by name. */
static int bind_named_params(rt_model *m, et_error *err)
{
    rt_acts *a = m->acts;
    a->word = rt_param(m, "embed.word_embeddings", &a->dword);
    a->pos = rt_param(m, "embed.position_embeddings", &a->dpos);
    a->type = rt_param(m, "embed.token_type_embeddings", &a->dtype);
    a->emb_g = rt_param(m, "embed.layernorm.weight", &a->emb_dg);
    a->emb_b = rt_param(m, "embed.layernorm.bias", &a->emb_db);
    const char *dec = a->decoder ? "head.lm.decoder" : "head.mlm.decoder";
    char id[64];
    snprintf(id, sizeof id, "%s.weight", dec);
    a->dec_W = m->s->model.tie_embeddings ? a->word : rt_param(m, id, &a->dec_dW);
    if (m->s->model.tie_embeddings) a->dec_dW = a->dword;
    snprintf(id, sizeof id, "%s.bias", dec);
    a->dec_b = rt_param(m, id, &a->dec_db); /* GPT's decoder has no bias: NULL, the kernels skip it */
    if (!a->word || (!a->pos && m->s->model.position == ET_POSITION_LEARNED) || !a->dec_W)
        return et_error_set(err, NULL, 0, 0, NULL, "the graph lacks the embedding or decoder parameters");
    for (int i = 0; m->s->model.sinks && i < a->L; i++) {
        snprintf(id, sizeof id, "layer.%d.attn.sinks", i);
        if (!(a->layers[i].sinks = rt_param(m, id, &a->layers[i].dsinks)))
            return et_error_set(err, NULL, 0, 0, NULL, "the graph lacks %s", id);
        if (!a->layers[i].dsinks) a->layers[i].dsinks = a->frozen_grad; /* frozen (LoRA) */
    }
    for (int i = 0; m->s->model.qk_norm && i < a->L; i++) {
        rt_layer_acts *l = &a->layers[i];
        snprintf(id, sizeof id, "layer.%d.attn.q_norm.weight", i);
        l->qn_g = rt_param(m, id, &l->qn_dg);
        snprintf(id, sizeof id, "layer.%d.attn.k_norm.weight", i);
        l->kn_g = rt_param(m, id, &l->kn_dg);
        if (!l->qn_g || !l->kn_g) return et_error_set(err, NULL, 0, 0, NULL, "the graph lacks %s", id);
    }
    return 0;
}

/* The micro-batch's ints on the device (batch_ints): tokens, positions, types, offsets (T + 1), scored rows,
 * targets, and the prediction modules' tokens and targets, at a capacity of T_cap tokens. */
static size_t batch_ints_count(const rt_model *m)
{
    const size_t T = (size_t)m->T_cap, D = (size_t)m->s->model.mtp_layers;
    return 6 * T + 1 + 2 * D * T;
}

static int alloc_state(rt_model *m, et_error *err)
{
    rt_backend *be = m->be;
    const size_t bytes = m->n_params * sizeof(float), T = (size_t)m->T_cap;
    m->params = be->alloc(be, bytes);
    m->grads = be->alloc(be, bytes);
    m->m = be->alloc(be, bytes);
    m->v = be->alloc(be, bytes);
    m->mask = m->s->method.kind == ET_METHOD_SPARSE ? be->alloc(be, bytes) : NULL;
    const size_t D = (size_t)m->s->model.mtp_layers;
    m->batch_ints = be->alloc(be, batch_ints_count(m) * sizeof(int));
    m->mtp_host = D ? malloc(2 * D * T * sizeof(int)) : NULL;
    m->ops = calloc((size_t)m->graph.n_ops, sizeof *m->ops);
    m->op_time = calloc((size_t)m->graph.n_ops, sizeof *m->op_time);
    m->tt_records = calloc((size_t)m->s->model.layers * 4, sizeof *m->tt_records);
    if (!m->params || !m->grads || !m->m || !m->v || !m->batch_ints || !m->ops || !m->op_time ||
        (D && !m->mtp_host) || !m->tt_records || (m->s->method.kind == ET_METHOD_SPARSE && !m->mask))
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                 "out of %s memory for %zu parameters", be->name, m->n_params);
    int *p = m->batch_ints;
    m->batch.tokens = p, m->batch.positions = p + T, m->batch.types = p + 2 * T; /* types stay 0 */
    m->batch.offsets = p + 3 * T, m->batch.pred_rows = p + 4 * T + 1, m->batch.targets = p + 5 * T + 1;
    if (D) m->batch.mtp_tokens = p + 6 * T + 1, m->batch.mtp_targets = p + 6 * T + 1 + D * T;
    return 0;
}

/* The step's device scalars (rt_model.h's layout) and the optimizer's gate after them, one block read back
 * once a step, and its host copy; for LAMB, the parameters' tensors in chunks (rt_chunks.c). */
static int alloc_scalars(rt_model *m, et_error *err)
{
    m->n_scalars = RT_SC_BUCKETS + 2 * m->n_buckets + 2 * m->graph.n_params;
    const size_t bytes = (size_t)(m->n_scalars + 1) * sizeof(double); /* the gate's two floats in the last */
    m->scalars = m->be->alloc(m->be, bytes);
    m->scalars_host = calloc(1, bytes);
    if (!m->scalars || !m->scalars_host)
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory");
    m->gate = (float *)(m->scalars + m->n_scalars);
    if (m->s->optimizer.name != ET_OPT_LAMB) return 0;
    /* LAMB's per-tensor norms in one launch: the parameters' tensors cut into chunks */
    size_t *sizes = malloc(((size_t)m->graph.n_params + 1) * sizeof *sizes);
    if (!sizes) return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory");
    for (int i = 0; i < m->graph.n_params; i++) /* each tensor with its alignment's padding (zeros) */
        sizes[i] = (i + 1 < m->graph.n_params ? m->param_offset[i + 1] : m->n_params) - m->param_offset[i];
    const int rc = rt_chunks_build(m->be, sizes, m->graph.n_params, &m->chunks);
    free(sizes);
    return rc ? et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory for LAMB's chunks")
              : 0;
}

/* LoRA: the model's own parameters, listed by its graph without the method, in a buffer of their own. */
static int alloc_frozen(rt_model *m, const et_graph_options *o, et_error *err)
{
    if (m->s->method.kind != ET_METHOD_LORA) return 0;
    et_graph_options dense = *o;
    dense.method = NULL;
    if (et_graph_params(&m->s->model, &dense, &m->frozen_graph, err)) return -1;
    m->frozen_offset = malloc(((size_t)m->frozen_graph.n_params + 1) * sizeof *m->frozen_offset);
    if (!m->frozen_offset) return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory");
    for (int i = 0; i < m->frozen_graph.n_params; i++) {
        m->frozen_offset[i] = m->n_frozen;
        m->n_frozen += rt_aligned_floats((size_t)m->frozen_graph.params[i].dense);
    }
    m->frozen = m->be->alloc(m->be, (m->n_frozen ? m->n_frozen : 1) * sizeof(float));
    if (!m->frozen)
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                 "out of %s memory for %zu frozen parameters", m->be->name, m->n_frozen);
    return 0;
}

int rt_model_init(rt_model *m, const et_scenario *s, rt_backend *be, unsigned long long seed, et_error *err)
{
    return rt_model_init_comm(m, s, be, seed, NULL, err);
}

int rt_model_init_comm(rt_model *m, const et_scenario *s, rt_backend *be, unsigned long long seed,
                       rt_comm *comm, et_error *err)
{
    memset(m, 0, sizeof *m);
    m->s = s;
    m->be = be;
    m->seed = seed;
    m->comm = comm;
    m->ep = s->parallel.expert > 1 ? s->parallel.expert : 1;
    m->loss_scale = 1;
    if (refuse_unsupported(s, err) || choose_gemm_math(s, be, err)) return -1;
    if (m->ep > 1) {
        if (!comm || comm->size % m->ep)
            return et_error_set(err, s->source, 0, 0, "$.parallelism.expert",
                                "expert parallelism %d needs a multiple of %d ranks (mpirun -np), got %d",
                                m->ep, m->ep, comm ? comm->size : 1);
        if (comm->set_expert_groups(comm, m->ep))
            return et_error_set_code(err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL,
                                     "cannot form the expert-parallel groups");
        m->ep_index = comm->rank % m->ep;
    }
    et_graph_options o = et_plan_graph_options(s);
    if (et_graph_build(&s->model, &o, &m->graph, err)) return -1;
    if (be->op_timers_init(be, m->graph.n_ops))
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory for %d op timers",
                                 m->graph.n_ops);
    /* every parameter is held dense (sparse ones with a mask) */
    m->param_offset = malloc((size_t)m->graph.n_params * sizeof *m->param_offset);
    if (!m->param_offset) return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory");
    for (int i = 0; i < m->graph.n_params; i++) { /* each tensor's slice 32-byte aligned */
        m->param_offset[i] = m->n_params;
        m->n_params += rt_aligned_floats((size_t)m->graph.params[i].dense);
        m->n_values += (size_t)m->graph.params[i].dense;
    }
    m->T_cap = (int)(s->batch.local * s->data.seq_len);
    m->P_cap = m->T_cap;
    if (alloc_state(m, err) || alloc_frozen(m, &o, err)) return -1;
    /* the model's buckets, cut as the cost model cuts them (model/analytic.c, sim/step_sim.c): by the
     * gradient bytes it reduces in the plan's precision, kept values for sparse plans unless they reduce
     * dense gradients; each is reduced as its dense fp32 slice, the layout etrun holds */
    if (et_buckets_build(&m->graph, s->parallel.bucket_bytes, et_precision_bytes(s->precision), &m->buckets,
                         &m->n_buckets, err))
        return -1;
    if (alloc_scalars(m, err) || rt_acts_alloc(m, err) || bind_named_params(m, err)) return -1;
    if (rt_init_params(m, err)) return -1;
    if (rt_bind_ops(m, err)) return -1; /* also draws tensor-train cores at their own scale */
    if (rt_init_masks(m, err)) return -1;
    /* 16-bit products read the weights from a 16-bit copy rounded once a step, not at every call */
    const rt_gemm_math math = rt_gemm_math_for(s->precision);
    if (math == RT_GEMM_BF16 || math == RT_GEMM_FP16) {
        if (!(m->params16 = be->alloc(be, m->n_params * 2)))
            return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                     "out of %s memory for the parameters' 16-bit copy", be->name);
        be->shadow16(be, m->params, m->params16, m->n_params);
        rt_model_refresh16(m);
    }
    return 0;
}

void rt_model_refresh16(rt_model *m)
{
    if (m->params16) m->be->round16(m->be, m->params16, m->params, m->n_params);
}

void rt_model_free(rt_model *m)
{
    rt_backend *be = m->be;
    if (!be) return;
    rt_acts_free(m);
    rt_chunks_free(be, &m->chunks);
    for (int i = 0; m->tt_records && i < m->s->model.layers * 4; i++) {
        rt_tt_record *r = &m->tt_records[i];
        if (r->tmp) be->free(be, r->tmp);
        for (int c = 0; c < 3; c++)
            if (r->work[c]) be->free(be, r->work[c]);
    }
    if (m->params16) be->shadow16(be, NULL, NULL, 0);
    float *dev[] = {m->params, m->grads, m->m, m->v, m->mask, m->frozen, (float *)m->scalars, m->params16};
    for (size_t k = 0; k < sizeof dev / sizeof dev[0]; k++)
        if (dev[k]) be->free(be, dev[k]);
    if (m->batch_ints) be->free(be, m->batch_ints);
    free(m->tt_records), free(m->ops), free(m->op_time), free(m->param_offset), free(m->buckets);
    free(m->frozen_offset);
    free(m->mtp_host);
    free(m->scalars_host);
    for (int k = 0; k < m->n_staging; k++)
        be->free_host(be, m->staging[k]);
    free(m->staging);
    et_graph_free(&m->graph);
    et_graph_free(&m->frozen_graph);
    memset(m, 0, sizeof *m);
}

void rt_model_begin_step(rt_model *m)
{
    m->be->fill(m->be, m->grads, 0, m->n_params);
    /* the scalars and the gate zeroed (a double 0 is two float 0s) */
    m->be->fill(m->be, (float *)m->scalars, 0, 2 * (size_t)(m->n_scalars + 1));
    memset(m->op_time, 0, (size_t)m->graph.n_ops * sizeof *m->op_time);
    m->loss_sum = 0;
    m->mtp_loss_sum = 0;
    m->last_grad_norm = 0;
    m->step_loss_scale = m->loss_scale;
    m->norm_taken = m->updated = false;
    m->micro = 0;
}

double *rt_model_scalar(const rt_model *m, int slot)
{
    return m->scalars + slot;
}

int rt_model_end_step(rt_model *m)
{
    rt_backend *be = m->be;
    be->download(be, m->scalars_host, m->scalars, (size_t)(m->n_scalars + 1) * sizeof(double));
    be->op_timers_collect(be, m->op_time, m->graph.n_ops);
    const double *h = m->scalars_host, S = m->step_loss_scale;
    m->loss_sum = h[RT_SC_LOSS];
    m->mtp_loss_sum = h[RT_SC_MTP_LOSS];
    m->last_grad_norm = m->norm_taken ? sqrt(h[RT_SC_GRAD_SQ]) / S : 0;
    if (!m->updated) return 0;
    float gate[2];
    memcpy(gate, h + m->n_scalars, sizeof gate);
    const int skipped = gate[1] != 0;
    if (skipped) m->adam_t--; /* the update did not happen: its bias corrections come again */
    if (S != 1) {             /* fp16's dynamic loss scale, as PyTorch's GradScaler */
        if (skipped)
            m->skipped_steps++, m->loss_scale = S / 2 >= 1 ? S / 2 : 1, m->good_steps = 0;
        else if (++m->good_steps == RT_LOSS_SCALE_GROWTH_INTERVAL)
            m->loss_scale = S * 2, m->good_steps = 0;
    }
    return skipped;
}

void rt_model_bucket_norms(const rt_model *m, int k, double max_norm, double *before, double *after)
{
    const double *h = m->scalars_host + RT_SC_BUCKETS + 2 * k, S = m->step_loss_scale;
    *before = sqrt(h[0]) / S;
    *after = *before > max_norm ? sqrt(h[1]) / S : *before; /* measured again where it was clipped */
}

/* The flat-buffer slice (floats) of graph parameters [param, param + n). */
static void param_slice(const rt_model *m, int param, int n, size_t *first, size_t *count)
{
    const int last = param + n - 1;
    *first = m->param_offset[param];
    *count = m->param_offset[last] + (size_t)m->graph.params[last].dense - *first;
}

/* The micro-batch's staging area: host memory the backend copies from without waiting (pinned on a GPU),
 * one a micro-batch of the step, laid out as the device's batch_ints; made the first time a step has that
 * many micro-batches, reused from the next step on (its copy long done: rt_model_end_step waited). NULL
 * when out of memory. */
static int *staging_slot(rt_model *m)
{
    const int k = m->micro++;
    if (k < m->n_staging) return m->staging[k];
    int **grown = realloc(m->staging, (size_t)(k + 1) * sizeof *grown);
    if (!grown) return NULL;
    m->staging = grown;
    m->staging[k] = m->be->alloc_host(m->be, batch_ints_count(m) * sizeof(int));
    if (!m->staging[k]) return NULL;
    m->n_staging = k + 1;
    return m->staging[k];
}

/* The batch's arrays into a staging slot, at batch_ints' offsets, then one copy to the device. */
static int upload_batch(rt_model *m, const rt_batch *b)
{
    rt_backend *be = m->be;
    rt_dev_batch *d = &m->batch;
    int *h = staging_slot(m);
    if (!h) return -1;
    d->B = b->B, d->T = b->T, d->P = b->P;
    d->offsets_host = b->offsets;
    const size_t at = (size_t)m->T_cap; /* batch_ints' stride (its capacity in tokens) */
    memcpy(h, b->tokens, (size_t)b->T * sizeof(int));
    memcpy(h + at, b->positions, (size_t)b->T * sizeof(int));
    memcpy(h + 3 * at, b->offsets, (size_t)(b->B + 1) * sizeof(int));
    memcpy(h + 4 * at + 1, b->pred_rows, (size_t)b->P * sizeof(int));
    memcpy(h + 5 * at + 1, b->targets, (size_t)b->P * sizeof(int));
    const int D = m->s->model.mtp_layers, T = b->T;
    if (D) { /* each depth's tokens and targets, within each sequence (causal: row r's target is targets[r])
              */
        int *tok = m->mtp_host, *tgt = m->mtp_host + (size_t)D * T;
        for (int j = 0; j < D; j++)
            for (int s = 0; s < b->B; s++) {
                const int end = b->offsets[s + 1];
                for (int r = b->offsets[s]; r < end; r++) {
                    tok[(size_t)j * T + r] = r + j + 1 < end ? b->tokens[r + j + 1] : 0;
                    /* the main head's target of row r + j + 1 (token r + j + 2, or masked) */
                    tgt[(size_t)j * T + r] = r + j + 1 < end ? b->targets[r + j + 1] : -1;
                }
            }
        memcpy(h + 6 * at + 1, tok, (size_t)D * T * sizeof(int));
        memcpy(h + 6 * at + 1 + (size_t)D * at, tgt, (size_t)D * T * sizeof(int));
    }
    be->upload(be, m->batch_ints, h, batch_ints_count(m) * sizeof(int));
    return 0;
}

int rt_model_step_micro(rt_model *m, const rt_batch *b, double norm, rt_grad_ready_fn ready, void *ctx)
{
    if (b->T > m->T_cap || b->P > m->P_cap || b->B > m->T_cap) return -1;
    rt_backend *be = m->be;
    if (upload_batch(m, b)) return -1;
    m->acts->norm = norm / m->loss_scale; /* the loss's gradient scaled, the loss itself not */
    for (int i = 0; i < m->graph.n_ops; i++) {
        const et_op *op = &m->graph.ops[i];
        if (op->phase == ET_PHASE_OPTIMIZER) continue;
        be->op_timer_begin(be, i);
        m->ops[i].exec(m, &m->ops[i], &m->batch);
        if (op->phase == ET_PHASE_BACKWARD && m->mask && op->grad_count) {
            /* only kept weights learn: mask the gradients as soon as they are final */
            size_t first, count;
            param_slice(m, op->grad_first, op->grad_count, &first, &count);
            be->mask_mul(be, m->grads + first, m->mask + first, count);
        }
        be->op_timer_end(be, i);
        if (ready && op->phase == ET_PHASE_BACKWARD) ready(ctx, i);
    }
    return m->comm_failed ? -1 : 0; /* an all-to-all failed (under a handler that returns) */
}

void rt_model_bucket_slice(const rt_model *m, int k, size_t *first, size_t *count)
{
    param_slice(m, m->buckets[k].param_first, m->buckets[k].param_count, first, count);
}

void rt_model_clip_bucket(rt_model *m, int k, double max_norm)
{
    rt_backend *be = m->be;
    size_t first, count;
    rt_model_bucket_slice(m, k, &first, &count);
    double *sq = rt_model_scalar(m, RT_SC_BUCKETS + 2 * k);
    be->sum_sq(be, m->grads + first, count, sq);
    be->clip_scale(be, m->grads + first, count, sq, max_norm, m->loss_scale, sq + 1);
}

void rt_model_get_state(const rt_model *m, float *params, float *m1, float *v, float *grads)
{
    const size_t bytes = m->n_params * sizeof(float);
    if (params) m->be->download(m->be, params, m->params, bytes);
    if (m1) m->be->download(m->be, m1, m->m, bytes);
    if (v) m->be->download(m->be, v, m->v, bytes);
    if (grads) m->be->download(m->be, grads, m->grads, bytes);
}

void rt_model_set_state(rt_model *m, const float *params, const float *m1, const float *v)
{
    const size_t bytes = m->n_params * sizeof(float);
    if (params) m->be->upload(m->be, m->params, params, bytes), rt_model_refresh16(m);
    if (m1) m->be->upload(m->be, m->m, m1, bytes);
    if (v) m->be->upload(m->be, m->v, v, bytes);
}

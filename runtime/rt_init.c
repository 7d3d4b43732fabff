/* Initial state of the model, drawn on the host from the seed (the same on every backend and rank count)
 * and uploaded: weights N(0, 0.02), norms' gains 1, biases and attention sinks 0; fixed sparse masks;
 * tensor-train cores at the dense layers' scale. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "rt_exec.h"

/* Parameter p's initial values, drawn from stream i of the seed, uploaded to dst. */
static int init_one(rt_model *m, const et_param *p, int i, float *dst, et_error *err)
{
    size_t n = (size_t)p->dense;
    float *w = malloc((n ? n : 1) * sizeof *w);
    if (!w)
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory initialising %s",
                                 p->id);
    size_t len = strlen(p->id);
    /* layer norms, RMSNorms, latent attention's, a prediction module's pair ("norms") */
    int is_gamma = strstr(p->id, "norm.weight") != NULL || strstr(p->id, "norms.weight") != NULL;
    int is_bias = (len > 5 && strcmp(p->id + len - 5, ".bias") == 0) || strstr(p->id, "layernorm.bias");
    /* LoRA's B starts at zero, so the adapted model starts as the frozen one (Hu et al. 2021) */
    int is_zero = is_bias || (len > 14 && strcmp(p->id + len - 14, ".lora_b.weight") == 0);
    /* attention sinks start at 0 (a sink logit's exp(0) in every row's denominator) */
    is_zero = is_zero || (len > 6 && strcmp(p->id + len - 6, ".sinks") == 0);
    unsigned long long st = et_rng_stream(m->seed, 7, (unsigned long long)i);
    /* an expert-parallel rank's experts are its slice of every expert's draw: the same weights as
     * without expert parallelism */
    if (p->expert && !is_gamma && !is_bias)
        for (size_t k = 0; k < (size_t)m->ep_index * n; k++)
            et_rng_normal(&st);
    for (size_t k = 0; k < n; k++)
        w[k] = is_gamma ? 1.0f : is_zero ? 0.0f : (float)(0.02 * et_rng_normal(&st));
    m->be->upload(m->be, dst, w, n * sizeof *w);
    free(w);
    return 0;
}

int rt_init_params(rt_model *m, et_error *err)
{
    const int base = m->frozen ? m->frozen_graph.n_params : 0;
    for (int i = 0; i < m->graph.n_params; i++)
        if (init_one(m, &m->graph.params[i], base + i, m->params + m->param_offset[i], err)) return -1;
    /* LoRA's frozen model: the values a dense plan of the same seed starts from (its parameters' streams),
     * the adapters' streams after them */
    for (int i = 0; m->frozen && i < m->frozen_graph.n_params; i++)
        if (init_one(m, &m->frozen_graph.params[i], i, m->frozen + m->frozen_offset[i], err)) return -1;
    return 0;
}

/* Fixed masks of sparse weights: unstructured, b x b blocks, or 2 of every 4 along the input; the masked
 * weights start at zero. */
int rt_init_masks(rt_model *m, et_error *err)
{
    if (m->s->method.kind != ET_METHOD_SPARSE) return 0;
    rt_backend *be = m->be;
    be->fill(be, m->mask, 1.0f, m->n_params);
    for (int i = 0; i < m->graph.n_params; i++) {
        const et_param *p = &m->graph.params[i];
        if (p->count == p->dense) continue;
        /* the op that finalises this parameter names its group and shape */
        et_sparse_spec sp = {1, ET_PATTERN_DENSE, 0};
        int n_in = 1;
        for (int o = 0; o < m->graph.n_ops; o++) {
            const et_op *op = &m->graph.ops[o];
            if (i >= op->grad_first && i < op->grad_first + op->grad_count) {
                sp = op->sparse;
                n_in = (int)et_linear_eval(&op->n, &(et_batch_shape){0});
            }
        }
        size_t n = (size_t)p->dense;
        float *mask = malloc((n ? n : 1) * sizeof *mask);
        if (!mask) {
            return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                     "out of memory drawing the mask of %s", p->id);
        }
        unsigned long long st = et_rng_stream(m->seed, 11, (unsigned long long)i);
        for (size_t k = 0; k < n; k++)
            mask[k] = 1;
        if (sp.pattern == ET_PATTERN_2_4) {
            for (size_t k = 0; k + 3 < n; k += 4) {
                int a = (int)(et_rng_uniform(&st) * 4), b = (a + 1 + (int)(et_rng_uniform(&st) * 3)) % 4;
                for (int j = 0; j < 4; j++)
                    mask[k + j] = (j == a || j == b) ? 1.0f : 0.0f;
            }
        } else if (sp.pattern == ET_PATTERN_BLOCK && n_in > 0) {
            int bs = sp.block, rows = (int)(n / n_in);
            for (int r0 = 0; r0 < rows; r0 += bs)
                for (int c0 = 0; c0 < n_in; c0 += bs) {
                    float keep = et_rng_uniform(&st) < sp.density ? 1.0f : 0.0f;
                    for (int r = r0; r < r0 + bs && r < rows; r++)
                        for (int c = c0; c < c0 + bs && c < n_in; c++)
                            mask[(size_t)r * n_in + c] = keep;
                }
        } else {
            for (size_t k = 0; k < n; k++)
                mask[k] = et_rng_uniform(&st) < sp.density ? 1.0f : 0.0f;
        }
        const size_t off = m->param_offset[i];
        be->upload(be, m->mask + off, mask, n * sizeof *mask);
        be->mask_mul(be, m->params + off, m->mask + off, n);
        free(mask);
    }
    return 0;
}

/* The record of (layer, role): the layer with the cost model's contraction order, the cores of each copy
 * (stored in reverse in the flat parameter buffer), workspaces; cores drawn so the matrix they represent
 * has the dense layers' scale (std 0.02): each entry sums prod(r_k) paths of d factors, so
 * sigma^(2d) prod(r_k) = 0.02^2. */
int rt_init_tt_cores(rt_model *m, rt_tt_record *rec, int layer, int role, et_error *err)
{
    static const char *const roles[] = {"attn.qkv", "attn.out", "mlp.fc1", "mlp.fc2"};
    static const char *const copy[] = {"q", "k", "v"};
    rt_backend *be = m->be;
    const int H = m->s->model.hidden, F = m->s->model.ffn;
    const int n_in = role == RT_ROLE_FC2 ? F : H, n_out = role == RT_ROLE_FC1 ? F : H;
    const et_tt_factors *f = et_method_factors(&m->s->method, n_in, n_out);
    et_tt_shape shape;
    if (!f || et_tt_linear(&shape, f->in, f->d_in, f->out, f->d_out, m->s->method.tt_rank, err)) return -1;
    rt_tt_layer_init(&rec->tt, &shape, m->graph.options.tokens_hint);
    rec->copies = role == RT_ROLE_QKV ? 3 : 1;
    rec->n_in = n_in;
    rec->n_out = n_out;
    const int d = shape.d_in + shape.d_out;
    const size_t ws = rt_tt_workspace_size(&rec->tt, m->T_cap);
    /* layers sharing the op pass their outputs and output gradients through T x n_out rows of their own */
    rec->tmp = rec->copies > 1 ? be->alloc(be, sizeof(float) * (size_t)m->T_cap * n_out) : NULL;
    if (rec->copies > 1 && !rec->tmp)
        return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory for TT workspaces");
    double paths = 1;
    for (int k = 1; k < d; k++)
        paths *= shape.rank[k];
    const double sigma = pow(0.0004 / paths, 1.0 / (2 * d));
    size_t total = 0;
    for (int k = 0; k < d; k++)
        total += (size_t)et_tt_core_params(&shape, k);
    float *host = malloc((total ? total : 1) * sizeof *host);
    if (!host) return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory for TT cores");
    for (int c = 0; c < rec->copies; c++) {
        char id[128];
        size_t off[ET_TT_MAX_CORES] = {0};
        for (int k = 0; k < d; k++) {
            if (rec->copies > 1)
                snprintf(id, sizeof id, "layer.%d.%s.%s.core.%d", layer, roles[role], copy[c], k);
            else
                snprintf(id, sizeof id, "layer.%d.%s.core.%d", layer, roles[role], k);
            int p = rt_param_index(&m->graph, id);
            if (p < 0) {
                free(host);
                return et_error_set(err, m->s->source, 0, 0, NULL, "no parameter %s", id);
            }
            off[k] = m->param_offset[p];
        }
        /* the graph lists cores last to first: the base is core d-1 */
        for (int k = 0; k < d; k++)
            rec->tt.core_offset[k] = off[k] - off[d - 1];
        rec->cores[c] = m->params + off[d - 1];
        rec->dcores[c] = m->grads + off[d - 1];
        rec->work[c] = be->alloc(be, sizeof(float) * ws);
        if (!rec->work[c]) {
            free(host);
            return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                                     "out of memory for TT workspaces");
        }
        unsigned long long st = et_rng_stream(m->seed, 13, (unsigned long long)(layer * 16 + role * 4 + c));
        for (size_t k = 0; k < total; k++)
            host[k] = (float)(sigma * et_rng_normal(&st));
        be->upload(be, rec->cores[c], host, total * sizeof *host);
    }
    free(host);
    rec->ready = 1;
    return 0;
}

#include "graph.h"
#include "graph_build.h"
#include "software.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

const char *const et_op_kind_names[] = {"gemm",
                                        "attention",
                                        "elementwise",
                                        "embedding",
                                        "loss",
                                        "optimizer",
                                        "tp_allreduce",
                                        "tensor_train",
                                        "tp_allgather",
                                        "tp_reduce_scatter",
                                        "cp_ring",
                                        "ep_alltoall",
                                        NULL};

bool et_op_is_comm(et_op_kind kind)
{
    return kind == ET_OP_TP_ALLREDUCE || kind == ET_OP_TP_ALLGATHER || kind == ET_OP_TP_REDUCE_SCATTER ||
           kind == ET_OP_CP_RING || kind == ET_OP_EP_ALLTOALL;
}

const char *const et_phase_names[] = {"forward", "backward", "optimizer", NULL};

/* Op and parameter ids are formatted for every op of every graph (the plan search builds tens of thousands
 * of graphs): %s, %d and %.Ns are all this file uses, and formatting them by hand is several times faster
 * than vsnprintf. Anything else goes to vsnprintf. The result is the same text. */
static void format_id(char *out, size_t size, const char *fmt, va_list ap)
{
    size_t n = 0;
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            if (n + 1 < size) out[n++] = *f;
            continue;
        }
        size_t limit = (size_t)-1;
        const char *spec = f + 1;
        if (*spec == '.') {
            limit = 0;
            for (spec++; *spec >= '0' && *spec <= '9'; spec++)
                limit = 10 * limit + (size_t)(*spec - '0');
        }
        if (*spec == 's') {
            const char *a = va_arg(ap, const char *);
            for (size_t k = 0; a[k] && k < limit && n + 1 < size; k++)
                out[n++] = a[k];
        } else if (*spec == 'd' && limit == (size_t)-1) {
            int v = va_arg(ap, int);
            char digits[16];
            int m = 0;
            unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
            do
                digits[m++] = (char)('0' + u % 10);
            while (u /= 10);
            if (v < 0 && n + 1 < size) out[n++] = '-';
            while (m && n + 1 < size)
                out[n++] = digits[--m];
        } else {
            /* not a pattern of this file: the rest by the C library */
            out[n < size ? n : size - 1] = 0;
            if (n + 1 < size) vsnprintf(out + n, size - n, f, ap);
            return;
        }
        f = spec;
    }
    if (size) out[n < size ? n : size - 1] = 0;
}

static _Thread_local int ids_off; /* et_graph_set_ids */

void et_graph_set_ids(bool on)
{
    ids_off = !on;
}

bool et_graph_ids_on(void)
{
    return !ids_off;
}

void gb_id_printf(char *out, size_t size, const char *fmt, ...)
{
    if (ids_off) {
        out[0] = 0;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    format_id(out, size, fmt, ap);
    va_end(ap);
}

et_op *gb_add_op(builder *b, et_op_kind kind, et_phase phase, int layer, const char *fmt, ...)
{
    et_graph *g = b->g;
    if (b->failed) return NULL;
    if (!b->params_only && g->n_ops == g->cap_ops) {
        int cap = g->cap_ops ? 2 * g->cap_ops : 256;
        et_op *ops = realloc(g->ops, (size_t)cap * sizeof *ops);
        if (!ops) {
            b->failed = 1;
            et_error_set_code(b->err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                              "out of memory building the op graph");
            return NULL;
        }
        g->ops = ops;
        g->cap_ops = cap;
    }
    /* parameters only: the op is written into the scratch, not kept */
    et_op *op = b->last = b->params_only ? &b->scratch : &g->ops[g->n_ops++];
    /* a tensor-train op's contraction steps (the op's last, largest field) are read up to n_steps only */
    memset(op, 0, offsetof(et_op, steps));
    const et_op_scales *sc = b->params_only ? NULL : g->options.op_scales;
    if (!b->params_only && (!ids_off || (sc && sc->n))) { /* op scales are looked up by id */
        va_list ap;
        va_start(ap, fmt);
        format_id(op->id, sizeof op->id, fmt, ap);
        va_end(ap);
    }
    op->kind = kind;
    op->phase = phase;
    op->layer = layer;
    op->grad_first = g->n_params;
    op->kernels = 1;
    op->time_scale = 1;
    for (int i = 0; sc && i < sc->n; i++)
        if (strcmp(sc->id[i], op->id) == 0) op->time_scale = sc->factor[i];
    op->group = ET_GROUP_COUNT; /* no weights */
    return op;
}

/* Appends a parameter whose gradient is final after the most recently added op: `count` trainable values
 * (dense-equivalent `dense`), `grad_elems` gradient elements reduced, `meta` bytes of sparse indices. */
void gb_add_param(builder *b, int layer, double count, double dense, double grad_elems, double meta,
                  const char *name)
{
    et_graph *g = b->g;
    if (b->failed) return;
    if (b->lora && !b->adapter) { /* frozen: its weights stored, nothing to reduce or update */
        g->frozen_count += count;
        g->weight_bytes += count * b->e + meta;
        return;
    }
    if (g->n_params == g->cap_params) {
        int cap = g->cap_params ? 2 * g->cap_params : 256;
        et_param *p = realloc(g->params, (size_t)cap * sizeof *p);
        if (!p) {
            b->failed = 1;
            et_error_set_code(b->err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                              "out of memory building the op graph");
            return;
        }
        g->params = p;
        g->cap_params = cap;
    }
    et_param *p = &g->params[g->n_params++];
    gb_id_printf(p->id, sizeof p->id, "%.79s", name);
    p->count = count;
    p->dense = dense;
    p->grad_elems = grad_elems;
    p->meta_bytes = meta;
    p->layer = layer;
    p->rows = p->cols = 0;
    p->expert = false;
    p->quantized = false;
    g->param_count += count;
    g->param_dense += dense;
    g->grad_elems += grad_elems;
    g->weight_bytes += count * b->e + meta;
    b->last->grad_count = g->n_params - b->last->grad_first;
}

/* The parameter just added is the weight of the product just added, which is quantized (FP8, FP4). */
void gb_mark_quantized(builder *b)
{
    if (!b->failed && b->g->n_params > 0 && b->quant_bytes > 0 && b->last && !b->last->unquantized)
        b->g->params[b->g->n_params - 1].quantized = true;
}

/* A dense parameter. */
void gb_add_grad(builder *b, int layer, double count, const char *fmt, ...)
{
    char name[80] = "";
    if (!ids_off) {
        va_list ap;
        va_start(ap, fmt);
        format_id(name, sizeof name, fmt, ap);
        va_end(ap);
    }
    gb_add_param(b, layer, count, count, count, 0, name);
}

et_op *gb_elementwise(builder *b, et_phase phase, int layer, et_linear flops, et_linear bytes, const char *id)
{
    et_op *op = gb_add_op(b, ET_OP_ELEMENTWISE, phase, layer, "%s", id);
    if (!op) return NULL;
    op->flops = flops;
    op->bytes = bytes;
    return op;
}

/* Sets an op's special-function evaluations (exp, tanh, sigmoid, sqrt, division); returns the op. */
et_op *gb_special(et_op *op, et_linear evaluations)
{
    if (op) op->special = evaluations;
    return op;
}

/* The sparsity of a weight group under the method (dense unless the method is sparse). */
static et_sparse_spec sparse_of(const builder *b, et_layer_group group)
{
    et_sparse_spec dense = {.density = 1, .pattern = ET_PATTERN_DENSE};
    if (b->method->kind != ET_METHOD_SPARSE || group >= ET_GROUP_COUNT) return dense;
    et_sparse_spec sp = b->method->sparse[group];
    return sp.pattern == ET_PATTERN_DENSE || sp.density >= 1 ? dense : sp;
}

/* The TT of an n_in x n_out layer of `group` under the method, or 0 when it is not tensor-train. */
static int tt_of(builder *b, et_layer_group group, double n_in, double n_out, et_tt_shape *tt)
{
    const et_method *m = b->method;
    if (m->kind != ET_METHOD_TENSOR_TRAIN || group >= ET_GROUP_COUNT || !m->tt_group[group]) return 0;
    const et_tt_factors *f = et_method_factors(m, (int)n_in, (int)n_out);
    if (!f) return 0; /* checked when the scenario is loaded */
    et_error err;
    return et_tt_linear(tt, f->in, f->d_in, f->out, f->d_out, b->tt_rank, &err) == 0;
}

/* FP8 and FP4 products: the activation operand is quantized per product at the recipe's bytes an element
 * and kernels (quantization.h: 3 bytes and one kernel under delayed scaling); the weight's quantized copy
 * is made once a step, with the optimizer. The products of the layers kept in 16 bits
 * (et_graph_layer_bf16) are not quantized. */
void gb_fp8_cast(const builder *b, et_op *op, et_linear rows, double n_in)
{
    op->unquantized = b->unquantized || et_graph_layer_bf16(&b->g->model, &b->g->options, op->layer);
    if (b->quant_bytes <= 0 || op->unquantized) return;
    op->bytes = lin_add(op->bytes, lin_scale(rows, b->quant_bytes * n_in));
    op->kernels += b->quant_kernels;
}

/* One product of a weight W [n_out, n_in] with activations of `rows` rows: forward (m = rows, n = n_out,
 * k = n_in), data gradient (rows, n_in, n_out) or weight gradient (n_out, n_in, rows). FLOPs at the
 * weight density; bytes: the two activation operands plus the stored weight (values and indices). */
static et_op *weight_gemm(builder *b, et_phase phase, int layer, et_layer_group group, et_linear m,
                          et_linear n, et_linear k, et_linear rows, double n_in, double n_out, const char *id)
{
    et_op *op = gb_add_op(b, ET_OP_GEMM, phase, layer, "%s", id);
    if (!op) return NULL;
    et_sparse_spec sp = sparse_of(b, group);
    op->m = m;
    op->n = n;
    op->k = k;
    op->group = group;
    op->sparse = sp;
    op->flops = lin_scale(lin_mul(lin_mul(m, n), k), 2 * sp.density);
    op->weight_bytes = n_in * n_out * et_sparse_bytes_per_weight(&sp, b->e);
    op->bytes = lin_add(lin_scale(rows, b->e * (n_in + n_out)), FIX(op->weight_bytes));
    gb_fp8_cast(b, op, rows, n_in);
    return op;
}

/* A tensor-train product over `copies` independent layers (q, k, v share one op): the forward
 * contractions, or (phase backward) the reverse pass that yields the input and the core gradients
 * together, two contractions of the same cost for each forward one. */
static et_op *tt_op(builder *b, et_phase phase, int layer, et_layer_group group, const et_tt_shape *tt,
                    int copies, const char *id)
{
    et_tt_plan plan;
    et_tt_plan_best(tt, b->tokens, &plan);
    et_op *op = gb_add_op(b, ET_OP_TT, phase, layer, "%s", id);
    if (!op) return NULL;
    op->group = group;
    op->sparse.density = 1;
    const int fwd = phase != ET_PHASE_BACKWARD, passes = fwd ? 1 : 2;
    op->kernels = passes * copies * plan.steps;
    op->flops = (et_linear){.fixed = passes * copies * plan.flops_fixed,
                            .per_token = passes * copies * plan.flops_per_token};
    op->n_steps = plan.steps;
    op->step_repeats = passes * copies;
    memcpy(op->steps, plan.step, sizeof op->steps);
    op->m = FIX(plan.largest_m);
    op->n = FIX(plan.largest_n);
    op->k = FIX(plan.largest_k);
    op->weight_bytes = copies * et_tt_params(tt) * b->e;
    op->bytes = (et_linear){.fixed = passes * op->weight_bytes,
                            .per_token = passes * copies * b->e *
                                         (et_tt_in(tt) + et_tt_out(tt) + plan.intermediate_per_token)};
    /* the layout copies of tt_network.h's storage orders; layers sharing one op (q, k, v) also copy their
     * output out of, and their output's gradient into, the shared rows (a read and a write each) */
    et_tt_copies c;
    et_tt_plan_copies(tt, &plan, &c);
    const double e = b->e, shared = copies > 1 ? 2 * et_tt_out(tt) : 0;
    op->copy_bytes =
        (et_linear){.fixed = copies * e * (fwd ? c.fwd_fixed : c.bwd_fixed),
                    .per_token = copies * e * ((fwd ? c.fwd_per_token : c.bwd_per_token) + shared)};
    return op;
}

/* LoRA (Hu et al. 2021; Megatron-Bridge's LoRA adapters): beside a target W (n_out x n_in on this rank),
 * y += (alpha / r) x A^T B^T: `X.lora_a` (T x r x n_in) and `X.lora_b` (T x n_out x r, accumulated into
 * the product's output: its read added); in backward each one's data and weight gradients (the adapters'
 * parameters, A r x n_in and B n_out x r), after the product's own data gradient, A's accumulated into it
 * (its read added). `id` the product's. Both stay in 16 bits under FP8 and FP4 recipes (gb_plain_*):
 * Megatron-Bridge's ParallelLinearAdapter is built of megatron.core.tensor_parallel layers. */
static int lora_targets(const builder *b, et_lora_target t)
{
    return b->lora && (b->method->lora_targets >> t & 1u);
}

static void lora_forward(builder *b, et_phase phase, int layer, et_layer_group group, double n_in,
                         double n_out, et_lora_target t, const char *id)
{
    if (!lora_targets(b, t)) return;
    char name[96];
    const double r = b->method->lora_rank;
    gb_id_printf(name, sizeof name, "%s.lora_a", id);
    gb_plain_forward(b, phase, layer, group, TOK(1), n_in, r, name);
    gb_id_printf(name, sizeof name, "%s.lora_b", id);
    gb_plain_forward(b, phase, layer, group, TOK(1), r, n_out, name);
    if (!b->failed) b->last->bytes = lin_add(b->last->bytes, TOK(b->e * n_out));
}

static void lora_backward(builder *b, int layer, et_layer_group group, double n_in, double n_out,
                          et_lora_target t, const char *name)
{
    if (!lora_targets(b, t)) return;
    char id[96];
    const double r = b->method->lora_rank;
    b->adapter = 1;
    gb_id_printf(id, sizeof id, "%s.lora_b", name);
    gb_plain_backward(b, layer, group, TOK(1), r, n_out, id, 0, 1);
    gb_id_printf(id, sizeof id, "%s.lora_a", name);
    gb_plain_backward(b, layer, group, TOK(1), n_in, r, id, 0, 1);
    b->adapter = 0;
    /* A's data gradient (the op before its weight gradient) accumulates into the product's: read too */
    if (!b->params_only && !b->failed && b->g->n_ops >= 2) {
        et_op *op = &b->g->ops[b->g->n_ops - 2];
        op->bytes = lin_add(op->bytes, TOK(b->e * n_in));
    }
}

/* Forward of y = x W^T for `copies` layers of n_in x n_out each: dense or sparse GEMM, or tensor train. */
void gb_weight_forward(builder *b, et_phase phase, int layer, et_layer_group group, et_linear rows,
                       double n_in, double n_out, int copies, const char *id)
{
    et_tt_shape tt;
    if (tt_of(b, group, n_in, n_out, &tt))
        tt_op(b, phase, layer, group, &tt, copies, id);
    else
        weight_gemm(b, phase, layer, group, rows, FIX(copies * n_out), FIX(n_in), rows, n_in, copies * n_out,
                    id);
}

/* Backward: data gradient then weight gradient, which finalises the weights (or cores) and biases. */
void gb_weight_backward(builder *b, int layer, et_layer_group group, et_linear rows, double n_in,
                        double n_out, int copies, const char *name, int bias, int weight_grad)
{
    static const char *const copy_names[] = {"q", "k", "v"};
    char id[96], pname[96];
    et_tt_shape tt;
    if (tt_of(b, group, n_in, n_out, &tt)) {
        /* one reverse pass yields the input and the core gradients (they share its intermediates' gradients,
         * and etrun runs it so); the weight-gradient op is left the bias gradient's column sums */
        gb_id_printf(id, sizeof id, "%s.bwd_data", name);
        tt_op(b, ET_PHASE_BACKWARD, layer, group, &tt, copies, id);
        gb_id_printf(id, sizeof id, "%s.bwd_weight", name);
        et_op *bias_op = gb_add_op(b, ET_OP_TT, ET_PHASE_BACKWARD, layer, "%s", id);
        if (bias_op) {
            bias_op->group = group;
            bias_op->sparse.density = 1;
            bias_op->kernels = bias ? 1 : 0;
            bias_op->bytes = bias ? lin_scale(rows, b->e * copies * n_out) : FIX(0);
        }
        for (int c = 0; c < copies; c++)
            for (int k = tt.d_in + tt.d_out - 1; k >= 0; k--) {
                if (copies > 1)
                    snprintf(pname, sizeof pname, "%.60s.%s.core.%d", name, copy_names[c % 3], k);
                else
                    snprintf(pname, sizeof pname, "%.60s.core.%d", name, k);
                double n = et_tt_core_params(&tt, k);
                gb_add_param(b, layer, n, n, n, 0, pname);
            }
    } else {
        double out = copies * n_out;
        gb_id_printf(id, sizeof id, "%s.bwd_data", name);
        weight_gemm(b, ET_PHASE_BACKWARD, layer, group, rows, FIX(n_in), FIX(out), rows, n_in, out, id);
        if (bias && b->bias_kernels && (!b->lora || b->adapter)) {
            /* the bias gradient's column sums over the output gradient, a kernel of its own */
            gb_id_printf(id, sizeof id, "%s.bias_grad", name);
            gb_elementwise(b, ET_PHASE_BACKWARD, layer, lin_scale(rows, out), lin_scale(rows, b->e * out),
                           id);
        }
        gb_id_printf(id, sizeof id, "%s.bwd_weight", name);
        if (!b->lora || b->adapter) /* a frozen weight has no gradient */
            weight_gemm(b, ET_PHASE_BACKWARD, layer, group, FIX(out), FIX(n_in), rows, rows, n_in, out, id);
        if (weight_grad) {
            et_sparse_spec sp = sparse_of(b, group);
            double dense = out * n_in, kept = dense * sp.density;
            gb_id_printf(pname, sizeof pname, "%s.weight", name);
            gb_add_param(b, layer, kept, dense, b->method->dense_gradients ? dense : kept,
                         dense * et_sparse_meta_bytes_per_weight(&sp), pname);
            if (!b->failed && sp.density >= 1 && (!b->lora || b->adapter)) { /* added (not frozen) */
                b->g->params[b->g->n_params - 1].rows = out;
                b->g->params[b->g->n_params - 1].cols = n_in;
                gb_mark_quantized(b);
            }
        }
    }
    if (bias) gb_add_grad(b, layer, copies * n_out, "%s.bias", name);
}

/* A product that stays in 16 bits under FP8 and FP4 recipes (no quantize pass, the 16-bit peak): Megatron-
 * Core's output layer, a tensor_parallel.ColumnParallelLinear outside the transformer block whose layers
 * alone run under Transformer Engine's FP8 autocast (megatron/core/models/gpt/gpt_model.py), and the MoE
 * router, TopKRouter's plain linear (megatron/core/transformer/moe/router.py). */
void gb_plain_forward(builder *b, et_phase phase, int layer, et_layer_group group, et_linear rows,
                      double n_in, double n_out, const char *id)
{
    b->unquantized = 1;
    gb_weight_forward(b, phase, layer, group, rows, n_in, n_out, 1, id);
    b->unquantized = 0;
}

void gb_plain_backward(builder *b, int layer, et_layer_group group, et_linear rows, double n_in, double n_out,
                       const char *name, int bias, int weight_grad)
{
    b->unquantized = 1;
    gb_weight_backward(b, layer, group, rows, n_in, n_out, 1, name, bias, weight_grad);
    b->unquantized = 0;
}

/* The tensor-parallel collective at the boundary of a block: one all-reduce of the block's output, or
 * with sequence parallelism a reduce-scatter after the block and an all-gather before the next (`gather`
 * selects the one before). Messages are the full T x H activation. In backward, the reduction after a
 * column-parallel layer's products (its input gradient's) runs beside the weight-gradient product before it
 * when the stack issues it asynchronously (Megatron's LinearWithGradAccumulationAndAsyncCommunication). */
static et_op *tp_boundary(builder *b, const dims *d, et_phase phase, int layer, int gather, const char *name)
{
    if (d->t <= 1 || (gather && !d->sp)) return NULL;
    et_op_kind kind = !d->sp ? ET_OP_TP_ALLREDUCE : gather ? ET_OP_TP_ALLGATHER : ET_OP_TP_REDUCE_SCATTER;
    et_op *op = gb_add_op(b, kind, phase, layer, "%s", name);
    if (!op) return NULL;
    op->bytes = TOK(d->e * d->H);
    op->async_comm = d->tp_async && phase == ET_PHASE_BACKWARD && !gather;
    return op;
}

/* Sequence parallelism keeps a column-parallel layer's input as its 1/t share: backward all-gathers it again
 * for the weight gradient (the forward all-gather's bytes), beside the input-gradient product that follows
 * (asynchronously in Megatron's linear layers and Transformer Engine's, blocking otherwise). */
static void sp_regather(builder *b, const dims *d, int layer, const char *name)
{
    et_op *op = tp_boundary(b, d, ET_PHASE_BACKWARD, layer, 1, name);
    if (op) op->async_comm = d->tp_async, op->regather = true;
}

/* Dropout on `elems` values per batch unit (a mask byte each; Megatron's fused kernels): forward reads
 * and writes the values (the decoder's residual add fused in, as Megatron's bias-dropout-add), backward
 * reads the gradient and the mask. */
static void dropout_op(builder *b, const dims *d, et_phase phase, int layer, et_linear elems, double reads,
                       const char *id)
{
    if (d->dropout <= 0) return;
    gb_elementwise(b, phase, layer, lin_scale(elems, 2), lin_scale(elems, (reads + 1) * d->e + 1), id);
}

/* A decoder's residual add where no dropout kernel carries it (dropout 0): the block's output added to the
 * residual stream, one kernel reading both and writing the sum (with software.residual_kernels; else folded
 * into the next layer norm, as etrun's add-norm does). */
static void residual_add(builder *b, const dims *d, et_phase phase, int layer, const char *id)
{
    if (d->dropout > 0 || !d->residual) return;
    gb_elementwise(b, phase, layer, TOK(d->H * d->St), TOK(3 * d->e * d->H * d->St), id);
}

/* Backward of a residual block x + f(x): the stream's gradient and the one f's backward returns for x are
 * summed, one add kernel (autograd's accumulation of a tensor used twice; etrun's layer-norm backward
 * accumulates into the stream's gradient instead: software.residual_kernels false). */
static void residual_backward(builder *b, const dims *d, int layer, const char *id)
{
    if (!d->residual) return;
    gb_elementwise(b, ET_PHASE_BACKWARD, layer, TOK(d->H * d->St), TOK(3 * d->e * d->H * d->St), id);
}

/* Layout copies (gathers, scatters, concatenations) of `bytes` in `kernels` launches: no arithmetic. */
void gb_copies(builder *b, et_phase phase, int layer, et_linear bytes, int kernels, const char *id)
{
    et_op *op = gb_elementwise(b, phase, layer, (et_linear){0}, bytes, id);
    if (op) op->kernels = kernels;
}

void gb_bias_forward(builder *b, et_phase phase, int layer, et_linear rows, double n_out, int qkv,
                     const char *id)
{
    if (b->bias_kernels == ET_BIAS_FUSED || (b->bias_kernels == ET_BIAS_MEGATRON && !qkv)) return;
    char name[96];
    gb_id_printf(name, sizeof name, "%s.bias", id);
    gb_elementwise(b, phase, layer, lin_scale(rows, n_out), lin_scale(rows, 2 * b->e * n_out), name);
}

/* Ring attention (context parallelism; Liu et al. 2023, Megatron-Core's context parallelism): each step
 * passes one chunk's keys and values (`tensors` = 2), or in backward also their gradients (4), to the next
 * rank of the ring while the current chunk's attention runs: bytes per step `tensors` e T KVt for this
 * rank's T tokens. */
static void cp_ring(builder *b, const dims *d, et_phase phase, int layer, int tensors, const char *id)
{
    if (b->g->options.context <= 1) return;
    et_op *op = gb_add_op(b, ET_OP_CP_RING, phase, layer, "%s", id);
    if (op) op->bytes = TOK(tensors * d->e * d->KVt);
}

/* The attention core: scores, softmax, dropout, context (what selective recomputation repeats); or one
 * flash-style kernel: the same 4 l^2 D FLOPs per head forward, q, k, v read and the context written, the
 * scores never leaving the chip (backward: 2.5x the forward FLOPs, the scores recomputed inside; Dao 2023).
 */
/* Of a sequence's l x l query-key pairs, those a fused kernel computes for layer i: a causal kernel skips
 * the blocks above the diagonal (Q / 2), a windowed layer's the ones outside its window of w keys (w T: a
 * row's w keys, the first w - 1 rows of each sequence counted whole), else all (Q). */
static et_linear attention_area(const builder *b, const dims *d, int i)
{
    const et_model_config *m = &b->g->model;
    if (d->flash && d->causal && et_model_layer_windowed(m, i)) return TOK(m->window);
    return SQ(d->flash ? d->causal_share : 1);
}

/* A causal fused kernel computes whole blocks on the diagonal: each block of ET_FLASH_BLOCK query rows also
 * computes the keys above the diagonal within its block, half a block a row on average (FlashAttention 2's
 * forward and backward tiles, 128 query rows; Dao 2023, section 3.1). A windowed layer's block of rows
 * [q, q + B) attends the keys [q - w + 1, q + B): w + B - 1 of them for each row's w, its diagonal block's
 * masked half and its window's leading half, a block a row. */
#define ET_FLASH_BLOCK 128
static double flash_tile_keys(const builder *b, const dims *d, int i)
{
    if (!d->causal) return 0;
    return et_model_layer_windowed(&b->g->model, i) ? ET_FLASH_BLOCK : ET_FLASH_BLOCK / 2.0;
}

/* A fused attention op's kernel, forward and backward alike: the stack's (its share of the profile's
 * FlashAttention 2 rate, or cuDNN's own) and the diagonal blocks it computes */
static void fused_kernel(const builder *b, const dims *d, int i, et_op *op)
{
    op->fused = true;
    op->fused_rate = d->flash_rate;
    op->cudnn_kernel = d->cudnn;
    op->tile_keys = flash_tile_keys(b, d, i);
    op->window_keys = d->causal && et_model_layer_windowed(&b->g->model, i) ? b->g->model.window : 0;
}

static void attention_core(builder *b, const dims *d, int i, et_phase phase, const char *suffix)
{
    char id[80];
    const double Qt = d->Qt, Vt = d->Vt, At = d->At, e = d->e;
    const et_linear area = attention_area(b, d, i);
#define ID(name) (gb_id_printf(id, sizeof id, "layer.%d.%s%s", i, name, suffix), id)
    et_op *op;
    if (d->flash) {
        if (d->unpad) /* unpad_input: q, k and v gathered into unpadded rows, one kernel each */
            gb_copies(b, phase, i, TOK(2 * e * (Qt + 2 * d->KVt)), 3, ID("attn.unpad"));
        if ((op = gb_add_op(b, ET_OP_ATTENTION, phase, i, "%s", ID("attn.flash")))) {
            op->k = FIX(d->D);
            op->flops = lin_scale(area, 2 * Qt + 2 * Vt);
            op->bytes = TOK(e * (2 * Qt + 2 * Vt) + 4 * At); /* q, k, v, context; fp32 log-sum-exp a row */
            op->special = lin_scale(area, At);               /* an exp per score */
            fused_kernel(b, d, i, op);
        }
        if (d->unpad) /* pad_input: a zeroed T x Q context and the scatter into it */
            gb_copies(b, phase, i, TOK(3 * e * Vt), 2, ID("attn.pad"));
        return;
    }
    /* ALiBi through the score product (Megatron-DeepSpeed's BLOOM: torch.baddbmm with the bias as its input
     * and beta != 0): the bias broadcast over the query rows is first copied into the scores' buffer (a
     * kernel writing every score; the [heads, 1, l] bias it reads is negligible), and the product reads it
     * back as C. A fused kernel adds the slopes in its own loop (FlashAttention 2's alibi_slopes): nothing */
    if (d->alibi) gb_copies(b, phase, i, SQ(e * At), 1, ID("attn.alibi"));
    op = gb_add_op(b, ET_OP_ATTENTION, phase, i, "%s", ID("attn.scores"));
    if (op) {
        op->k = FIX(d->D);
        op->flops = SQ(2 * Qt);
        op->bytes = lin_add(TOK(2 * e * Qt), SQ((d->alibi ? 2 : 1) * e * At));
    }
    /* an exp per live score: all l^2 of a sequence, or under a causal mask l (l + 1) / 2 (sum over its rows,
     * Q / 2 + T / 2: the masked ones are set to zero, not exponentiated, as etrun's and Megatron's fused
     * upper-triangular softmax do); every score is read and written */
    gb_special(gb_elementwise(b, phase, i, SQ(5 * At), SQ(2 * e * At), ID("attn.softmax")),
               d->causal ? lin_add(SQ(At / 2), TOK(At / 2)) : SQ(At));
    dropout_op(b, d, phase, i, SQ(At), 1, ID("attn.dropout"));
    op = gb_add_op(b, ET_OP_ATTENTION, phase, i, "%s", ID("attn.context"));
    if (op) {
        op->k = FIX(d->D);
        op->flops = SQ(2 * Vt);
        op->bytes = lin_add(TOK(2 * e * Vt), SQ(e * At));
    }
#undef ID
}

/* An MLP's activation over `width` values a token: SiLU(gate) x up (reading both halves, writing one: 6
 * FLOPs and 3 e bytes a value forward, 10 and 5 e backward) or GELU (8 and 2 e, 8 and 3 e); a
 * special-function evaluation a value either way. The MLPs, the experts and the shared experts all use it. */
et_op *gb_activation(builder *b, const dims *d, et_phase phase, int layer, double width, int backward,
                     const char *id)
{
    const double flops = backward ? (d->swiglu ? 10 : 8) : (d->swiglu ? 6 : 8);
    const double bytes = backward ? (d->swiglu ? 5 : 3) : (d->swiglu ? 3 : 2);
    return gb_special(gb_elementwise(b, phase, layer, TOK(flops * width), TOK(bytes * d->e * width), id),
                      TOK(width));
}

/* Forward ops of one transformer layer. Formulas: docs/cost-model.md, "Transformer layer". */
static void layer_forward(builder *b, const dims *d, int i, int decoder, et_phase phase, const char *suffix)
{
    char id[80];
    const double H = d->H, Ht = d->Ht, Ft = d->Ft, e = d->e, St = d->St;
    const double reads = decoder ? 2 : 1; /* the decoder's dropout kernels add the residual */
#define ID(name) (gb_id_printf(id, sizeof id, "layer.%d.%s%s", i, name, suffix), id)
    if (decoder) gb_elementwise(b, phase, i, TOK(8 * H * St), TOK(2 * e * H * St), ID("attn.layernorm"));
    tp_boundary(b, d, phase, i, 1, ID("attn.tp_allgather"));
    /* q, k, v: one product of 3Ht outputs, or three tensor-train layers of H x H, or MLA's latents */
    if (d->mla)
        gb_mla_forward(b, d, i, phase, suffix);
    else if (b->method->kind == ET_METHOD_TENSOR_TRAIN && b->method->tt_group[ET_GROUP_ATTENTION])
        gb_weight_forward(b, phase, i, ET_GROUP_ATTENTION, TOK(1), H, Ht, 3, ID("attn.qkv"));
    else {
        gb_weight_forward(b, phase, i, ET_GROUP_ATTENTION, TOK(1), H, d->Qt + 2 * d->KVt, 1, ID("attn.qkv"));
        lora_forward(b, phase, i, ET_GROUP_ATTENTION, H, d->Qt + 2 * d->KVt, ET_LORA_QKV, id);
        if (d->bias) gb_bias_forward(b, phase, i, TOK(1), d->Qt + 2 * d->KVt, 1, ID("attn.qkv"));
    }
    /* each head's query and key normalised (RMSNorm over D: a square, a sum, a scale per element) */
    if (d->qk_norm)
        gb_elementwise(b, phase, i, TOK(4 * (d->Qt + d->KVt)), TOK(2 * e * (d->Qt + d->KVt)),
                       ID("attn.qk_norm"));
    /* rotary positions: q and k rotated pairwise (a multiply-add per element and its cos/sin lookup) */
    if (d->rope && !d->mla)
        gb_elementwise(b, phase, i, TOK(6 * (d->Qt + d->KVt)), TOK(2 * e * (d->Qt + d->KVt)),
                       ID("attn.rope"));
    attention_core(b, d, i, phase, suffix);
    cp_ring(b, d, phase, i, 2, ID("attn.cp_ring"));
    gb_weight_forward(b, phase, i, ET_GROUP_ATTENTION, TOK(1), d->Vt, H, 1, ID("attn.out"));
    lora_forward(b, phase, i, ET_GROUP_ATTENTION, d->Vt, H, ET_LORA_PROJ, id);
    if (d->bias) gb_bias_forward(b, phase, i, TOK(1), H, 0, ID("attn.out"));
    tp_boundary(b, d, phase, i, 0, d->sp ? ID("attn.tp_reduce_scatter") : ID("attn.tp_allreduce"));
    dropout_op(b, d, phase, i, TOK(H * St), reads, ID("attn.out.dropout"));
    if (decoder) residual_add(b, d, phase, i, ID("attn.residual"));
    /* encoder (post-LN): residual add fused with layer norm after each block */
    if (decoder)
        gb_elementwise(b, phase, i, TOK(8 * H * St), TOK(2 * e * H * St), ID("mlp.layernorm"));
    else
        gb_elementwise(b, phase, i, TOK(8 * H * St), TOK(3 * e * H * St), ID("attn.layernorm"));
    const int mlp_boundary = gb_mlp_tp_boundary(b, d, i);
    if (mlp_boundary) tp_boundary(b, d, phase, i, 1, ID("mlp.tp_allgather"));
    if (et_model_layer_is_moe(&b->g->model, i)) {
        gb_moe_forward(b, d, i, phase, suffix);
    } else {
        gb_weight_forward(b, phase, i, ET_GROUP_MLP, TOK(1), H, d->swiglu ? 2 * Ft : Ft, 1, ID("mlp.fc1"));
        lora_forward(b, phase, i, ET_GROUP_MLP, H, d->swiglu ? 2 * Ft : Ft, ET_LORA_FC1, id);
        gb_activation(b, d, phase, i, Ft, 0, ID(d->swiglu ? "mlp.swiglu" : "mlp.gelu"));
        /* PyTorch's early stop: the last tensors this layer saves for backward are the second product's
         * input and weight, saved as that product is dispatched, before its kernel runs; the recomputation
         * stops there (with a dropout kernel after it, or an adapter reading the same input, there is more
         * to rebuild and it goes on) */
        if (phase == ET_PHASE_BACKWARD && d->early_stop && decoder && d->dropout <= 0 &&
            !lora_targets(b, ET_LORA_FC2))
            return;
        gb_weight_forward(b, phase, i, ET_GROUP_MLP, TOK(1), Ft, H, 1, ID("mlp.fc2"));
        lora_forward(b, phase, i, ET_GROUP_MLP, Ft, H, ET_LORA_FC2, id);
        if (d->bias) gb_bias_forward(b, phase, i, TOK(1), H, 0, ID("mlp.fc2"));
    }
    if (mlp_boundary)
        tp_boundary(b, d, phase, i, 0, d->sp ? ID("mlp.tp_reduce_scatter") : ID("mlp.tp_allreduce"));
    dropout_op(b, d, phase, i, TOK(H * St), reads, ID("mlp.fc2.dropout"));
    if (decoder) residual_add(b, d, phase, i, ID("mlp.residual"));
    if (!decoder) gb_elementwise(b, phase, i, TOK(8 * H * St), TOK(3 * e * H * St), ID("mlp.layernorm"));
#undef ID
}

static void layernorm_backward(builder *b, const dims *d, int layer, const char *name, et_linear rows)
{
    char id[80];
    gb_id_printf(id, sizeof id, "%s.bwd", name);
    gb_elementwise(b, ET_PHASE_BACKWARD, layer, lin_scale(rows, 10 * d->H), lin_scale(rows, 4 * d->e * d->H),
                   id);
    gb_add_grad(b, layer, d->H, "%s.weight", name);
    if (!d->rms) gb_add_grad(b, layer, d->H, "%s.bias", name);
}

static void layer_backward(builder *b, const dims *d, int i, int decoder, et_recompute recompute)
{
    char name[80];
    const double H = d->H, Ht = d->Ht, Qt = d->Qt, Ft = d->Ft, At = d->At, e = d->e, St = d->St;
    if (recompute == ET_RECOMPUTE_FULL) layer_forward(b, d, i, decoder, ET_PHASE_BACKWARD, ".recompute");
    const int norms = decoder && ET_RECOMPUTES(d->rm, ET_RECOMPUTE_LAYERNORM);
#define NAME(s) (gb_id_printf(name, sizeof name, "layer.%d.%s", i, s), name)
    if (norms) /* selective "layernorm": the norm's output rebuilt for the products that read it */
        gb_elementwise(b, ET_PHASE_BACKWARD, i, TOK(8 * H * St), TOK(2 * e * H * St),
                       NAME("mlp.layernorm.recompute"));
    if (!decoder) layernorm_backward(b, d, i, NAME("mlp.layernorm"), TOK(St));
    dropout_op(b, d, ET_PHASE_BACKWARD, i, TOK(H * St), 1, NAME("mlp.fc2.dropout.bwd"));
    const int mlp_boundary = gb_mlp_tp_boundary(b, d, i);
    if (mlp_boundary) tp_boundary(b, d, ET_PHASE_BACKWARD, i, 1, NAME("mlp.tp_allgather.bwd"));
    /* rows of weight-grad products are the token dimension: m = n_out fixed, k = T */
    if (et_model_layer_is_moe(&b->g->model, i)) {
        gb_moe_backward(b, d, i);
    } else {
        if (ET_RECOMPUTES(d->rm, ET_RECOMPUTE_MLP)) { /* selective "mlp": the first product and activation */
            gb_weight_forward(b, ET_PHASE_BACKWARD, i, ET_GROUP_MLP, TOK(1), H, d->swiglu ? 2 * Ft : Ft, 1,
                              NAME("mlp.fc1.recompute"));
            gb_activation(b, d, ET_PHASE_BACKWARD, i, Ft, 0,
                          NAME(d->swiglu ? "mlp.swiglu.recompute" : "mlp.gelu.recompute"));
        }
        gb_weight_backward(b, i, ET_GROUP_MLP, TOK(1), Ft, H, 1, NAME("mlp.fc2"), d->bias, 1);
        lora_backward(b, i, ET_GROUP_MLP, Ft, H, ET_LORA_FC2, NAME("mlp.fc2"));
        gb_activation(b, d, ET_PHASE_BACKWARD, i, Ft, 1, NAME(d->swiglu ? "mlp.swiglu.bwd" : "mlp.gelu.bwd"));
        if (mlp_boundary) sp_regather(b, d, i, NAME("mlp.tp_allgather.regather"));
        gb_weight_backward(b, i, ET_GROUP_MLP, TOK(1), H, d->swiglu ? 2 * Ft : Ft, 1, NAME("mlp.fc1"),
                           d->bias, 1);
        lora_backward(b, i, ET_GROUP_MLP, H, d->swiglu ? 2 * Ft : Ft, ET_LORA_FC1, NAME("mlp.fc1"));
    }
    if (mlp_boundary)
        tp_boundary(b, d, ET_PHASE_BACKWARD, i, 0,
                    d->sp ? NAME("mlp.tp_reduce_scatter.bwd") : NAME("mlp.tp_allreduce.bwd"));
    if (!decoder) residual_backward(b, d, i, NAME("mlp.residual.bwd"));
    layernorm_backward(b, d, i, decoder ? NAME("mlp.layernorm") : NAME("attn.layernorm"), TOK(St));
    if (decoder) residual_backward(b, d, i, NAME("mlp.residual.bwd"));
    dropout_op(b, d, ET_PHASE_BACKWARD, i, TOK(H * St), 1, NAME("attn.out.dropout.bwd"));
    tp_boundary(b, d, ET_PHASE_BACKWARD, i, 1, NAME("attn.tp_allgather.bwd"));
    gb_weight_backward(b, i, ET_GROUP_ATTENTION, TOK(1), d->Vt, H, 1, NAME("attn.out"), d->bias, 1);
    lora_backward(b, i, ET_GROUP_ATTENTION, d->Vt, H, ET_LORA_PROJ, NAME("attn.out"));
    const et_linear area = attention_area(b, d, i);
    et_op *op;
    if (d->flash) {
        if (d->unpad) /* pad_input's backward: the context's gradient gathered back into unpadded rows */
            gb_copies(b, ET_PHASE_BACKWARD, i, TOK(2 * e * d->Vt), 1, NAME("attn.pad.bwd"));
        /* the fused backward recomputes the scores itself: nothing for selective recomputation to repeat */
        if ((op = gb_add_op(b, ET_OP_ATTENTION, ET_PHASE_BACKWARD, i, "%s", NAME("attn.flash.bwd")))) {
            op->k = FIX(d->D);
            /* scores again, dV and dP (value width), dQ and dK (query width) */
            op->flops = lin_scale(area, 6 * Qt + 4 * d->Vt);
            op->bytes = TOK(e * (4 * Qt + 4 * d->Vt) + 4 * At); /* q, k, v, context, dO in; dq, dk, dv out */
            op->special = lin_scale(area, At);                  /* the scores' exps again */
            fused_kernel(b, d, i, op);
        }
        /* unpad_input's backward: dq, dk, dv each scattered into a zeroed padded tensor (6 launches), then
         * concatenated into the q, k, v projection's gradient (qkv.chunk's backward) */
        if (d->unpad)
            gb_copies(b, ET_PHASE_BACKWARD, i, TOK(5 * e * (Qt + 2 * d->KVt)), 7, NAME("attn.unpad.bwd"));
        cp_ring(b, d, ET_PHASE_BACKWARD, i, 4, NAME("attn.cp_ring.bwd"));
    }
    if (!d->flash && ET_RECOMPUTES(d->rm, ET_RECOMPUTE_CORE_ATTN))
        attention_core(b, d, i, ET_PHASE_BACKWARD, ".recompute");
    /* context = P V: dP = dO V^T and dV = P^T dO, each 2*l*l*D per head */
    if (!d->flash &&
        (op = gb_add_op(b, ET_OP_ATTENTION, ET_PHASE_BACKWARD, i, "%s", NAME("attn.context.bwd")))) {
        op->k = FIX(d->D);
        op->flops = SQ(4 * d->Vt);
        op->bytes = lin_add(TOK(4 * e * d->Vt), SQ(2 * e * At));
    }
    if (!d->flash) {
        dropout_op(b, d, ET_PHASE_BACKWARD, i, SQ(At), 1, NAME("attn.dropout.bwd"));
        gb_elementwise(b, ET_PHASE_BACKWARD, i, SQ(4 * At), SQ(3 * e * At), NAME("attn.softmax.bwd"));
        if ((op = gb_add_op(b, ET_OP_ATTENTION, ET_PHASE_BACKWARD, i, "%s", NAME("attn.scores.bwd")))) {
            op->k = FIX(d->D);
            op->flops = SQ(4 * Qt);
            op->bytes = lin_add(TOK(4 * e * Qt), SQ(e * At));
        }
    }
    if (d->sinks) gb_add_grad(b, i, At, "layer.%d.attn.sinks", i);
    if (norms)
        gb_elementwise(b, ET_PHASE_BACKWARD, i, TOK(8 * H * St), TOK(2 * e * H * St),
                       NAME("attn.layernorm.recompute"));
    if (d->mla)
        gb_mla_backward(b, d, i);
    else if (b->method->kind == ET_METHOD_TENSOR_TRAIN && b->method->tt_group[ET_GROUP_ATTENTION])
        gb_weight_backward(b, i, ET_GROUP_ATTENTION, TOK(1), H, Ht, 3, NAME("attn.qkv"), 1, 1);
    else {
        if (d->rope)
            gb_elementwise(b, ET_PHASE_BACKWARD, i, TOK(6 * (Qt + d->KVt)), TOK(2 * e * (Qt + d->KVt)),
                           NAME("attn.rope.bwd"));
        if (d->qk_norm) { /* as a layer norm's backward over q and k; each norm's weight of D */
            gb_elementwise(b, ET_PHASE_BACKWARD, i, TOK(10 * (Qt + d->KVt)), TOK(4 * e * (Qt + d->KVt)),
                           NAME("attn.qk_norm.bwd"));
            gb_add_grad(b, i, d->D, "layer.%d.attn.q_norm.weight", i);
            gb_add_grad(b, i, d->D, "layer.%d.attn.k_norm.weight", i);
        }
        sp_regather(b, d, i, NAME("attn.tp_allgather.regather"));
        gb_weight_backward(b, i, ET_GROUP_ATTENTION, TOK(1), H, Qt + 2 * d->KVt, 1, NAME("attn.qkv"), d->bias,
                           1);
        lora_backward(b, i, ET_GROUP_ATTENTION, H, Qt + 2 * d->KVt, ET_LORA_QKV, NAME("attn.qkv"));
    }
    tp_boundary(b, d, ET_PHASE_BACKWARD, i, 0,
                d->sp ? NAME("attn.tp_reduce_scatter.bwd") : NAME("attn.tp_allreduce.bwd"));
    if (decoder) layernorm_backward(b, d, i, NAME("attn.layernorm"), TOK(St));
    residual_backward(b, d, i, NAME("attn.residual.bwd"));
#undef NAME
}

/* The loss head; `p` names it ("head", or a multi-token prediction module's "mtp.j.head", which runs the
 * causal head's products on the shared output weight). */
static void head_forward(builder *b, const dims *d, const et_model_config *m, const char *p)
{
    const double H = d->H, Vt = d->V / d->t, e = d->e;
    char id[80];
#define ID(name) (gb_id_printf(id, sizeof id, "%s.%s", p, name), id)
    /* a tied output projection is the word embedding: it has the embeddings' sparsity */
    const et_layer_group decoder_group = m->tie_embeddings ? ET_GROUP_EMBEDDINGS : ET_GROUP_HEAD;
    if (m->head == ET_HEAD_CAUSAL_LM) {
        gb_elementwise(b, ET_PHASE_FORWARD, -1, TOK(8 * H * d->St), TOK(2 * e * H * d->St),
                       ID("final_layernorm"));
        tp_boundary(b, d, ET_PHASE_FORWARD, -1, 1, ID("tp_allgather"));
        gb_plain_forward(b, ET_PHASE_FORWARD, -1, decoder_group, PRED(1), H, Vt, ID("lm.decoder"));
    } else {
        if (m->head == ET_HEAD_MLM_NSP) {
            gb_weight_forward(b, ET_PHASE_FORWARD, -1, ET_GROUP_HEAD, SEQ(1), H, H, 1, "head.pooler");
            gb_weight_forward(b, ET_PHASE_FORWARD, -1, ET_GROUP_HEAD, SEQ(1), H, 2, 1, "head.nsp");
        }
        gb_elementwise(b, ET_PHASE_FORWARD, -1, FIX(0), PRED(2 * e * H), "head.mlm.gather");
        gb_weight_forward(b, ET_PHASE_FORWARD, -1, ET_GROUP_HEAD, PRED(1), H, H, 1, "head.mlm.transform");
        gb_special(gb_elementwise(b, ET_PHASE_FORWARD, -1, PRED(8 * H), PRED(2 * e * H), "head.mlm.gelu"),
                   PRED(H));
        gb_elementwise(b, ET_PHASE_FORWARD, -1, PRED(8 * H), PRED(2 * e * H), "head.mlm.layernorm");
        gb_plain_forward(b, ET_PHASE_FORWARD, -1, decoder_group, PRED(1), H, Vt, "head.mlm.decoder");
    }
    /* softmax cross-entropy: read logits, fp32 reductions, write the logit gradient (fused fwd+bwd); or
     * Megatron's vocabulary-parallel one over fp32 logits: the upcast copy (read e, write 4), forward's
     * max, subtract, exp, sum and divide (read 4 each, write 4 for the three in place), backward's multiply
     * (read and write 4) and the cast back (read 4, write e): 48 + 2e bytes a logit, 8 kernels */
    et_op *op = gb_add_op(b, ET_OP_LOSS, ET_PHASE_FORWARD, -1, "%s", ID("loss"));
    if (op) {
        op->flops = PRED(6 * Vt);
        op->bytes = b->g->options.loss_fp32 ? PRED((48 + 2 * e) * Vt) : PRED(2 * e * Vt);
        op->special = PRED(Vt); /* an exp per logit */
        if (b->g->options.loss_fp32) op->kernels = 8;
    }
#undef ID
}

/* The head's backward; `owner`: it finalises the output weight (a prediction module's copy accumulates
 * into the main head's gradient, which the main head's backward finalises after it). */
static void head_backward(builder *b, const dims *d, const et_model_config *m, const char *p, int owner)
{
    const double H = d->H, Vt = d->V / d->t, e = d->e;
    const et_layer_group decoder_group = m->tie_embeddings ? ET_GROUP_EMBEDDINGS : ET_GROUP_HEAD;
    int untied = !m->tie_embeddings && owner;
    char id[80];
    if (m->head == ET_HEAD_CAUSAL_LM) {
        gb_id_printf(id, sizeof id, "%s.lm.decoder", p);
        gb_plain_backward(b, -1, decoder_group, PRED(1), H, Vt, id, 0, untied);
        gb_id_printf(id, sizeof id, "%s.tp_reduce_scatter.bwd", p);
        tp_boundary(b, d, ET_PHASE_BACKWARD, -1, 0, id);
        gb_id_printf(id, sizeof id, "%s.final_layernorm", p);
        layernorm_backward(b, d, -1, id, TOK(d->St));
        return;
    }
    gb_plain_backward(b, -1, decoder_group, PRED(1), H, Vt, "head.mlm.decoder", 1, untied);
    layernorm_backward(b, d, -1, "head.mlm.layernorm", PRED(1));
    gb_special(gb_elementwise(b, ET_PHASE_BACKWARD, -1, PRED(8 * H), PRED(3 * e * H), "head.mlm.gelu.bwd"),
               PRED(H));
    gb_weight_backward(b, -1, ET_GROUP_HEAD, PRED(1), H, H, 1, "head.mlm.transform", 1, 1);
    gb_elementwise(b, ET_PHASE_BACKWARD, -1, FIX(0), PRED(2 * e * H), "head.mlm.gather.bwd");
    if (m->head == ET_HEAD_MLM_NSP) {
        gb_weight_backward(b, -1, ET_GROUP_HEAD, SEQ(1), H, 2, 1, "head.nsp", 1, 1);
        gb_weight_backward(b, -1, ET_GROUP_HEAD, SEQ(1), H, H, 1, "head.pooler", 1, 1);
    }
}

/* Multi-token prediction module j (DeepSeek-V3 section 2.2; Megatron-Core's MultiTokenPredictionBlock): the
 * embedding of the tokens j + 1 ahead (the shared table) and the previous depth's hidden state, each
 * RMS-normed, concatenated and projected 2H -> H, one transformer layer (numbered layers + j) and the
 * shared output head with its own loss, on each of the micro-batch's tokens. */
static void mtp_forward(builder *b, const dims *d, const et_model_config *m, int j)
{
    char id[80];
    const double H = d->H, e = d->e;
    const int layer = m->layers + j;
#define ID(name) (gb_id_printf(id, sizeof id, "mtp.%d.%s", j, name), id)
    et_op *op = gb_add_op(b, ET_OP_EMBEDDING, ET_PHASE_FORWARD, layer, "%s", ID("embed.lookup"));
    if (op) {
        op->group = ET_GROUP_EMBEDDINGS;
        op->flops = TOK(H);
        op->bytes = TOK(2 * e * H);
    }
    gb_elementwise(b, ET_PHASE_FORWARD, layer, TOK(16 * H), TOK(4 * e * H), ID("norms"));
    gb_weight_forward(b, ET_PHASE_FORWARD, layer, ET_GROUP_ATTENTION, TOK(1), 2 * H, H, 1, ID("eh_proj"));
    layer_forward(b, d, layer, 1, ET_PHASE_FORWARD, "");
    gb_id_printf(id, sizeof id, "mtp.%d.head", j);
    head_forward(b, d, m, id);
#undef ID
}

/* Its backward; `first`: this stage holds the embedding table (else the module's lookups scatter into the
 * last stage's copy, whose gradient is reduced with the first stage's like a tied output weight's). */
static void mtp_backward(builder *b, const dims *d, const et_model_config *m, int j, int first)
{
    char id[80];
    const double H = d->H, e = d->e;
    const int layer = m->layers + j;
    gb_id_printf(id, sizeof id, "mtp.%d.head", j);
    head_backward(b, d, m, id, 0);
    layer_backward(b, d, layer, 1, b->g->options.recompute);
    gb_id_printf(id, sizeof id, "mtp.%d.eh_proj", j);
    gb_weight_backward(b, layer, ET_GROUP_ATTENTION, TOK(1), 2 * H, H, 1, id, d->bias, 1);
    gb_id_printf(id, sizeof id, "mtp.%d.norms.bwd", j);
    gb_elementwise(b, ET_PHASE_BACKWARD, layer, TOK(20 * H), TOK(8 * e * H), id);
    gb_add_grad(b, layer, 2 * H, "mtp.%d.norms.weight", j); /* the embedding's and the hidden state's */
    et_op *op = gb_add_op(b, ET_OP_EMBEDDING, ET_PHASE_BACKWARD, layer, "mtp.%d.embed.lookup.bwd", j);
    if (op) {
        op->group = ET_GROUP_EMBEDDINGS;
        op->flops = TOK(H);
        op->bytes = TOK(2 * e * H);
    }
    if (!first && j == 0) gb_add_grad(b, -1, d->V / d->t * H, "mtp.embed.word_embeddings");
}

/* The word embedding as a TT-matrix, when the method says so. */
static int tt_embedding_of(const builder *b, et_tt_shape *tt)
{
    const et_method *m = b->method;
    if (m->kind != ET_METHOD_TENSOR_TRAIN || !m->tt_embedding) return 0;
    et_error err;
    return et_tt_embedding(tt, m->emb_rows, m->emb_cols, m->emb_d, m->emb_rank, &err) == 0;
}

static void embedding_forward(builder *b, const dims *d, const et_model_config *m)
{
    const double H = d->H, e = d->e;
    double tables = 1 + (m->position == ET_POSITION_LEARNED) + (m->type_vocab > 0);
    et_tt_shape tt;
    int tt_word = tt_embedding_of(b, &tt);
    et_op *op = gb_add_op(b, ET_OP_EMBEDDING, ET_PHASE_FORWARD, -1, "embed.lookup");
    if (op) {
        op->group = ET_GROUP_EMBEDDINGS;
        op->flops = TOK(tables * H + (tt_word ? et_tt_embedding_flops_per_token(&tt) : 0));
        op->bytes = TOK((tables + 1) * e * H);
        if (tt_word) op->bytes.fixed = op->weight_bytes = et_tt_params(&tt) * e;
    }
    tp_boundary(b, d, ET_PHASE_FORWARD, -1, 0, d->sp ? "embed.tp_reduce_scatter" : "embed.tp_allreduce");
    dropout_op(b, d, ET_PHASE_FORWARD, -1, TOK(H * d->St), 1, "embed.dropout");
    if (m->arch == ET_ARCH_ENCODER)
        gb_elementwise(b, ET_PHASE_FORWARD, -1, TOK(8 * H), TOK(2 * e * H), "embed.layernorm");
}

static void embedding_backward(builder *b, const dims *d, const et_model_config *m)
{
    const double H = d->H, e = d->e, Vt = d->V / d->t;
    if (m->arch == ET_ARCH_ENCODER) layernorm_backward(b, d, -1, "embed.layernorm", TOK(1));
    dropout_op(b, d, ET_PHASE_BACKWARD, -1, TOK(H * d->St), 1, "embed.dropout.bwd");
    double tables = 1 + (m->position == ET_POSITION_LEARNED) + (m->type_vocab > 0);
    et_tt_shape tt;
    int tt_word = tt_embedding_of(b, &tt);
    et_sparse_spec sp = sparse_of(b, ET_GROUP_EMBEDDINGS);
    double word_dense = Vt * H, word_kept = tt_word ? et_tt_params(&tt) : word_dense * sp.density;
    double table_elems = word_kept + (m->position == ET_POSITION_LEARNED ? (double)m->max_positions * H : 0) +
                         m->type_vocab * H;
    /* under LoRA the tables are frozen: no scatter (their weights still counted below) */
    et_op *op = b->lora ? NULL : gb_add_op(b, ET_OP_EMBEDDING, ET_PHASE_BACKWARD, -1, "embed.lookup.bwd");
    if (!op && !b->lora) return;
    if (op) {
        op->group = ET_GROUP_EMBEDDINGS;
        /* scatter-add of token gradients into the (zeroed) tables; a TT table gets its cores' gradients by
         * running the row contraction backwards (twice the forward FLOPs per token) */
        op->flops = TOK(tables * H + (tt_word ? 2 * et_tt_embedding_flops_per_token(&tt) : 0));
        op->bytes = lin_add(TOK(2 * tables * e * H), FIX(e * table_elems));
    }
    if (tt_word) {
        char name[80];
        for (int k = tt.d_in - 1; k >= 0; k--) {
            snprintf(name, sizeof name, "embed.word_embeddings.core.%d", k);
            double n = et_tt_core_params(&tt, k);
            gb_add_param(b, -1, n, n, n, 0, name);
        }
    } else {
        gb_add_param(b, -1, word_kept, word_dense, b->method->dense_gradients ? word_dense : word_kept,
                     word_dense * et_sparse_meta_bytes_per_weight(&sp), "embed.word_embeddings");
    }
    if (m->position == ET_POSITION_LEARNED)
        gb_add_grad(b, -1, (double)m->max_positions * H, "embed.position_embeddings");
    if (m->type_vocab > 0) gb_add_grad(b, -1, (double)m->type_vocab * H, "embed.token_type_embeddings");
}

/* A tied output projection over a TT embedding needs the dense table: rebuilt from the cores each step. */
static void tt_table_reconstruct(builder *b, const dims *d)
{
    et_tt_shape tt;
    if (!tt_embedding_of(b, &tt) || !b->g->model.tie_embeddings) return;
    et_op *op = gb_add_op(b, ET_OP_EMBEDDING, ET_PHASE_FORWARD, -1, "head.tied_table.reconstruct");
    if (!op) return;
    op->group = ET_GROUP_EMBEDDINGS;
    op->flops = FIX(d->V * et_tt_embedding_flops_per_token(&tt));
    op->bytes = FIX(d->V * d->H * d->e + et_tt_params(&tt) * d->e);
}

/* Whether GaLore projects parameter i: a transformer layer's dense weight matrix whose shorter side
 * exceeds the rank. */
static int galore_projects(const et_graph *g, const et_param *p)
{
    const int r = g->options.galore.rank;
    return r > 0 && p->layer >= 0 && p->rows > 0 && fmin(p->rows, p->cols) > r;
}

/* GaLore's optimizer ops per projected matrix W (m x n, m = min side): the gradient projected on P
 * (r x m by m x n), Adam on r x n states, the update projected back (m x r by r x n); and P recomputed
 * from the gradient's SVD every update_interval steps, amortised (4 m n m + 8 m^3 FLOPs: Golub and Van
 * Loan's bidiagonalisation and the left singular vectors, at the product efficiency of an m x n x m GEMM).
 * Returns the parameters projected; their states go to g->galore_state_elems. */
static double galore_ops(builder *b, const et_graph_options *o)
{
    et_graph *g = b->g;
    const double r = o->galore.rank, T = o->galore.update_interval, e = b->e;
    double projected = 0, low_rank = 0, full = 0;
    const int n_params = g->n_params;
    for (int i = 0; i < n_params && !b->failed; i++) {
        const et_param p = g->params[i];
        if (!galore_projects(g, &p)) continue;
        const double m = fmin(p.rows, p.cols), n = fmax(p.rows, p.cols);
        et_op *op =
            gb_add_op(b, ET_OP_GEMM, ET_PHASE_OPTIMIZER, p.layer, "optimizer.galore.project.%s", p.id);
        if (op) {
            op->m = FIX(r), op->n = FIX(n), op->k = FIX(m);
            op->flops = FIX(2 * r * m * n);
            op->bytes = FIX(e * (m * n + r * m + r * n));
        }
        if ((op = gb_add_op(b, ET_OP_GEMM, ET_PHASE_OPTIMIZER, p.layer, "optimizer.galore.project_back.%s",
                            p.id))) {
            op->m = FIX(m), op->n = FIX(n), op->k = FIX(r);
            op->flops = FIX(2 * r * m * n);
            op->bytes = FIX(e * (m * n + r * m + r * n));
        }
        if ((op = gb_add_op(b, ET_OP_GEMM, ET_PHASE_OPTIMIZER, p.layer, "optimizer.galore.svd.%s", p.id))) {
            op->m = FIX(m), op->n = FIX(n), op->k = FIX(m);
            op->flops = FIX((4 * m * n * m + 8 * m * m * m) / T);
            op->bytes = FIX(4 * (2 * m * n + m * m) / T);
        }
        projected += p.count;
        low_rank += r * n;
        full += m * n;
        g->galore_state_elems += 2 * r * n + r * m;
    }
    et_op *op;
    if (projected > 0 &&
        (op = gb_add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.galore.step"))) {
        /* Adam on the low-rank states (m, v read and written), the full-size update applied to the fp32
         * master copy and the weights, the gradient read */
        op->flops = FIX(12 * low_rank + 2 * full);
        op->bytes = FIX(16 * low_rank + (e + 8 + e) * full);
    }
    g->galore_projected = projected;
    return projected;
}

double et_graph_optimizer_params(const et_graph *g)
{
    const et_graph_options *o = &g->options;
    double experts = 0;
    for (int i = 0; i < g->n_params; i++)
        if (g->params[i].expert) experts += g->params[i].count;
    const double shards = o->optimizer_shards > 0 ? o->optimizer_shards : 1,
                 expert_shards = o->expert_optimizer_shards > 0 ? o->expert_optimizer_shards : shards;
    return (g->param_count - experts) / shards + experts / expert_shards;
}

/* Optimizer kernels over this GPU's shard of parameters (fp32 math, bytes per parameter in docs): GaLore's
 * unprojected parameters over the data ranks, else the experts' states over their own group too
 * (et_graph_optimizer_params). */
static void optimizer_ops(builder *b, const et_graph_options *o, double params)
{
    if (o->galore.rank > 0) params -= galore_ops(b, o);
    const double shard = o->galore.rank > 0 ? params / o->optimizer_shards : et_graph_optimizer_params(b->g);
    double ge = b->e; /* gradient element size */
    /* sparse weights kept dense with a mask (etrun's CPU backend): the update runs over every element */
    double dense = 0, kept = 0;
    for (int i = 0; i < b->g->n_params; i++)
        if (b->g->params[i].dense > b->g->params[i].count)
            dense += b->g->params[i].dense, kept += b->g->params[i].count;
    const double masked_scale = dense > 0 && params > 0 ? (params - kept + dense) / params : 0,
                 mask_bytes = 4 * dense / o->optimizer_shards; /* fp32 masks */
    et_op *op;
    if (o->precision == ET_FP16 &&
        (op = gb_add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.unscale"))) {
        op->flops = FIX(2 * shard);
        op->bytes = FIX(2 * ge * shard);
    }
    if (o->clip_global &&
        (op = gb_add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.grad_norm"))) {
        op->flops = FIX(2 * shard);
        op->bytes = FIX(ge * shard);
    }
    if (o->optimizer == ET_OPT_LAMB) {
        if ((op = gb_add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.update"))) {
            op->flops = FIX(12 * shard);
            op->bytes = FIX((ge + 12 + 12) * shard);
            op->cold_bytes = FIX(ET_ADAM_MOMENT_BYTES * shard);
            op->footprint = FIX((ge + 12) * shard); /* gradients, fp32 weights, m and v */
            op->masked_scale = masked_scale, op->mask_bytes = mask_bytes;
        }
        if ((op = gb_add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.trust_ratio"))) {
            op->flops = FIX(4 * shard);
            op->bytes = FIX(8 * shard);
        }
        if ((op = gb_add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.apply"))) {
            op->flops = FIX(3 * shard);
            op->bytes = FIX((12 + (ge < 4 ? ge : 0)) * shard); /* the 16-bit copy under mixed precision */
        }
    } else if ((op = gb_add_op(b, ET_OP_OPTIMIZER, ET_PHASE_OPTIMIZER, -1, "optimizer.step"))) {
        et_adam_step_costs(op, shard, ge);
        op->masked_scale = masked_scale, op->mask_bytes = mask_bytes;
    }
}

void et_adam_step_costs(et_op *op, double values, double grad_bytes)
{
    op->flops = FIX(12 * values);
    /* gradient read, master weight, m and v read and written, and under mixed precision (16-bit gradients)
     * the 16-bit weight copy written; fp32 training updates its one copy of the weights */
    op->bytes = FIX((grad_bytes + 12 + 12 + (grad_bytes < 4 ? grad_bytes : 0)) * values);
    op->cold_bytes = FIX(ET_ADAM_MOMENT_BYTES * values);
    op->footprint = FIX((grad_bytes + 12 + (grad_bytes < 4 ? grad_bytes : 0)) * values);
}

int et_graph_build(const et_model_config *m, const et_graph_options *o, et_graph *g, et_error *err)
{
    memset(g, 0, sizeof *g);
    return et_graph_rebuild(m, o, g, err);
}

static int build(const et_model_config *m, const et_graph_options *o, et_graph *g, int params_only,
                 et_error *err);

int et_graph_rebuild(const et_model_config *m, const et_graph_options *o, et_graph *g, et_error *err)
{
    et_op *ops = g->ops;
    et_param *params = g->params;
    int cap_ops = g->cap_ops, cap_params = g->cap_params;
    /* room for a stage's layers at once (about 50 ops and 16 parameters a layer, recomputed ones
     * included): a buffer grown by doubling copies what it held, into memory touched for the first time,
     * and a cache slot reused for a larger stage would grow again and again */
    const int layers = o->layers_per_stage ? o->layers_per_stage[o->stage] : m->layers / o->pipeline;
    if (cap_ops < 50 * layers + 64) { /* once for the whole model: pages are touched as ops are added */
        free(ops);
        cap_ops = 50 * m->layers + 64;
        ops = malloc((size_t)cap_ops * sizeof *ops);
        if (!ops) cap_ops = 0; /* add_op grows it, or reports the failure */
    }
    if (cap_params < 16 * layers + 16) {
        free(params);
        cap_params = 16 * m->layers + 16;
        params = malloc((size_t)cap_params * sizeof *params);
        if (!params) cap_params = 0;
    }
    memset(g, 0, sizeof *g);
    g->ops = ops, g->cap_ops = cap_ops, g->params = params, g->cap_params = cap_params;
    return build(m, o, g, 0, err);
}

int et_graph_params(const et_model_config *m, const et_graph_options *o, et_graph *g, et_error *err)
{
    memset(g, 0, sizeof *g);
    return build(m, o, g, 1, err);
}

static int build(const et_model_config *m, const et_graph_options *o, et_graph *g, int params_only,
                 et_error *err)
{
    g->model = *m;
    g->options = *o;
    static const et_method dense_method = {.kind = ET_METHOD_DENSE};
    builder b = {.g = g,
                 .err = err,
                 .e = et_precision_bytes(o->precision),
                 .method = o->method ? o->method : &dense_method,
                 .tokens = o->tokens_hint > 0 ? o->tokens_hint : 1,
                 .t = o->tensor,
                 .x = o->expert > 1 ? o->expert : 1,
                 .quant_bytes = et_precision_quantized(o->precision) ? et_quantize_bytes(o->scaling) : 0,
                 .quant_kernels = et_precision_quantized(o->precision) ? et_quantize_kernels(o->scaling) : 0,
                 .params_only = params_only,
                 .bias_kernels = o->bias_kernels,
                 .expert_launches = o->expert_launches,
                 .lora = o->method && o->method->kind == ET_METHOD_LORA};
    b.tt_rank = o->tt_rank > 0 ? o->tt_rank : b.method->tt_rank;
    dims d = {.H = m->hidden,
              .A = m->heads,
              .D = et_model_head_dim(m),
              .F = m->ffn,
              .V = m->vocab,
              .t = o->tensor,
              .e = b.e};
    d.Ht = d.H / d.t;
    d.Qt = d.A * d.D / d.t;
    d.Ft = d.F / d.t;
    d.At = d.A / d.t;
    d.sp = o->sequence_parallel && o->tensor > 1;
    d.St = d.sp ? 1 / d.t : 1;
    d.dropout = m->dropout;
    d.KVt = (m->kv_heads ? m->kv_heads : m->heads) * d.D / d.t;
    d.Vt = d.Qt;
    if (m->mla.kv_lora > 0) {
        d.mla = 1;
        d.Lq = m->mla.q_lora, d.Lkv = m->mla.kv_lora, d.R = m->mla.rope_dim, d.Dv = m->mla.v_dim;
        d.Qt = d.A * (d.D + d.R) / d.t;
        d.Vt = d.A * d.Dv / d.t;
        d.KVt = (d.Qt + d.Vt) / 2;
    }
    d.bias = !m->no_bias;
    d.swiglu = m->mlp == ET_MLP_SWIGLU;
    d.rms = m->norm == ET_NORM_RMSNORM;
    d.rope = m->position == ET_POSITION_ROPE;
    d.alibi = m->position == ET_POSITION_ALIBI;
    d.qk_norm = m->qk_norm;
    d.sinks = m->sinks;
    d.rm = et_recompute_modules_of(o->recompute, o->recompute_modules);
    d.early_stop = o->recompute_early_stop;
    /* a fused causal kernel skips the blocks above the diagonal; materialised scores are computed whole */
    d.causal_share = m->arch == ET_ARCH_DECODER && o->attention == ET_ATTENTION_FLASH ? 0.5 : 1;
    d.causal = m->arch == ET_ARCH_DECODER;
    d.flash = o->attention == ET_ATTENTION_FLASH;
    d.flash_rate = o->flash_rate; /* 0: the profile's kernel, as et_op_time reads an op's fused_rate */
    d.unpad = d.flash && o->attention_unpad;
    d.cudnn = d.flash && o->attention_cudnn;
    d.tp_async = o->tp_async;
    d.residual = o->residual_kernels;
    if (m->moe.experts > 0) {
        d.E = m->moe.experts;
        d.k = m->moe.top_k;
        d.kc = d.k * (m->moe.capacity_factor > 0 ? m->moe.capacity_factor : 1);
        d.El = d.E / b.x;
        d.sort_chunks = o->moe_sort_chunks;
        /* at most the tensor degree (a graph of the whole model, tensor 1, splits no expert) */
        const int etp = o->expert_tensor > 0 && o->expert_tensor < o->tensor ? o->expert_tensor : o->tensor;
        d.folded = etp < o->tensor;
        d.Mt = d.folded ? d.St : 1;
        d.Fet = et_model_expert_ffn(m) / etp;
        d.Fst = (double)m->moe.shared_experts * et_model_expert_ffn(m) / d.t;
    }
    int per_stage = m->layers / o->pipeline;
    g->first_layer = o->stage * per_stage;
    if (o->layers_per_stage) {
        g->first_layer = 0;
        for (int k = 0; k < o->stage; k++)
            g->first_layer += o->layers_per_stage[k];
        per_stage = o->layers_per_stage[o->stage];
    }
    g->last_layer = g->first_layer + per_stage - 1;
    int first = o->stage == 0, last = o->stage == o->pipeline - 1;
    int decoder = m->arch == ET_ARCH_DECODER;

    if (first) embedding_forward(&b, &d, m);
    for (int i = g->first_layer; i <= g->last_layer; i++)
        layer_forward(&b, &d, i, decoder, ET_PHASE_FORWARD, "");
    if (last) tt_table_reconstruct(&b, &d);
    for (int j = 0; last && j < m->mtp_layers; j++)
        mtp_forward(&b, &d, m, j);
    if (last) head_forward(&b, &d, m, "head");
    for (int j = m->mtp_layers - 1; last && j >= 0; j--)
        mtp_backward(&b, &d, m, j, first);
    if (last) head_backward(&b, &d, m, "head", 1);
    for (int i = g->last_layer; i >= g->first_layer; i--)
        layer_backward(&b, &d, i, decoder,
                       o->recompute == ET_RECOMPUTE_FULL && !et_graph_layer_recomputed(g, i)
                           ? ET_RECOMPUTE_NONE
                           : o->recompute);
    if (first) embedding_backward(&b, &d, m);
    /* An untied output projection on a one-stage model is still finalised in head_backward above; a tied one
     * on a last stage that does not hold the embedding keeps its own copy (Megatron), finalised at the end.
     */
    if (last && !first && m->tie_embeddings) {
        et_op *op = b.lora
                        ? NULL
                        : gb_add_op(&b, ET_OP_ELEMENTWISE, ET_PHASE_BACKWARD, -1, "head.tied_embedding.grad");
        if (op) op->bytes = FIX(b.e * d.V / d.t * d.H);
        gb_add_grad(&b, -1, d.V / d.t * d.H, "head.tied_embedding");
    }
    optimizer_ops(&b, o, g->param_count);
    /* what a step holds besides an update's own state: one micro-batch's activations (in flight, once) */
    et_linear acts, once;
    et_graph_activation_terms(g, &acts, &once);
    const et_linear step = lin_add(acts, once);
    for (int i = 0; !b.failed && i < g->n_ops; i++)
        if (g->ops[i].footprint.fixed > 0) g->ops[i].footprint = lin_add(g->ops[i].footprint, step);
    if (b.failed) {
        et_graph_free(g);
        return -1;
    }
    return 0;
}

int et_graph_stage_twin(const et_model_config *m, const et_graph_options *o)
{
    const int pp = o->pipeline, stage = o->stage;
    if (stage <= 1 || stage >= pp - 1 || o->layers_per_stage || (o->op_scales && o->op_scales->n))
        return stage; /* the first and last stages hold the embedding and the head */
    const int per_stage = m->layers / pp;
    if (m->moe.experts > 0 && (per_stage % m->moe.every != 0 || m->moe.first_dense > per_stage)) return stage;
    if (m->window > 0 && m->full_every > 0 && per_stage % m->full_every != 0) return stage;
    return 1;
}

void et_graph_free(et_graph *g)
{
    free(g->ops);
    free(g->params);
    g->ops = NULL;
    g->params = NULL;
    g->n_ops = g->n_params = g->cap_ops = g->cap_params = 0;
}

int et_graph_find(const et_graph *g, const char *id)
{
    for (int i = 0; i < g->n_ops; i++)
        if (strcmp(g->ops[i].id, id) == 0) return i;
    return -1;
}

double et_graph_quantized_params(const et_graph *g)
{
    double n = 0;
    for (int i = 0; i < g->n_params; i++)
        if (g->params[i].quantized) n += g->params[i].count;
    return n;
}

double et_graph_param_gather_bytes(const et_graph *g, bool fp8)
{
    const double e = et_precision_bytes(g->options.precision);
    return e * g->param_count - (fp8 ? (e - 1) * et_graph_quantized_params(g) : 0);
}

bool et_graph_layer_recomputed(const et_graph *g, int i)
{
    const et_graph_options *o = &g->options;
    if (o->recompute != ET_RECOMPUTE_FULL) return false;
    if (o->recompute_layers <= 0 || i > g->last_layer) return true;
    const int chunk = et_pipeline_chunk_layers(g->last_layer - g->first_layer + 1, o->virtual_pipeline);
    return (i - g->first_layer) % chunk < o->recompute_layers;
}

bool et_graph_layer_bf16(const et_model_config *model, const et_graph_options *o, int layer)
{
    if (!et_precision_quantized(o->precision) || layer < 0 || layer >= model->layers) return false;
    return layer < o->bf16_first || layer >= model->layers - o->bf16_last;
}

double et_op_model_share(const et_graph *g, const et_op *op)
{
    if (op->kind != ET_OP_ATTENTION || !op->fused || op->phase != ET_PHASE_BACKWARD) return 1;
    const double qk = et_model_qk_dim(&g->model), v = et_model_v_dim(&g->model);
    return (4 * qk + 4 * v) / (6 * qk + 4 * v);
}

double et_model_param_count(const et_model_config *model)
{
    /* once per model: the plan search asks it for every candidate of one model, and a whole graph of a
     * 175B model was most of a candidate's cost (the struct compared byte for byte: scenarios are parsed
     * into zeroed structs) */
    static _Thread_local et_model_config cached_model;
    static _Thread_local double cached_count = -1;
    if (cached_count >= 0 && memcmp(&cached_model, model, sizeof *model) == 0) return cached_count;
    et_graph g;
    et_error err;
    et_graph_options o = {
        .tensor = 1, .pipeline = 1, .stage = 0, .precision = ET_FP32, .optimizer_shards = 1};
    if (et_graph_params(model, &o, &g, &err)) return -1;
    double n = g.param_count;
    et_graph_free(&g);
    cached_model = *model;
    cached_count = n;
    return n;
}

double et_model_active_param_count(const et_model_config *model)
{
    double total = et_model_param_count(model);
    const et_moe *moe = &model->moe;
    if (moe->experts <= 0 || total < 0) return total;
    const double H = model->hidden, Fe = et_model_expert_ffn(model);
    /* one expert: its two or three matrices, and biases when the model has them */
    const double matrices = model->mlp == ET_MLP_SWIGLU ? 3 : 2;
    const double bias = model->no_bias ? 0 : (model->mlp == ET_MLP_SWIGLU ? 2 * Fe : Fe) + H;
    /* the prediction modules' MoE layers too (their parameters are in the total) */
    const double moe_layers = et_model_moe_layers(model, 0, model->layers + model->mtp_layers - 1);
    return total - moe_layers * (moe->experts - moe->top_k) * (matrices * H * Fe + bias);
}

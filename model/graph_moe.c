/* The op graph's mixture-of-experts blocks (docs/cost-model.md, "Mixture of experts"): the router, the
 * tokens' permutation and all-to-alls, the experts' grouped products, shared experts, and whether an MoE
 * layer's MLP block sits between tensor-parallel collectives (graph_build.h). */
#include "graph_build.h"

/* The products of an MoE layer's experts on this rank as one grouped GEMM (MegaBlocks, Megatron-Core's
 * grouped GEMM; launched as one kernel, or once per local expert: software.grouped_gemm): `rows` routed
 * rows in all, `experts` experts, each weight n_in x n_out. `dir` 0 forward
 * (m = rows / experts, n = n_out, k = n_in), 1 data gradient (rows / experts, n_in, n_out), 2 weight
 * gradient (n_out, n_in, rows / experts). FLOPs 2 rows n_in n_out; bytes the two activation operands and
 * every local expert's weight. */
static et_op *expert_gemm(builder *b, et_phase phase, int layer, int dir, et_linear rows, double experts,
                          double n_in, double n_out, const char *id)
{
    et_op *op = gb_add_op(b, ET_OP_GEMM, phase, layer, "%s", id);
    if (!op) return NULL;
    const et_linear per_expert = lin_scale(rows, 1 / experts);
    op->m = dir == 2 ? FIX(n_out) : per_expert;
    op->n = dir == 0 ? FIX(n_out) : FIX(n_in);
    op->k = dir == 0 ? FIX(n_in) : dir == 1 ? FIX(n_out) : per_expert;
    op->group = ET_GROUP_MLP;
    op->sparse = (et_sparse_spec){.density = 1, .pattern = ET_PATTERN_DENSE};
    op->expert = true;
    if (b->expert_launches) op->kernels = (int)experts; /* one per local expert: TE's GroupedLinear */
    op->flops = lin_scale(rows, 2 * n_in * n_out);
    op->weight_bytes = experts * n_in * n_out * b->e;
    op->bytes = lin_add(lin_scale(rows, b->e * (n_in + n_out)), FIX(op->weight_bytes));
    gb_fp8_cast(b, op, rows, n_in);
    return op;
}

/* The parameter just added is an expert's. */
static void mark_expert(builder *b)
{
    if (!b->failed && (!b->lora || b->adapter)) b->g->params[b->g->n_params - 1].expert = true;
}

/* The experts' all-to-all of this rank's routed rows (dispatch or combine), with expert parallelism. */
static void alltoall(builder *b, const dims *d, et_phase phase, int layer, const char *id)
{
    if (b->x <= 1) return;
    et_op *op = gb_add_op(b, ET_OP_EP_ALLTOALL, phase, layer, "%s", id);
    if (op) op->bytes = TOK(d->e * d->H * d->kc * d->Mt);
}

/* Shared experts (DeepSeekMoE): a dense MLP of Fs hidden width on every token beside the routed experts
 * (Megatron-Core's SharedExpertMLP, split over the tensor ranks like the model's MLP), its output added to
 * the experts' combined one. */
static void shared_forward(builder *b, const dims *d, int i, et_phase phase, const char *suffix)
{
    if (d->Fst <= 0) return;
    char id[80];
    const double H = d->H, F = d->Fst;
#define ID(name) (gb_id_printf(id, sizeof id, "layer.%d.moe.shared.%s%s", i, name, suffix), id)
    gb_weight_forward(b, phase, i, ET_GROUP_MLP, TOK(1), H, d->swiglu ? 2 * F : F, 1, ID("fc1"));
    gb_activation(b, d, phase, i, F, 0, ID(d->swiglu ? "swiglu" : "gelu"));
    gb_weight_forward(b, phase, i, ET_GROUP_MLP, TOK(1), F, H, 1, ID("fc2"));
#undef ID
}

static void shared_backward(builder *b, const dims *d, int i)
{
    if (d->Fst <= 0) return;
    char name[80];
    const double H = d->H, F = d->Fst;
#define NAME(s) (gb_id_printf(name, sizeof name, "layer.%d.moe.shared.%s", i, s), name)
    if (ET_RECOMPUTES(d->rm, ET_RECOMPUTE_SHARED_EXPERTS)) { /* selective "shared_experts" */
        gb_weight_forward(b, ET_PHASE_BACKWARD, i, ET_GROUP_MLP, TOK(1), H, d->swiglu ? 2 * F : F, 1,
                          NAME("fc1.recompute"));
        gb_activation(b, d, ET_PHASE_BACKWARD, i, F, 0, NAME("act.recompute"));
    }
    gb_weight_backward(b, i, ET_GROUP_MLP, TOK(1), F, H, 1, NAME("fc2"), d->bias, 1);
    gb_activation(b, d, ET_PHASE_BACKWARD, i, F, 1, NAME(d->swiglu ? "swiglu.bwd" : "gelu.bwd"));
    gb_weight_backward(b, i, ET_GROUP_MLP, TOK(1), H, d->swiglu ? 2 * F : F, 1, NAME("fc1"), d->bias, 1);
#undef NAME
}

/* Megatron-Core's all-to-all dispatcher: the rows an expert rank receives arrive grouped by source rank, and
 * with more than one local expert they are copied into local-expert order after the dispatch and back
 * before the combine (sort_chunks_by_idxs), each a read and a write of the k c T rows */
static void sort_chunks(builder *b, const dims *d, et_phase phase, int i, const char *id)
{
    if (!d->sort_chunks || d->El <= 1 || d->El >= d->E) return;
    et_op *op = gb_elementwise(b, phase, i, FIX(0), TOK(2 * d->e * d->H * d->kc * d->Mt), id);
    if (op) op->expert = true;
}

/* An MoE MLP (docs/cost-model.md, "Mixture of experts"): the router's product and top-k, the tokens
 * permuted into expert order (k c copies), dispatched to the experts' ranks, the experts' products as
 * grouped GEMMs over k c T rows, combined back and summed with the router's weights. */
void gb_moe_forward(builder *b, const dims *d, int i, et_phase phase, const char *suffix)
{
    char id[80];
    const double H = d->H, e = d->e, E = d->E, kc = d->kc, Fet = d->Fet, El = d->El, Mt = d->Mt;
#define ID(name) (gb_id_printf(id, sizeof id, "layer.%d.moe.%s%s", i, name, suffix), id)
    gb_plain_forward(b, phase, i, ET_GROUP_MLP, TOK(Mt), H, E, ID("router"));
    /* softmax over E logits and the top-k: logits read, probabilities written, k indices and weights */
    gb_special(gb_elementwise(b, phase, i, TOK(6 * E * Mt), TOK((2 * e * E + 8 * d->k) * Mt), ID("route")),
               TOK(E * Mt));
    shared_forward(b, d, i, phase, suffix);
    gb_elementwise(b, phase, i, FIX(0), TOK(e * H * (1 + kc) * Mt), ID("permute"));
    alltoall(b, d, phase, i, ID("dispatch"));
    sort_chunks(b, d, phase, i, ID("experts.sort"));
    et_op *op =
        expert_gemm(b, phase, i, 0, TOK(kc * Mt), El, H, d->swiglu ? 2 * Fet : Fet, ID("experts.fc1"));
    op = gb_activation(b, d, phase, i, Fet * kc * Mt, 0, ID(d->swiglu ? "experts.swiglu" : "experts.gelu"));
    if (op) op->expert = true;
    expert_gemm(b, phase, i, 0, TOK(kc * Mt), El, Fet, H, ID("experts.fc2"));
    sort_chunks(b, d, phase, i, ID("experts.unsort"));
    alltoall(b, d, phase, i, ID("combine"));
    /* each token's k outputs weighted and summed */
    gb_elementwise(b, phase, i, TOK(2 * d->k * H * Mt), TOK(e * H * (1 + kc) * Mt), ID("unpermute"));
#undef ID
}

/* An expert product's backward (data and weight gradients over the routed rows) and the parameters it
 * finalises: El weights of n_in x n_out, and their biases when the model has them. */
static void expert_backward(builder *b, const dims *d, int i, double n_in, double n_out, const char *name)
{
    char id[80], pname[96];
    gb_id_printf(id, sizeof id, "layer.%d.moe.experts.%s.bwd_data", i, name);
    expert_gemm(b, ET_PHASE_BACKWARD, i, 1, TOK(d->kc * d->Mt), d->El, n_in, n_out, id);
    gb_id_printf(id, sizeof id, "layer.%d.moe.experts.%s.bwd_weight", i, name);
    expert_gemm(b, ET_PHASE_BACKWARD, i, 2, TOK(d->kc * d->Mt), d->El, n_in, n_out, id);
    gb_id_printf(pname, sizeof pname, "layer.%d.moe.experts.%s.weight", i, name);
    gb_add_param(b, i, d->El * n_in * n_out, d->El * n_in * n_out, d->El * n_in * n_out, 0, pname);
    mark_expert(b);
    gb_mark_quantized(b);
    if (d->bias) gb_add_grad(b, i, d->El * n_out, "layer.%d.moe.experts.%s.bias", i, name), mark_expert(b);
}

void gb_moe_backward(builder *b, const dims *d, int i)
{
    char id[80], pname[96];
    const double H = d->H, e = d->e, E = d->E, kc = d->kc, Fet = d->Fet, Mt = d->Mt;
    const double Fc1 = d->swiglu ? 2 * Fet : Fet;
#define ID(name) (gb_id_printf(id, sizeof id, "layer.%d.moe.%s", i, name), id)
    gb_elementwise(b, ET_PHASE_BACKWARD, i, TOK(2 * d->k * H * Mt), TOK((e * H * (1 + kc) + 4 * d->k) * Mt),
                   ID("unpermute.bwd"));
    alltoall(b, d, ET_PHASE_BACKWARD, i, ID("combine.bwd"));
    sort_chunks(b, d, ET_PHASE_BACKWARD, i, ID("experts.unsort.bwd"));
    expert_backward(b, d, i, Fet, H, "fc2");
    et_op *op;
    if (ET_RECOMPUTES(d->rm, ET_RECOMPUTE_MOE_ACT)) { /* selective "moe_act": the activation's output */
        op = gb_activation(b, d, ET_PHASE_BACKWARD, i, Fet * kc * Mt, 0, ID("experts.act.recompute"));
        if (op) op->expert = true;
    }
    op = gb_activation(b, d, ET_PHASE_BACKWARD, i, Fet * kc * Mt, 1,
                       ID(d->swiglu ? "experts.swiglu.bwd" : "experts.gelu.bwd"));
    if (op) op->expert = true;
    expert_backward(b, d, i, H, Fc1, "fc1");
    sort_chunks(b, d, ET_PHASE_BACKWARD, i, ID("experts.sort.bwd"));
    alltoall(b, d, ET_PHASE_BACKWARD, i, ID("dispatch.bwd"));
    gb_elementwise(b, ET_PHASE_BACKWARD, i, FIX(0), TOK(e * H * (1 + kc) * Mt), ID("permute.bwd"));
    shared_backward(b, d, i);
    gb_elementwise(b, ET_PHASE_BACKWARD, i, TOK(4 * E * Mt), TOK((2 * e * E + 8 * d->k) * Mt),
                   ID("route.bwd"));
    gb_id_printf(pname, sizeof pname, "layer.%d.moe.router", i);
    gb_plain_backward(b, i, ET_GROUP_MLP, TOK(Mt), H, E, pname, d->bias, 1);
#undef ID
}

/* Whether layer i's MLP block gathers its input over the tensor ranks and reduces its output: every dense
 * MLP; an MoE layer with folded experts only for its shared experts (their tensor-parallel MLP), its routed
 * part running on the rank's sequence-parallel tokens (Megatron-Core's MoE layer with expert tensor
 * parallelism 1: the token dispatcher's all-to-all replaces the tensor-parallel gather). */
int gb_mlp_tp_boundary(const builder *b, const dims *d, int i)
{
    return !(d->folded && d->Fst <= 0 && et_model_layer_is_moe(&b->g->model, i));
}

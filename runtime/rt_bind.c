/* Op binding: every graph op to its executor, the parameters it touches and the kernel families its
 * executor calls, checked against the backend's `supports` at start-up. Tables are data: an op id (after
 * "layer.N." for layer ops), the executor, the parameter names under the op's prefix, the families. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_exec.h"

#define F(x) (1u << RT_FAMILY_##x)

typedef struct binding {
    const char *name;
    rt_exec_fn exec;
    const char *weight, *bias;
    unsigned families; /* bit per rt_kernel_family, besides buffers */
} binding;

static const binding layer_ops[] = {
    {"attn.qkv", rt_ex_qkv, "weight", "bias", F(LINEAR)},
    {"attn.scores", rt_ex_scores, NULL, NULL, F(ATTENTION)},
    {"attn.softmax", rt_ex_softmax, NULL, NULL, F(ATTENTION)},
    {"attn.context", rt_ex_context, NULL, NULL, F(ATTENTION)},
    {"attn.flash", rt_ex_flash, NULL, NULL, F(FLASH)},
    {"attn.out", rt_ex_attn_out, "weight", "bias", F(LINEAR)},
    {"attn.layernorm", rt_ex_attn_ln, "weight", "bias", F(LAYERNORM) | F(GLUE)},
    {"mlp.fc1", rt_ex_fc1, "weight", "bias", F(LINEAR)},
    {"mlp.gelu", rt_ex_gelu, NULL, NULL, F(GELU)},
    {"mlp.swiglu", rt_ex_swiglu, NULL, NULL, F(SWIGLU)},
    {"mlp.swiglu.bwd", rt_ex_swiglu_bwd, NULL, NULL, F(SWIGLU)},
    {"moe.router", rt_ex_moe_router, "weight", "bias", F(LINEAR)},
    {"moe.shared.fc1", rt_ex_moe_shared_fc1, "weight", "bias", F(LINEAR)},
    {"moe.shared.swiglu", rt_ex_moe_shared_act, NULL, NULL, F(SWIGLU)},
    {"moe.shared.gelu", rt_ex_moe_shared_act, NULL, NULL, F(GELU)},
    {"moe.shared.fc2", rt_ex_moe_shared_fc2, "weight", "bias", F(LINEAR)},
    {"moe.shared.fc2.bwd_data", rt_ex_moe_shared_fc2_bwd_data, "weight", NULL, F(LINEAR)},
    {"moe.shared.fc2.bwd_weight", rt_ex_moe_shared_fc2_bwd_weight, "weight", "bias", F(LINEAR)},
    {"moe.shared.swiglu.bwd", rt_ex_moe_shared_act_bwd, NULL, NULL, F(SWIGLU)},
    {"moe.shared.gelu.bwd", rt_ex_moe_shared_act_bwd, NULL, NULL, F(GELU)},
    {"moe.shared.fc1.bwd_data", rt_ex_moe_shared_fc1_bwd_data, "weight", NULL, F(LINEAR)},
    {"moe.shared.fc1.bwd_weight", rt_ex_moe_shared_fc1_bwd_weight, "weight", "bias", F(LINEAR)},
    {"moe.route", rt_ex_moe_route, NULL, NULL, F(MOE)},
    {"moe.permute", rt_ex_moe_permute, NULL, NULL, F(MOE) | F(GLUE)},
    {"moe.experts.fc1", rt_ex_moe_fc1, "weight", "bias", F(LINEAR)},
    {"moe.experts.swiglu", rt_ex_moe_act, NULL, NULL, F(SWIGLU)},
    {"moe.experts.gelu", rt_ex_moe_act, NULL, NULL, F(GELU)},
    {"moe.experts.fc2", rt_ex_moe_fc2, "weight", "bias", F(LINEAR)},
    {"moe.unpermute", rt_ex_moe_unpermute, NULL, NULL, F(MOE) | F(GLUE)},
    {"moe.dispatch", rt_ex_moe_dispatch, NULL, NULL, F(GLUE)},
    {"moe.combine", rt_ex_moe_combine, NULL, NULL, F(GLUE)},
    {"moe.combine.bwd", rt_ex_moe_combine_bwd, NULL, NULL, F(GLUE)},
    {"moe.dispatch.bwd", rt_ex_moe_dispatch_bwd, NULL, NULL, F(GLUE)},
    {"moe.unpermute.bwd", rt_ex_moe_unpermute_bwd, NULL, NULL, F(MOE)},
    {"moe.experts.fc2.bwd_data", rt_ex_moe_fc2_bwd_data, "weight", "bias", F(LINEAR)},
    {"moe.experts.fc2.bwd_weight", rt_ex_moe_fc2_bwd_weight, "weight", "bias", F(LINEAR)},
    {"moe.experts.swiglu.bwd", rt_ex_moe_act_bwd, NULL, NULL, F(SWIGLU)},
    {"moe.experts.gelu.bwd", rt_ex_moe_act_bwd, NULL, NULL, F(GELU)},
    {"moe.experts.fc1.bwd_data", rt_ex_moe_fc1_bwd_data, "weight", "bias", F(LINEAR)},
    {"moe.experts.fc1.bwd_weight", rt_ex_moe_fc1_bwd_weight, "weight", "bias", F(LINEAR)},
    {"moe.permute.bwd", rt_ex_moe_permute_bwd, NULL, NULL, F(GLUE)},
    {"moe.route.bwd", rt_ex_moe_route_bwd, NULL, NULL, F(MOE)},
    {"moe.router.bwd_data", rt_ex_moe_router_bwd_data, "weight", NULL, F(LINEAR)},
    {"moe.router.bwd_weight", rt_ex_moe_router_bwd_weight, "weight", "bias", F(LINEAR)},
    {"attn.rope", rt_ex_rope, NULL, NULL, F(ROPE)},
    {"attn.qk_norm", rt_ex_qk_norm, NULL, NULL, F(RMSNORM)},
    {"attn.qk_norm.bwd", rt_ex_qk_norm_bwd, NULL, NULL, F(RMSNORM)},
    {"attn.q_down", rt_ex_mla_q_down, "weight", "bias", F(LINEAR)},
    {"attn.q_norm", rt_ex_mla_q_norm, "weight", NULL, F(RMSNORM)},
    {"attn.q_up", rt_ex_mla_q_up, "weight", "bias", F(LINEAR)},
    {"attn.q", rt_ex_mla_q, "weight", "bias", F(LINEAR)},
    {"attn.kv_down", rt_ex_mla_kv_down, "weight", "bias", F(LINEAR)},
    {"attn.kv_norm", rt_ex_mla_kv_norm, "weight", NULL, F(RMSNORM)},
    {"attn.kv_up", rt_ex_mla_kv_up, "weight", "bias", F(LINEAR)},
    {"attn.qk_concat", rt_ex_mla_concat, NULL, NULL, 0},
    {"attn.qk_concat.bwd", rt_ex_mla_concat_bwd, NULL, NULL, 0},
    {"attn.kv_up.bwd_data", rt_ex_mla_kv_up_bwd_data, "weight", NULL, F(LINEAR)},
    {"attn.kv_up.bwd_weight", rt_ex_mla_kv_up_bwd_weight, "weight", "bias", F(LINEAR)},
    {"attn.kv_norm.bwd", rt_ex_mla_kv_norm_bwd, "weight", NULL, F(RMSNORM)},
    {"attn.kv_down.bwd_data", rt_ex_mla_kv_down_bwd_data, "weight", NULL, F(LINEAR)},
    {"attn.kv_down.bwd_weight", rt_ex_mla_kv_down_bwd_weight, "weight", "bias", F(LINEAR)},
    {"attn.q_up.bwd_data", rt_ex_mla_q_up_bwd_data, "weight", NULL, F(LINEAR)},
    {"attn.q_up.bwd_weight", rt_ex_mla_q_up_bwd_weight, "weight", "bias", F(LINEAR)},
    {"attn.q_norm.bwd", rt_ex_mla_q_norm_bwd, "weight", NULL, F(RMSNORM)},
    {"attn.q_down.bwd_data", rt_ex_mla_q_down_bwd_data, "weight", NULL, F(LINEAR)},
    {"attn.q_down.bwd_weight", rt_ex_mla_q_down_bwd_weight, "weight", "bias", F(LINEAR)},
    {"attn.q.bwd_data", rt_ex_mla_q_bwd_data, "weight", NULL, F(LINEAR)},
    {"attn.q.bwd_weight", rt_ex_mla_q_bwd_weight, "weight", "bias", F(LINEAR)},
    {"attn.rope.bwd", rt_ex_rope_bwd, NULL, NULL, F(ROPE)},
    {"mlp.fc2", rt_ex_fc2, "weight", "bias", F(LINEAR) | F(GLUE)},
    {"mlp.layernorm", rt_ex_mlp_ln, "weight", "bias", F(LAYERNORM) | F(GLUE)},
    {"mlp.layernorm.bwd", rt_ex_mlp_ln_bwd, "weight", "bias", F(LAYERNORM)},
    {"mlp.fc2.bwd_data", rt_ex_fc2_bwd_data, "weight", "bias", F(LINEAR)},
    {"mlp.fc2.bwd_weight", rt_ex_fc2_bwd_weight, "weight", "bias", F(LINEAR)},
    {"mlp.gelu.bwd", rt_ex_gelu_bwd, NULL, NULL, F(GELU)},
    {"mlp.fc1.bwd_data", rt_ex_fc1_bwd_data, "weight", "bias", F(LINEAR)},
    {"mlp.fc1.bwd_weight", rt_ex_fc1_bwd_weight, "weight", "bias", F(LINEAR)},
    {"attn.layernorm.bwd", rt_ex_attn_ln_bwd, "weight", "bias", F(LAYERNORM)},
    {"attn.out.bwd_data", rt_ex_attn_out_bwd_data, "weight", "bias", F(LINEAR)},
    {"attn.out.bwd_weight", rt_ex_attn_out_bwd_weight, "weight", "bias", F(LINEAR)},
    {"attn.context.bwd", rt_ex_context_bwd, NULL, NULL, F(ATTENTION)},
    {"attn.softmax.bwd", rt_ex_softmax_bwd, NULL, NULL, F(ATTENTION)},
    {"attn.scores.bwd", rt_ex_scores_bwd, NULL, NULL, F(ATTENTION)},
    {"attn.flash.bwd", rt_ex_flash_bwd, NULL, NULL, F(FLASH)},
    {"attn.qkv.bwd_data", rt_ex_qkv_bwd_data, "weight", "bias", F(LINEAR)},
    {"attn.qkv.bwd_weight", rt_ex_qkv_bwd_weight, "weight", "bias", F(LINEAR)},
#define LORA_BINDINGS(target, name)                                                                          \
    {target ".lora_a", rt_ex_lora_a_##name, "weight", NULL, F(LINEAR) | F(GLUE)},                            \
        {target ".lora_b", rt_ex_lora_b_##name, "weight", NULL, F(LINEAR) | F(GLUE)},                        \
        {target ".lora_b.bwd_data", rt_ex_lora_b_bwd_data_##name, "weight", NULL, F(LINEAR) | F(GLUE)},      \
        {target ".lora_b.bwd_weight", rt_ex_lora_b_bwd_weight_##name, "weight", NULL, F(LINEAR)},            \
        {target ".lora_a.bwd_data", rt_ex_lora_a_bwd_data_##name, "weight", NULL, F(LINEAR)},                \
    {                                                                                                        \
        target ".lora_a.bwd_weight", rt_ex_lora_a_bwd_weight_##name, "weight", NULL, F(LINEAR)               \
    }
    LORA_BINDINGS("attn.qkv", qkv),
    LORA_BINDINGS("attn.out", proj),
    LORA_BINDINGS("mlp.fc1", fc1),
    LORA_BINDINGS("mlp.fc2", fc2),
#undef LORA_BINDINGS
};

/* a multi-token prediction module's ops, after "mtp.j." (its weights under "mtp.j." too; the output weight
 * is the main head's) */
static const binding mtp_ops[] = {
    {"embed.lookup", rt_ex_mtp_embed, NULL, NULL, F(EMBEDDING)},
    {"norms", rt_ex_mtp_norms, "weight", NULL, F(RMSNORM)},
    {"eh_proj", rt_ex_mtp_eh_proj, "weight", "bias", F(LINEAR)},
    {"head.final_layernorm", rt_ex_mtp_final_ln, "weight", "bias", F(LAYERNORM)},
    {"head.lm.decoder", rt_ex_mtp_decoder, NULL, NULL, F(LINEAR)},
    {"head.loss", rt_ex_mtp_loss, NULL, NULL, F(CROSS_ENTROPY)},
    {"head.lm.decoder.bwd_data", rt_ex_mtp_decoder_bwd_data, NULL, NULL, F(LINEAR)},
    {"head.lm.decoder.bwd_weight", rt_ex_mtp_decoder_bwd_weight, NULL, NULL, F(LINEAR)},
    {"head.final_layernorm.bwd", rt_ex_mtp_final_ln_bwd, "weight", "bias", F(LAYERNORM) | F(GLUE)},
    {"eh_proj.bwd_data", rt_ex_mtp_eh_proj_bwd_data, "weight", NULL, F(LINEAR)},
    {"eh_proj.bwd_weight", rt_ex_mtp_eh_proj_bwd_weight, "weight", "bias", F(LINEAR)},
    {"norms.bwd", rt_ex_mtp_norms_bwd, "weight", NULL, F(RMSNORM)},
    {"embed.lookup.bwd", rt_ex_mtp_embed_bwd, NULL, NULL, F(EMBEDDING)},
};

static const binding other_ops[] = {
    {"embed.lookup", rt_ex_embed, NULL, NULL, F(EMBEDDING)},
    {"embed.layernorm", rt_ex_embed_ln, NULL, NULL, F(LAYERNORM)},
    {"embed.layernorm.bwd", rt_ex_embed_ln_bwd, NULL, NULL, F(LAYERNORM)},
    {"embed.lookup.bwd", rt_ex_embed_bwd, NULL, NULL, F(EMBEDDING)},
    {"head.mlm.gather", rt_ex_gather, NULL, NULL, F(GLUE)},
    {"head.mlm.transform", rt_ex_transform, "weight", "bias", F(LINEAR)},
    {"head.mlm.gelu", rt_ex_head_gelu, NULL, NULL, F(GELU)},
    {"head.mlm.layernorm", rt_ex_head_ln, "weight", "bias", F(LAYERNORM)},
    {"head.mlm.decoder", rt_ex_decoder, NULL, NULL, F(LINEAR)},
    {"head.final_layernorm", rt_ex_final_ln, "weight", "bias", F(LAYERNORM)},
    {"head.lm.decoder", rt_ex_decoder, NULL, NULL, F(LINEAR)},
    {"head.loss", rt_ex_loss, NULL, NULL, F(CROSS_ENTROPY)},
    {"head.mlm.decoder.bwd_data", rt_ex_decoder_bwd_data, NULL, NULL, F(LINEAR)},
    {"head.mlm.decoder.bwd_weight", rt_ex_decoder_bwd_weight, NULL, NULL, F(LINEAR)},
    {"head.lm.decoder.bwd_data", rt_ex_decoder_bwd_data, NULL, NULL, F(LINEAR)},
    {"head.lm.decoder.bwd_weight", rt_ex_decoder_bwd_weight, NULL, NULL, F(LINEAR)},
    {"head.mlm.layernorm.bwd", rt_ex_head_ln_bwd, "weight", "bias", F(LAYERNORM)},
    {"head.mlm.gelu.bwd", rt_ex_head_gelu_bwd, NULL, NULL, F(GELU)},
    {"head.mlm.transform.bwd_data", rt_ex_transform_bwd_data, "weight", "bias", F(LINEAR)},
    {"head.mlm.transform.bwd_weight", rt_ex_transform_bwd_weight, "weight", "bias", F(LINEAR)},
    {"head.mlm.gather.bwd", rt_ex_gather_bwd, NULL, NULL, F(GLUE)},
    {"head.final_layernorm.bwd", rt_ex_final_ln_bwd, "weight", "bias", F(LAYERNORM)},
    /* the optimizer ops are run by rt_model_update, in graph order (families checked there) */
    {"optimizer.unscale", rt_ex_nothing, NULL, NULL, 0},
    {"optimizer.grad_norm", rt_ex_nothing, NULL, NULL, F(GLUE)},
    {"optimizer.step", rt_ex_nothing, NULL, NULL, F(ADAM)},
    {"optimizer.update", rt_ex_nothing, NULL, NULL, F(LAMB)},
    {"optimizer.trust_ratio", rt_ex_nothing, NULL, NULL, F(LAMB)},
    {"optimizer.apply", rt_ex_nothing, NULL, NULL, F(LAMB) | F(GLUE)},
};

int rt_param_index(const et_graph *g, const char *id)
{
    for (int i = 0; i < g->n_params; i++)
        if (strcmp(g->params[i].id, id) == 0) return i;
    return -1;
}

float *rt_param(rt_model *m, const char *id, float **grad)
{
    int i = rt_param_index(&m->graph, id);
    if (i < 0 && m->frozen) { /* LoRA: a frozen parameter has no gradient */
        i = rt_param_index(&m->frozen_graph, id);
        if (grad) *grad = NULL;
        return i < 0 ? NULL : m->frozen + m->frozen_offset[i];
    }
    if (i < 0) return NULL;
    if (grad) *grad = m->grads + m->param_offset[i];
    return m->params + m->param_offset[i];
}

/* The parameter prefix of an op id: "layer.3.mlp.fc2.bwd_data" -> "layer.3.mlp.fc2". */
static void prefix_of(const char *name, int layer, char *out, size_t size)
{
    char base[96];
    snprintf(base, sizeof base, "%s", name);
    char *suffix = strstr(base, ".bwd");
    if (suffix) *suffix = 0;
    if (layer >= 0)
        snprintf(out, size, "layer.%d.%s", layer, base);
    else
        snprintf(out, size, "%s", base);
}

/* Refuses an op whose executor calls a kernel family the backend lacks. */
static int check_families(const rt_model *m, const et_op *op, unsigned families, et_error *err)
{
    families |= F(BUFFERS);
    if (m->mask && op->phase == ET_PHASE_BACKWARD && op->grad_count) families |= F(GLUE); /* gradient masks */
    for (int f = 0; f < RT_FAMILY_COUNT; f++)
        if ((families & (1u << f)) && !m->be->supports(m->be, (rt_kernel_family)f))
            return et_error_set(err, m->s->source, 0, 0, NULL,
                                "the %s backend cannot run op \"%s\": it has no %s kernels", m->be->name,
                                op->id, rt_kernel_family_names[f]);
    return 0;
}

static int bind_tt(rt_model *m, rt_op *r, const et_op *op, const char *name, et_error *err)
{
    static const char *const roles[] = {"attn.qkv", "attn.out", "mlp.fc1", "mlp.fc2"};
    int role = -1;
    for (int k = 0; k < 4; k++)
        if (strncmp(name, roles[k], strlen(roles[k])) == 0) role = k;
    if (role < 0 || op->layer < 0)
        return et_error_set(err, m->s->source, 0, 0, NULL, "etrun has no tensor-train kernel for op \"%s\"",
                            op->id);
    rt_tt_record *rec = &m->tt_records[op->layer * 4 + role];
    if (!rec->ready && rt_init_tt_cores(m, rec, op->layer, role, err)) return -1;
    r->role = (rt_tt_role)role;
    r->tt = rec;
    char id[128];
    snprintf(id, sizeof id, "layer.%d.%s.bias", op->layer, roles[role]);
    r->bias = rt_param(m, id, &r->dbias);
    size_t len = strlen(name);
    r->exec = len > 9 && strcmp(name + len - 9, ".bwd_data") == 0       ? rt_ex_tt_bwd_data
              : len > 11 && strcmp(name + len - 11, ".bwd_weight") == 0 ? rt_ex_tt_bwd_weight
                                                                        : rt_ex_tt_fwd;
    unsigned families = F(TENSOR_TRAIN) | F(GLUE) | F(LINEAR);
    return check_families(m, op, families, err);
}

int rt_bind_ops(rt_model *m, et_error *err)
{
    for (int i = 0; i < m->graph.n_ops; i++) {
        const et_op *op = &m->graph.ops[i];
        rt_op *r = &m->ops[i];
        r->layer = op->layer;
        if (op->kind == ET_OP_TT) {
            if (bind_tt(m, r, op, strchr(strchr(op->id, '.') + 1, '.') + 1, err)) return -1;
            continue;
        }
        const char *name = op->id;
        const binding *table = other_ops;
        size_t n = sizeof other_ops / sizeof other_ops[0];
        char mtp_prefix[32] = "";
        r->mtp = -1;
        if (strncmp(op->id, "mtp.", 4) == 0) { /* "mtp.j.<name>" */
            r->mtp = atoi(op->id + 4);
            name = strchr(op->id + 4, '.') + 1;
            snprintf(mtp_prefix, sizeof mtp_prefix, "mtp.%d.", r->mtp);
            table = mtp_ops;
            n = sizeof mtp_ops / sizeof mtp_ops[0];
        } else if (op->layer >= 0) {
            name = strchr(strchr(op->id, '.') + 1, '.') + 1; /* after "layer.N." */
            table = layer_ops;
            n = sizeof layer_ops / sizeof layer_ops[0];
        }
        const binding *found = NULL;
        for (size_t k = 0; k < n && !found; k++)
            if (strcmp(table[k].name, name) == 0) found = &table[k];
        if (!found)
            return et_error_set(
                err, m->s->source, 0, 0, NULL,
                "etrun has no executor for op \"%s\" (%s); the plan uses a feature the runtime "
                "does not run yet",
                op->id, et_op_kind_names[op->kind]);
        unsigned families = found->families;
        if (m->acts->rms && (families & F(LAYERNORM))) families = (families & ~F(LAYERNORM)) | F(RMSNORM);
        if (check_families(m, op, families, err)) return -1;
        r->exec = found->exec;
        if (found->weight) {
            char prefix[128];
            if (r->mtp >= 0) {
                char base[96];
                prefix_of(name, -1, base, sizeof base);
                snprintf(prefix, sizeof prefix, "%s%s", mtp_prefix, base);
            } else {
                prefix_of(name, op->layer, prefix, sizeof prefix);
            }
            char id[256];
            snprintf(id, sizeof id, "%s.%s", prefix, found->weight);
            r->W = rt_param(m, id, &r->dW);
            if (found->bias) {
                snprintf(id, sizeof id, "%s.%s", prefix, found->bias);
                r->bias = rt_param(m, id, &r->dbias);
            }
            if (!r->W)
                return et_error_set(err, m->s->source, 0, 0, NULL, "op %s: no parameter %s.%s", op->id,
                                    prefix, found->weight);
        }
    }
    return 0;
}

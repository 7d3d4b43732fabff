#include "model_config.h"

#include <math.h>
#include <string.h>

const char *const et_arch_names[] = {"encoder", "decoder", NULL};
const char *const et_loss_head_names[] = {"mlm_nsp", "mlm", "causal_lm", NULL};
const char *const et_mlp_names[] = {"gelu", "swiglu", NULL};
const char *const et_norm_names[] = {"layernorm", "rmsnorm", NULL};
const char *const et_position_names[] = {"learned", "rope", "none", "alibi", NULL};
const char *const et_routing_names[] = {"uniform", "zipf", NULL};
const char *const et_model_preset_names[] = {
    "bert-base",     "bert-large",      "gpt3-13b",    "encoder-6x768", "llama2-7b",   "llama2-13b",
    "llama2-70b",    "llama3-8b",       "llama3-70b",  "llama3-405b",   "mistral-7b",  "mixtral-8x7b",
    "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3", "gpt-oss-120b",  "gpt-oss-20b", NULL};

/* The Llama family: pre-norm decoders with RMSNorm, SwiGLU, rotary positions, no biases, untied output
 * (dimensions from the models' published configurations: Touvron et al. 2023, Meta's Llama 3 model cards,
 * Mistral AI's Mistral 7B release). */
static et_model_config llama(const char *name, int layers, int hidden, int heads, int kv_heads, int ffn,
                             int vocab, int positions)
{
    et_model_config m = {
        .layers = layers,
        .hidden = hidden,
        .heads = heads,
        .ffn = ffn,
        .vocab = vocab,
        .max_positions = positions,
        .arch = ET_ARCH_DECODER,
        .head = ET_HEAD_CAUSAL_LM,
        .mask_fraction = 1.0,
        .tie_embeddings = false,
        .kv_heads = kv_heads,
        .mlp = ET_MLP_SWIGLU,
        .norm = ET_NORM_RMSNORM,
        .position = ET_POSITION_ROPE,
        .no_bias = true,
    };
    strncpy(m.name, name, sizeof m.name - 1);
    return m;
}

static et_model_config bert(const char *name, int layers, int hidden, int heads, int vocab)
{
    et_model_config m = {
        .layers = layers,
        .hidden = hidden,
        .heads = heads,
        .ffn = 4 * hidden,
        .vocab = vocab,
        .max_positions = 512,
        .type_vocab = 2,
        .arch = ET_ARCH_ENCODER,
        .head = ET_HEAD_MLM_NSP,
        .max_predictions = 76,
        .mask_fraction = 0.15,
        .tie_embeddings = true,
    };
    strncpy(m.name, name, sizeof m.name - 1);
    return m;
}

int et_model_preset(const char *name, et_model_config *out)
{
    if (strcmp(name, "bert-base") == 0) {
        *out = bert(name, 12, 768, 12, 30522);
        out->max_predictions = 20; /* Google's BERT recipe: 20 predictions for 128-token sequences */
    } else if (strcmp(name, "bert-large") == 0) {
        *out = bert(name, 24, 1024, 16, 30528); /* MLPerf: vocab padded to a multiple of 8, 76 predictions */
    } else if (strcmp(name, "encoder-6x768") == 0) {
        *out = bert(name, 6, 768, 12, 30522);
        out->max_positions = 512;
        out->head = ET_HEAD_MLM;
        out->max_predictions = 20;
    } else if (strcmp(name, "llama2-7b") == 0) {
        *out = llama(name, 32, 4096, 32, 32, 11008, 32000, 4096);
    } else if (strcmp(name, "llama2-13b") == 0) {
        *out = llama(name, 40, 5120, 40, 40, 13824, 32000, 4096);
    } else if (strcmp(name, "llama2-70b") == 0) {
        *out = llama(name, 80, 8192, 64, 8, 28672, 32000, 4096);
    } else if (strcmp(name, "llama3-8b") == 0) {
        *out = llama(name, 32, 4096, 32, 8, 14336, 128256, 8192);
        out->rope_base = 500000;
    } else if (strcmp(name, "llama3-70b") == 0) {
        *out = llama(name, 80, 8192, 64, 8, 28672, 128256, 8192);
        out->rope_base = 500000;
    } else if (strcmp(name, "llama3-405b") == 0) {
        *out = llama(name, 126, 16384, 128, 8, 53248, 128256, 8192);
        out->rope_base = 500000;
    } else if (strcmp(name, "mistral-7b") == 0) {
        *out = llama(name, 32, 4096, 32, 8, 14336, 32000, 32768);
    } else if (strcmp(name, "mixtral-8x7b") == 0) {
        /* Mistral AI's Mixtral 8x7B (Jiang et al. 2024): Mistral 7B's dimensions, every MLP eight SwiGLU
         * experts of which each token uses two, trained dropless */
        *out = llama(name, 32, 4096, 32, 8, 14336, 32000, 32768);
        out->moe = (et_moe){.experts = 8, .top_k = 2, .every = 1};
        out->rope_base = 1000000;
    } else if (strcmp(name, "qwen3-30b-a3b") == 0 || strcmp(name, "qwen3-235b-a22b") == 0) {
        /* Qwen3's mixtures (Qwen Team 2025; Megatron-Bridge's Qwen3MoEModelProvider30B_A3B and 235B_A22B,
         * qwen_provider.py @v0.2.0, as the NeMo rows cite them): heads of width 128 apart from hidden /
         * heads, RMSNorm on each head's query and key, every MLP 128 SwiGLU experts of which each token uses
         * 8, no shared expert, untied output, vocabulary 151,936, rotary base 10^6 */
        const int big = strcmp(name, "qwen3-235b-a22b") == 0;
        *out = llama(name, big ? 94 : 48, big ? 4096 : 2048, big ? 64 : 32, 4, big ? 12288 : 6144, 151936,
                     40960);
        out->head_dim = 128;
        out->qk_norm = true;
        out->moe = (et_moe){.experts = 128, .top_k = 8, .every = 1, .ffn = big ? 1536 : 768};
        out->rope_base = 1000000;
    } else if (strcmp(name, "deepseek-v3") == 0) {
        /* DeepSeek-V3 (DeepSeek-AI 2024, arXiv:2412.19437, and its config.json; Megatron-Bridge's
         * DeepSeekV3ModelProvider): 61 layers of hidden 7,168 with multi-head latent attention (128 heads,
         * query latent 1,536, key-value latent 512, head 128 + 64 rotary, value 128), the first 3 layers
         * dense (ffn 18,432), the rest 256 routed experts of 2,048 of which each token uses 8, beside one
         * shared expert; vocabulary 129,280, untied; one multi-token prediction module. 671B parameters,
         * 37B active a token (the paper's counts, without the prediction module and the input table). */
        *out = llama(name, 61, 7168, 128, 128, 18432, 129280, 163840);
        out->head_dim = 128;
        out->mla = (et_mla){.q_lora = 1536, .kv_lora = 512, .rope_dim = 64, .v_dim = 128};
        out->moe = (et_moe){
            .experts = 256, .top_k = 8, .every = 1, .ffn = 2048, .shared_experts = 1, .first_dense = 3};
        out->mtp_layers = 1;
        out->rope_base = 10000;
    } else if (strcmp(name, "gpt-oss-120b") == 0 || strcmp(name, "gpt-oss-20b") == 0) {
        /* OpenAI's gpt-oss (model card, arXiv:2508.10925, and its config.json): hidden 2,880, 64 query heads
         * and 8 key-value heads of 64, biases on the attention and expert products, a learned sink logit
         * per head, layers alternating a 128-token sliding window (even layers) and full attention, every
         * MLP an MoE of SwiGLU experts of width 2,880 (128 experts top-4 in 36 layers for 120b; 32 top-4
         * in 24 for 20b), vocabulary 201,088 untied; rotary base 150,000. 116.8B and 20.9B parameters,
         * 5.1B and 3.6B active (the card's counts, without the input table). */
        const int big = strcmp(name, "gpt-oss-120b") == 0;
        *out = llama(name, big ? 36 : 24, 2880, 64, 8, 2880, 201088, 131072);
        out->head_dim = 64;
        out->no_bias = false;
        out->sinks = true;
        out->window = 128;
        out->full_every = 2;
        out->moe = (et_moe){.experts = big ? 128 : 32, .top_k = 4, .every = 1, .ffn = 2880};
        out->rope_base = 150000;
    } else if (strcmp(name, "gpt3-13b") == 0) {
        et_model_config m = {
            .layers = 40,
            .hidden = 5120,
            .heads = 40,
            .ffn = 4 * 5120,
            .vocab = 50257,
            .max_positions = 2048,
            .type_vocab = 0,
            .arch = ET_ARCH_DECODER,
            .head = ET_HEAD_CAUSAL_LM,
            .max_predictions = 0,
            .mask_fraction = 1.0,
            .tie_embeddings = true,
        };
        strncpy(m.name, name, sizeof m.name - 1);
        *out = m;
    } else {
        return -1;
    }
    return 0;
}

int et_model_config_check(const et_model_config *m, const char *source, const char *path, et_error *err)
{
    char p[300];
    if (m->head_dim == 0 && m->hidden % m->heads != 0) {
        snprintf(p, sizeof p, "%s.heads", path);
        return et_error_set(err, source, 0, 0, p,
                            "heads (%d) must divide hidden (%d), or give head_dim (each head's width)",
                            m->heads, m->hidden);
    }
    if (m->mla.kv_lora > 0 && m->kv_heads && m->kv_heads != m->heads) {
        snprintf(p, sizeof p, "%s.kv_heads", path);
        return et_error_set(
            err, source, 0, 0, p,
            "kv_heads (%d) applies to standard attention: multi-head latent attention's keys and "
            "values come from its latent, one per head (%d)",
            m->kv_heads, m->heads);
    }
    if (m->mla.kv_lora > 0 && m->position != ET_POSITION_ROPE && m->mla.rope_dim > 0) {
        snprintf(p, sizeof p, "%s.mla.rope_dim", path);
        return et_error_set(err, source, 0, 0, p, "a rotary part of %d needs position_embedding \"rope\"",
                            m->mla.rope_dim);
    }
    if (m->moe.experts > 0 && m->moe.first_dense >= m->layers) {
        snprintf(p, sizeof p, "%s.moe.first_dense", path);
        return et_error_set(err, source, 0, 0, p,
                            "%d dense layers first leave no MoE layer among the %d layers",
                            m->moe.first_dense, m->layers);
    }
    if (m->window > 0 && m->arch != ET_ARCH_DECODER) {
        snprintf(p, sizeof p, "%s.sliding_window", path);
        return et_error_set(
            err, source, 0, 0, p,
            "a sliding window applies to a decoder's causal attention (architecture \"decoder\")");
    }
    if (m->mtp_layers > 0 && m->head != ET_HEAD_CAUSAL_LM) {
        snprintf(p, sizeof p, "%s.mtp_layers", path);
        return et_error_set(err, source, 0, 0, p, "multi-token prediction needs loss head \"causal_lm\"");
    }
    if (m->kv_heads && (m->kv_heads > m->heads || m->heads % m->kv_heads != 0)) {
        snprintf(p, sizeof p, "%s.kv_heads", path);
        return et_error_set(err, source, 0, 0, p, "kv_heads (%d) must divide heads (%d)", m->kv_heads,
                            m->heads);
    }
    if (m->moe.experts > 0 && m->moe.top_k > m->moe.experts) {
        snprintf(p, sizeof p, "%s.moe.top_k", path);
        return et_error_set(err, source, 0, 0, p, "top_k (%d) cannot exceed the number of experts (%d)",
                            m->moe.top_k, m->moe.experts);
    }
    if (m->moe.experts > 0 && m->moe.every > m->layers) {
        snprintf(p, sizeof p, "%s.moe.every", path);
        return et_error_set(err, source, 0, 0, p, "an MoE layer every %d layers leaves none of the %d layers",
                            m->moe.every, m->layers);
    }
    if (m->head == ET_HEAD_CAUSAL_LM && m->arch != ET_ARCH_DECODER) {
        snprintf(p, sizeof p, "%s.loss_head", path);
        return et_error_set(err, source, 0, 0, p, "loss head \"causal_lm\" needs architecture \"decoder\"");
    }
    if (m->head != ET_HEAD_CAUSAL_LM && m->max_predictions <= 0) {
        snprintf(p, sizeof p, "%s.max_predictions", path);
        return et_error_set(err, source, 0, 0, p, "a masked-LM head needs max_predictions >= 1");
    }
    return 0;
}

int et_model_head_dim(const et_model_config *m)
{
    return m->head_dim > 0 ? m->head_dim : m->hidden / m->heads;
}

int et_model_qk_dim(const et_model_config *m)
{
    return et_model_head_dim(m) + (m->mla.kv_lora > 0 ? m->mla.rope_dim : 0);
}

int et_model_v_dim(const et_model_config *m)
{
    return m->mla.kv_lora > 0 ? m->mla.v_dim : et_model_head_dim(m);
}

double et_model_mtp_loss_scale(const et_model_config *m)
{
    return m->mtp_loss_scale > 0 ? m->mtp_loss_scale : 0.1;
}

bool et_model_layer_windowed(const et_model_config *m, int layer)
{
    return m->window > 0 && !(m->full_every > 0 && layer % m->full_every == m->full_every - 1);
}

bool et_model_layer_is_moe(const et_model_config *m, int layer)
{
    return m->moe.experts > 0 && layer >= m->moe.first_dense && layer % m->moe.every == m->moe.every - 1;
}

int et_model_moe_layers(const et_model_config *m, int first, int last)
{
    int n = 0;
    for (int i = first; i <= last; i++)
        n += et_model_layer_is_moe(m, i);
    return n;
}

int et_model_expert_ffn(const et_model_config *m)
{
    return m->moe.ffn > 0 ? m->moe.ffn : m->ffn;
}

double et_model_predictions_for_length(const et_model_config *m, int length)
{
    if (m->head == ET_HEAD_CAUSAL_LM) return length;
    double p = ceil(m->mask_fraction * length);
    return p < m->max_predictions ? p : m->max_predictions;
}

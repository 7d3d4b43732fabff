#include "model_config.h"

#include <math.h>
#include <string.h>

const char *const et_arch_names[] = {"encoder", "decoder", NULL};
const char *const et_loss_head_names[] = {"mlm_nsp", "mlm", "causal_lm", NULL};
const char *const et_model_preset_names[] = {"bert-base", "bert-large", "gpt3-13b", "encoder-6x768", NULL};

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
    if (m->hidden % m->heads != 0) {
        snprintf(p, sizeof p, "%s.heads", path);
        return et_error_set(err, source, 0, 0, p, "heads (%d) must divide hidden (%d)", m->heads, m->hidden);
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

double et_model_predictions_for_length(const et_model_config *m, int length)
{
    if (m->head == ET_HEAD_CAUSAL_LM) return length;
    double p = ceil(m->mask_fraction * length);
    return p < m->max_predictions ? p : m->max_predictions;
}

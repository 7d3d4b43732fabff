#include "batch.h"

et_batch_shape et_batch_expected(const et_scenario *s)
{
    const et_length_dist *d = &s->data.lengths;
    double b = (double)s->batch.local;
    et_batch_shape shape = {.sequences = b};
    if (s->data.unpadded) {
        shape.tokens = b * et_length_mean(d);
        shape.tokens_sq = b * et_length_mean_square(d);
        double p = 0;
        for (int l = 1; l <= d->max_len; l++)
            if (d->pmf[l] > 0) p += d->pmf[l] * et_model_predictions_for_length(&s->model, l);
        shape.predictions = b * p;
    } else {
        double S = s->data.seq_len;
        shape.tokens = b * S;
        shape.tokens_sq = b * S * S;
        /* padded masked-LM batches score a fixed max_predictions slots per sequence */
        shape.predictions = s->model.head == ET_HEAD_CAUSAL_LM ? b * S : b * s->model.max_predictions;
    }
    return shape;
}

et_batch_shape et_batch_from_lengths(const et_scenario *s, const int *lengths, int count)
{
    et_batch_shape shape = {.sequences = count};
    for (int i = 0; i < count; i++) {
        double l = s->data.unpadded ? lengths[i] : s->data.seq_len;
        shape.tokens += l;
        shape.tokens_sq += l * l;
        shape.predictions += s->data.unpadded || s->model.head == ET_HEAD_CAUSAL_LM
                                 ? et_model_predictions_for_length(&s->model, (int)l)
                                 : s->model.max_predictions;
    }
    return shape;
}

#include "batch.h"

et_batch_shape et_batch_expected(const et_scenario *s)
{
    et_sampler sampler;
    et_error err;
    if (et_sampler_init(&sampler, &s->data.lengths, &s->data.sampling, (int)s->batch.local, s->parallel.data,
                        s->simulation.seed, NULL, "$.data.sampling", &err)) {
        et_batch_shape none = {0};
        return none; /* cannot happen for a loaded scenario: its sampling was validated */
    }
    et_batch_shape shape = et_sampler_expected_shape(&sampler, &s->model, s->data.unpadded);
    et_sampler_free(&sampler);
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

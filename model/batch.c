#include "batch.h"

#include <math.h>

et_batch_shape et_batch_shape_unknown(void)
{
    return (et_batch_shape){.sequences = NAN, .tokens = NAN, .tokens_sq = NAN, .predictions = NAN};
}

et_batch_shape et_batch_expected(const et_scenario *s)
{
    et_sampler sampler;
    et_error err;
    if (et_sampler_init(&sampler, &s->data.lengths, &s->data.sampling, (int)s->batch.local, s->parallel.data,
                        s->simulation.seed, NULL, "$.data.sampling", &err)) {
        return et_batch_shape_unknown(); /* out of memory: a loaded scenario's sampling was validated */
    }
    et_batch_shape shape = et_sampler_expected_shape(&sampler, &s->model, s->data.unpadded);
    et_sampler_free(&sampler);
    return et_batch_context_share(s, shape);
}

double et_batch_padding_fraction(const et_scenario *s)
{
    const et_sampling *c = &s->data.sampling;
    if (c->pad_to != ET_PAD_LONGEST || s->data.unpadded || c->scheme == ET_SAMPLING_PACKED)
        return et_length_padding_fraction(&s->data.lengths, s->data.seq_len);
    et_sampler sampler;
    et_error err;
    if (et_sampler_init(&sampler, &s->data.lengths, c, (int)s->batch.local, s->parallel.data,
                        s->simulation.seed, NULL, "$.data.sampling", &err))
        return NAN;
    const et_batch_shape b = et_sampler_expected_shape(&sampler, &s->model, 0);
    et_sampler_free(&sampler);
    return b.tokens > 0 ? 1 - (double)s->batch.local * et_length_mean(&s->data.lengths) / b.tokens : 0;
}

et_batch_shape et_batch_context_share(const et_scenario *s, et_batch_shape b)
{
    const double c = s->parallel.context > 1 ? s->parallel.context : 1;
    b.tokens /= c;
    b.tokens_sq /= c;
    b.predictions /= c;
    return b;
}

et_batch_shape et_batch_worst_case(const et_scenario *s)
{
    const double B = (double)s->batch.local, S = s->data.seq_len;
    et_batch_shape w = {.sequences = B, .tokens = B * S, .tokens_sq = B * S * S};
    w.predictions = B * et_model_predictions_for_length(&s->model, s->data.seq_len);
    return et_batch_context_share(s, w);
}

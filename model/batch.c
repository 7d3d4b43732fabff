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

/* libFuzzer target: the plan parser (model/plan.h), a scenario plus "run", and, for a plan small enough to
 * run in a moment (a few layers of at most 128 wide, short sequences, small batches), what etrun does with
 * it on one rank: the data generator draws a step's batches, the model is built on the CPU backend, and
 * one step runs forward, backward and the optimizer (a vocabulary of 2 once divided by zero there). */
#include <string.h>

#include "fuzz_common.h"
#include "plan.h"
#include "rt_backend.h"
#include "rt_data.h"
#include "rt_model.h"

static int small(const et_plan *p)
{
    const et_scenario *s = &p->s;
    const et_model_config *m = &s->model;
    return m->layers <= 4 && m->hidden <= 128 && m->ffn <= 512 && m->vocab <= 4096 &&
           m->max_positions <= 256 && m->moe.experts <= 8 && s->data.seq_len <= 64 && s->batch.local <= 8 &&
           s->batch.global / s->batch.local <= 4 && !p->data_from_file;
}

static void run_one_step(et_plan *p)
{
    et_error err;
    rt_data data;
    rt_model m;
    rt_batch b = {0};
    memset(&m, 0, sizeof m);
    rt_backend *be = NULL;
    if (rt_data_init(&data, &p->s, 1, 0, p->seed, NULL, &err)) return; /* refused: fine */
    if ((be = rt_backend_create("cpu", &err)) && rt_model_init(&m, &p->s, be, p->seed, &err) == 0) {
        rt_model_begin_step(&m);
        const double norm = rt_data_global_predictions(&data, 0);
        int ok = 1;
        for (int micro = 0; ok && micro < data.accum; micro++)
            ok =
                rt_data_batch(&data, 0, micro, &b) == 0 && rt_model_step_micro(&m, &b, norm, NULL, NULL) == 0;
        if (ok) rt_model_update(&m, &p->hyper), rt_model_end_step(&m);
        rt_model_free(&m);
    }
    if (be) be->destroy(be);
    rt_batch_free(&b);
    rt_data_free(&data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    et_plan p;
    et_error err;
    if (et_plan_load(fuzz_file(data, size, "plan.json"), &p, &err) == 0) {
        if (small(&p)) run_one_step(&p);
        et_plan_free(&p);
    }
    return 0;
}

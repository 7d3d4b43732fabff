/* A search result as JSON and back: how the ranks of an MPI search send theirs to rank 0 (search.h). */
#include <stdlib.h>
#include <string.h>

#include "search.h"

static json_t *plan_to_json(const search_plan *p)
{
    json_t *j = json_pack(
        "{s:i, s:I, s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:i, s:b, s:f, s:f, s:f, s:f, s:f, "
        "s:f, s:f}",
        "gpus", p->gpus, "global", (json_int_t)p->global, "device", p->device, "tensor", p->tensor,
        "pipeline", p->pipeline, "virtual_pipeline", p->virtual_pipeline, "data", p->data, "zero_stage",
        p->zero_stage, "local", (json_int_t)p->local, "grad_accum", (json_int_t)p->grad_accum, "recompute",
        (int)p->recompute, "sequence_parallel", p->sequence_parallel, "step_s", p->step_s, "mfu", p->mfu,
        "memory_gib", p->memory_gib, "time_to_train_s", p->time_to_train_s, "gpu_hours", p->gpu_hours,
        "price", p->price, "cost", p->cost);
    if (j) json_object_set_new(j, "bucket_mib", json_real(p->bucket_mib));
    if (j) json_object_set_new(j, "tflops_per_gpu", json_real(p->tflops_per_gpu));
    if (j) json_object_set_new(j, "vary", json_integer(p->vary));
    if (j) json_object_set_new(j, "status", json_integer(p->status));
    if (j) json_object_set_new(j, "allreduce", json_integer(p->allreduce));
    if (j) json_object_set_new(j, "expert", json_integer(p->expert));
    if (j) json_object_set_new(j, "context", json_integer(p->context));
    if (j && p->scenario) json_object_set(j, "scenario", p->scenario);
    return j;
}

static int plan_from_json(const json_t *j, search_plan *p)
{
    json_int_t global = 0, local = 0, accum = 0;
    int recompute = 0, sp = 0;
    memset(p, 0, sizeof *p);
    json_error_t e;
    if (json_unpack_ex(
            (json_t *)j, &e, 0,
            "{s:i, s:I, s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:i, s:b, s:F, s:F, s:F, s:F, s:F, s:F, "
            "s:F}",
            "gpus", &p->gpus, "global", &global, "device", &p->device, "tensor", &p->tensor, "pipeline",
            &p->pipeline, "virtual_pipeline", &p->virtual_pipeline, "data", &p->data, "zero_stage",
            &p->zero_stage, "local", &local, "grad_accum", &accum, "recompute", &recompute,
            "sequence_parallel", &sp, "step_s", &p->step_s, "mfu", &p->mfu, "memory_gib", &p->memory_gib,
            "time_to_train_s", &p->time_to_train_s, "gpu_hours", &p->gpu_hours, "price", &p->price, "cost",
            &p->cost))
        return -1;
    p->global = global, p->local = local, p->grad_accum = accum;
    p->recompute = (et_recompute)recompute;
    p->sequence_parallel = sp;
    p->bucket_mib = json_real_value(json_object_get(j, "bucket_mib"));
    p->tflops_per_gpu = json_real_value(json_object_get(j, "tflops_per_gpu"));
    p->vary = (int)json_integer_value(json_object_get(j, "vary"));
    p->status = (int)json_integer_value(json_object_get(j, "status"));
    p->expert = (int)json_integer_value(json_object_get(j, "expert"));
    p->context = (int)json_integer_value(json_object_get(j, "context"));
    p->allreduce = (int)json_integer_value(json_object_get(j, "allreduce"));
    json_t *doc = json_object_get(j, "scenario");
    p->scenario = doc ? json_incref(doc) : NULL;
    return 0;
}

static json_t *plans_to_json(const search_plan *p, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, plan_to_json(&p[i]));
    return a;
}

json_t *search_result_to_json(const search_result *r)
{
    json_t *j = json_pack(
        "{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:o}", "tried", r->tried, "invalid",
        r->invalid, "too_big", r->too_big, "too_slow", r->too_slow, "over_budget", r->over_budget, "ranked",
        r->ranked, "threads", r->threads, "best", plans_to_json(r->best, r->n_best), "front",
        plans_to_json(r->front, r->n_front), "all", plans_to_json(r->all, r->n_all), "nearest_too_big",
        plan_to_json(&r->nearest_too_big), "nearest_too_slow", plan_to_json(&r->nearest_too_slow),
        "nearest_over_budget", plan_to_json(&r->nearest_over_budget));
    return j;
}

/* The n plans of array `a` into a new array in *out (documents kept only with `docs`). */
static int plans_from_json(const json_t *a, search_plan **out, int *n, int docs)
{
    size_t count = json_array_size(a);
    *n = 0;
    *out = calloc(count ? count : 1, sizeof **out);
    if (!*out || !json_is_array(a)) return -1;
    for (size_t i = 0; i < count; i++) {
        if (plan_from_json(json_array_get(a, i), &(*out)[i])) return -1;
        if (!docs) {
            json_decref((*out)[i].scenario);
            (*out)[i].scenario = NULL;
        }
        (*n)++;
    }
    return 0;
}

int search_result_from_json(const json_t *j, int keep, search_result *out)
{
    memset(out, 0, sizeof *out);
    json_error_t e;
    if (json_unpack_ex((json_t *)j, &e, 0, "{s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "tried", &out->tried,
                       "invalid", &out->invalid, "too_big", &out->too_big, "too_slow", &out->too_slow,
                       "over_budget", &out->over_budget, "ranked", &out->ranked, "threads", &out->threads))
        return -1;
    int n_best = 0;
    if (plans_from_json(json_object_get(j, "best"), &out->best, &n_best, 1) ||
        plans_from_json(json_object_get(j, "front"), &out->front, &out->n_front, 0) ||
        plans_from_json(json_object_get(j, "all"), &out->all, &out->n_all, 0) ||
        plan_from_json(json_object_get(j, "nearest_too_big"), &out->nearest_too_big) ||
        plan_from_json(json_object_get(j, "nearest_too_slow"), &out->nearest_too_slow) ||
        plan_from_json(json_object_get(j, "nearest_over_budget"), &out->nearest_over_budget)) {
        out->n_best = n_best;
        search_result_free(out);
        return -1;
    }
    out->n_best = n_best > keep ? keep : n_best;
    out->cap_front = out->n_front, out->cap_all = out->n_all;
    for (int i = out->n_best; i < n_best; i++)
        json_decref(out->best[i].scenario);
    return 0;
}

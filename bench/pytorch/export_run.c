/* export_run: writes what a PyTorch twin of an etrun run needs to train exactly the same model on exactly
 * the same batches (bench/pytorch/compare_cpu.sh): etrun's initial parameters (the graph's parameter
 * order and ids, flat float32), the model and optimizer settings, and every micro-batch of STEPS steps on
 * one rank. Usage: export_run plan.json STEPS OUT_DIR. Writes OUT_DIR/meta.json, params.bin, batches.bin
 * (per micro-batch, int32: tokens[T], positions[T], offsets[B+1], pred_rows[P], targets[P]). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plan.h"
#include "rt_data.h"
#include "rt_model.h"

static int write_ints(FILE *f, const int *v, int n)
{
    return n > 0 && fwrite(v, sizeof *v, (size_t)n, f) != (size_t)n ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: export_run plan.json STEPS OUT_DIR\n");
        return 2;
    }
    const int steps = atoi(argv[2]);
    et_plan plan;
    et_error err;
    rt_data data;
    rt_model m;
    rt_batch b = {0};
    if (et_plan_load(argv[1], &plan, &err)) {
        et_error_print(stderr, &err);
        return 2;
    }
    rt_backend *be = rt_backend_cpu_create(&err);
    if (!be || rt_data_init(&data, &plan.s, 1, 0, plan.seed, NULL, &err) ||
        rt_model_init(&m, &plan.s, be, plan.seed, &err)) {
        et_error_print(stderr, &err);
        return 2;
    }
    if (mkdir(argv[3], 0777) && errno != EEXIST) {
        perror(argv[3]);
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/params.bin", argv[3]);
    float *w = malloc(m.n_params * sizeof *w);
    FILE *f = fopen(path, "wb");
    rt_model_get_state(&m, w, NULL, NULL, NULL);
    if (!f || fwrite(w, sizeof *w, m.n_params, f) != m.n_params || fclose(f)) {
        perror(path);
        return 1;
    }
    json_t *params = json_array(), *step_list = json_array();
    for (int i = 0; i < m.graph.n_params; i++)
        json_array_append_new(params, json_pack("{s:s, s:I, s:I}", "id", m.graph.params[i].id, "offset",
                                                (json_int_t)m.param_offset[i], "count",
                                                (json_int_t)m.graph.params[i].dense));
    snprintf(path, sizeof path, "%s/batches.bin", argv[3]);
    f = fopen(path, "wb");
    for (int s = 0; f && s < steps; s++) {
        json_t *micro = json_array();
        for (int k = 0; k < data.accum; k++) {
            if (rt_data_batch(&data, s, k, &b) || write_ints(f, b.tokens, b.T) ||
                write_ints(f, b.positions, b.T) || write_ints(f, b.offsets, b.B + 1) ||
                write_ints(f, b.pred_rows, b.P) || write_ints(f, b.targets, b.P)) {
                perror(path);
                return 1;
            }
            json_array_append_new(micro, json_pack("{s:i, s:i, s:i}", "B", b.B, "T", b.T, "P", b.P));
        }
        json_array_append_new(
            step_list, json_pack("{s:f, s:o}", "norm", rt_data_global_predictions(&data, s), "micro", micro));
    }
    if (!f || fclose(f)) {
        perror(path);
        return 1;
    }
    const et_model_config *mc = &plan.s.model;
    json_t *meta = json_pack(
        "{s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:b, s:b}, s:{s:s, s:s, s:f, s:f, s:f, s:f, s:f, s:i, "
        "s:f}, "
        "s:i, s:I, s:o, s:o}",
        "plan", plan.s.name, "model", "layers", mc->layers, "hidden", mc->hidden, "heads", mc->heads, "ffn",
        mc->ffn, "vocab", mc->vocab, "type_vocab", mc->type_vocab, "decoder", mc->arch == ET_ARCH_DECODER,
        "tied", mc->tie_embeddings, "mlm", mc->head == ET_HEAD_MLM, "optimizer", "name",
        et_optimizer_names[plan.s.optimizer.name], "clip", et_clip_mode_names[plan.s.optimizer.clip],
        "max_grad_norm", plan.s.optimizer.max_grad_norm, "lr", plan.hyper.lr, "beta1", plan.hyper.beta1,
        "beta2", plan.hyper.beta2, "eps", plan.hyper.eps, "lr_warmup_steps", plan.hyper.warmup_steps,
        "weight_decay", plan.hyper.weight_decay, "steps", steps, "parameters", (json_int_t)m.n_params,
        "params", params, "steps_data", step_list);
    snprintf(path, sizeof path, "%s/meta.json", argv[3]);
    if (json_dump_file(meta, path, JSON_INDENT(1))) {
        perror(path);
        return 1;
    }
    json_decref(meta);
    free(w);
    rt_batch_free(&b);
    rt_model_free(&m);
    be->destroy(be);
    rt_data_free(&data);
    et_plan_free(&plan);
    return 0;
}

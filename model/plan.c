#include "plan.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "json_reader.h"

static int read_run(const char *path, json_t *root, et_plan *p, et_error *err)
{
    static const char *const keys[] = {"steps",
                                       "warmup_steps",
                                       "learning_rate",
                                       "beta1",
                                       "beta2",
                                       "eps",
                                       "weight_decay",
                                       "seed",
                                       "data",
                                       "checkpoint_every",
                                       "lr_warmup_steps",
                                       "log_every",
                                       "backend",
                                       "loss_scale",
                                       NULL};
    static const char *const backends[] = {"auto", "cpu", "cuda", NULL};
    static const char *const data_keys[] = {"source", "file", NULL};
    static const char *const sources[] = {"synthetic", "file", NULL};
    et_json_reader r = {path, err};
    json_t *run, *data;
    long long v;
    if (et_json_get_object(&r, root, "$", "run", true, keys, &run)) return -1;
    if (et_json_get_int(&r, run, "$.run", "steps", true, 0, 1, 10000000, &v)) return -1;
    p->steps = (int)v;
    if (et_json_get_int(&r, run, "$.run", "warmup_steps", false, 1, 0, p->steps - 1, &v)) return -1;
    p->warmup_steps = (int)v;
    if (et_json_get_int(&r, run, "$.run", "checkpoint_every", false, 0, 0, INT_MAX, &v)) return -1;
    p->checkpoint_every = (int)v;
    if (et_json_get_int(&r, run, "$.run", "lr_warmup_steps", false, 0, 0, INT_MAX, &v)) return -1;
    p->hyper.warmup_steps = (int)v;
    if (et_json_get_int(&r, run, "$.run", "log_every", false, 0, 0, INT_MAX, &v)) return -1;
    p->log_every = (int)v;
    int backend;
    if (et_json_get_enum(&r, run, "$.run", "backend", false, backends, 0, &backend)) return -1;
    snprintf(p->backend, sizeof p->backend, "%s", backends[backend]);
    if (et_json_get_int(&r, run, "$.run", "seed", false, (long long)p->s.simulation.seed, 0, LLONG_MAX, &v))
        return -1;
    p->seed = (unsigned long long)v;
    if (et_json_get_positive(&r, run, "$.run", "learning_rate", false, 1e-3, &p->hyper.lr) ||
        et_json_get_number(&r, run, "$.run", "beta1", false, 0.9, 0, 0.999999, &p->hyper.beta1) ||
        et_json_get_number(&r, run, "$.run", "beta2", false, 0.999, 0, 0.999999, &p->hyper.beta2) ||
        et_json_get_positive(&r, run, "$.run", "eps", false, 1e-8, &p->hyper.eps) ||
        et_json_get_number(&r, run, "$.run", "weight_decay", false, 0.01, 0, 1, &p->hyper.weight_decay) ||
        et_json_get_number(&r, run, "$.run", "loss_scale", false, 65536, 1, 1e15, &p->hyper.loss_scale))
        return -1;
    if (et_json_get_object(&r, run, "$.run", "data", false, data_keys, &data)) return -1;
    if (data) {
        int src;
        const char *file;
        if (et_json_get_enum(&r, data, "$.run.data", "source", true, sources, 0, &src)) return -1;
        if (et_json_get_string(&r, data, "$.run.data", "file", src == 1, NULL, &file)) return -1;
        if (file && src != 1)
            return et_error_set(err, path, 0, 0, "$.run.data.file", "\"file\" needs source \"file\"");
        p->data_from_file = src == 1;
        if (file) {
            if (file[0] == '/')
                snprintf(p->data_file, sizeof p->data_file, "%s", file);
            else
                snprintf(p->data_file, sizeof p->data_file, "%.500s/%.500s", p->s.dir, file);
        }
    }
    return 0;
}

int et_plan_load(const char *path, et_plan *out, et_error *err)
{
    static const char *const extra[] = {"run", "format_version", NULL};
    memset(out, 0, sizeof *out);
    json_t *root;
    if (et_json_load_file(path, &root, err)) return -1;
    et_json_reader r = {path, err};
    long long version;
    if (et_json_get_int(&r, root, "$", "format_version", false, 1, 1, LLONG_MAX, &version)) {
        json_decref(root);
        return -1;
    }
    if (version > ET_PLAN_FORMAT_VERSION) {
        json_decref(root);
        return et_error_set(err, path, 0, 0, "$.format_version",
                            "plan format %lld is newer than this ET reads (%d): update ET", version,
                            ET_PLAN_FORMAT_VERSION);
    }
    int rc = et_scenario_parse(root, path, extra, &out->s, err);
    if (!rc && read_run(path, root, out, err)) {
        et_scenario_free(&out->s);
        rc = -1;
    }
    json_decref(root);
    return rc;
}

void et_plan_free(et_plan *p)
{
    et_scenario_free(&p->s);
}

/* Makes a relative file name absolute against the scenario's folder. */
static void absolute(json_t *obj, const char *key, const char *dir)
{
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v || !json_is_string(v)) return;
    const char *name = json_string_value(v);
    if (name[0] == '/' || (!strchr(name, '/') && !strstr(name, ".json") && strcmp(key, "device") == 0))
        return;
    char *real = realpath(dir, NULL), buf[4096], found[1100];
    if (strcmp(key, "file") == 0) /* a data file: where the scenario's parse found it (its fallback too) */
        et_data_file_path(name, real ? real : dir, found, sizeof found);
    else
        snprintf(found, sizeof found, "%s/%s", real ? real : dir, name);
    snprintf(buf, sizeof buf, "%s", found);
    free(real);
    json_object_set_new(obj, key, json_string(buf));
}

void et_scenario_json_absolute(json_t *root, const char *dir)
{
    json_t *data = json_object_get(root, "data"), *cluster = json_object_get(root, "cluster");
    absolute(data ? json_object_get(data, "lengths") : NULL, "file", dir);
    absolute(cluster, "device", dir);
    absolute(cluster, "platform_file", dir);
}

int et_plan_write_for_document(const json_t *doc, const char *source, const char *plan_path, int steps,
                               et_error *err)
{
    et_scenario s;
    json_t *root = json_deep_copy(doc);
    if (!root) return et_error_set_code(err, ET_ERROR_MEMORY, source, 0, 0, NULL, "out of memory");
    if (et_scenario_parse(root, source, NULL, &s, err)) { /* the scenario must be valid first */
        json_decref(root);
        return -1;
    }
    et_scenario_json_absolute(root, s.dir);
    json_object_set_new(root, "format_version", json_integer(ET_PLAN_FORMAT_VERSION));
    json_object_set_new(root, "run",
                        json_pack("{s:i, s:i, s:f, s:I, s:{s:s}}", "steps", steps, "warmup_steps",
                                  steps > 2 ? 2 : 0, "learning_rate", 1e-3, "seed",
                                  (json_int_t)s.simulation.seed, "data", "source", "synthetic"));
    int rc = et_atomic_write_json(plan_path, root, err);
    json_decref(root);
    et_scenario_free(&s);
    return rc;
}

int et_plan_write_for_scenario(const char *scenario_path, const char *plan_path, int steps, et_error *err)
{
    json_t *root;
    if (et_json_load_file(scenario_path, &root, err)) return -1;
    int rc = et_plan_write_for_document(root, scenario_path, plan_path, steps, err);
    json_decref(root);
    return rc;
}

/* check_run: assertions on etrun's outputs for the runtime tests.
 *   check_run loss measured.json RATIO          mean loss of the last 50 steps < RATIO x first step's loss
 *   check_run same-loss a.json b.json FROM      losses of b equal a's from step FROM on (resumed run)
 *   check_run close-loss a.json b.json TOL      the same number of steps, every loss within TOL (relative)
 *   check_run checkpoints A/checkpoint.bin B/checkpoint.bin TOL   parameters equal within TOL (max abs diff)
 *   check_run ops measured.json RANKS           every op has a timing per rank, medians >= 0
 *   check_run same-ops predicted.json measured.json   etsim's simulated ops and etrun's have the same ids
 *   check_run zeros CKPT MIN MAX                 fraction of parameters that are exactly zero in [MIN, MAX]
 *   check_run clipped measured.json MAX          per-bucket clipping: every bucket's norm after clipping is
 *                                                at most MAX, and clipping triggered (some norm before > MAX)
 *   check_run record measured.json STEPS         provenance, per-step times, predictions and per-bucket
 *                                                communication timings are recorded for STEPS steps
 * Prints "N passed, M failed" and exits non-zero on failure. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static json_t *load(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j) fprintf(stderr, "%s: %s\n", path, e.text);
    return j;
}

static float *read_params(const char *path, uint64_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char magic[8];
    uint64_t step, t;
    uint32_t len; /* ETCKPT02: the fingerprint's length, then its text (runtime/rt_checkpoint.h) */
    float *p = NULL;
    if (fread(magic, 1, 8, f) == 8 && fread(&step, 8, 1, f) == 1 && fread(n, 8, 1, f) == 1 &&
        fread(&t, 8, 1, f) == 1 && fread(&len, 4, 1, f) == 1 && fseek(f, len, SEEK_CUR) == 0) {
        p = malloc(*n * sizeof *p);
        if (p && fread(p, 4, *n, f) != *n) {
            free(p);
            p = NULL;
        }
    }
    fclose(f);
    return p;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: check_run loss|same-loss|checkpoints|ops ...\n");
        return 2;
    }
    const char *mode = argv[1];
    if (strcmp(mode, "loss") == 0) {
        json_t *m = load(argv[2]), *loss = m ? json_object_get(m, "loss") : NULL;
        size_t n = json_array_size(loss);
        CHECK(n >= 100, "at least 100 steps of losses (%zu)", n);
        if (n >= 100) {
            double first = json_number_value(json_array_get(loss, 0)), last = 0;
            for (size_t i = n - 50; i < n; i++)
                last += json_number_value(json_array_get(loss, i)) / 50;
            printf("loss: first step %.4f, mean of the last 50 steps %.4f (ratio %.3f, must be < %s)\n",
                   first, last, last / first, argv[3]);
            CHECK(last < atof(argv[3]) * first, "loss falls well below its start");
        }
        json_decref(m);
    } else if (strcmp(mode, "same-loss") == 0 && argc >= 5) {
        json_t *a = load(argv[2]), *b = load(argv[3]);
        json_t *la = a ? json_object_get(a, "loss") : NULL, *lb = b ? json_object_get(b, "loss") : NULL;
        size_t from = (size_t)atoi(argv[4]), same = 1;
        CHECK(json_array_size(la) == from + json_array_size(lb), "resumed run covers the remaining steps");
        for (size_t i = 0; i < json_array_size(lb); i++)
            same &=
                json_number_value(json_array_get(la, from + i)) == json_number_value(json_array_get(lb, i));
        CHECK(same, "a resumed run continues with exactly the losses of an uninterrupted one");
        json_decref(a);
        json_decref(b);
    } else if (strcmp(mode, "close-loss") == 0 && argc >= 5) {
        json_t *a = load(argv[2]), *b = load(argv[3]);
        json_t *la = a ? json_object_get(a, "loss") : NULL, *lb = b ? json_object_get(b, "loss") : NULL;
        const double tol = atof(argv[4]);
        double worst = 0;
        CHECK(json_array_size(la) > 0 && json_array_size(la) == json_array_size(lb),
              "the same steps (%zu, %zu)", json_array_size(la), json_array_size(lb));
        for (size_t i = 0; i < json_array_size(la) && i < json_array_size(lb); i++) {
            double x = json_number_value(json_array_get(la, i)), y = json_number_value(json_array_get(lb, i));
            worst = fmax(worst, fabs(x - y) / fmax(fabs(x), 1e-30));
        }
        printf("losses: largest relative difference %.2e\n", worst);
        CHECK(worst <= tol, "every loss within %g", tol);
        json_decref(a);
        json_decref(b);
    } else if (strcmp(mode, "checkpoints") == 0 && argc >= 5) {
        uint64_t na = 0, nb = 0;
        float *a = read_params(argv[2], &na), *b = read_params(argv[3], &nb);
        CHECK(a && b && na == nb, "both checkpoints readable, same size");
        double worst = 0, scale = 0;
        for (uint64_t i = 0; a && b && na == nb && i < na; i++) {
            worst = fmax(worst, fabs((double)a[i] - b[i]));
            scale = fmax(scale, fabs(a[i]));
        }
        printf("parameters: largest difference %.3g (largest parameter %.3g)\n", worst, scale);
        CHECK(worst <= atof(argv[4]), "parameters equal within %s", argv[4]);
        free(a);
        free(b);
    } else if (strcmp(mode, "ops") == 0) {
        json_t *m = load(argv[2]), *ops = m ? json_object_get(m, "ops") : NULL;
        int ranks = atoi(argv[3]), ok = 1;
        CHECK(json_array_size(ops) > 20, "ops listed (%zu)", json_array_size(ops));
        for (size_t i = 0; i < json_array_size(ops); i++) {
            json_t *r = json_object_get(json_array_get(ops, i), "ranks");
            ok &= (int)json_array_size(r) == ranks;
            for (size_t k = 0; k < json_array_size(r); k++)
                ok &= json_number_value(json_object_get(json_array_get(r, k), "median_s")) >= 0;
        }
        CHECK(ok, "every op has a median per rank");
        CHECK(json_integer_value(json_object_get(m, "ranks")) == ranks, "ranks recorded");
        json_decref(m);
    } else if (strcmp(mode, "zeros") == 0 && argc >= 5) {
        uint64_t n = 0;
        float *p = read_params(argv[2], &n);
        double zeros = 0;
        for (uint64_t i = 0; p && i < n; i++)
            zeros += p[i] == 0.0f;
        double f = n ? zeros / n : 0;
        printf("parameters exactly zero after training: %.4f\n", f);
        CHECK(p && f >= atof(argv[3]) && f <= atof(argv[4]), "zero fraction %.4f in [%s, %s]", f, argv[3],
              argv[4]);
        free(p);
    } else if (strcmp(mode, "same-ops") == 0) {
        json_t *p = load(argv[2]), *m = load(argv[3]);
        json_t *po = p ? json_object_get(json_object_get(p, "simulation"), "ops") : NULL;
        json_t *mo = m ? json_object_get(m, "ops") : NULL;
        int same = json_array_size(po) == json_array_size(mo) && json_array_size(po) > 0;
        for (size_t i = 0; same && i < json_array_size(po); i++)
            same = strcmp(json_string_value(json_object_get(json_array_get(po, i), "id")),
                          json_string_value(json_object_get(json_array_get(mo, i), "id"))) == 0;
        CHECK(same, "%zu predicted and %zu measured ops, same ids in the same order", json_array_size(po),
              json_array_size(mo));
        json_decref(p);
        json_decref(m);
    } else if (strcmp(mode, "clipped") == 0) {
        json_t *m = load(argv[2]), *comm = m ? json_object_get(m, "communication") : NULL;
        const double max = atof(argv[3]);
        int buckets = (int)json_array_size(comm), triggered = 0, over = 0, off = 0, values = 0;
        double largest_before = 0, largest_after = 0;
        for (int k = 0; k < buckets; k++) {
            json_t *b = json_array_get(comm, (size_t)k), *before = json_object_get(b, "norm_before_clip"),
                   *after = json_object_get(b, "norm_after_clip");
            for (size_t s = 0; s < json_array_size(after); s++, values++) {
                double nb = json_number_value(json_array_get(before, s)),
                       na = json_number_value(json_array_get(after, s));
                largest_before = fmax(largest_before, nb), largest_after = fmax(largest_after, na);
                over += na > max * (1 + 1e-5);
                if (nb > max) {
                    triggered++;
                    off += fabs(na - max) > 1e-4 * max; /* clipped exactly to the threshold */
                } else {
                    off += na != nb; /* untouched below it */
                }
            }
        }
        printf("per-bucket clipping at %g: %d buckets, %d of %d bucket norms clipped, largest before %.4g, "
               "after "
               "%.4g\n",
               max, buckets, triggered, values, largest_before, largest_after);
        CHECK(buckets >= 2 && values > 0, "several buckets with clipping norms recorded (%d)", buckets);
        CHECK(triggered > 0, "clipping triggered");
        CHECK(over == 0, "%d bucket norms above the threshold after clipping", over);
        CHECK(off == 0, "%d bucket norms not at the threshold (clipped) or unchanged (below it)", off);
        json_decref(m);
    } else if (strcmp(mode, "record") == 0) {
        json_t *m = load(argv[2]);
        const size_t steps = (size_t)atoi(argv[3]);
        json_t *prov = json_object_get(m, "provenance");
        const char *keys[] = {"host", "cpu", "date", "git_commit", "backend", "communicator"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            CHECK(json_is_string(json_object_get(prov, keys[i])), "provenance.%s recorded", keys[i]);
        CHECK(json_integer_value(json_object_get(prov, "ranks")) >= 1, "provenance.ranks");
        CHECK(json_integer_value(json_object_get(prov, "blas_threads")) >= 1, "provenance.blas_threads");
        json_t *st = json_object_get(m, "step_times_s");
        CHECK(json_array_size(st) == steps, "one time per step (%zu)", json_array_size(st));
        int positive = 1;
        for (size_t i = 0; i < json_array_size(st); i++)
            positive &= json_number_value(json_array_get(st, i)) > 0;
        CHECK(positive, "step times positive");
        json_t *ops = json_object_get(m, "ops");
        int predicted = 0;
        for (size_t i = 0; i < json_array_size(ops); i++)
            predicted += json_number_value(json_object_get(json_array_get(ops, i), "predicted_s")) > 0;
        CHECK(predicted > 20, "ops carry the cost model's prediction (%d)", predicted);
        json_t *comm = json_object_get(m, "communication");
        int ordered = json_array_size(comm) > 0, in_order = 1;
        long long bytes = 0;
        for (size_t k = 0; k < json_array_size(comm); k++) {
            json_t *b = json_array_get(comm, k), *s = json_object_get(b, "start_s"),
                   *e = json_object_get(b, "end_s");
            json_t *prev = k ? json_object_get(json_array_get(comm, k - 1), "start_s") : NULL;
            bytes += json_integer_value(json_object_get(b, "bytes"));
            for (size_t i = 0; i < json_array_size(s); i++) {
                ordered &=
                    json_number_value(json_array_get(e, i)) >= json_number_value(json_array_get(s, i)) &&
                    json_number_value(json_array_get(s, i)) > 0;
                /* the events of one stream: bucket k is ready after bucket k - 1 */
                if (prev)
                    in_order &=
                        json_number_value(json_array_get(s, i)) >= json_number_value(json_array_get(prev, i));
            }
        }
        CHECK(ordered, "every bucket's reduction starts after the step does and ends after it starts");
        CHECK(in_order, "the buckets start in backward's order (events of the compute stream)");
        CHECK(bytes == 4 * json_integer_value(json_object_get(m, "parameters")),
              "buckets cover every gradient once (%lld bytes)", bytes);
        json_decref(m);
    } else {
        fprintf(stderr, "check_run: unknown mode %s\n", mode);
        return 2;
    }
    return check_summary("check_run");
}

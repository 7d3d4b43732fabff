/* The all-reduce rows of a micro.json as network samples: see calib_allreduce.h. */
#include <stdlib.h>

#include "calib_allreduce.h"

int calib_allreduce_samples(const json_t *micro, const char *source, calib_coll_sample **out, int *n,
                            et_error *err)
{
    const json_t *rows = json_object_get(micro, "allreduce");
    *out = NULL, *n = 0;
    if (!json_is_array(rows) || json_array_size(rows) == 0)
        return et_error_set(err, source, 0, 0, "$.allreduce",
                            "no all-reduce rows: run etcalib bench under mpirun with two ranks or more");
    size_t count = json_array_size(rows);
    *out = calloc(count, sizeof **out);
    if (!*out) return et_error_set_code(err, ET_ERROR_MEMORY, source, 0, 0, NULL, "out of memory");
    for (size_t i = 0; i < count; i++) {
        const json_t *r = json_array_get(rows, i);
        double bytes = json_number_value(json_object_get(r, "bytes")),
               secs = json_number_value(json_object_get(r, "seconds"));
        int ranks = (int)json_integer_value(json_object_get(r, "ranks"));
        if (!(bytes > 0) || !(secs > 0) || ranks < 2) {
            free(*out);
            *out = NULL;
            char path[64];
            snprintf(path, sizeof path, "$.allreduce[%zu]", i);
            return et_error_set(err, source, 0, 0, path,
                                "expected positive bytes and seconds and ranks >= 2");
        }
        (*out)[(*n)++] = (calib_coll_sample){.nodes = 1, .per_node = ranks, .bytes = bytes, .seconds = secs};
    }
    return 0;
}

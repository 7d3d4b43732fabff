/* libFuzzer target: the checkpoint loader (runtime/rt_checkpoint.h) against the model of a small plan
 * ($ET_FUZZ_PLAN, built once): the input is the whole checkpoint.bin. The seed is a real checkpoint of that
 * plan (tests/fuzz/run.sh saves one); for inputs whose first byte after the magic is even, the trailing
 * xxh64 is recomputed over the mutated bytes, so mutations reach the fingerprint, consistency and value
 * checks behind the checksum instead of all stopping at it. */
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "fuzz_common.h"
#include "plan.h"
#include "rt_backend.h"
#include "rt_checkpoint.h"
#include "rt_model.h"

static et_plan plan; /* kept for the whole run, as the model refers to its scenario */
static rt_model model;
static int ready;

static void setup(void)
{
    et_error err;
    const char *path = getenv("ET_FUZZ_PLAN");
    rt_backend *be;
    if (!path || et_plan_load(path, &plan, &err) || !(be = rt_backend_create("cpu", &err)) ||
        rt_model_init(&model, &plan.s, be, 1, &err)) {
        fprintf(stderr, "fuzz_checkpoint: cannot build the plan's model: %s\n", err.text);
        abort();
    }
    ready = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ready) setup();
    const char *dir = getenv("ET_FUZZ_DIR");
    char folder[4096];
    snprintf(folder, sizeof folder, "%s/ckpt.%d", dir && *dir ? dir : "/tmp", (int)getpid());
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "%s/checkpoint.bin", folder);
    (void)mkdir(folder, 0777);
    FILE *f = fopen(cmd, "wb");
    if (!f) abort();
    if (size > 16 && data[8] % 2 == 0) { /* the checksum made right for what precedes it */
        uint64_t sum = XXH64(data, size - 8, 0);
        if (fwrite(data, 1, size - 8, f) != size - 8 || fwrite(&sum, 8, 1, f) != 1) abort();
    } else if (size && fwrite(data, 1, size, f) != size) {
        abort();
    }
    fclose(f);
    long long next;
    et_error err;
    (void)rt_checkpoint_load(folder, &model, &next, &err);
    return 0;
}

/* libFuzzer target: the length-histogram reader (model/length_dist.h) at seq_len 512. */
#include "fuzz_common.h"
#include "length_dist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    et_length_dist d;
    et_error err;
    if (et_length_dist_load_histogram(fuzz_file(data, size, "lengths.csv"), 512, &d, &err) == 0)
        et_length_dist_free(&d);
    return 0;
}

/* libFuzzer target: the token-file reader (runtime/rt_data.h), vocabulary 256, sequences up to 64. */
#include "fuzz_common.h"
#include "rt_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rt_token_file f = {0};
    et_error err;
    if (rt_token_file_load(fuzz_file(data, size, "tokens.bin"), 256, 64, &f, &err) == 0)
        rt_token_file_free(&f);
    return 0;
}

/* libFuzzer target: the device profile reader (model/device_profile.h). */
#include "device_profile.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    et_device_profile d;
    et_error err;
    (void)et_device_profile_load(fuzz_file(data, size, "profile.json"), &d, &err);
    return 0;
}

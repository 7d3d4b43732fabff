/* libFuzzer target: the scenario parser (model/scenario.h) on arbitrary bytes. */
#include "fuzz_common.h"
#include "scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    et_scenario s;
    et_error err;
    if (et_scenario_load(fuzz_file(data, size, "scenario.json"), &s, &err) == 0) et_scenario_free(&s);
    return 0;
}

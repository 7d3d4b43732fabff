/* libFuzzer target: the plan parser (model/plan.h): a scenario plus "run". */
#include "fuzz_common.h"
#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    et_plan p;
    et_error err;
    if (et_plan_load(fuzz_file(data, size, "plan.json"), &p, &err) == 0) et_plan_free(&p);
    return 0;
}

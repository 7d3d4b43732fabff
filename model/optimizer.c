#include "optimizer.h"

#include <stddef.h>

const char *const et_optimizer_names[] = {"adam", "adamw", "lamb", NULL};

/* memory: bytes per GPU of one training plan: weights, gradients, optimizer states (with ZeRO sharding),
 * activations (with recomputation and 1F1B pipelining) and the device's reserved memory.
 *
 * Contract: pure computation, no allocation. Activation sizes follow Korthikanti et al. 2022 (see
 * docs/cost-model.md); `fits` is false when the total exceeds the device memory, and callers must then
 * report an error-level message. */
#ifndef ET_MEMORY_H
#define ET_MEMORY_H

#include <stdbool.h>

#include "graph.h"
#include "scenario.h"

typedef struct et_memory {
    double weights;
    double gradients;
    double optimizer_states;
    double activations;
    double reserved;
    double total;
    double capacity;
    bool fits;
} et_memory;

/* `g` is the graph of the stage to size (stage 0 holds the most in-flight micro-batches under 1F1B);
 * `micro` the shape of the largest micro-batch to plan for. */
et_memory et_memory_estimate(const et_scenario *s, const et_graph *g, const et_batch_shape *micro);

#endif

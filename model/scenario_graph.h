/* scenario_graph: the graph options (graph.h) a scenario implies for one pipeline stage: parallelism,
 * precision, recomputation, optimizer, ZeRO sharding, clipping, method, and for tensor-train methods the
 * tokens per micro-batch their contraction order is chosen for. The one place a scenario becomes a graph. */
#ifndef ET_SCENARIO_GRAPH_H
#define ET_SCENARIO_GRAPH_H

#include "graph.h"
#include "scenario.h"

et_graph_options et_scenario_graph_options(const et_scenario *s, int stage);

/* The graph etrun runs for a plan's scenario: stage 0, optimizer states unsharded (one rank holds all). */
et_graph_options et_plan_graph_options(const et_scenario *s);

#endif

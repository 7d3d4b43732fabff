/* Context parallelism (ring attention) against hand-computed figures: a rank's share of the batch, the
 * ring's key/value exchange per layer and what of it attention hides, activation memory divided by the
 * ring's size, model FLOPs unchanged, and the simulator equal to the analytic step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analytic.h"
#include "batch.h"
#include "check.h"
#include "check_scenario.h"
#include "check_sim.h"
#include "collectives.h"
#include "memory.h"
#include "scenario.h"
#include "scenario_graph.h"
#include "step_sim.h"

#define DATA(name) ET_SOURCE_DIR "/tests/data/" name

int main(void)
{
    et_scenario s;
    if (check_scenario_load(DATA("context-16.json"), &s)) return check_summary("test_context");
    const int c = s.parallel.context;
    const double S = s.data.seq_len, H = s.model.hidden, kvD = s.model.kv_heads * (H / s.model.heads);
    CHECK(s.parallel.data == 2 && et_scenario_grad_ranks(&s) == 16, "data %d (replicas), gradient ranks %d",
          s.parallel.data, et_scenario_grad_ranks(&s));
    et_batch_shape b = et_batch_expected(&s);
    CHECK(b.tokens == S / c && b.tokens_sq == S * S / c && b.sequences == 1,
          "a rank's share: T = S/c = %g, Q = S^2/c = %g", b.tokens, b.tokens_sq);

    et_graph g;
    et_error err;
    et_graph_options o = et_scenario_graph_options(&s, 0);
    CHECK(et_graph_build(&s.model, &o, &g, &err) == 0, "graph: %s", err.text);
    int rings = 0, flash = -1;
    double ring_bytes = 0;
    for (int i = 0; i < g.n_ops; i++) {
        if (g.ops[i].kind != ET_OP_CP_RING) continue;
        rings++;
        if (g.ops[i].phase == ET_PHASE_FORWARD && g.ops[i].layer == 0)
            ring_bytes = et_linear_eval(&g.ops[i].bytes, &b), flash = i - 1;
    }
    CHECK(rings == 2 * s.model.layers, "%d ring exchanges, one forward and one backward per layer", rings);
    CHECK(ring_bytes == 2 * 2 * (S / c) * kvD, "a step passes the chunk's keys and values: %g bytes",
          ring_bytes);
    /* what attention does not hide, by hand: (c - 1) max(0, step - chunk) */
    et_comm_group cp = et_cp_group(&s);
    CHECK(cp.ranks == c && cp.nodes == 1, "the ring sits inside one node");
    double step = cp.alpha_intra + ring_bytes / cp.intra_bw;
    double chunk = et_op_time(&g.ops[flash], &b, &s.cluster.device, s.precision) / c;
    double tp = 0;
    et_phase_time(&s, &g, ET_PHASE_FORWARD, &b, &tp);
    const double hand = s.model.layers * (c - 1) * fmax(0, step - chunk);
    CHECK(fabs(tp - hand) <= 1e-9 * hand && hand > 0,
          "forward's exposed exchange %.6g s: L (c-1) max(0, %.3g us - %.3g us) = %.6g s", tp, step * 1e6,
          chunk * 1e6, hand);

    et_estimate with, without;
    CHECK(et_analytic_estimate(&s, &with, &err) == 0, "estimate: %s", err.text);
    et_scenario one = s;
    one.parallel.context = 1;
    one.parallel.data = 16;
    one.batch.grad_accum = 1;
    one.batch.local = 1;
    one.batch.global = 16;
    CHECK(et_analytic_estimate(&one, &without, &err) == 0, "estimate without context parallelism");
    CHECK_REL(with.flops_per_token, without.flops_per_token, 1e-12, "model FLOPs per token unchanged");
    et_memory m1 = et_memory_estimate(&s, &g, &b);
    et_batch_shape whole = {.sequences = 1, .tokens = S, .tokens_sq = S * S, .predictions = S};
    et_memory m0 = et_memory_estimate(&s, &g, &whole);
    CHECK_REL(m1.activations * c, m0.activations, 0.01, "activations divided by the ring's size");

    /* the simulator plays the same step (ring attention blocking, as tensor parallelism) */
    s.parallel.overlap = false;
    et_estimate flat;
    CHECK(et_analytic_estimate(&s, &flat, &err) == 0, "estimate without overlap");
    json_t *out = check_simulate(&s, 1, 1);
    if (out) CHECK_REL(check_step_mean(out), flat.step_time, 0.02, "simulated step vs analytic");
    json_decref(out);
    et_graph_free(&g);
    et_scenario_free(&s);
    return check_summary("test_context");
}

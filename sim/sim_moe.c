/* Mixture of experts in the simulation: every all-to-all of the experts' tokens (dispatch and combine, in
 * forward, recomputation and backward) played as flows among the ranks of an expert-parallel group, on the
 * same links as the data-parallel all-reduce; compute waits for each (the step schedule's all-to-all
 * items, played by sim_actors.c).
 *
 * An all-to-all starts when the last rank of its group arrives (NCCL's grouped send/receive needs every
 * peer), pays the closed form's latency term, then rank i sends rank j its rows for j's experts: the bytes
 * of i's batch times j's share of the layer's routed rows, drawn per (step, micro-batch, layer, group) from
 * the routing distribution (moe.h); all members end together, when the last flow has. Compute between
 * all-to-alls follows the cost model, expert ops scaled by the rank's own load. */
#include <math.h>
#include <stdlib.h>
#include <xbt/asserts.h>

#include "batch.h"

#include "moe.h"
#include "rng.h"
#include "sg_cxx.h"
#include "sim_world.h"

XBT_LOG_NEW_DEFAULT_CATEGORY(et_moe, "etsim experts' all-to-alls");

int sim_moe_build(sim_world *w)
{
    const et_scenario *s = w->s;
    const int x = s->parallel.expert, t = s->parallel.tensor, dp = s->parallel.data;
    const int per_stage = w->n_ranks / s->parallel.pipeline;
    w->ep = et_ep_group(s);
    w->moe_tokens = et_moe_routed_tokens(s, et_batch_expected(s).tokens);
    w->n_ep_groups = w->n_ranks / x;
    w->ep_groups = calloc((size_t)w->n_ep_groups, sizeof *w->ep_groups);
    w->a2a = calloc(3 * (size_t)w->n_ranks, sizeof *w->a2a);
    w->a2a_count = calloc((size_t)w->n_ranks, sizeof *w->a2a_count);
    if (!w->ep_groups || !w->a2a || !w->a2a_count) return -1;
    for (int i = 0; i < w->n_ep_groups; i++) {
        w->ep_groups[i].size = x;
        w->ep_groups[i].members = malloc((size_t)x * sizeof(int));
        if (!w->ep_groups[i].members) return -1;
        w->ep_groups[i].bar = sg_barrier_init((unsigned)x);
    }
    /* Megatron order (step_sim.c): tensor rank fastest, then data, then stage; a group is x consecutive data
     * ranks of one stage and tensor rank, or with the experts folded over the tensor ranks x consecutive
     * ranks of one stage (x / t data ranks, every tensor rank) */
    const int folded = et_scenario_experts_folded(s);
    for (int rank = 0; rank < w->n_ranks; rank++) {
        sim_rank *r = &w->ranks[rank];
        int st = rank / per_stage, within = rank % per_stage, d = within / t, tp = within % t;
        if (folded) {
            r->ep_group = st * (per_stage / x) + within / x;
            r->ep_index = within % x;
        } else {
            r->ep_group = (st * t + tp) * (dp / x) + d / x;
            r->ep_index = d % x;
        }
        w->ep_groups[r->ep_group].members[r->ep_index] = rank;
    }
    return 0;
}

void sim_moe_loads(const sim_world *w, const sim_rank *r, int step, int i, int layer, double *load)
{
    const et_scenario *s = w->s;
    et_moe_rank_loads(s, w->moe_tokens,
                      et_rng_stream(s->simulation.seed,
                                    ((unsigned long long)step * s->batch.grad_accum + i) * 100003ULL +
                                        (unsigned long long)layer,
                                    (unsigned long long)r->ep_group + 1),
                      load);
}

/* `to_experts` (dispatch, and combine's gradient) sends each peer its share of this rank's rows; otherwise
 * (combine, dispatch's gradient) each peer gets back its own rows that this rank's experts processed. */
void sim_moe_alltoall(sim_world *w, sim_rank *r, int step, int i, const et_step_event *e, const double *load,
                      sg_comm_t *comms)
{
    const et_op *op = &w->stages[r->stage].graph.ops[e->op];
    const sim_ep_group *grp = &w->ep_groups[r->ep_group];
    const int x = grp->size;
    const double arrive = simgrid_get_clock();
    sg_barrier_wait(grp->bar);
    const double start = simgrid_get_clock();
    const double mine = et_linear_eval(&op->bytes, sim_shape(w, r->rank, step, i));
    sg_actor_sleep_for(et_step_alpha(&w->ep)); /* the closed form's latency term */
    int n = 0;
    for (int j = 0; j < x; j++) {
        if (j == r->ep_index) continue;
        const int peer = grp->members[j];
        double bytes = e->to_experts
                           ? mine * load[j] / x
                           : et_linear_eval(&op->bytes, sim_shape(w, peer, step, i)) * load[r->ep_index] / x;
        if (bytes > 0) comms[n++] = et_sendto_async(r->host, w->ranks[peer].host, bytes);
    }
    if (n) sg_comm_wait_all(comms, (size_t)n);
    sg_barrier_wait(grp->bar);
    const double end = simgrid_get_clock();
    w->a2a[3 * r->rank] += end - start;
    w->a2a[3 * r->rank + 1] += start - arrive;
    w->a2a[3 * r->rank + 2] += et_alltoall_time(&w->ep, mine);
    w->a2a_count[r->rank]++;
    w->flows_modelled += n, w->flows_simulated += n;
    sim_trace_note(r, 1, arrive, start - arrive, "wait for expert peers");
    sim_trace_note(r, 1, start, end - start, "%s", op->id);
}

void sim_moe_results(const sim_world *w, sim_alltoall_stats *out)
{
    double time = 0, wait = 0, closed = 0;
    long long count = 0;
    for (int r = 0; r < w->n_ranks; r++) {
        time += w->a2a[3 * r], wait += w->a2a[3 * r + 1], closed += w->a2a[3 * r + 2];
        count += w->a2a_count[r];
    }
    const double per = (double)w->n_ranks * w->steps;
    *out = (sim_alltoall_stats){count / per, time / per, wait / per, closed / per};
}

/* schedule: how a step's work is ordered on the GPUs: activation recomputation and the 1F1B pipeline
 * (plain or interleaved), the rules the analytic model, the simulator and the memory model share.
 *
 * Contract: pure functions of their arguments, no allocation, no errors. Counts are in micro-batches
 * of one (whole) pipeline stage; formulas and sources are in docs/cost-model.md ("Pipeline schedules"). */
#ifndef ET_SCHEDULE_H
#define ET_SCHEDULE_H

typedef enum { ET_RECOMPUTE_NONE, ET_RECOMPUTE_FULL, ET_RECOMPUTE_SELECTIVE } et_recompute;
extern const char *const et_recompute_names[]; /* "none", "full", "selective", NULL */

/* Idle time of a 1F1B pipeline of `stages` stages with `virtual_stages` model chunks per stage, in
 * whole-stage micro-batch times (forward + backward): (p - 1) / v (Narayanan et al. 2021, sec. 2.2). */
double et_pipeline_bubble_micro_batches(int stages, int virtual_stages);

/* Activation sends (and receives) between stages per micro-batch, each way: v chunk boundaries. */
int et_pipeline_sends_per_micro_batch(int stages, int virtual_stages);

/* Micro-batches whose activations stage `stage` holds at its peak under 1F1B: min(m, p - stage), times
 * 1 + (p - 1) / (p v) with interleaving (Korthikanti et al. 2022, sec. 4.2.3). */
double et_pipeline_in_flight(int stages, int virtual_stages, int stage, long long micro_batches);

#endif

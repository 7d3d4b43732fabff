/* phase_time: the seconds of the pieces a training step is made of, from the cost model: an op (its
 * compute, or the blocking communication it stands for), a phase of one micro-batch, a pipeline send, one
 * gradient bucket's collective and clipping kernel. The step schedule (step_schedule.h) places them; the
 * analytic model and the simulator both read them from here.
 *
 * Contract: pure functions of the scenario, the graph (or its op classes timed at the shape given,
 * et_op_classes_times) and the batch shape; nothing is allocated. */
#ifndef ET_PHASE_TIME_H
#define ET_PHASE_TIME_H

#include "buckets.h"
#include "collectives.h"
#include "graph.h"
#include "op_classes.h"
#include "scenario.h"

/* Collective time of one gradient bucket under the scenario's data parallelism and ZeRO stage. */
double et_bucket_comm_time(const et_scenario *s, const et_comm_group *dp, double bytes, et_coll_algo *chosen);
/* The group a bucket is reduced over: the ranks holding the same experts for an expert bucket under expert
 * parallelism (et_ep_data_group), else the data-parallel one (dp, as given). */
et_comm_group et_bucket_group(const et_scenario *s, const et_bucket *bucket, const et_comm_group *dp);

/* Time of the clipping kernel of one bucket: read for the norm, then read and write to scale. */
double et_bucket_clip_time(const et_scenario *s, double bytes);

/* The seconds a collective of `comm` seconds adds beside a product of `gemm` seconds that it runs with,
 * taking `taken` of the device's `sms` multiprocessors (0 sms: none known, nothing taken). With `margin`
 * the product runs on the others throughout (Transformer Engine's set_sm_margin): max(comm, gemm sms /
 * (sms - taken)) - gemm; without, the two share the SMs while the collective runs: the product loses
 * taken / sms of its rate for comm seconds, or the collective outlasts it. */
double et_overlap_blocking(double comm, double gemm, double taken, double sms, bool margin);
/* The same for tensor-parallel collective `op` beside its product, as the scenario overlaps it: NCCL's
 * channels (software.overlap_sms) sharing the SMs, or Transformer Engine's userbuffers
 * (parallelism.tp_overlap: ring exchange on one SM; the forward reduce-scatters pipelined on overlap_sms and
 * the backward ones and the re-gather in bulk on bulk_overlap_sms, taken from the product). */
double et_beside_product_blocking(const et_scenario *s, const et_op *op, double comm, double gemm);

/* Op i's seconds at the rank's own (balanced) rows, from its class (c timed at b) or the cost model (c
 * NULL). A communication op (tensor-parallel collective, experts' all-to-all, ring attention's exchange)
 * returns 0 and adds what of it blocks compute to *tp_comm (when not NULL): with tp_overlap or issued beside
 * its product (op->async_comm), what the GEMM it feeds or drains cannot hide, and what the SMs it takes
 * slow that GEMM by (et_beside_product_blocking); an all-to-all at the busiest expert rank's rows. */
double et_op_seconds_balanced(const et_scenario *s, const et_graph *g, int i, const et_batch_shape *b,
                              const et_op_classes *c, const et_comm_group *tp, double *tp_comm);

/* One segment's seconds at a batch shape: `compute` (every op at the rank's own, balanced rows, experts'
 * included), `expert` (the part of compute in expert ops, which a rank's routed rows scale: moe.h), `comm`
 * (blocking communication: tensor-parallel collectives, ring attention's exchanges) and of it `exchange`
 * (ring attention's). A host slower than the device stretches compute by the pass's ratio (schedule.h's
 * bound, decided on the pass's compute at the expected expert imbalance). */
typedef struct et_segment_time {
    double compute, expert, comm, exchange;
} et_segment_time;

/* A whole phase of one micro-batch as one segment (c, a graph's classes, timed at b): what a pass without
 * cuts takes, and what picks the busiest pipeline stage. */
void et_phase_whole_time(const et_scenario *s, const et_op_classes *c, et_phase phase,
                         const et_batch_shape *b, et_segment_time *t);

/* The seconds of a segment with its experts at `load` times the balanced rows (the expected imbalance in the
 * analytic model, the drawn one in the simulator), blocking communication included. */
double et_segment_seconds(const et_segment_time *t, double load);

/* Op i's share of a segment (c timed at b): its balanced compute, the expert part, its blocking
 * communication (tp: the tensor-parallel group). */
void et_segment_add_op(const et_scenario *s, const et_graph *g, int i, const et_batch_shape *b,
                       const et_op_classes *c, const et_comm_group *tp, et_segment_time *t);

/* A host slower than the device stretches n segments' compute evenly (their ratio, decided on their compute
 * at the expected expert imbalance; `kernels` they launch). */
void et_segment_host_stretch(const et_scenario *s, const et_batch_shape *b, et_segment_time *t, int n,
                             double kernels);

/* Sum of op times of a phase for one micro-batch (expert ops at the busiest expert rank's rows);
 * communication is added to *tp_comm as et_op_seconds_balanced does; a host slower than the device bounds
 * the compute (schedule.h). */
double et_phase_time(const et_scenario *s, const et_graph *g, et_phase phase, const et_batch_shape *b,
                     double *tp_comm);

/* The same from a graph's op classes timed at shape b (et_op_classes_times): et_phase_whole_time's
 * compute at the expected expert imbalance, its blocking communication added to *tp_comm. */
double et_phase_time_of(const et_scenario *s, const et_op_classes *c, et_phase phase, const et_batch_shape *b,
                        double *tp_comm);

/* Pipeline activation sends of one micro-batch in one direction, seconds of the compute stream (0 with one
 * stage): one per model chunk boundary, so v with v virtual stages; each rank's share of the activation as
 * the stack sends it (software.pipeline_sends: 1/t, 1/t and an all-gather over the tensor ranks, or whole),
 * 1/t under sequence parallelism. Overlapped (software.p2p_overlap with v > 1): only the share of the
 * multiprocessors the transfers take from the pass beside them (et_overlap_blocking, sharing). */
double et_pipeline_send_time(const et_scenario *s, const et_batch_shape *b);

/* Seconds of one tensor-parallel collective op (all-reduce, all-gather or reduce-scatter of `bytes`, the
 * full activation) on the tensor-parallel group, ring algorithm. */
double et_tp_comm_time(const et_comm_group *tp, et_op_kind kind, double bytes);

/* The host's wall time for `kernels` launches around `device` seconds of work: the slower of the two
 * (schedule.h), or their sum when every launch waits for its kernel (software.launch_blocking). */
double et_host_time(const et_scenario *s, double device, double kernels);

/* One host synchronisation: the device's queue drains and the next kernel reaches it one host launch
 * later (host.per_kernel). */
double et_sync_time(const et_scenario *s);

/* One micro-batch's gradients of `tensors` parameters, `elements` values, accumulated into the gradient that
 * is reduced, as the stack does it (software.grad_accumulation; 0 when fused into the GEMMs). */
double et_accumulate_time(const et_scenario *s, double elements, double tensors);

/* The optimizer's passes beyond the graph's (software.optimizer) for `params` local parameters of which
 * `shard` are this rank's to update, `quantized_shard` of them quantized products' weights (with
 * software.fp8_param_gather, an amax pass over their fp32 values before the cast to FP8). */
double et_optimizer_stack_time(const et_scenario *s, double params, double shard, double quantized_shard);

#endif

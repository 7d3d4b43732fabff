/* resilience: what a long run on many GPUs loses to failures, and the checkpoint interval that loses least.
 *
 * A job on G GPUs, each interrupted at `interruptions_per_gpu_hour` (independent, exponential), fails on
 * average every M = 3600 / (rate x G) seconds. It writes a checkpoint (the model's weights and optimizer
 * state: et_checkpoint_bytes) every tau seconds of work; each costs the step `delta` seconds (the whole
 * write to storage when synchronous, the copy to host memory when asynchronous); a failure costs a restart
 * R (a fixed time plus reading the checkpoint back) and the work since the last checkpoint. Daly (2006,
 * "A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22) gives the
 * expected wall time of T seconds of work, T_w = M e^(R/M) (e^((tau + delta)/M) - 1) T / tau, and the
 * interval that minimises it, tau = sqrt(2 delta M) [1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9] - delta
 * for delta < 2M (else M); Young (1974) is its first term. An asynchronous write also delays the point
 * a failure rolls back to by the write itself, added to R. Defaults and their sources: docs/cost-model.md.
 *
 * Contract: pure computation. et_goodput_estimate() fills *out for a job of `gpus` GPUs and `nodes` nodes
 * whose full checkpoint is `checkpoint_bytes`; a rate of 0 means no failures (factor 1 unless an interval is
 * given, whose checkpoints then cost their stalls). */
#ifndef ET_RESILIENCE_H
#define ET_RESILIENCE_H

#include <stdbool.h>

typedef struct et_resilience {
    double interruptions_per_gpu_hour; /* default: Llama 3's 419 in 54 days on 16,384 H100s */
    double write_GBps_per_node;        /* storage write (and read) bandwidth a node, 10^9 B/s */
    bool asynchronous;                 /* the write overlaps training; the step pays the copy to host */
    double host_copy_GBps;             /* device-to-host copy a GPU, for asynchronous checkpoints */
    double restart_s;                  /* fixed restart cost: rescheduling, start-up, before reading */
    double interval_s;                 /* checkpoint interval in seconds of work; 0: Daly's optimum */
} et_resilience;

typedef struct et_goodput {
    double mtbf_s;           /* the job's mean time between interruptions (inf without failures) */
    double checkpoint_bytes; /* one full checkpoint */
    double write_s;          /* writing it to storage */
    double stall_s;          /* what each checkpoint costs the step (delta) */
    double restart_s;        /* R: the fixed restart plus reading the checkpoint (plus an async write) */
    double interval_s;       /* tau: work between checkpoints (inf: none) */
    double factor;           /* expected wall time / failure-free time (>= 1) */
    double interruptions;    /* expected interruptions over the run (of the failure-free time) */
} et_goodput;

/* The resilience defaults (docs/cost-model.md, "Failures and checkpoints"). */
et_resilience et_resilience_defaults(void);

/* Bytes of one resumable checkpoint of `params` parameters trained in a precision of `weight_bytes` bytes
 * an element: the weights as trained plus the optimizer's fp32 master weights and two moments (12 bytes;
 * an fp32 run's master weights are its weights: 4 + 8). */
double et_checkpoint_bytes(double params, double weight_bytes);

void et_goodput_estimate(const et_resilience *r, int gpus, int nodes, double checkpoint_bytes, double work_s,
                         et_goodput *out);

#endif

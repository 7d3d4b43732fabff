#include "resilience.h"

#include <math.h>

/* Llama 3 (Meta, "The Llama 3 Herd of Models", 2024, section 3.3.4): 419 unexpected interruptions in a
 * 54-day snapshot of pre-training on 16,384 H100 GPUs. */
#define LLAMA3_INTERRUPTIONS 419.0
#define LLAMA3_GPU_HOURS (54.0 * 24.0 * 16384.0)

et_resilience et_resilience_defaults(void)
{
    return (et_resilience){
        .interruptions_per_gpu_hour = LLAMA3_INTERRUPTIONS / LLAMA3_GPU_HOURS,
        .write_GBps_per_node = 5, /* assumption: one 50 Gb/s storage NIC's worth a node */
        .asynchronous = false,
        .host_copy_GBps = 25, /* PCIe Gen4 x16 one way, about 25 GB/s achieved */
        .restart_s = 600,     /* assumption: 10 minutes to reschedule and start before reading */
        .interval_s = 0,
    };
}

double et_checkpoint_bytes(double params, double weight_bytes)
{
    return params * (weight_bytes >= 4 ? 12.0 : weight_bytes + 12.0);
}

/* Daly's optimum for stall delta and MTBF m (2006, eq. 37). */
static double daly_interval(double delta, double m)
{
    if (delta >= 2 * m) return m;
    const double x = delta / (2 * m);
    return sqrt(2 * delta * m) * (1 + sqrt(x) / 3 + x / 9) - delta;
}

void et_goodput_estimate(const et_resilience *r, int gpus, int nodes, double checkpoint_bytes, double work_s,
                         et_goodput *out)
{
    const double write_bw = r->write_GBps_per_node * 1e9 * (nodes > 0 ? nodes : 1);
    out->checkpoint_bytes = checkpoint_bytes;
    out->write_s = write_bw > 0 ? checkpoint_bytes / write_bw : 0;
    out->stall_s = !r->asynchronous                    ? out->write_s
                   : r->host_copy_GBps > 0 && gpus > 0 ? checkpoint_bytes / gpus / (r->host_copy_GBps * 1e9)
                                                       : 0;
    /* restarting reads the checkpoint back at the write bandwidth; an asynchronous write in flight when
     * the failure comes leaves the checkpoint before it, older by that write */
    out->restart_s = r->restart_s + out->write_s + (r->asynchronous ? out->write_s : 0);
    const double rate = r->interruptions_per_gpu_hour * gpus / 3600; /* per second of the job */
    if (!(rate > 0)) {
        out->mtbf_s = INFINITY;
        out->interval_s = r->interval_s > 0 ? r->interval_s : INFINITY;
        out->factor = r->interval_s > 0 ? 1 + out->stall_s / r->interval_s : 1;
        out->interruptions = 0;
        return;
    }
    const double m = 1 / rate;
    out->mtbf_s = m;
    double tau = r->interval_s > 0 ? r->interval_s : daly_interval(out->stall_s, m);
    if (r->asynchronous && tau < out->write_s) tau = out->write_s; /* one write at a time */
    if (!(tau > 0)) tau = 1e-9;
    out->interval_s = tau;
    /* T_w / T = M e^(R/M) (e^((tau + delta)/M) - 1) / tau, with expm1 for small exponents */
    out->factor = m * exp(out->restart_s / m) * expm1((tau + out->stall_s) / m) / tau;
    out->interruptions = work_s * out->factor / m;
}

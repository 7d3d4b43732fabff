/* op_scales: per-op factors on the cost model's times, by op id: what `etsim --op-times measured.json` sets
 * (an op measured on one device over its modelled time there), so a step measured on one device predicts
 * the cluster (calib/et_measured_run.h computes them). The owner frees id and factor with et_op_scales_free.
 */
#ifndef ET_OP_SCALES_H
#define ET_OP_SCALES_H

typedef struct et_op_scales {
    int n;
    char (*id)[80];
    double *factor;
} et_op_scales;

void et_op_scales_free(et_op_scales *s);

#endif

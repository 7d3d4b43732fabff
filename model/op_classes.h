/* op_classes: the ops of a graph grouped by cost.
 *
 * Transformer layers repeat the same ops, so the time of every op for one batch shape is known after one
 * et_op_time per class: a few dozen evaluations instead of thousands. The simulator and the analytic
 * straggler factor evaluate every rank's own batch, so this is most of their compute work on large
 * clusters.
 *
 * Contract: et_op_classes_build groups the ops of g (which must outlive the classes) by everything
 * et_op_time reads; et_op_classes_times fills op_time[i] (seconds) for every op i of the graph with exactly
 * the value et_op_time(&g->ops[i], b, d, p) gives, and the classes' times and kernels for the phase sums of
 * et_op_classes_plain. Build returns -1 when out of memory (nothing to free). */
#ifndef ET_OP_CLASSES_H
#define ET_OP_CLASSES_H

#include "graph.h"

typedef struct et_op_classes {
    const et_graph *graph;
    int n_classes;
    int *first;            /* [class]: index of its first op */
    int *class_of;         /* [op] */
    double *class_time;    /* [class]: its time at the shape et_op_classes_times was last given */
    double *class_kernels; /* [class]: kernels it launches at that shape (et_op_launches) */
    /* what a walk over the ops reads, compact: a graph's ops are large and a phase walk touches thousands */
    unsigned char *phase_of; /* [op] its et_phase */
    unsigned char *plain;    /* [op] 1: timed by its class alone (not communication, not an expert's op) */
    int *count[3];           /* [phase][class]: its plain ops in that phase */
    int *special[3];         /* [phase]: the other ops of the phase, in graph order */
    int n_special[3];
} et_op_classes;

int et_op_classes_build(const et_graph *g, et_op_classes *c);
void et_op_classes_times(et_op_classes *c, const et_batch_shape *b, const et_device_profile *d,
                         et_precision p, double *op_time);
/* The plain ops of a phase at the last timed shape: their seconds, and their kernels into *kernels. */
double et_op_classes_plain(const et_op_classes *c, et_phase phase, double *kernels);
void et_op_classes_free(et_op_classes *c);

#endif

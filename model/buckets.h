/* buckets: gradient buckets cut from the order in which backward finalises parameter gradients, as
 * PyTorch DDP and Apex do: parameters are appended to the current bucket until it holds at least
 * `bucket_bytes` of gradients (the last bucket may be smaller). A mixture of experts' expert parameters never
 * share a bucket with the others: they are reduced over the ranks holding the same experts.
 *
 * Contract: et_buckets_build() allocates *out (caller frees with free()); bucket k becomes ready when op
 * `ready_op` of the graph ends. Errors: out of memory. */
#ifndef ET_BUCKETS_H
#define ET_BUCKETS_H

#include "graph.h"

typedef struct et_bucket {
    int param_first;
    int param_count;
    double elements;
    double bytes; /* gradient bytes */
    int ready_op; /* index of the op after which every gradient in the bucket is final */
    bool expert;  /* expert parameters only */
} et_bucket;

int et_buckets_build(const et_graph *g, double bucket_bytes, double grad_elem_bytes, et_bucket **out,
                     int *count, et_error *err);

#endif

#include "method.h"

const char *const et_method_kind_names[] = {"dense", "sparse", "tensor_train", "lora", NULL};
const char *const et_lora_target_names[] = {"linear_qkv", "linear_proj", "linear_fc1", "linear_fc2", NULL};
const char *const et_layer_group_names[] = {"attention", "mlp", "embeddings", "head", NULL};
const char *const et_sparse_pattern_names[] = {"dense", "unstructured", "block", "2:4", NULL};

double et_sparse_meta_bytes_per_weight(const et_sparse_spec *s)
{
    switch (s->pattern) {
    case ET_PATTERN_UNSTRUCTURED:
        return 4 * s->density; /* CSR column index */
    case ET_PATTERN_BLOCK:
        return 4 * s->density / ((double)s->block * s->block); /* one index per block */
    case ET_PATTERN_2_4:
        return 0.25 * s->density; /* 2 bits per kept value */
    default:
        return 0;
    }
}

double et_sparse_bytes_per_weight(const et_sparse_spec *s, double e)
{
    if (s->pattern == ET_PATTERN_DENSE || s->density >= 1) return e;
    return e * s->density + et_sparse_meta_bytes_per_weight(s);
}

double et_sparse_rate_factor(const et_device_profile *d, const et_sparse_spec *s)
{
    if (s->pattern == ET_PATTERN_DENSE || s->density >= 1) return 1;
    if (d->sparse_masked_dense) return s->density; /* the dense product's time for the kept FLOPs */
    switch (s->pattern) {
    case ET_PATTERN_UNSTRUCTURED:
        return d->sparse_unstructured_efficiency;
    case ET_PATTERN_BLOCK:
        return s->block / (s->block + d->sparse_block_half);
    case ET_PATTERN_2_4:
        /* 2:4 keeps half the weights; the sparse tensor cores run the kept FLOPs at speedup / 2 of dense */
        return d->sparse_2_4_speedup > 0 ? d->sparse_2_4_speedup * s->density : -1;
    default:
        return 1;
    }
}

const et_tt_factors *et_method_factors(const et_method *m, int n_in, int n_out)
{
    for (int i = 0; i < m->n_factors; i++)
        if (m->factors[i].n_in == n_in && m->factors[i].n_out == n_out) return &m->factors[i];
    return NULL;
}

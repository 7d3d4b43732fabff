/* rt_chunks: a flat buffer's tensors cut into chunks of at most RT_CHUNK_VALUES values (rt_backend.h), the
 * table built on the host and copied to the backend's device once. */
#include <stdlib.h>

#include "rt_backend.h"

int rt_chunks_build(rt_backend *be, const size_t *sizes, int n_tensors, rt_chunks *out)
{
    *out = (rt_chunks){0};
    size_t n = 0;
    for (int t = 0; t < n_tensors; t++)
        n += (sizes[t] + RT_CHUNK_VALUES - 1) / RT_CHUNK_VALUES;
    int *tensor = malloc((n ? n : 1) * sizeof *tensor), *len = malloc((n ? n : 1) * sizeof *len);
    size_t *first = malloc((n ? n : 1) * sizeof *first);
    int rc = -1;
    if (!tensor || !len || !first || n > (size_t)1 << 30) goto done;
    size_t c = 0, at = 0;
    for (int t = 0; t < n_tensors; at += sizes[t], t++)
        for (size_t off = 0; off < sizes[t]; off += RT_CHUNK_VALUES, c++) {
            tensor[c] = t;
            first[c] = at + off;
            len[c] = (int)(sizes[t] - off < RT_CHUNK_VALUES ? sizes[t] - off : RT_CHUNK_VALUES);
        }
    int *d_tensor = be->alloc(be, (n ? n : 1) * sizeof *tensor),
        *d_len = be->alloc(be, (n ? n : 1) * sizeof *len);
    size_t *d_first = be->alloc(be, (n ? n : 1) * sizeof *first);
    out->tensor = d_tensor, out->len = d_len, out->first = d_first;
    if (!d_tensor || !d_len || !d_first) {
        rt_chunks_free(be, out);
        goto done;
    }
    be->upload(be, d_tensor, tensor, n * sizeof *tensor);
    be->upload(be, d_len, len, n * sizeof *len);
    be->upload(be, d_first, first, n * sizeof *first);
    out->n = (int)n;
    rc = 0;
done:
    free(tensor), free(len), free(first);
    return rc;
}

void rt_chunks_free(rt_backend *be, rt_chunks *ch)
{
    if (ch->tensor) be->free(be, (void *)ch->tensor);
    if (ch->len) be->free(be, (void *)ch->len);
    if (ch->first) be->free(be, (void *)ch->first);
    *ch = (rt_chunks){0};
}

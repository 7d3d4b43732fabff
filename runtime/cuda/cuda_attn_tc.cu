/* Attention's products on the tensor cores, every sequence and head of a micro-batch in one launch
 * (cu_attn_tc_gemm, cuda_attention.h): a block computes a 64 x 64 tile of one (sequence, head) product, in
 * k-steps of 32 staged through shared memory (bounds-checked, zero-filled), with WMMA's 16 x 16 x 8 tf32
 * fragments (inputs rounded to tf32, fp32 accumulation); four warps of 32 x 32 each. Blocks past their
 * sequence's tiles return at once, so short sequences cost little. cuBLAS's grouped call ran the same
 * products one sequence after another (0.29 ms a layer's context backward on an H200, 2026-12-04).
 * Multi-head only: grouped-query heads add into a shared key/value head and take the per-sequence path. */
#include <mma.h>

#include "cuda_attention.h"

using namespace nvcuda;

#define TILE 64
#define KSTEP 32
#define PAD 4

/* the sequence of item (s) and where its probabilities start: a loop over the earlier sequences */
__device__ static void sequence_of(const int *offsets, int s, int A, int *o, int *l, long long *p0)
{
    long long acc = 0;
    for (int q = 0; q < s; q++) {
        const long long lq = offsets[q + 1] - offsets[q];
        acc += (long long)A * lq * lq;
    }
    *o = offsets[s], *l = offsets[s + 1] - offsets[s], *p0 = acc;
}

__global__ void __launch_bounds__(128) attn_tc_kernel(attn_product p, const int *offsets, int A, int D)
{
    __shared__ __align__(128) float As[TILE][KSTEP + PAD]; /* op(A) tile: [i][kk] */
    __shared__ __align__(128) float Bs[KSTEP][TILE + PAD]; /* op(B) tile: [kk][j] */
    __shared__ __align__(128) float Cs[TILE][TILE + PAD];  /* the result tile, [i][j] */
    const int item = blockIdx.z, s = item / A, h = item % A;
    int o, l;
    long long p0;
    sequence_of(offsets, s, A, &o, &l, &p0);
    const int m = p.m_l ? l : D, n = p.n_l ? l : D, k = p.k_l ? l : D;
    const int i0 = blockIdx.x * TILE, j0 = blockIdx.y * TILE;
    if (i0 >= m || j0 >= n) return;
    const float *Ap = operand_at(&p.a, o, l, p0, h), *Bp = operand_at(&p.b, o, l, p0, h);
    float *Cp = (float *)operand_at(&p.c, o, l, p0, h);
    const int lda = ld_of(&p.a, l), ldb = ld_of(&p.b, l), ldc = ld_of(&p.c, l);
    const int tid = threadIdx.x, warp = tid / 32, wm = warp / 2, wn = warp % 2;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2][2];
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            wmma::fill_fragment(acc[a][b], 0.0f);
    for (int k0 = 0; k0 < k; k0 += KSTEP) {
        /* op(A)[i][kk] = ta ? A[kk + i lda] : A[i + kk lda]; consecutive threads on the contiguous index */
        for (int e = tid; e < TILE * KSTEP; e += 128) {
            int i, kk;
            if (p.ta)
                i = e / KSTEP, kk = e % KSTEP;
            else
                kk = e / TILE, i = e % TILE;
            const int gi = i0 + i, gk = k0 + kk;
            float v = 0.0f;
            if (gi < m && gk < k) v = p.ta ? Ap[gk + (long long)gi * lda] : Ap[gi + (long long)gk * lda];
            As[i][kk] = v;
        }
        /* op(B)[kk][j] = tb ? B[j + kk ldb] : B[kk + j ldb] */
        for (int e = tid; e < KSTEP * TILE; e += 128) {
            int j, kk;
            if (p.tb)
                kk = e / TILE, j = e % TILE;
            else
                j = e / KSTEP, kk = e % KSTEP;
            const int gj = j0 + j, gk = k0 + kk;
            float v = 0.0f;
            if (gj < n && gk < k) v = p.tb ? Bp[gj + (long long)gk * ldb] : Bp[gk + (long long)gj * ldb];
            Bs[kk][j] = v;
        }
        __syncthreads();
        for (int kk = 0; kk < KSTEP; kk += 8) {
            wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb[2];
            for (int a = 0; a < 2; a++) {
                wmma::load_matrix_sync(fa[a], &As[wm * 32 + a * 16][kk], KSTEP + PAD);
                for (int t = 0; t < fa[a].num_elements; t++)
                    fa[a].x[t] = wmma::__float_to_tf32(fa[a].x[t]);
            }
            for (int b = 0; b < 2; b++) {
                wmma::load_matrix_sync(fb[b], &Bs[kk][wn * 32 + b * 16], TILE + PAD);
                for (int t = 0; t < fb[b].num_elements; t++)
                    fb[b].x[t] = wmma::__float_to_tf32(fb[b].x[t]);
            }
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++)
                    wmma::mma_sync(acc[a][b], fa[a], fb[b], acc[a][b]);
        }
        __syncthreads();
    }
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            wmma::store_matrix_sync(&Cs[wm * 32 + a * 16][wn * 32 + b * 16], acc[a][b], TILE + PAD,
                                    wmma::mem_row_major);
    __syncthreads();
    /* C is column-major: consecutive threads down a column */
    for (int e = tid; e < TILE * TILE; e += 128) {
        const int j = e / TILE, i = e % TILE, gi = i0 + i, gj = j0 + j;
        if (gi >= m || gj >= n) continue;
        float *cp = Cp + gi + (long long)gj * ldc;
        const float v = p.alpha * Cs[i][j];
        *cp = p.beta == 0.0f ? v : v + p.beta * *cp;
    }
}

void cu_attn_tc_gemm(cu_ctx *c, const attn_product *p, const rt_dev_batch *b, int A, int D)
{
    if (c->failure[0] || b->B <= 0) return;
    int lmax = 0;
    for (int s = 0; s < b->B; s++)
        lmax = b->offsets_host[s + 1] - b->offsets_host[s] > lmax
                   ? b->offsets_host[s + 1] - b->offsets_host[s]
                   : lmax;
    if (lmax <= 0) return;
    const int mmax = p->m_l ? lmax : D, nmax = p->n_l ? lmax : D;
    if (b->B * A > 65535) {
        cu_fail(c, __FILE__, __LINE__, "cu_attn_tc_gemm", "more than 65535 sequence heads in a micro-batch",
                "a smaller micro-batch");
        return;
    }
    dim3 grid((unsigned)((mmax + TILE - 1) / TILE), (unsigned)((nmax + TILE - 1) / TILE),
              (unsigned)(b->B * A));
    attn_tc_kernel<<<grid, 128, 0, c->compute>>>(*p, b->offsets, A, D);
    CU_CHECK_LAUNCH(c, "attn_tc_kernel");
}

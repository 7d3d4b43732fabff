/* cuBLASLt products with their descriptors kept (cuda_internal.h: cu_lt_gemm). A product's shape (sizes,
 * leading dimensions, batch and strides, types, epilogue, and the pointers' alignments, since cuBLASLt's
 * heuristic assumes 256-byte alignment unless told) keys a hash table of plans: descriptors, layouts and an
 * algorithm. Token counts change with every micro-batch, so a shape is new at almost every step; asking the
 * heuristic each time cost up to milliseconds on the host while the GPU waited (measured on an H200,
 * 2026-12-04: 3.5 to 5.5 ms for the first product of a new token count). A new shape therefore first tries
 * the algorithm found for its class (sizes rounded up: size_class; leading dimensions by their alignment),
 * checked for this shape with
 * cublasLtMatmulAlgoCheck, and asks the heuristic only when there is none or it does not fit. The table is
 * emptied when it passes 16384 plans (the classes' algorithms stay). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

typedef struct cu_gemm_key {
    int ta, tb, m, n, k, lda, ldb, ldc, batch, bias, ab_type, compute;
    long long sa, sb, sc;
    int align_a, align_b, align_c;
} cu_gemm_key;

struct cu_gemm_plan {
    cu_gemm_key key;
    int used;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
};

typedef struct cu_algo_entry {
    cu_gemm_key key; /* the class: sizes rounded up */
    int used;
    cublasLtMatmulAlgo_t algo;
} cu_algo_entry;

#define CU_MAX_PLANS 16384

static int alignment_of(const void *p)
{
    const uintptr_t u = (uintptr_t)p;
    int a = 256;
    while (a > 4 && u % (uintptr_t)a)
        a /= 2;
    return a;
}

static uint64_t hash_key(const cu_gemm_key *k)
{
    const unsigned char *b = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof *k; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void destroy_plan(cu_gemm_plan *p)
{
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->c) cublasLtMatrixLayoutDestroy(p->c);
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    memset(p, 0, sizeof *p);
}

void cu_gemm_free_plans(cu_ctx *c)
{
    for (int i = 0; i < c->cap_plans; i++)
        if (c->plans[i].used) destroy_plan(&c->plans[i]);
    free(c->plans), free(c->algos);
    c->plans = NULL, c->n_plans = c->cap_plans = 0;
    c->algos = NULL, c->n_algos = c->cap_algos = 0;
}

/* the slot of `key` in an open-addressing table of `cap` (a power of two) entries of `size` bytes whose
 * first members are the key and `used` */
static void *slot_of(void *table, size_t size, int cap, const cu_gemm_key *key)
{
    for (uint64_t i = hash_key(key) & (uint64_t)(cap - 1);; i = (i + 1) & (uint64_t)(cap - 1)) {
        char *e = (char *)table + i * size;
        const cu_gemm_key *k = (const cu_gemm_key *)e;
        const int used = *(const int *)(e + sizeof(cu_gemm_key));
        if (!used || memcmp(k, key, sizeof *key) == 0) return e;
    }
}

/* a table of `cap` entries of `size` bytes moved into one of `new_cap` (NULL when out of memory) */
static void *rehash(void *table, int cap, int new_cap, size_t size)
{
    char *t = (char *)calloc((size_t)new_cap, size);
    if (!t) return NULL;
    for (int i = 0; i < cap; i++) {
        const char *e = (const char *)table + (size_t)i * size;
        if (*(const int *)(e + sizeof(cu_gemm_key)))
            memcpy(slot_of(t, size, new_cap, (const cu_gemm_key *)e), e, size);
    }
    free(table);
    return t;
}

/* tables at most half full: grown (rehashed) or, for plans past CU_MAX_PLANS, emptied */
static int make_room(cu_ctx *c)
{
    if (2 * (c->n_plans + 1) > c->cap_plans && c->n_plans >= CU_MAX_PLANS) {
        for (int i = 0; i < c->cap_plans; i++)
            if (c->plans[i].used) destroy_plan(&c->plans[i]);
        c->n_plans = 0;
    } else if (2 * (c->n_plans + 1) > c->cap_plans) {
        const int cap = c->cap_plans ? 2 * c->cap_plans : 1024;
        void *t = rehash(c->plans, c->cap_plans, cap, sizeof *c->plans);
        if (!t) return -1;
        c->plans = (cu_gemm_plan *)t, c->cap_plans = cap;
    }
    if (2 * (c->n_algos + 1) > c->cap_algos) {
        const int cap = c->cap_algos ? 2 * c->cap_algos : 256;
        void *t = rehash(c->algos, c->cap_algos, cap, sizeof *c->algos);
        if (!t) return -1;
        c->algos = (cu_algo_entry *)t, c->cap_algos = cap;
    }
    return 0;
}

static cublasLtMatrixLayout_t make_layout(cu_ctx *c, cudaDataType_t type, int rows, int cols, int ld,
                                          int batch, long long stride)
{
    cublasLtMatrixLayout_t l = NULL;
    LT_CHECK(c, cublasLtMatrixLayoutCreate(&l, type, (uint64_t)rows, (uint64_t)cols, (int64_t)ld),
             "describing a product's operand");
    if (batch > 1 && l) {
        int32_t b = batch;
        int64_t s = stride;
        LT_CHECK(c, cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b),
                 "setting a batch count");
        LT_CHECK(
            c, cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof s),
            "setting a batch stride");
    }
    return l;
}

/* a size's class: a multiple of 128 up to 1024, of 512 up to 8192, then of 2048 */
static int size_class(int x)
{
    const int step = x <= 1024 ? 128 : x <= 8192 ? 512 : 2048;
    return (x + step - 1) / step * step;
}

/* the class of a shape: sizes by size_class, leading dimensions and strides by their alignment */
static cu_gemm_key class_of(const cu_gemm_key *k)
{
    cu_gemm_key r = *k;
    r.m = size_class(k->m), r.n = size_class(k->n), r.k = size_class(k->k);
    r.lda = k->lda % 8, r.ldb = k->ldb % 8, r.ldc = k->ldc % 8;
    r.sa = k->sa % 8, r.sb = k->sb % 8, r.sc = k->sc % 8;
    r.batch = k->batch > 1;
    return r;
}

/* the heuristic's algorithm for the plan's exact shape; 0 when it has one */
static int ask_heuristic(cu_ctx *c, cu_gemm_plan *p)
{
    const cu_gemm_key *key = &p->key;
    cublasLtMatmulPreference_t pref = NULL;
    LT_CHECK(c, cublasLtMatmulPreferenceCreate(&pref), "creating a heuristic preference");
    if (!pref) return -1;
    const uint64_t ws = c->workspace_bytes;
    LT_CHECK(
        c,
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
        "setting the workspace");
    /* the operands' alignments (D is C) */
    const cublasLtMatmulPreferenceAttributes_t attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t align[4] = {(uint32_t)key->align_a, (uint32_t)key->align_b, (uint32_t)key->align_c,
                               (uint32_t)key->align_c};
    for (int i = 0; i < 4; i++)
        LT_CHECK(c, cublasLtMatmulPreferenceSetAttribute(pref, attr[i], &align[i], sizeof align[i]),
                 "setting an operand's alignment");
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    memset(&result, 0, sizeof result);
    LT_CHECK(c,
             cublasLtMatmulAlgoGetHeuristic(c->lt, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found),
             "asking cuBLASLt's heuristic for an algorithm");
    cublasLtMatmulPreferenceDestroy(pref);
    if (c->failure[0]) return -1;
    if (found == 0) {
        char what[200];
        snprintf(what, sizeof what, "no algorithm for m %d n %d k %d (lda %d ldb %d ldc %d, batch %d)",
                 key->m, key->n, key->k, key->lda, key->ldb, key->ldc, key->batch);
        cu_fail(c, __FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic", what, "a shape cuBLASLt cannot run");
        return -1;
    }
    p->algo = result.algo;
    return 0;
}

/* the plan of this exact shape, made on first use; NULL after a failure */
static cu_gemm_plan *plan_of(cu_ctx *c, const cu_gemm_key *key)
{
    if (c->cap_plans) {
        cu_gemm_plan *p = (cu_gemm_plan *)slot_of(c->plans, sizeof *p, c->cap_plans, key);
        if (p->used) return p;
    }
    if (make_room(c)) {
        cu_fail(c, __FILE__, __LINE__, "calloc", "out of host memory", "keeping the products' plans");
        return NULL;
    }
    cu_gemm_plan q;
    memset(&q, 0, sizeof q);
    q.key = *key;
    const cudaDataType_t ab = (cudaDataType_t)key->ab_type;
    LT_CHECK(c, cublasLtMatmulDescCreate(&q.desc, (cublasComputeType_t)key->compute, CUDA_R_32F),
             "creating a product's descriptor");
    const cublasOperation_t ta = key->ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                            tb = key->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_CHECK(c, cublasLtMatmulDescSetAttribute(q.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
             "setting op(A)");
    LT_CHECK(c, cublasLtMatmulDescSetAttribute(q.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
             "setting op(B)");
    if (key->bias) {
        const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        LT_CHECK(c, cublasLtMatmulDescSetAttribute(q.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
                 "setting the bias epilogue");
    }
    q.a = make_layout(c, ab, key->ta ? key->k : key->m, key->ta ? key->m : key->k, key->lda, key->batch,
                      key->sa);
    q.b = make_layout(c, ab, key->tb ? key->n : key->k, key->tb ? key->k : key->n, key->ldb, key->batch,
                      key->sb);
    q.c = make_layout(c, CUDA_R_32F, key->m, key->n, key->ldc, key->batch, key->sc);
    if (c->failure[0]) {
        destroy_plan(&q);
        return NULL;
    }
    /* the class's algorithm when it fits this shape, else the heuristic's (then kept for the class) */
    const cu_gemm_key cls = class_of(key);
    cu_algo_entry *a = (cu_algo_entry *)slot_of(c->algos, sizeof *a, c->cap_algos, &cls);
    int have = 0;
    if (a->used) {
        cublasLtMatmulHeuristicResult_t check;
        memset(&check, 0, sizeof check);
        if (cublasLtMatmulAlgoCheck(c->lt, q.desc, q.a, q.b, q.c, q.c, &a->algo, &check) ==
                CUBLAS_STATUS_SUCCESS &&
            check.workspaceSize <= c->workspace_bytes)
            q.algo = a->algo, have = 1;
    }
    if (!have) {
        if (ask_heuristic(c, &q)) {
            destroy_plan(&q);
            return NULL;
        }
        if (!a->used) c->n_algos++;
        a->key = cls, a->used = 1, a->algo = q.algo;
    }
    q.used = 1;
    cu_gemm_plan *p = (cu_gemm_plan *)slot_of(c->plans, sizeof *p, c->cap_plans, key);
    *p = q;
    c->n_plans++;
    return p;
}

void cu_lt_gemm(cu_ctx *c, cublasComputeType_t compute, cudaDataType_t ab_type, bool ta, bool tb, int m,
                int n, int k, float alpha, const void *A, int lda, long long sa, const void *B, int ldb,
                long long sb, float beta, float *C, int ldc, long long sc, int batch, const float *bias)
{
    if (c->failure[0] || m <= 0 || n <= 0 || batch <= 0) return;
    if (k <= 0) { /* an empty sum: accumulating nothing is nothing to do; anything else is not expected */
        if (beta != 1.0f || bias)
            cu_fail(c, __FILE__, __LINE__, "cu_lt_gemm", "a product with no inner dimension",
                    "an empty batch");
        return;
    }
    cu_gemm_key key;
    memset(&key, 0, sizeof key); /* padding too: keys are hashed and compared as bytes */
    key.ta = ta, key.tb = tb, key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldc = ldc;
    key.batch = batch, key.bias = bias != NULL, key.ab_type = (int)ab_type, key.compute = (int)compute;
    key.sa = batch > 1 ? sa : 0, key.sb = batch > 1 ? sb : 0, key.sc = batch > 1 ? sc : 0;
    key.align_a = alignment_of(A), key.align_b = alignment_of(B), key.align_c = alignment_of(C);
    cu_gemm_plan *p = plan_of(c, &key);
    if (!p) return;
    if (bias)
        LT_CHECK(
            c, cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
            "setting the bias");
    LT_CHECK(c,
             cublasLtMatmul(c->lt, p->desc, &alpha, A, p->a, B, p->b, &beta, C, p->c, C, p->c, &p->algo,
                            c->workspace, c->workspace_bytes, c->compute),
             "a matrix product");
}

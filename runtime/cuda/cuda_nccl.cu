/* rt_comm over NCCL (rt_comm.h): the gradients' summing all-reduces on the CUDA backend's communication
 * stream, each after the compute-stream event that says its bucket is ready, so they run beside the rest
 * of backward; wait_all makes the compute stream (not the host) wait for them before the optimizer. The
 * experts' all-to-alls are grouped sends and receives on the compute stream, in order with the kernels
 * around them. The host's small collectives (the loss, timings, flags, routing counts) go through the
 * bootstrap communicator (MPI, or one rank alone), which also broadcasts rank 0's NCCL unique id.
 *
 * Every CUDA and NCCL call is checked; the first failure is kept as "file:line: call: what (hint)" (with
 * NCCL's own last error where it has one), returned by `failure`, and every later call returns -1 at once. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

extern "C" {
#include "rt_comm.h"
}

typedef struct nccl_ctx {
    rt_comm *boot; /* owned: host collectives and the unique id's broadcast */
    cu_ctx *cu;    /* the backend's device and streams */
    ncclComm_t world, expert, expert_data;
    int x;           /* expert-parallel group size (0: not set) */
    cudaEvent_t *ev; /* per slot: its reduction's completion on the communication stream */
    int *started;    /* per slot: started and not yet seen complete */
    int slots;
    cudaEvent_t mark; /* the compute stream's point where a reduction without a `ready` event starts */
    char failure[640];
} nccl_ctx;

static int nccl_fail(nccl_ctx *x, const char *file, int line, const char *call, const char *what,
                     const char *hint)
{
    if (x->failure[0]) return -1;
    const char *last = x->world ? ncclGetLastError(x->world) : NULL;
    snprintf(x->failure, sizeof x->failure, "%s:%d: %s: %s (%s)%s%s", file, line, call, what, hint,
             last && last[0] ? "; NCCL: " : "", last && last[0] ? last : "");
    return -1;
}

/* a call of `type` checked against `ok`, its error named by `what` (NCCL's or CUDA's) */
#define NC_CHECK(x, type, ok, what, call, hint)                                                              \
    do {                                                                                                     \
        if (!(x)->failure[0]) {                                                                              \
            type r_ = (call);                                                                                \
            if (r_ != (ok)) nccl_fail((x), __FILE__, __LINE__, #call, what(r_), (hint));                     \
        }                                                                                                    \
    } while (0)
#define NC_NCCL(x, call, hint) NC_CHECK(x, ncclResult_t, ncclSuccess, ncclGetErrorString, call, hint)
#define NC_CUDA(x, call, hint) NC_CHECK(x, cudaError_t, cudaSuccess, cudaGetErrorString, call, hint)

static nccl_ctx *nc_of(const rt_comm *c)
{
    return (nccl_ctx *)c->ctx;
}

static int grow(nccl_ctx *x, int slot)
{
    if (slot < x->slots) return 0;
    int n = x->slots ? x->slots : 16;
    while (n <= slot)
        n *= 2;
    cudaEvent_t *ev = (cudaEvent_t *)realloc(x->ev, (size_t)n * sizeof *ev);
    if (!ev) return nccl_fail(x, __FILE__, __LINE__, "realloc", "out of host memory", "the buckets' events");
    x->ev = ev;
    int *started = (int *)realloc(x->started, (size_t)n * sizeof *started);
    if (!started)
        return nccl_fail(x, __FILE__, __LINE__, "realloc", "out of host memory", "the buckets' events");
    x->started = started;
    for (int k = x->slots; k < n; k++) {
        x->ev[k] = NULL, x->started[k] = 0;
        NC_CUDA(x, cudaEventCreateWithFlags(&x->ev[k], cudaEventDisableTiming),
                "a bucket's completion event");
    }
    x->slots = n;
    return x->failure[0] ? -1 : 0;
}

/* A NCCL sum of buf over `comm`, on the communication stream after `ready` (else after the compute stream's
 * work so far), its completion marked in the slot's event and `done`. */
static int start(rt_comm *c, ncclComm_t comm, float *buf, size_t n, int slot, rt_event *ready, rt_event *done)
{
    nccl_ctx *x = nc_of(c);
    if (x->failure[0] || slot < 0 || grow(x, slot)) return -1;
    cudaStream_t s = x->cu->comm;
    if (!ready) {
        NC_CUDA(x, cudaEventRecord(x->mark, x->cu->compute), "marking the compute stream before a reduction");
        NC_CUDA(x, cudaStreamWaitEvent(s, x->mark, 0), "a reduction waiting for the compute stream");
    } else {
        NC_CUDA(x, cudaStreamWaitEvent(s, (cudaEvent_t)ready, 0), "a reduction waiting for its bucket");
    }
    NC_NCCL(x, ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, s), "a gradient bucket's all-reduce");
    /* the caller's event first: the slot's, which wait_all orders the compute stream after, then follows it,
     * so once the compute stream has passed its wait, `done` is complete too (its time can be read) */
    if (done) NC_CUDA(x, cudaEventRecord((cudaEvent_t)done, s), "marking a reduction's completion");
    NC_CUDA(x, cudaEventRecord(x->ev[slot], s), "marking a reduction's completion");
    x->started[slot] = 1;
    return x->failure[0] ? -1 : 0;
}

static int nc_allreduce_start(rt_comm *c, float *buf, size_t n, int slot, rt_event *ready, rt_event *done)
{
    return start(c, nc_of(c)->world, buf, n, slot, ready, done);
}

/* a failure NCCL found in the background (a peer gone, a network error) */
static int async_error(nccl_ctx *x)
{
    ncclComm_t comms[3] = {x->world, x->expert, x->expert_data};
    for (int i = 0; i < 3 && !x->failure[0]; i++) {
        ncclResult_t r = ncclSuccess;
        if (!comms[i]) continue;
        NC_NCCL(x, ncclCommGetAsyncError(comms[i], &r), "asking NCCL for a background error");
        if (r != ncclSuccess && r != ncclInProgress)
            nccl_fail(x, __FILE__, __LINE__, "ncclCommGetAsyncError", ncclGetErrorString(r),
                      "a collective failed in the background: a peer stopped, or the network failed");
    }
    return x->failure[0] ? -1 : 0;
}

static int nc_test(rt_comm *c, int slot)
{
    nccl_ctx *x = nc_of(c);
    if (x->failure[0]) return -1;
    if (slot < 0 || slot >= x->slots || !x->started[slot]) return 1;
    const cudaError_t q = cudaEventQuery(x->ev[slot]);
    if (q == cudaSuccess) { /* seen complete: later tests answer at once, and wait_all has nothing to order */
        x->started[slot] = 0;
        return 1;
    }
    if (q != cudaErrorNotReady)
        return nccl_fail(x, __FILE__, __LINE__, "cudaEventQuery", cudaGetErrorString(q),
                         "a reduction, or a kernel before it, failed on the device");
    return async_error(x) ? -1 : 0;
}

static int nc_wait_all(rt_comm *c, int n_slots)
{
    nccl_ctx *x = nc_of(c);
    for (int k = 0; k < n_slots && k < x->slots; k++) {
        if (!x->started[k]) continue;
        NC_CUDA(x, cudaStreamWaitEvent(x->cu->compute, x->ev[k], 0), "the optimizer waiting for a reduction");
        x->started[k] = 0;
    }
    return x->failure[0] || async_error(x) ? -1 : 0;
}

static int nc_sum_doubles(rt_comm *c, double *v, int n)
{
    rt_comm *b = nc_of(c)->boot;
    return b->allreduce_sum_doubles(b, v, n);
}

static int nc_gather_doubles(rt_comm *c, const double *send, int n, double *recv)
{
    rt_comm *b = nc_of(c)->boot;
    return b->gather_doubles(b, send, n, recv);
}

static int nc_broadcast_int(rt_comm *c, int *v)
{
    rt_comm *b = nc_of(c)->boot;
    return b->broadcast_int(b, v);
}

static int nc_broadcast_bytes(rt_comm *c, void *buf, int n)
{
    rt_comm *b = nc_of(c)->boot;
    return b->broadcast_bytes(b, buf, n);
}

static int nc_max_double(rt_comm *c, double *v)
{
    rt_comm *b = nc_of(c)->boot;
    return b->max_double(b, v);
}

static int nc_set_expert_groups(rt_comm *c, int groups_of)
{
    nccl_ctx *x = nc_of(c);
    if (x->failure[0] || groups_of < 1 || c->size % groups_of || x->x) return -1;
    if (x->boot->set_expert_groups(x->boot, groups_of)) return -1; /* the routing counts' exchange */
    x->x = groups_of;
    NC_NCCL(x, ncclCommSplit(x->world, c->rank / groups_of, c->rank, &x->expert, NULL),
            "the communicator of a rank's expert group");
    NC_NCCL(x, ncclCommSplit(x->world, c->rank % groups_of, c->rank, &x->expert_data, NULL),
            "the communicator of the ranks holding the same experts");
    return x->failure[0] ? -1 : 0;
}

/* the experts' rows to and from each member of the group: grouped sends and receives on the compute stream
 * (a member's own rows included: NCCL copies them) */
static int nc_expert_alltoallv(rt_comm *c, const float *send, const int *send_counts, float *recv,
                               const int *recv_counts)
{
    nccl_ctx *x = nc_of(c);
    if (x->failure[0] || !x->x) return -1;
    size_t so = 0, ro = 0;
    NC_NCCL(x, ncclGroupStart(), "grouping the experts' sends and receives");
    for (int i = 0; i < x->x && !x->failure[0]; i++) {
        NC_NCCL(x, ncclSend(send + so, (size_t)send_counts[i], ncclFloat, i, x->expert, x->cu->compute),
                "sending rows to an expert's rank");
        NC_NCCL(x, ncclRecv(recv + ro, (size_t)recv_counts[i], ncclFloat, i, x->expert, x->cu->compute),
                "receiving rows from a member of the expert group");
        so += (size_t)send_counts[i], ro += (size_t)recv_counts[i];
    }
    NC_NCCL(x, ncclGroupEnd(), "the experts' all-to-all");
    return x->failure[0] ? -1 : 0;
}

static int nc_expert_alltoall_ints(rt_comm *c, const int *send, int *recv, int n)
{
    rt_comm *b = nc_of(c)->boot;
    return b->expert_alltoall_ints(b, send, recv, n);
}

static int nc_expert_allreduce_start(rt_comm *c, float *buf, size_t n, int slot, rt_event *ready,
                                     rt_event *done)
{
    nccl_ctx *x = nc_of(c);
    if (!x->x) return -1;
    return start(c, x->expert_data, buf, n, slot, ready, done);
}

static const char *nc_failure(const rt_comm *c)
{
    const nccl_ctx *x = nc_of(c);
    return x->failure[0] ? x->failure : NULL;
}

static void nc_free(nccl_ctx *x)
{
    if (!x) return;
    if (x->expert) ncclCommDestroy(x->expert);
    if (x->expert_data) ncclCommDestroy(x->expert_data);
    if (x->world) ncclCommDestroy(x->world);
    for (int k = 0; k < x->slots; k++)
        if (x->ev[k]) cudaEventDestroy(x->ev[k]);
    if (x->mark) cudaEventDestroy(x->mark);
    free(x->ev), free(x->started);
    free(x);
}

static void nc_destroy(rt_comm *c)
{
    if (!c) return;
    nccl_ctx *x = nc_of(c);
    rt_comm *boot = x ? x->boot : NULL;
    nc_free(x);
    if (boot) boot->destroy(boot);
    free(c);
}

extern "C" rt_comm *rt_comm_nccl_create(rt_comm *boot, rt_backend *be, et_error *err)
{
    if (!be || strcmp(be->name, "cuda") != 0) {
        et_error_set(err, NULL, 0, 0, NULL, "NCCL's communicator needs the cuda backend (given %s)",
                     be ? be->name : "none");
        return NULL;
    }
    rt_comm *c = (rt_comm *)calloc(1, sizeof *c);
    nccl_ctx *x = (nccl_ctx *)calloc(1, sizeof *x);
    if (!c || !x) {
        free(x), free(c);
        et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                          "out of memory creating NCCL's communicator");
        return NULL;
    }
    x->cu = cu_of(be);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    int bad = 0;
    if (boot->rank == 0) {
        NC_NCCL(x, ncclGetUniqueId(&id),
                "rank 0 making NCCL's unique id (NCCL_SOCKET_IFNAME may name the "
                "interface to bootstrap on)");
        bad = x->failure[0] != 0;
    }
    /* every rank learns whether rank 0 has an id before waiting for it */
    if (boot->broadcast_int(boot, &bad) || (bad && !x->failure[0]))
        nccl_fail(x, __FILE__, __LINE__, "ncclGetUniqueId", "failed on rank 0", "see rank 0's message");
    if (!x->failure[0] && boot->broadcast_bytes(boot, &id, (int)sizeof id))
        nccl_fail(x, __FILE__, __LINE__, "broadcast_bytes", "the bootstrap broadcast failed",
                  "rank 0's NCCL unique id");
    NC_CUDA(x, cudaSetDevice(x->cu->device), "selecting the backend's device for NCCL");
    NC_NCCL(x, ncclCommInitRank(&x->world, boot->size, id, boot->rank),
            "joining NCCL's communicator (NCCL_DEBUG=INFO says why)");
    NC_CUDA(x, cudaEventCreateWithFlags(&x->mark, cudaEventDisableTiming), "the compute stream's mark");
    if (x->failure[0]) {
        et_error_set_code(err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL, "NCCL: %s", x->failure);
        nc_free(x);
        free(c);
        return NULL;
    }
    x->boot = boot;
    c->name = "nccl";
    c->rank = boot->rank, c->size = boot->size;
    c->local_rank = boot->local_rank, c->local_size = boot->local_size;
    c->be = be;
    c->ctx = x;
    c->allreduce_start = nc_allreduce_start;
    c->test = nc_test;
    c->wait_all = nc_wait_all;
    c->allreduce_sum_doubles = nc_sum_doubles;
    c->gather_doubles = nc_gather_doubles;
    c->broadcast_int = nc_broadcast_int;
    c->broadcast_bytes = nc_broadcast_bytes;
    c->max_double = nc_max_double;
    c->set_expert_groups = nc_set_expert_groups;
    c->expert_alltoallv = nc_expert_alltoallv;
    c->expert_alltoall_ints = nc_expert_alltoall_ints;
    c->expert_allreduce_start = nc_expert_allreduce_start;
    c->failure = nc_failure;
    c->destroy = nc_destroy;
    return c;
}

/* rt_comm: the communication etrun's data parallelism needs, as one table per implementation (MPI, NCCL
 * with the CUDA backend, one rank alone): start a summing all-reduce of a gradient slice in place, test or
 * wait for it, and the small blocking collectives of the step's bookkeeping.
 *
 * Buffers passed to allreduce_start are the memory of the backend `be` (host memory for the CPU backend
 * and MPI). Each started all-reduce has a slot (0, 1, ...: the bucket index); a slot is reused only after
 * wait_all. Events (rt_backend.h) order the reductions with the backend's streams: `ready` (NULL: the
 * buffer is ready now) was recorded on the compute stream after the last write to the buffer, and the
 * reduction reads it only after that point; `done` (may be NULL) is recorded once the reduction is
 * complete: NCCL records it on the communication stream after the collective, MPI when the host first
 * sees the reduction complete (in test or wait_all). test() returns 1 once the slot's reduction has
 * completed, 0 before, and lets the implementation progress it, never waiting. After wait_all the compute
 * stream's later work sees every started reduction: NCCL makes the compute stream wait for them (the host
 * does not), MPI waits on the host.
 *
 * Errors: the functions return non-zero and the run stops; `failure` (may be NULL) names the first error
 * with file:line and a hint where the implementation keeps one (NCCL). MPI's default error handler on
 * MPI_COMM_WORLD is MPI_ERRORS_ARE_FATAL: a failed MPI call aborts the whole job inside MPI, with MPI's
 * message, before any code returns; the codes are checked for handlers that return (MPI_ERRORS_RETURN).
 * Ownership: the caller destroys the communicator. */
#ifndef ET_RT_COMM_H
#define ET_RT_COMM_H

#include <stddef.h>

#include "et_error.h"
#include "rt_backend.h"

typedef struct rt_comm rt_comm;
struct rt_comm {
    const char *name; /* "mpi", "nccl", "single" */
    int rank, size;
    int local_rank, local_size; /* among the ranks on this host (a GPU backend's device: rt_backend.h) */
    rt_backend *be;             /* whose memory and events the all-reduces take (rt_comm_use_backend) */
    void *ctx;
    int (*allreduce_start)(rt_comm *c, float *buf, size_t n, int slot, rt_event *ready, rt_event *done);
    int (*test)(rt_comm *c, int slot);
    int (*wait_all)(rt_comm *c, int n_slots);
    int (*allreduce_sum_doubles)(rt_comm *c, double *v, int n);                 /* blocking, in place */
    int (*gather_doubles)(rt_comm *c, const double *send, int n, double *recv); /* to rank 0: size * n */
    int (*broadcast_int)(rt_comm *c, int *v);                                   /* from rank 0 */
    int (*broadcast_bytes)(rt_comm *c, void *buf, int n);                       /* from rank 0 */
    int (*max_double)(rt_comm *c, double *v);                                   /* blocking, in place */
    /* Expert parallelism over groups of x consecutive ranks (set_expert_groups, once, collective): the
     * all-to-alls of the experts' rows inside a rank's group (counts and displacements in floats, one per
     * member; in order with the compute stream's kernels: blocking on MPI, on the compute stream with
     * NCCL), the routing counts' exchange (n host ints to and from each member; blocking), and the reduction
     * of expert gradients over the ranks holding the same experts (rank % x alike; a slot and events as
     * allreduce_start). */
    int (*set_expert_groups)(rt_comm *c, int x);
    int (*expert_alltoallv)(rt_comm *c, const float *send, const int *send_counts, float *recv,
                            const int *recv_counts);
    int (*expert_alltoall_ints)(rt_comm *c, const int *send, int *recv, int n);
    int (*expert_allreduce_start)(rt_comm *c, float *buf, size_t n, int slot, rt_event *ready,
                                  rt_event *done);
    const char *(*failure)(const rt_comm *c);
    void (*destroy)(rt_comm *c);
};

/* The communicator's first error text, or NULL (none, or an implementation that keeps none). */
static inline const char *rt_comm_why(const rt_comm *c)
{
    return c->failure ? c->failure(c) : NULL;
}

/* The backend whose memory and events the communicator takes from now on (before the first all-reduce). */
static inline void rt_comm_use_backend(rt_comm *c, rt_backend *be)
{
    c->be = be;
}

/* For host-driven implementations (MPI, one rank): the host waits until `ready` was reached (at once on the
 * CPU, where it always has been); `done` marks the reduction's completion now; a reduction over one rank
 * is complete once its buffer is ready, which `done` then marks without the host waiting. */
static inline void rt_comm_host_ready(rt_comm *c, rt_event *ready)
{
    if (ready && c->be && !c->be->event_done(c->be, ready)) c->be->event_sync(c->be, ready);
}
static inline void rt_comm_host_done(rt_comm *c, rt_event *done)
{
    if (done && c->be) c->be->event_record(c->be, done, RT_STREAM_COMM);
}
static inline void rt_comm_done_when_ready(rt_comm *c, rt_event *ready, rt_event *done)
{
    if (ready && done && c->be) c->be->stream_wait(c->be, RT_STREAM_COMM, ready);
    rt_comm_host_done(c, done);
}

/* The job's processes: rt_comm_init starts them (MPI_Init; nothing for a build of one rank alone),
 * rt_comm_world_rank says which one this is, rt_comm_finalize ends them. */
void rt_comm_init(int *argc, char ***argv);
int rt_comm_world_rank(void);
void rt_comm_finalize(void);

/* Every rank of the job: MPI_COMM_WORLD in a normal build (rt_comm_mpi.c; slots grow as all-reduces
 * start), one rank alone in a device build without MPI (rt_comm_single.c: every collective is the
 * identity). */
rt_comm *rt_comm_create(et_error *err);

/* NCCL's communicator over the ranks of `boot` (made by rt_comm_create), on the CUDA backend `be`'s device
 * and communication stream (runtime/cuda/cuda_nccl.cu, where the build found NCCL: ET_HAVE_NCCL). Rank 0
 * makes NCCL's unique id and boot broadcasts it; the gradients' reductions run on the communication
 * stream, the experts' all-to-alls on the compute stream, the host collectives through boot. On success the
 * new communicator owns boot (destroying it destroys boot); NULL with *err (file:line and a hint) and boot
 * untouched otherwise. */
rt_comm *rt_comm_nccl_create(rt_comm *boot, rt_backend *be, et_error *err);

#endif

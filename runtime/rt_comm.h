/* rt_comm: the communication etrun's data parallelism needs, as one table per implementation (MPI now,
 * NCCL with the CUDA backend): start a summing all-reduce of a gradient slice in place, test or wait for
 * it, and the small blocking collectives of the step's bookkeeping.
 *
 * Buffers passed to allreduce_start are the backend's device memory (host memory for the CPU backend and
 * MPI). Each started all-reduce has a slot (0, 1, ...: the bucket index); a slot is reused only
 * after wait_all. test() returns 1 once the slot's reduction has completed, 0 before, and lets the
 * implementation progress it. Errors: the functions return non-zero and the run stops. MPI's default
 * error handler on MPI_COMM_WORLD is MPI_ERRORS_ARE_FATAL: a failed MPI call aborts the whole job inside
 * MPI, with MPI's message, before any code returns; the codes are checked for handlers that return
 * (MPI_ERRORS_RETURN). Ownership: the caller destroys the communicator. */
#ifndef ET_RT_COMM_H
#define ET_RT_COMM_H

#include <stddef.h>

#include "et_error.h"

typedef struct rt_comm rt_comm;
struct rt_comm {
    const char *name; /* "mpi", "nccl" */
    int rank, size;
    void *ctx;
    int (*allreduce_start)(rt_comm *c, float *buf, size_t n, int slot);
    int (*test)(rt_comm *c, int slot);
    int (*wait_all)(rt_comm *c, int n_slots);
    int (*allreduce_sum_doubles)(rt_comm *c, double *v, int n);                 /* blocking, in place */
    int (*gather_doubles)(rt_comm *c, const double *send, int n, double *recv); /* to rank 0: size * n */
    int (*broadcast_int)(rt_comm *c, int *v);                                   /* from rank 0 */
    int (*max_double)(rt_comm *c, double *v);                                   /* blocking, in place */
    /* Expert parallelism over groups of x consecutive ranks (set_expert_groups, once, collective): the
     * all-to-alls of the experts' rows inside a rank's group (counts and displacements in floats, one per
     * member; blocking), the routing counts' exchange (n ints to and from each member), and the reduction
     * of expert gradients over the ranks holding the same experts (rank % x alike; a slot as
     * allreduce_start). */
    int (*set_expert_groups)(rt_comm *c, int x);
    int (*expert_alltoallv)(rt_comm *c, const float *send, const int *send_counts, float *recv,
                            const int *recv_counts);
    int (*expert_alltoall_ints)(rt_comm *c, const int *send, int *recv, int n);
    int (*expert_allreduce_start)(rt_comm *c, float *buf, size_t n, int slot);
    void (*destroy)(rt_comm *c);
};

/* The job's processes: rt_comm_init starts them (MPI_Init; nothing for a build of one rank alone),
 * rt_comm_world_rank says which one this is, rt_comm_finalize ends them. */
void rt_comm_init(int *argc, char ***argv);
int rt_comm_world_rank(void);
void rt_comm_finalize(void);

/* Every rank of the job: MPI_COMM_WORLD in a normal build (rt_comm_mpi.c; slots grow as all-reduces
 * start), one rank alone in a device build without MPI (rt_comm_single.c: every collective is the
 * identity). */
rt_comm *rt_comm_create(et_error *err);

#endif

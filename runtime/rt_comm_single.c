/* rt_comm for one rank alone (a device build without MPI): every collective is the identity, every
 * all-reduce complete at once; expert parallelism needs more ranks than there are. */
#include <stdlib.h>
#include <string.h>

#include "rt_comm.h"

static int single_allreduce_start(rt_comm *c, float *buf, size_t n, int slot, rt_event *ready, rt_event *done)
{
    (void)buf, (void)n, (void)slot;
    rt_comm_done_when_ready(c, ready, done);
    return 0;
}

static int single_test(rt_comm *c, int slot)
{
    (void)c, (void)slot;
    return 1;
}

static int single_wait_all(rt_comm *c, int n_slots)
{
    (void)c, (void)n_slots;
    return 0;
}

static int single_doubles(rt_comm *c, double *v, int n)
{
    (void)c, (void)v, (void)n;
    return 0;
}

static int single_gather_doubles(rt_comm *c, const double *send, int n, double *recv)
{
    (void)c;
    memcpy(recv, send, (size_t)n * sizeof *recv);
    return 0;
}

static int single_int(rt_comm *c, int *v)
{
    (void)c, (void)v;
    return 0;
}

static int single_bytes(rt_comm *c, void *buf, int n)
{
    (void)c, (void)buf, (void)n;
    return 0;
}

static int single_double(rt_comm *c, double *v)
{
    (void)c, (void)v;
    return 0;
}

static int single_expert_groups(rt_comm *c, int x)
{
    (void)c;
    return x == 1 ? 0 : -1;
}

static int single_alltoallv(rt_comm *c, const float *send, const int *send_counts, float *recv,
                            const int *recv_counts)
{
    (void)c, (void)send, (void)send_counts, (void)recv, (void)recv_counts;
    return -1; /* groups of one never exchange: set_expert_groups refused any other */
}

static int single_alltoall_ints(rt_comm *c, const int *send, int *recv, int n)
{
    (void)c;
    memcpy(recv, send, (size_t)n * sizeof *recv);
    return 0;
}

static void single_destroy(rt_comm *c)
{
    free(c);
}

rt_comm *rt_comm_create(et_error *err)
{
    rt_comm *c = calloc(1, sizeof *c);
    if (!c) {
        et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory creating the communicator");
        return NULL;
    }
    *c = (rt_comm){.name = "single",
                   .rank = 0,
                   .size = 1,
                   .local_size = 1,
                   .allreduce_start = single_allreduce_start,
                   .test = single_test,
                   .wait_all = single_wait_all,
                   .allreduce_sum_doubles = single_doubles,
                   .gather_doubles = single_gather_doubles,
                   .broadcast_int = single_int,
                   .broadcast_bytes = single_bytes,
                   .max_double = single_double,
                   .set_expert_groups = single_expert_groups,
                   .expert_alltoallv = single_alltoallv,
                   .expert_alltoall_ints = single_alltoall_ints,
                   .expert_allreduce_start = single_allreduce_start,
                   .destroy = single_destroy};
    return c;
}

void rt_comm_init(int *argc, char ***argv)
{
    (void)argc, (void)argv;
}

int rt_comm_world_rank(void)
{
    return 0;
}

void rt_comm_finalize(void) {}

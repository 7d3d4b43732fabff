/* rt_comm over MPI: non-blocking MPI_Iallreduce per bucket on MPI_COMM_WORLD (one rank: nothing to do); the
 * host waits for a bucket's `ready` event before MPI reads it, and records its `done` event when it first
 * sees the reduction complete. */
#include <mpi.h>
#include <stdlib.h>

#include "rt_comm.h"

typedef struct mpi_ctx {
    int slots; /* grown as all-reduces start (request handles are values: moving them is safe) */
    MPI_Request *req;
    int *done;
    rt_event **done_ev;           /* per slot: the caller's event marking completion (NULL: none) */
    int x;                        /* expert-parallel group size (0: not set) */
    MPI_Comm expert, expert_data; /* a rank's group, and the ranks holding the same experts */
    int *displs;                  /* 2 x per all-to-all */
} mpi_ctx;

static int grow(mpi_ctx *x, int slot)
{
    if (slot < x->slots) return 0;
    int n = x->slots ? x->slots : 16;
    while (n <= slot)
        n *= 2;
    MPI_Request *req = realloc(x->req, (size_t)n * sizeof *req);
    if (!req) return -1;
    x->req = req;
    int *done = realloc(x->done, (size_t)n * sizeof *done);
    if (!done) return -1;
    x->done = done;
    rt_event **ev = realloc(x->done_ev, (size_t)n * sizeof *ev);
    if (!ev) return -1;
    x->done_ev = ev;
    for (int k = x->slots; k < n; k++)
        x->req[k] = MPI_REQUEST_NULL, x->done[k] = 1, x->done_ev[k] = NULL;
    x->slots = n;
    return 0;
}

static int ok(int rc)
{
    return rc == MPI_SUCCESS ? 0 : -1;
}

/* an Iallreduce of slot `slot` over `group` members of `world` (1: complete at once) */
static int start(rt_comm *c, float *buf, size_t n, int slot, rt_event *ready, rt_event *done, int group,
                 MPI_Comm world)
{
    mpi_ctx *x = c->ctx;
    if (slot < 0 || n > (size_t)0x7fffffff || grow(x, slot)) return -1;
    x->done[slot] = 0, x->done_ev[slot] = done;
    if (group == 1) {
        x->req[slot] = MPI_REQUEST_NULL, x->done[slot] = 1;
        rt_comm_done_when_ready(c, ready, done);
        return 0;
    }
    rt_comm_host_ready(c, ready);
    return ok(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, world, &x->req[slot]));
}

static int mpi_allreduce_start(rt_comm *c, float *buf, size_t n, int slot, rt_event *ready, rt_event *done)
{
    return start(c, buf, n, slot, ready, done, c->size, MPI_COMM_WORLD);
}

static int mpi_test(rt_comm *c, int slot)
{
    mpi_ctx *x = c->ctx;
    if (slot < 0 || slot >= x->slots || x->done[slot]) return 1; /* never started, or complete */
    int flag = 0;
    if (MPI_Test(&x->req[slot], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
    x->done[slot] = flag;
    if (flag) rt_comm_host_done(c, x->done_ev[slot]);
    return flag;
}

static int mpi_wait_all(rt_comm *c, int n_slots)
{
    mpi_ctx *x = c->ctx;
    for (int k = 0; k < n_slots && k < x->slots; k++) {
        if (x->done[k]) continue;
        if (MPI_Wait(&x->req[k], MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
        x->done[k] = 1;
        rt_comm_host_done(c, x->done_ev[k]);
    }
    return 0;
}

static int mpi_sum_doubles(rt_comm *c, double *v, int n)
{
    if (c->size == 1) return 0;
    return ok(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
}

static int mpi_gather_doubles(rt_comm *c, const double *send, int n, double *recv)
{
    (void)c;
    return ok(MPI_Gather(send, n, MPI_DOUBLE, recv, n, MPI_DOUBLE, 0, MPI_COMM_WORLD));
}

static int mpi_broadcast_int(rt_comm *c, int *v)
{
    (void)c;
    return ok(MPI_Bcast(v, 1, MPI_INT, 0, MPI_COMM_WORLD));
}

static int mpi_broadcast_bytes(rt_comm *c, void *buf, int n)
{
    (void)c;
    return ok(MPI_Bcast(buf, n, MPI_BYTE, 0, MPI_COMM_WORLD));
}

static int mpi_max_double(rt_comm *c, double *v)
{
    if (c->size == 1) return 0;
    return ok(MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
}

static int mpi_set_expert_groups(rt_comm *c, int groups_of)
{
    mpi_ctx *x = c->ctx;
    if (groups_of < 1 || c->size % groups_of || x->x) return -1;
    x->displs = malloc(2 * (size_t)groups_of * sizeof *x->displs);
    if (!x->displs) return -1;
    x->x = groups_of;
    if (MPI_Comm_split(MPI_COMM_WORLD, c->rank / groups_of, c->rank, &x->expert) != MPI_SUCCESS) return -1;
    return ok(MPI_Comm_split(MPI_COMM_WORLD, c->rank % groups_of, c->rank, &x->expert_data));
}

static int mpi_expert_alltoallv(rt_comm *c, const float *send, const int *send_counts, float *recv,
                                const int *recv_counts)
{
    mpi_ctx *x = c->ctx;
    int *sd = x->displs, *rd = x->displs + x->x;
    sd[0] = rd[0] = 0;
    for (int i = 1; i < x->x; i++)
        sd[i] = sd[i - 1] + send_counts[i - 1], rd[i] = rd[i - 1] + recv_counts[i - 1];
    return ok(MPI_Alltoallv(send, send_counts, sd, MPI_FLOAT, recv, recv_counts, rd, MPI_FLOAT, x->expert));
}

static int mpi_expert_alltoall_ints(rt_comm *c, const int *send, int *recv, int n)
{
    mpi_ctx *x = c->ctx;
    return ok(MPI_Alltoall(send, n, MPI_INT, recv, n, MPI_INT, x->expert));
}

static int mpi_expert_allreduce_start(rt_comm *c, float *buf, size_t n, int slot, rt_event *ready,
                                      rt_event *done)
{
    mpi_ctx *x = c->ctx;
    /* the ranks holding the same experts; one where every rank holds other experts: nothing to sum */
    return start(c, buf, n, slot, ready, done, c->size / (x->x ? x->x : 1), x->expert_data);
}

static void mpi_destroy(rt_comm *c)
{
    if (!c) return;
    mpi_ctx *x = c->ctx;
    if (x && x->x) MPI_Comm_free(&x->expert), MPI_Comm_free(&x->expert_data);
    if (x) free(x->req), free(x->done), free(x->done_ev), free(x->displs), free(x);
    free(c);
}

rt_comm *rt_comm_create(et_error *err)
{
    rt_comm *c = calloc(1, sizeof *c);
    mpi_ctx *x = calloc(1, sizeof *x);
    if (!c || !x) {
        free(x), free(c);
        et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL,
                          "out of memory creating the MPI communicator");
        return NULL;
    }
    *c = (rt_comm){.name = "mpi",
                   .ctx = x,
                   .allreduce_start = mpi_allreduce_start,
                   .test = mpi_test,
                   .wait_all = mpi_wait_all,
                   .allreduce_sum_doubles = mpi_sum_doubles,
                   .gather_doubles = mpi_gather_doubles,
                   .broadcast_int = mpi_broadcast_int,
                   .broadcast_bytes = mpi_broadcast_bytes,
                   .max_double = mpi_max_double,
                   .set_expert_groups = mpi_set_expert_groups,
                   .expert_alltoallv = mpi_expert_alltoallv,
                   .expert_alltoall_ints = mpi_expert_alltoall_ints,
                   .expert_allreduce_start = mpi_expert_allreduce_start,
                   .destroy = mpi_destroy};
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    /* the ranks sharing this host's memory: the host's ranks, which a GPU backend spreads over its devices */
    MPI_Comm node;
    c->local_rank = 0, c->local_size = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_rank(node, &c->local_rank);
        MPI_Comm_size(node, &c->local_size);
        MPI_Comm_free(&node);
    }
    return c;
}

void rt_comm_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
}

int rt_comm_world_rank(void)
{
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

void rt_comm_finalize(void)
{
    MPI_Finalize();
}

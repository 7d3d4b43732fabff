/* test_comm: the communicator's table (runtime/rt_comm.h) on a backend's memory and events, the way
 * etrun's reducer drives it: three gradient buckets of different sizes, each all-reduced after the event
 * that marks it ready, tested under later work, then wait_all and a kernel that must see the sums. Checks
 * the sums against the host's, that no call before the read waited for the device (host_waits), that each
 * reduction's `done` event comes after its `ready` one, the host collectives (sum, broadcast of bytes),
 * and that the communicator reports no failure. Runs on one rank or under mpirun; `--backend cuda` takes
 * the device of the rank's local index and NCCL's communicator where the build has it.
 *
 * Exit: 0 all checks passed, 1 a check failed, 77 the backend cannot start here (no device), 2 bad usage. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_backend.h"
#include "rt_comm.h"

static int failures, checks, rank;

static void check(int ok, const char *what, double got, double want)
{
    checks++;
    if (!ok) failures++;
    if (!ok || rank == 0)
        printf("%-4s rank %d %-44s got %-12.6g want %.6g\n", ok ? "ok" : "FAIL", rank, what, got, want);
}

#define N_BUCKETS 3

int main(int argc, char **argv)
{
    rt_comm_init(&argc, &argv);
    const char *name = "cpu";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            name = argv[++i];
        } else {
            fprintf(stderr, "usage: test_comm [--backend cpu|cuda]\n");
            rt_comm_finalize();
            return 2;
        }
    }
    et_error err;
    rt_comm *comm = rt_comm_create(&err);
    if (!comm) {
        fprintf(stderr, "test_comm: %s\n", err.text);
        rt_comm_finalize();
        return 1;
    }
    rank = comm->rank;
    rt_backend *be = rt_backend_create_local(name, comm->local_rank, &err);
    if (!be) {
        if (rank == 0) printf("skip test_comm %s: %s\n", name, err.text);
        comm->destroy(comm);
        rt_comm_finalize();
        return 77;
    }
#ifdef ET_HAVE_NCCL
    if (strcmp(be->name, "cuda") == 0) {
        rt_comm *nccl = rt_comm_nccl_create(comm, be, &err);
        if (!nccl) {
            printf("FAIL rank %d: %s\n", rank, err.text);
            be->destroy(be), comm->destroy(comm);
            rt_comm_finalize();
            return 1;
        }
        comm = nccl;
    }
#endif
    rt_comm_use_backend(comm, be);
    if (rank == 0)
        printf("# test_comm: %s communicator, %d rank%s, backend %s\n", comm->name, comm->size,
               comm->size == 1 ? "" : "s", be->name);

    const size_t sizes[N_BUCKETS] = {1000, (size_t)1 << 20, 7};
    size_t total = 0;
    for (int k = 0; k < N_BUCKETS; k++)
        total += sizes[k];
    float *host = malloc(total * sizeof *host), *x = be->alloc(be, total * sizeof *x);
    rt_event *ready[N_BUCKETS], *done[N_BUCKETS];
    int made = host && x;
    for (int k = 0; k < N_BUCKETS; k++)
        made &= (ready[k] = be->event_create(be)) != NULL && (done[k] = be->event_create(be)) != NULL;
    if (!made) {
        printf("FAIL rank %d: out of memory\n", rank);
        return 1;
    }
    for (size_t i = 0; i < total; i++)
        host[i] = (float)((rank + 1) * (int)(i % 17));
    be->upload(be, x, host, total * sizeof *host);
    be->sync(be);

    /* as etrun's backward: a bucket's last kernel, its ready event, its reduction, a test of the earlier */
    const long long w0 = be->host_waits;
    size_t first = 0;
    int started = 0;
    for (int k = 0; k < N_BUCKETS; k++) {
        be->scale(be, x + first, 1.0f, sizes[k]);
        be->event_record(be, ready[k], RT_STREAM_COMPUTE);
        started += comm->allreduce_start(comm, x + first, sizes[k], k, ready[k], done[k]) == 0;
        for (int j = 0; j <= k; j++)
            comm->test(comm, j);
        first += sizes[k];
    }
    const int waited = comm->wait_all(comm, N_BUCKETS);
    be->scale(be, x, 2.0f, total); /* the optimizer's place: after wait_all, on the compute stream */
    const long long waits = be->host_waits - w0;
    be->download(be, host, x, total * sizeof *host);
    check(started == N_BUCKETS && waited == 0, "three reductions started and waited for", started, N_BUCKETS);
    check(waits == 0, "no host wait before the step's read", (double)waits, 0);

    const double ranks_sum = comm->size * (comm->size + 1) / 2.0;
    double worst = 0;
    for (size_t i = 0; i < total; i++)
        worst = fmax(worst, fabs(host[i] - 2.0 * ranks_sum * (double)(i % 17)));
    check(worst == 0, "sums of every bucket, seen after wait_all", worst, 0);
    int ordered = 1;
    for (int k = 0; k < N_BUCKETS; k++)
        ordered &= be->event_seconds(be, ready[k], done[k]) >= 0 && be->event_done(be, done[k]);
    check(ordered, "each reduction done after its bucket was ready", ordered, 1);

    double v[2] = {rank + 1.0, 1.0};
    comm->allreduce_sum_doubles(comm, v, 2);
    check(v[0] == ranks_sum && v[1] == comm->size, "host sum of doubles", v[0], ranks_sum);
    char id[128];
    for (int i = 0; i < 128; i++)
        id[i] = (char)(rank == 0 ? i * 7 : 0);
    comm->broadcast_bytes(comm, id, (int)sizeof id);
    int same = 1;
    for (int i = 0; i < 128; i++)
        same &= id[i] == (char)(i * 7);
    check(same, "rank 0's bytes broadcast", same, 1);
    const char *why = rt_comm_why(comm);
    check(!why && !be->failure(be), why ? why : "no communicator or backend failure", !why, 1);

    for (int k = 0; k < N_BUCKETS; k++)
        be->event_destroy(be, ready[k]), be->event_destroy(be, done[k]);
    be->free(be, x);
    free(host);
    comm->destroy(comm);
    be->destroy(be);
    if (rank == 0) printf("%d passed, %d failed\n", checks - failures, failures);
    rt_comm_finalize();
    return failures ? 1 : 0;
}

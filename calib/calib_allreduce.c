/* All-reduce bandwidth over MPI ranks: see calib_allreduce.h. */
#include "calib_allreduce.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "launcher.h"
#include "wall_clock.h"

static int started;

int calib_allreduce_active(void)
{
    return et_mpirun_ranks() > 1;
}

int calib_allreduce_init(int *argc, char ***argv, int *rank)
{
    *rank = 0;
    if (!calib_allreduce_active()) return 0;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) return -1;
    started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    return 0;
}

int calib_allreduce_rank(void)
{
    int rank = 0;
    if (started) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

void calib_allreduce_finish(void)
{
    if (started) MPI_Finalize();
    started = 0;
}

/* Human units for a byte count, as nccl-tests' tables are read. */
static void human(char *buf, size_t size, double bytes)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    while (bytes >= 1024 && u < 3)
        bytes /= 1024, u++;
    snprintf(buf, size, "%.0f %s", bytes, unit[u]);
}

json_t *calib_allreduce_bench(FILE *out, et_error *err)
{
    int rank = 0, ranks = 1;
    if (!started) {
        et_error_set(err, NULL, 0, 0, NULL, "the all-reduce benchmark needs mpirun with two ranks or more");
        return NULL;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const size_t largest = (size_t)64 << 20;
    float *buf = malloc(largest);
    int ok = buf != NULL, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        free(buf);
        et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory for the all-reduce buffer");
        return NULL;
    }
    for (size_t i = 0; i < largest / sizeof *buf; i++)
        buf[i] = 1e-3f;
    json_t *rows = rank == 0 ? json_array() : NULL;
    if (out && rank == 0)
        fprintf(out, "# all-reduce over %d MPI ranks (float sums)\n%14s %10s %12s %12s %12s\n", ranks,
                "size(B)", "size", "time(us)", "algbw(GB/s)", "busbw(GB/s)");
    for (size_t bytes = 4096; bytes <= largest; bytes *= 4) {
        const int count = (int)(bytes / sizeof *buf);
        for (int w = 0; w < 2; w++)
            MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        /* enough calls for 0.2 s, decided on rank 0 and shared so that every rank makes the same calls */
        int calls = 0;
        double elapsed = 0;
        for (;;) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = et_wall_seconds();
            MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            elapsed += et_wall_seconds() - t0;
            calls++;
            int more = calls < 5 || elapsed < 0.2;
            MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (!more) break;
        }
        const double t = elapsed / calls, algbw = (double)bytes / t / 1e9,
                     busbw = algbw * 2.0 * (ranks - 1) / ranks;
        if (rank == 0) {
            char h[32];
            human(h, sizeof h, (double)bytes);
            if (out) fprintf(out, "%14zu %10s %12.1f %12.2f %12.2f\n", bytes, h, t * 1e6, algbw, busbw);
            json_array_append_new(rows,
                                  json_pack("{s:f, s:i, s:f, s:f, s:f}", "bytes", (double)bytes, "ranks",
                                            ranks, "seconds", t, "algbw_GBps", algbw, "busbw_GBps", busbw));
        }
    }
    free(buf);
    return rows;
}

/* The plan search over MPI ranks: see search_mpi.h. */
#include "search_mpi.h"

#include <mpi.h>

#include "launcher.h"
#include <stdlib.h>
#include <string.h>

static int started;

int search_mpi_init(int *argc, char ***argv, int *rank, int *ranks)
{
    *rank = 0, *ranks = 1;
    if (et_mpirun_ranks() <= 1) return 0;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) return -1;
    started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, ranks);
    return 0;
}

void search_mpi_finish(void)
{
    if (started) MPI_Finalize();
    started = 0;
}

int search_mpi_gather(search_result *r, int keep, search_order order, int rank, int ranks, et_error *err)
{
    if (ranks <= 1) return 0;
    if (rank != 0) {
        json_t *j = search_result_to_json(r);
        char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
        json_decref(j);
        long len = text ? (long)strlen(text) : -1;
        int rc = MPI_Send(&len, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS && len > 0) rc = MPI_Send(text, (int)len, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        free(text);
        if (len < 0)
            return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory for the search");
        return rc == MPI_SUCCESS ? 0
                                 : et_error_set_code(err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL,
                                                     "rank %d cannot send its plans to rank 0", rank);
    }
    int bad = 0;
    for (int src = 1; src < ranks; src++) {
        long len = 0;
        if (MPI_Recv(&len, 1, MPI_LONG, src, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS ||
            len <= 0) {
            bad = bad ? bad
                      : et_error_set_code(err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL,
                                          "rank %d sent no plans (out of memory there?)", src);
            continue;
        }
        char *text = malloc((size_t)len);
        if (!text)
            return et_error_set_code(err, ET_ERROR_MEMORY, NULL, 0, 0, NULL, "out of memory for the search");
        MPI_Recv(text, (int)len, MPI_CHAR, src, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        json_t *j = json_loadb(text, (size_t)len, 0, NULL);
        free(text);
        search_result part;
        const int threads = r->threads;
        if (!j || search_result_from_json(j, keep, &part)) {
            json_decref(j);
            bad = bad ? bad
                      : et_error_set_code(err, ET_ERROR_INTERNAL, NULL, 0, 0, NULL,
                                          "rank %d's plans could not be read", src);
            continue;
        }
        json_decref(j);
        const int part_threads = part.threads;
        search_result_merge(r, &part, keep, order);
        r->threads = threads + part_threads;
    }
    return bad;
}

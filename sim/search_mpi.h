/* search_mpi: the plan search split over the ranks of mpirun (etsim --search under mpirun -np N).
 *
 * Contract: search_mpi_init() starts MPI when etsim runs under mpirun with more than one rank
 * (et_mpirun_ranks, model/launcher.h) and fills *rank and *ranks (0 and 1 otherwise, MPI untouched).
 * search_mpi_gather() sends every other rank's result to rank 0, which merges them into its own (the same
 * ranking as one process: every rank evaluates its block of the same candidate list); on the other ranks
 * `r` is left as it was. search_mpi_finish() ends MPI (a no-op without it). Errors: -1 with *err. */
#ifndef ET_SEARCH_MPI_H
#define ET_SEARCH_MPI_H

#include "search.h"

int search_mpi_init(int *argc, char ***argv, int *rank, int *ranks);
int search_mpi_gather(search_result *r, int keep, search_order order, int rank, int ranks, et_error *err);
void search_mpi_finish(void);

#endif

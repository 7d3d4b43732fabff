/* launcher: whether a tool runs under mpirun, from the environment the launcher sets (no MPI needed).
 *
 * Contract: et_mpirun_ranks() is the world size Open MPI (OMPI_COMM_WORLD_SIZE) or a PMI launcher
 * (PMI_SIZE) announces, or 1 when neither is set; the tools start MPI only when it is above 1. */
#ifndef ET_LAUNCHER_H
#define ET_LAUNCHER_H

int et_mpirun_ranks(void);

#endif

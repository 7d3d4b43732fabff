#include "launcher.h"

#include <stdlib.h>

int et_mpirun_ranks(void)
{
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = getenv("PMI_SIZE");
    int ranks = n ? atoi(n) : 1;
    return ranks > 1 ? ranks : 1;
}

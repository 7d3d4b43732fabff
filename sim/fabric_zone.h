/* fabric_zone: the generated cluster as one SimGrid netzone whose routes come from the fabric (fabric.h),
 * instead of a platform file: one zone, so SimGrid's set-up stays linear in GPUs (a zone per node, as a
 * platform file needs, costs zones x hosts when hosts are created and sealed: 16,384 GPUs took 3 s).
 *
 * Contract: call after simgrid_init and before anything else creates a zone (the first zone is the root
 * and sets SimGrid's models up from the configuration). Creates host gpu-<node>-<local> for every GPU, in
 * rank order, at 1 Gflop/s, and every fabric link as a split-duplex link; routes are computed on demand by
 * et_fabric_route. `f` must outlive the simulation. Returns 0, or -1 with `err` filled (text) on failure. */
#ifndef ET_FABRIC_ZONE_H
#define ET_FABRIC_ZONE_H

#include <stddef.h>

#include "fabric.h"

#ifdef __cplusplus
extern "C" {
#endif

int et_fabric_zone_create(const et_fabric *f, char *err, size_t size);

#ifdef __cplusplus
}
#endif

#endif

/* platform: the SimGrid platform (XML) of a scenario's generated cluster, for etsim --platform-out.
 *
 * The simulator itself builds the cluster as one netzone routed by the fabric (fabric_zone.h); this file
 * writes the same hosts, links and routes as a platform file a user can edit and pass back with
 * cluster.platform_file: one zone with Full routing listing every route in both directions (so it grows as
 * GPUs squared: at most PLATFORM_MAX_GPUS), and the network configuration the simulator uses (CM02 with
 * unit factors, no TCP window: an RDMA fabric; the scenario's calibration factors).
 *
 * Contract: platform_write() prints the XML to `out` (-1 on a write error, or with `err` filled when the
 * fabric cannot be built or is too large); platform_write_file() writes it atomically to `path`. */
#ifndef ET_PLATFORM_H
#define ET_PLATFORM_H

#include <stdio.h>

#include "et_error.h"
#include "scenario.h"

#define PLATFORM_MAX_GPUS 256

int platform_write(FILE *out, const et_scenario *s, et_error *err);
int platform_write_file(const char *path, const et_scenario *s, et_error *err);

/* The network configuration of a generated cluster, as SimGrid command-line options
 * ("--cfg=network/model:CM02", ...) written into buf[i] (n entries of 96 characters); returns n. */
#define PLATFORM_CONFIG_OPTIONS 6
int platform_config_options(const et_scenario *s, char buf[][96]);

#endif

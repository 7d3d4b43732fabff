/* platform: the SimGrid platform (XML) of a scenario's cluster.
 *
 * One host per GPU, named gpu-<node>-<local>. Inside a node each GPU has an NVSwitch port (a full-duplex
 * link at the per-direction NVLink bandwidth; GPU to GPU crosses the source's and the destination's
 * ports). The node's NICs are one aggregated full-duplex link (nics x speed) that every inter-node flow of
 * the node crosses. Nodes hang off leaf switches (nodes_per_leaf each); a leaf's up-link to the spine is
 * one aggregated link of (nodes in leaf x node NIC bandwidth / oversubscription). Switch latency is folded
 * into the adjacent links (no separate switch links: they would tie every flow of the cluster into one
 * max-min component and slow the solver down). The network model is CM02 with unit latency and bandwidth
 * factors and no TCP window (an RDMA fabric, not SimGrid's TCP-fitted defaults). Routing is Full at every
 * level.
 *
 * Contract: platform_write() prints the XML to `out` (returns -1 on a write error);
 * platform_write_file() writes it atomically to `path`. */
#ifndef ET_PLATFORM_H
#define ET_PLATFORM_H

#include <stdio.h>

#include "et_error.h"
#include "scenario.h"

/* Host name of GPU `local` on node `node`. */
void platform_host_name(char *buf, size_t size, int node, int local);

int platform_write(FILE *out, const et_scenario *s);
int platform_write_file(const char *path, const et_scenario *s, et_error *err);

#endif

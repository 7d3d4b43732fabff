/* sg_cxx: the SimGrid 3.32 calls etsim needs that have no C binding.
 *
 * et_sendto_async starts a flow of `bytes` bytes from `from` to `to` now, with no actor at either end
 * (s4u::Comm::sendto_async), and returns it; the caller owns it until it is passed to sg_comm_wait_all
 * (which releases it), as with sg_mailbox_put_async. Never NULL. One actor per communicator can then
 * launch every flow of a collective phase between the GPU hosts.
 *
 * et_cfg_set: see below.
 *
 * et_network_model copies the network model in use ("CM02", "LV08", "IB", ...) into buf (NUL-terminated,
 * truncated to size) and returns buf. Call after the platform is loaded. */
#ifndef ET_SG_CXX_H
#define ET_SG_CXX_H

#include <simgrid/comm.h>
#include <simgrid/host.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

sg_comm_t et_sendto_async(sg_host_t from, sg_host_t to, double bytes);

/* Loads a platform file: 0, or -1 with SimGrid's reason in err (a parse error, a bad route) instead of its
 * abort. */
int et_load_platform(const char *path, char *err, size_t size);

/* Whether the platform routes `from` to `to`: 0, or -1 with SimGrid's reason in err. */
int et_route_check(sg_host_t from, sg_host_t to, char *err, size_t size);

/* Sets one SimGrid option given as "name:value" (after simgrid_init, before the platform): 0, or -1 with
 * SimGrid's reason in err (an unknown name, a bad value) instead of SimGrid's abort. */
int et_cfg_set(const char *name_value, char *err, size_t size);
char *et_network_model(char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif

/* sg_sendto: a flow between two hosts with no actor at either end.
 *
 * SimGrid 3.32 offers this (s4u::Comm::sendto_async) only in C++; the C API has just the blocking
 * sg_host_sendto. One actor per communicator can then launch every flow of a collective phase from and to
 * the GPU hosts, instead of every GPU's actor waking for each phase.
 *
 * Contract: starts a flow of `bytes` bytes from `from` to `to` now and returns it; the caller owns it
 * until it is passed to sg_comm_wait_all (which releases it), as with sg_mailbox_put_async. Never NULL. */
#ifndef ET_SG_SENDTO_H
#define ET_SG_SENDTO_H

#include <simgrid/comm.h>
#include <simgrid/host.h>

#ifdef __cplusplus
extern "C" {
#endif

sg_comm_t et_sendto_async(sg_host_t from, sg_host_t to, double bytes);

#ifdef __cplusplus
}
#endif

#endif

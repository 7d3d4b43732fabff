// The one SimGrid call etsim needs that has no C binding: see sg_sendto.h.
#include "sg_sendto.h"

#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Host.hpp>

extern "C" sg_comm_t et_sendto_async(sg_host_t from, sg_host_t to, double bytes)
{
    simgrid::s4u::CommPtr comm = simgrid::s4u::Comm::sendto_async(from, to, static_cast<uint64_t>(bytes));
    comm->add_ref(); // the caller's reference, dropped by sg_comm_wait_all as for sg_mailbox_put_async
    return comm.get();
}

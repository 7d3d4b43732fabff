// The SimGrid calls etsim needs that have no C binding: see sg_cxx.h.
#include "sg_cxx.h"

#include <cstdio>
#include <exception>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <string>
#include <vector>
#include <xbt/config.hpp>

extern "C" sg_comm_t et_sendto_async(sg_host_t from, sg_host_t to, double bytes)
{
    simgrid::s4u::CommPtr comm = simgrid::s4u::Comm::sendto_async(from, to, static_cast<uint64_t>(bytes));
    comm->add_ref(); // the caller's reference, dropped by sg_comm_wait_all as for sg_mailbox_put_async
    return comm.get();
}

static void first_line(const std::exception &e, char *err, size_t size)
{
    std::string what = e.what();
    std::snprintf(err, size, "%s", what.substr(0, what.find('\n')).c_str());
}

extern "C" int et_load_platform(const char *path, char *err, size_t size)
{
    try {
        simgrid::s4u::Engine::get_instance()->load_platform(path);
        // what SimGrid accepts but cannot simulate: a link that never delivers (0 B/s), or one whose rate or
        // latency is not a finite number of the range ET's own inputs allow (10^15 GB/s at most)
        for (const simgrid::s4u::Link *link : simgrid::s4u::Engine::get_instance()->get_all_links()) {
            const double bw = link->get_bandwidth(), lat = link->get_latency();
            if (!(bw > 0) || !(bw <= 1e24) || !(lat >= 0) || !(lat <= 1e6)) {
                std::snprintf(
                    err, size,
                    "link \"%s\": bandwidth %g B/s and latency %g s; a link needs a bandwidth above 0 "
                    "and at most 1e24 B/s, a latency of 0 to 1e6 s",
                    link->get_cname(), bw, lat);
                return -1;
            }
        }
    } catch (const std::exception &e) {
        first_line(e, err, size);
        return -1;
    }
    return 0;
}

extern "C" int et_route_check(sg_host_t from, sg_host_t to, char *err, size_t size)
{
    try {
        std::vector<simgrid::s4u::Link *> links;
        double latency = 0;
        from->route_to(to, links, &latency);
        if (links.empty() && from != to) {
            std::snprintf(err, size, "no links between them (a route missing from the platform)");
            return -1;
        }
    } catch (const std::exception &e) {
        first_line(e, err, size);
        return -1;
    }
    return 0;
}

extern "C" int et_cfg_set(const char *name_value, char *err, size_t size)
{
    try {
        simgrid::config::set_parse(name_value);
    } catch (const std::exception &e) {
        std::string what = e.what();
        std::snprintf(err, size, "%s", what.substr(0, what.find('\n')).c_str());
        return -1;
    }
    return 0;
}

extern "C" char *et_network_model(char *buf, size_t size)
{
    std::string model = simgrid::config::get_value<std::string>("network/model");
    std::snprintf(buf, size, "%s", model.c_str());
    return buf;
}

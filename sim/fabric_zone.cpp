// The generated cluster as one SimGrid netzone routed by the fabric: see fabric_zone.h.
#include "fabric_zone.h"

#include <cstdio>
#include <exception>
#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <vector>

namespace
{

using simgrid::kernel::resource::StandardLinkImpl;
using simgrid::kernel::routing::NetPoint;
using simgrid::kernel::routing::Route;

class FabricZone : public simgrid::kernel::routing::NetZoneImpl
{
  public:
    explicit FabricZone(const et_fabric *fabric) : NetZoneImpl("fabric"), f_(fabric) {}

    std::vector<StandardLinkImpl *> up_, down_; // per fabric link id

    void get_local_route(const NetPoint *src, const NetPoint *dst, Route *route, double *latency) override
    {
        et_fabric_hop hops[ET_FABRIC_MAX_HOPS];
        int n = et_fabric_route(f_, static_cast<int>(src->id()), static_cast<int>(dst->id()), hops);
        for (int i = 0; i < n; i++) {
            route->link_list_.push_back(hops[i].down ? down_[hops[i].link] : up_[hops[i].link]);
            if (latency) *latency += f_->latency[hops[i].link];
        }
    }

  private:
    const et_fabric *f_;
};

} // namespace

extern "C" int et_fabric_zone_create(const et_fabric *f, char *err, size_t size)
{
    try {
        auto *zone = new FabricZone(f); // the root zone: the engine owns and deletes it
        char name[64];
        for (int g = 0; g < f->gpus; g++) {
            et_fabric_host_name(name, sizeof name, g / f->gpus_per_node, g % f->gpus_per_node);
            simgrid::s4u::Host *host = zone->create_host(name, std::vector<double>{1e9});
            host->seal();
            if (host->get_netpoint()->id() != static_cast<unsigned long>(g)) {
                std::snprintf(err, size, "host %s got netpoint %lu, expected %d", name,
                              host->get_netpoint()->id(), g);
                return -1;
            }
        }
        zone->up_.resize(static_cast<size_t>(f->n_links));
        zone->down_.resize(static_cast<size_t>(f->n_links));
        for (int l = 0; l < f->n_links; l++) {
            et_fabric_link_name(f, l, name, sizeof name);
            simgrid::s4u::SplitDuplexLink *link =
                zone->create_split_duplex_link(name, std::vector<double>{f->bandwidth[l]});
            link->set_latency(f->latency[l]);
            link->seal();
            zone->up_[static_cast<size_t>(l)] = link->get_link_up()->get_impl();
            zone->down_[static_cast<size_t>(l)] = link->get_link_down()->get_impl();
        }
        zone->seal();
    } catch (const std::exception &e) {
        std::snprintf(err, size, "cannot build the cluster in SimGrid: %s", e.what());
        return -1;
    }
    return 0;
}

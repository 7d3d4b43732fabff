#include "faults.h"

#include <stdio.h>
#include <string.h>

const char *const et_fault_part_names[] = {"gpu",         "nvlink", "nic", "leaf_switch",
                                           "rail_switch", "uplink", NULL};

#define FAIL(path, ...) return et_error_set(r->err, r->source, 0, 0, path, __VA_ARGS__)

/* factor or failed: exactly one of them */
static int read_left(const et_json_reader *r, json_t *o, const char *path, et_fault_part part, double *factor)
{
    char p[ET_JSON_PATH_MAX];
    json_t *jf = json_object_get(o, "factor"), *jx = json_object_get(o, "failed");
    if (jf && jx) FAIL(path, "give either \"factor\" (the fraction left) or \"failed\": true, not both");
    if (!jf && !jx)
        FAIL(path, "expected \"factor\" (the fraction of the part left, in (0, 1]) or \"failed\": true");
    if (jf) {
        if (et_json_get_number(r, o, path, "factor", true, 1, 0, 1, factor)) return -1;
        if (*factor <= 0)
            FAIL(et_json_path(p, path, "factor"), "a factor must be above 0 (use \"failed\": true)");
        return 0;
    }
    bool failed;
    if (et_json_get_bool(r, o, path, "failed", true, false, &failed)) return -1;
    if (!failed)
        FAIL(et_json_path(p, path, "failed"), "\"failed\" can only be true (leave the part out instead)");
    if (part == ET_FAULT_GPU)
        FAIL(path, "a failed GPU leaves the job: simulate the cluster without it, or give a factor");
    if (part == ET_FAULT_NVLINK)
        FAIL(path, "a failed NVLink port leaves its GPU out of the job: give a factor for a degraded port");
    if (part == ET_FAULT_UPLINK)
        FAIL(path, "the up-links of a leaf or pod are a bundle: give the fraction left as a factor (for "
                   "example 0.75 with one of four spine links down)");
    *factor = 0;
    return 0;
}

static int read_index(const et_json_reader *r, json_t *o, const char *path, const char *key, int count,
                      const char *what, int *out)
{
    long long v;
    if (et_json_get_int(r, o, path, key, true, 0, 0, 1LL << 30, &v)) return -1;
    if (v >= count) {
        char p[ET_JSON_PATH_MAX];
        FAIL(et_json_path(p, path, key), "%s %lld does not exist: the cluster has %d (0 to %d)", what, v,
             count, count - 1);
    }
    *out = (int)v;
    return 0;
}

static int read_fault(const et_json_reader *r, json_t *o, const char *path, const et_cluster *c, et_fault *f)
{
    static const char *const keys[] = {"part", "node", "gpu",    "nic",    "leaf", "pod",
                                       "unit", "rail", "factor", "failed", NULL};
    int e;
    if (et_json_expect_object(r, o, path, keys)) return -1;
    if (et_json_get_enum(r, o, path, "part", true, et_fault_part_names, 0, &e)) return -1;
    const int leaves = (c->nodes + c->nodes_per_leaf - 1) / c->nodes_per_leaf;
    const int pods = (leaves + c->leaves_per_pod - 1) / c->leaves_per_pod;
    *f = (et_fault){.part = (et_fault_part)e, .node = -1, .index = -1, .leaf = -1, .pod = -1};
    /* the keys each part takes */
    static const char *const wanted[][3] = {
        {"node", "gpu", NULL}, {"node", "gpu", NULL},  {"node", "nic", NULL},
        {"leaf", NULL, NULL},  {"unit", "rail", NULL}, {"leaf", "pod", NULL},
    };
    const char *const all[] = {"node", "gpu", "nic", "leaf", "pod", "unit", "rail"};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) {
        int ok = 0;
        for (int w = 0; w < 3 && wanted[e][w]; w++)
            ok |= !strcmp(wanted[e][w], all[k]);
        if (!ok && json_object_get(o, all[k])) {
            char p[ET_JSON_PATH_MAX];
            FAIL(et_json_path(p, path, all[k]), "a %s fault takes no \"%s\"", et_fault_part_names[e], all[k]);
        }
    }
    switch (f->part) {
    case ET_FAULT_GPU:
        if (read_index(r, o, path, "node", c->nodes, "node", &f->node) ||
            read_index(r, o, path, "gpu", c->gpus_per_node, "GPU", &f->index))
            return -1;
        break;
    case ET_FAULT_NVLINK:
        if (read_index(r, o, path, "node", c->nodes, "node", &f->node)) return -1;
        if (json_object_get(o, "gpu") && read_index(r, o, path, "gpu", c->gpus_per_node, "GPU", &f->index))
            return -1;
        break;
    case ET_FAULT_NIC:
        if (read_index(r, o, path, "node", c->nodes, "node", &f->node) ||
            read_index(r, o, path, "nic", c->nics_per_node, "NIC", &f->index))
            return -1;
        break;
    case ET_FAULT_LEAF_SWITCH:
        if (c->topology != ET_TOPO_FAT_TREE)
            FAIL(path, "a rail fabric has rail switches (part \"rail_switch\" with \"unit\" and \"rail\")");
        if (read_index(r, o, path, "leaf", leaves, "leaf switch", &f->leaf)) return -1;
        break;
    case ET_FAULT_RAIL_SWITCH:
        if (c->topology != ET_TOPO_RAIL)
            FAIL(path, "rail switches belong to a rail fabric (cluster.fabric.topology \"rail\")");
        if (read_index(r, o, path, "unit", leaves, "unit", &f->leaf) ||
            read_index(r, o, path, "rail", c->nics_per_node, "rail", &f->index))
            return -1;
        break;
    case ET_FAULT_UPLINK:
        if (json_object_get(o, "leaf") && json_object_get(o, "pod"))
            FAIL(path, "an up-link fault names a leaf or a pod, not both");
        if (json_object_get(o, "pod")) {
            if (c->tiers < 3) FAIL(path, "pods exist in a three-tier fabric only (cluster.fabric.tiers 3)");
            if (read_index(r, o, path, "pod", pods, "pod", &f->pod)) return -1;
        } else if (read_index(r, o, path, "leaf", leaves, "leaf", &f->leaf)) {
            return -1;
        }
        break;
    }
    if (read_left(r, o, path, f->part, &f->factor)) return -1;
    if (f->part == ET_FAULT_LEAF_SWITCH && f->factor == 0)
        FAIL(path,
             "leaf switch %d failed: its nodes have no other way out (each node of a fat tree hangs off one "
             "leaf); "
             "give a factor for a degraded switch, or leave its nodes out",
             f->leaf);
    return 0;
}

static int read_random(const et_json_reader *r, json_t *o, et_cluster *c)
{
    static const char *const keys[] = {"part", "fraction", "factor", "failed", "seed", NULL};
    static const char *const parts[] = {"gpu", "nvlink", "nic", NULL};
    const char *path = "$.cluster.random_faults";
    json_t *rf;
    int e;
    long long seed;
    if (et_json_get_object(r, o, "$.cluster", "random_faults", false, keys, &rf)) return -1;
    if (!rf) return 0;
    et_random_faults *x = &c->random_faults;
    if (et_json_get_enum(r, rf, path, "part", true, parts, 0, &e) ||
        et_json_get_number(r, rf, path, "fraction", true, 0, 0, 1, &x->fraction) ||
        et_json_get_int(r, rf, path, "seed", false, 1, 0, 0x7fffffffffffffffLL, &seed))
        return -1;
    x->part = (et_fault_part)e;
    x->seed = (unsigned long long)seed;
    if (read_left(r, rf, path, x->part, &x->factor)) return -1;
    x->set = true;
    return 0;
}

int et_faults_read(const et_json_reader *r, json_t *o, et_cluster *c)
{
    json_t *list;
    c->n_faults = 0;
    if (et_json_get_array(r, o, "$.cluster", "faults", false, &list)) return -1;
    size_t n = list ? json_array_size(list) : 0;
    if (n > ET_MAX_FAULTS)
        FAIL("$.cluster.faults", "at most %d faults can be listed, got %zu (random_faults draws more)",
             ET_MAX_FAULTS, n);
    for (size_t i = 0; i < n; i++) {
        char path[ET_JSON_PATH_MAX];
        et_json_path_index(path, "$.cluster.faults", i);
        if (read_fault(r, json_array_get(list, i), path, c, &c->faults[c->n_faults])) return -1;
        c->n_faults++;
    }
    /* a node whose NICs are all gone is cut off */
    for (size_t i = 0; i < n; i++) {
        const et_fault *f = &c->faults[i];
        if (f->part != ET_FAULT_NIC || f->factor > 0) continue;
        int failed = 0;
        for (size_t j = 0; j < n; j++)
            failed +=
                c->faults[j].part == ET_FAULT_NIC && c->faults[j].node == f->node && c->faults[j].factor == 0;
        if (failed >= c->nics_per_node)
            FAIL("$.cluster.faults", "every NIC of node %d failed: the node is cut off from the others",
                 f->node);
    }
    if (read_random(r, o, c)) return -1;
    if (c->platform_file[0] && (c->n_faults || c->random_faults.set))
        FAIL(c->n_faults ? "$.cluster.faults" : "$.cluster.random_faults",
             "faults describe the generated fabric; with a platform_file, edit its links instead");
    return 0;
}

const char *et_fault_describe(const et_fault *f, char *buf, unsigned long size)
{
    switch (f->part) {
    case ET_FAULT_GPU:
        snprintf(buf, size, "GPU %d of node %d", f->index, f->node);
        break;
    case ET_FAULT_NVLINK:
        if (f->index >= 0)
            snprintf(buf, size, "the NVLink port of GPU %d of node %d", f->index, f->node);
        else
            snprintf(buf, size, "the NVLink ports of node %d", f->node);
        break;
    case ET_FAULT_NIC:
        snprintf(buf, size, "NIC %d of node %d", f->index, f->node);
        break;
    case ET_FAULT_LEAF_SWITCH:
        snprintf(buf, size, "leaf switch %d", f->leaf);
        break;
    case ET_FAULT_RAIL_SWITCH:
        snprintf(buf, size, "the rail %d switch of unit %d", f->index, f->leaf);
        break;
    case ET_FAULT_UPLINK:
        if (f->pod >= 0)
            snprintf(buf, size, "the core up-links of pod %d", f->pod);
        else
            snprintf(buf, size, "the spine up-links of leaf %d", f->leaf);
        break;
    }
    return buf;
}

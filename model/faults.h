/* faults: broken and slow parts of a cluster, as a scenario states them (cluster.faults,
 * cluster.random_faults).
 *
 * A fault names a part and what is left of it: `factor` in (0, 1] is the fraction of its nominal speed or
 * bandwidth left, 0 means failed. Parts: a GPU (its compute), a GPU's NVLink port, a NIC, a leaf switch
 * (fat tree), a rail switch (rail fabric: NIC `rail` of every node of one unit) and a leaf's or a pod's
 * up-links. What a fault does to the network is the fabric's rule (fabric.h); the simulator plays it, the
 * analytic estimate is of the healthy cluster (the report says so).
 *
 * Contract: et_faults_read() parses the two keys of the cluster object `o` into c (c's sizes already read),
 * checking every index against the cluster and refusing faults no route can survive (a node with every NIC
 * failed, a failed leaf switch of a fat tree, a failed NVLink port or up-link); -1 with *err (JSON path)
 * otherwise. Nothing is allocated. */
#ifndef ET_FAULTS_H
#define ET_FAULTS_H

#include "cluster.h"
#include "json_reader.h"

extern const char *const et_fault_part_names[]; /* "gpu", "nvlink", "nic", "leaf_switch", "rail_switch",
                                                   "uplink", NULL */

int et_faults_read(const et_json_reader *r, json_t *cluster, et_cluster *c);

/* The part a fault names, in words ("NIC 1 of node 3"); returns buf. */
const char *et_fault_describe(const et_fault *f, char *buf, unsigned long size);

#endif

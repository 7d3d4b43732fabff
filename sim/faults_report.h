/* faults_report: what a scenario's broken and slow parts cost, for etsim's report.
 *
 * With faults (cluster.faults, cluster.random_faults) the step is simulated three times, side by side in
 * child processes: as given, on the healthy cluster, and with the slowest part alone (the part whose flows
 * or compute keep the smallest fraction, fabric.h). The report lists every part's effect, the cost of all
 * of them to the step (as given minus healthy), and names the slowest part with its own cost.
 *
 * Contract: faults_runs_start() starts the two extra simulations when the scenario has faults (none
 * otherwise; returns -1 with *err when the fabric cannot be built or a child cannot start);
 * faults_runs_finish() waits for them and fills sim->faults (the simulation of the scenario as given); every
 * started run must be finished. faults_report_print() prints the section, if any. */
#ifndef ET_FAULTS_REPORT_H
#define ET_FAULTS_REPORT_H

#include <stdio.h>

#include "fabric.h"
#include "step_sim.h"

typedef struct faults_runs {
    int active;
    et_fabric fabric; /* the effects */
    et_scenario healthy, slowest;
    sim_child healthy_child, slowest_child;
} faults_runs;

int faults_runs_start(const et_scenario *s, const sim_options *o, faults_runs *runs, et_error *err);
int faults_runs_finish(faults_runs *runs, sim_result *sim, et_error *err);
void faults_report_print(FILE *out, const sim_result *sim);

#endif

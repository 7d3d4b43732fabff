/* calib_fit: a device profile fitted to measured runs. The cost model's time of an op on a device
 * (et_op_time, model/graph.c) has up to ten terms a profile sets; the fit finds them:
 *   gemm rate    peak x gemm_max, FLOP/s reached by large matrix products
 *   gemm_half    the matrix dimension at which a product reaches half of it
 *   bandwidth    memory bandwidth x memory efficiency, bytes/s of streaming kernels
 *   vector rate  vector_flops x memory efficiency, FLOP/s of element-wise arithmetic
 *   overhead     seconds per kernel launch
 *   special rate special functions (exp, tanh, sigmoid) per second; fitted only when the base
 *                profile costs them (special_tops), else left at 0
 *   cache bandwidth  bytes/s of streaming kernels whose bytes fit in a cache level of the profile's, one
 *                term a level (up to ET_CACHE_LEVELS); fitted only for the levels the base profile has
 *                (their sizes stay the profile's)
 *   optimizer rate  optimizer_flops x memory efficiency, FLOP/s of the optimizer's fused passes (which
 *                the element-wise kernels' instruction mix does not describe); fitted from the optimizer
 *                microbenchmarks and the measured runs' optimizer ops where they are not memory-bound,
 *                else the base profile's
 *   attention    unfused attention's per-head products against a matrix product of the same shape (at
 *                most 1); fitted from the measured runs' attention ops, else the base profile's
 * minimising the time-weighted squared log error of every op's predicted time per step against its
 * measured one, plus the squared log error of every microbenchmark (etcalib bench: each GEMM shape and
 * streaming size counts alike, so small kernels pin the half dimension and the overhead), each run and
 * each microbenchmark file weighing one (Nelder-Mead in log space from the base profile and from three
 * fixed points around it, each restarted; the best kept).
 * Efficiencies stay at most 1: a rate above the datasheet's moves into the peak or the bandwidth (the
 * datasheet was too low for this machine).
 *
 * Contract: runs must be loaded against `base` (et_measured_run_load); `out` is `base` with the fitted terms.
 */
#ifndef ET_CALIB_FIT_H
#define ET_CALIB_FIT_H

#include "calib_bench.h"
#include "measured_run.h"

/* The op class report and fits group by: matrix products (GEMM, tensor train), attention, element-wise
 * (element-wise, embedding, loss), optimizer. */
typedef enum {
    CALIB_GEMM,
    CALIB_ATTENTION,
    CALIB_ELEMENTWISE,
    CALIB_OPTIMIZER,
    CALIB_CLASS_COUNT
} calib_class;
extern const char *const calib_class_names[];
calib_class calib_class_of(et_op_kind kind);

typedef struct calib_terms {
    double gemm_rate, gemm_half, bandwidth, vector_rate, overhead, special_rate, attention, optimizer_rate;
    double cache_bandwidth[ET_CACHE_LEVELS]; /* one a cache level of the profile's, smallest first */
} calib_terms;

calib_terms calib_terms_of(const et_device_profile *d, et_precision p);
void calib_terms_apply(const calib_terms *t, et_precision p, et_device_profile *d);

/* Fits; *iterations gets the optimiser's iterations. Returns the final objective. */
typedef struct calib_data {
    const et_measured_run *runs;
    int n_runs;
    const calib_micro *micro;
    int n_micro;
    et_precision precision;
} calib_data;

/* Bit k of *pinned (when not NULL): term k ended at its box limit (a factor of 1000 from the base profile's):
 * these runs do not determine it, and the fitted value is no measurement. Bits in the order of
 * calib_term_names. */
double calib_fit(const calib_data *data, const et_device_profile *base, et_device_profile *out,
                 int *iterations, unsigned *pinned);
/* The fit's terms by bit of *pinned: "GEMM rate", ..., as etcalib fit's table names them. */
extern const char *const calib_term_names[];

/* The objective for a profile: sum over ops of w (log predicted - log measured)^2, w = measured share. */
double calib_objective(const calib_data *data, const et_device_profile *d);
/* A microbenchmark sample's time under the profile (et_kernel_time). */
double calib_sample_time(const calib_sample *s, const et_device_profile *d, et_precision p);

#endif

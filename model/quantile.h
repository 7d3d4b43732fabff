/* quantile: the one quantile definition of ET's reports (etsim's step statistics, etrun's measured.json,
 * etcalib): the nearest rank, the smallest value with at least a fraction q of the values at or below it,
 * sorted[ceil(q n) - 1] (q = 0 gives the minimum). The median is q = 0.5, the lower middle for even n.
 * Contract: n >= 1 (0 returns 0); et_quantile sorts v in place. */
#ifndef ET_QUANTILE_H
#define ET_QUANTILE_H

double et_quantile_sorted(const double *sorted, int n, double q);
double et_quantile(double *v, int n, double q);
void et_sort_doubles(double *v, int n);

/* The 0.9 quantile of Student's t with df >= 1 degrees of freedom: a table to 30 (3.078 at 1, 1.310 at 30;
 * any statistics text's), Cornish-Fisher's expansion beyond (within 1e-4 of it there), 1.2816 (the normal's)
 * as df grows. What a prediction interval from df + 1 samples widens a normal's by. */
double et_student_t90(int df);

#endif

#include "quantile.h"

#include <math.h>
#include <stdlib.h>

double et_quantile_sorted(const double *sorted, int n, double q)
{
    if (n <= 0) return 0;
    int i = (int)ceil(q * n) - 1;
    return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void et_sort_doubles(double *v, int n)
{
    if (n > 1) qsort(v, (size_t)n, sizeof *v, compare_double);
}

double et_quantile(double *v, int n, double q)
{
    et_sort_doubles(v, n);
    return et_quantile_sorted(v, n, q);
}

double et_student_t90(int df)
{
    static const double table[31] = {0,     3.078, 1.886, 1.638, 1.533, 1.476, 1.440, 1.415,
                                     1.397, 1.383, 1.372, 1.363, 1.356, 1.350, 1.345, 1.341,
                                     1.337, 1.333, 1.330, 1.328, 1.325, 1.323, 1.321, 1.319,
                                     1.318, 1.316, 1.315, 1.314, 1.313, 1.311, 1.310};
    if (df < 1) df = 1;
    if (df <= 30) return table[df];
    const double z = 1.2815515655446004, z3 = z * z * z, z5 = z3 * z * z, v = df;
    return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v);
}

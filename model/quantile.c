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

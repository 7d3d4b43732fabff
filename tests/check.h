/* check.h: the minimal assertion harness of ET's C tests. Each CHECK counts; main returns check_summary(). */
#ifndef ET_CHECK_H
#define ET_CHECK_H

#include <math.h>
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        if (cond) {                                                                                          \
            check_passed++;                                                                                  \
        } else {                                                                                             \
            check_failed++;                                                                                  \
            fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);                                            \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fputc('\n', stderr);                                                                             \
        }                                                                                                    \
    } while (0)

/* |got - want| <= rel * |want| */
#define CHECK_REL(got, want, rel, what)                                                                      \
    do {                                                                                                     \
        double g_ = (got), w_ = (want);                                                                      \
        CHECK(fabs(g_ - w_) <= (rel)*fabs(w_), "%s: got %.9g, want %.9g (tolerance %.3g%%)", what, g_, w_,   \
              100.0 * (rel));                                                                                \
    } while (0)

static inline int check_summary(const char *suite)
{
    printf("%s: %d passed, %d failed\n", suite, check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif

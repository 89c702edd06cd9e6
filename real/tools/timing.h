/* Clock and median helpers of the measuring tools (cosched-sendwake, cosched-ctxswitch). */
#ifndef COSCHED_TOOLS_TIMING_H
#define COSCHED_TOOLS_TIMING_H
#include <time.h>

/* CLOCK_MONOTONIC, seconds. */
static inline double mono_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* qsort comparator of doubles, ascending. */
static inline int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
#endif

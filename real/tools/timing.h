/* Clock, median and CPU-pinning helpers of the measuring tools (cosched-sendwake, cosched-ctxswitch,
 * cosched-detour, cosched-wakeup, cosched-timeshare). */
#ifndef COSCHED_TOOLS_TIMING_H
#define COSCHED_TOOLS_TIMING_H
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
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
/* The q-quantile (0 <= q <= 1) of v[0..n) sorted ascending, the lower of its neighbours; 0 when n = 0. */
static inline double pct(const double *v, size_t n, double q) { return n ? v[(size_t)(q * (double)(n - 1))] : 0.0; }

/* The mean and the sample standard deviation of v[0..n) (0 and 0 when n = 0; sd 0 when n = 1). */
static inline void mean_sd(const double *v, size_t n, double *mean, double *sd) {
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    *mean = n ? sum / (double)n : 0;
    for (size_t i = 0; i < n; i++) sq += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(sq / (double)(n - 1)) : 0;
}

/* Pins the calling process (and the children it forks afterwards) to `cpu`; exits with an error naming
 * the call when it fails. */
static inline void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        exit(1);
    }
}
#endif

/* Clock, median and CPU-pinning helpers of the measuring tools (cosched-sendwake, cosched-ctxswitch,
 * cosched-detour, cosched-wakeup). */
#ifndef COSCHED_TOOLS_TIMING_H
#define COSCHED_TOOLS_TIMING_H
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

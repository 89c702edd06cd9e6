/*
 * cosched-detour: the interruptions a compute loop sees on one CPU of this machine, the "selfish detour"
 * method (P. Beckman, K. Iskra, K. Yoshii, S. Coghlan, "The influence of operating systems on the
 * performance of collective operations at extreme scale", IEEE Cluster 2006; also T. Hoefler,
 * T. Schneider, A. Lumsdaine, "Characterizing the influence of system noise on large-scale applications
 * by simulation", SC 2010, netgauge's noise benchmark):
 *
 * the process, pinned to CPU `cpu`, reads CLOCK_MONOTONIC in a tight loop for SECONDS; the smallest
 * step between two reads is the loop's own cost; a step longer than THRESHOLD (a multiple of it, at least
 * THRESHOLD_NS) is a detour: the time the loop did not run (the step minus the loop's cost). Detours are
 * split by length:
 *
 *   short   below LONG_US (default 100 us): timer and device interrupts, softirqs, kernel work done on
 *           the loop's time (what the simulator's OS noise charges to a compute burst)
 *   long    LONG_US and more: the CPU was given to another runnable task for a time slice
 *
 * Output: one JSON object: counts and totals of each kind; `run_s`, the loop's own running time (wall time
 * minus every detour); the short detours per second of running and `short_fraction`, the share of the
 * running time they take (what a compute burst loses to them); the 50th/90th/99th percentiles of the
 * short detours; the long detours per second of wall time and their share of it; the loop's cost. Usage: cosched-detour [CPU [SECONDS [LONG_US]]]
 * (default CPU 0, 2 s, 100 us). Run it on an idle CPU: on a loaded one the long detours are that load.
 * `cosched-detour pair [CPU [SECONDS [LONG_US]]]` runs two such loops on the CPU instead and reports the
 * lengths of their runs between long detours (the time slices the scheduler gives each).
 */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

#define THRESHOLD_FACTOR 10.0
#define THRESHOLD_NS 1000.0
#define MAX_DETOURS 1000000

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}


#define MAX_RUNS 200000

/* One loop of the pair: records the lengths (ns) of its runs between long detours into runs[0..*n). */
static void pair_loop(double seconds, double long_ns, double *runs, size_t *n) {
    double prev = now_ns(), start = prev, end = start + seconds * 1e9, run_start = prev;
    int first = 1;
    *n = 0;
    for (;;) {
        double t = now_ns();
        if (t - prev >= long_ns) {
            if (!first && *n < MAX_RUNS) runs[(*n)++] = prev - run_start;
            first = 0;
            run_start = t;
        }
        prev = t;
        if (t >= end) break;
    }
}

static int pair_main(int cpu, double seconds, double long_ns) {
    pin(cpu);
    /* Shared with the child: two arrays of runs and their counts. */
    size_t bytes = 2 * MAX_RUNS * sizeof(double) + 2 * sizeof(size_t);
    double *runs = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (runs == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    size_t *counts = (size_t *)(runs + 2 * MAX_RUNS);
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        pair_loop(seconds, long_ns, runs + MAX_RUNS, &counts[1]);
        _exit(0);
    }
    pair_loop(seconds, long_ns, runs, &counts[0]);
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "cosched-detour: the paired loop failed\n");
        return 1;
    }
    size_t n = counts[0] + counts[1];
    memmove(runs + counts[0], runs + MAX_RUNS, counts[1] * sizeof(double));
    double mean, sd;
    mean_sd(runs, n, &mean, &sd);
    qsort(runs, n, sizeof(double), cmp);
    printf("{\"mode\": \"pair\", \"cpu\": %d, \"seconds\": %.6f, \"long_us\": %.1f, \"slice_count\": %zu, "
           "\"slice_count_a\": %zu, \"slice_count_b\": %zu, \"slice_mean_us\": %.3f, \"slice_sd_us\": %.3f, "
           "\"slice_cv\": %.6f, \"slice_p10_us\": %.3f, \"slice_p50_us\": %.3f, \"slice_p90_us\": %.3f}\n",
           cpu, seconds, long_ns / 1e3, n, counts[0], counts[1], mean / 1e3, sd / 1e3, mean > 0 ? sd / mean : 0.0,
           pct(runs, n, 0.1) / 1e3, pct(runs, n, 0.5) / 1e3, pct(runs, n, 0.9) / 1e3);
    munmap(runs, bytes);
    return 0;
}

/* The plain mode: the detours of one loop (see the top of this file). */
static int detour_main(int cpu, double seconds, double long_ns) {
    pin(cpu);
    /* The loop's own cost: the smallest step over a short warm-up. */
    double loop = 1e18, prev = now_ns();
    for (int i = 0; i < 1000000; i++) {
        double t = now_ns();
        if (t - prev < loop) loop = t - prev;
        prev = t;
    }
    double threshold = loop * THRESHOLD_FACTOR > THRESHOLD_NS ? loop * THRESHOLD_FACTOR : THRESHOLD_NS;
    double *shorts = malloc(sizeof(double) * MAX_DETOURS);
    if (!shorts) {
        perror("malloc");
        return 1;
    }
    size_t n_short = 0, n_long = 0;
    double t_short = 0, t_long = 0;
    double start = now_ns(), end = start + seconds * 1e9;
    prev = start;
    for (;;) {
        double t = now_ns();
        double step = t - prev;
        prev = t;
        if (step > threshold) {
            double d = step - loop;
            if (d >= long_ns) {
                n_long++;
                t_long += d;
            } else {
                if (n_short < MAX_DETOURS) shorts[n_short] = d;
                n_short++;
                t_short += d;
            }
        }
        if (t >= end) break;
    }
    double wall = (prev - start) / 1e9;
    double run = wall - (t_short + t_long) / 1e9;
    size_t kept = n_short < MAX_DETOURS ? n_short : MAX_DETOURS;
    qsort(shorts, kept, sizeof(double), cmp);
    printf("{\"cpu\": %d, \"seconds\": %.6f, \"loop_ns\": %.1f, \"threshold_ns\": %.1f, \"long_us\": %.1f, \"run_s\": %.6f, "
           "\"short_count\": %zu, \"short_total_us\": %.3f, \"short_per_s\": %.3f, "
           "\"short_p50_us\": %.3f, \"short_p90_us\": %.3f, \"short_p99_us\": %.3f, "
           "\"short_fraction\": %.8f, \"long_count\": %zu, \"long_total_us\": %.3f, \"long_per_s\": %.3f, "
           "\"long_fraction\": %.8f}\n",
           cpu, wall, loop, threshold, long_ns / 1e3, run, n_short, t_short / 1e3, n_short / run,
           pct(shorts, kept, 0.5) / 1e3, pct(shorts, kept, 0.9) / 1e3, pct(shorts, kept, 0.99) / 1e3,
           t_short / 1e9 / run, n_long, t_long / 1e3, n_long / wall, t_long / 1e9 / wall);
    free(shorts);
    return 0;
}

/* The arguments of both modes: [CPU [SECONDS [LONG_US]]] from argv[first] on. */
struct args {
    int cpu;
    double seconds, long_ns;
};

/* Fills `a` (defaults: CPU 0, 2 s, 100 us); 0, or 2 after printing the usage when SECONDS or LONG_US is not
 * positive. */
static int parse_args(int argc, char **argv, int first, const char *mode, struct args *a) {
    a->cpu = argc > first ? atoi(argv[first]) : 0;
    a->seconds = argc > first + 1 ? atof(argv[first + 1]) : 2.0;
    a->long_ns = (argc > first + 2 ? atof(argv[first + 2]) : 100.0) * 1e3;
    if (a->seconds <= 0 || a->long_ns <= 0) {
        fprintf(stderr, "usage: cosched-detour %s[CPU [SECONDS [LONG_US]]]\n", mode);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv) {
    int pair = argc > 1 && strcmp(argv[1], "pair") == 0;
    struct args a;
    if (parse_args(argc, argv, pair ? 2 : 1, pair ? "pair " : "", &a) != 0) return 2;
    return pair ? pair_main(a.cpu, a.seconds, a.long_ns) : detour_main(a.cpu, a.seconds, a.long_ns);
}

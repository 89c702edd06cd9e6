/*
 * cosched-timeshare: how the native scheduler of this machine time-shares one CPU, the measurements the
 * real-vs-sim preset fits its OS model on (python/coscheduling/experiments/osfit.py). Every process is
 * pinned to CPU `cpu`; every figure comes from CLOCK_MONOTONIC stamps and per-thread CPU time
 * (CLOCK_THREAD_CPUTIME_ID), never from counts that depend on the load.
 *
 *   slices CPU N SECONDS [GAP_US]
 *       N CPU-bound spinners (N >= 2) share the CPU for SECONDS. Each reads CLOCK_MONOTONIC in a tight loop;
 *       a step of GAP_US (default 50) or more is a time the spinner did not run, so the stretch between two
 *       such steps is one run slice (the first run, begun before the window, and the last, cut by its end,
 *       are left out). A slice whose following gap saw another spinner start a run ends in a hand-off (the
 *       scheduler gave the CPU to the partner; otherwise another task of the machine took it). Output: the
 *       slices' count, mean, standard deviation, coefficient of variation and 10th/50th/90th percentiles,
 *       the share of slices ended by a hand-off, and each spinner's CPU time over the window.
 *
 *   wake CPU SPINNERS SLEEPERS ROUNDS [SLEEP_US [BURST_US [K [SEED]]]]
 *       SLEEPERS sleepers share the CPU with SPINNERS spinners (0: the CPU is otherwise idle, the baseline).
 *       ROUNDS times each computes a burst of CPU time drawn from Erlang-K of mean BURST_US (its own CPU
 *       clock; SplitMix64 draws from SEED + its index), then sleeps until SLEEP_US after the burst's end
 *       (clock_nanosleep, TIMER_ABSTIME, timer slack 1 ns). Two sleepers make the instant a sleeper wakes
 *       independent of when a spinner's slice began (it began when the other sleeper blocked, or after). A sample is the delay from that deadline to the sleeper running
 *       again: with a spinner on the CPU, whether the woken sleeper preempts it at once (wake-up
 *       preemption) or waits for the spinner's slice to end. Each spinner records its runs (stretches without
 *       a gap of 5 us), so each delay splits into the time a spinner held the CPU after the deadline
 *       (`held`: what wake-up preemption decides) and the rest (the timer's and the wake-up's own cost,
 *       and whatever other task of the machine ran: `held` does not depend on that load). Defaults
 *       20,000 us, 5,000 us, 5, 1: the simulator's `io-bound` job (seed 003 §3.2), so the simulated
 *       counterpart runs the same program. Output: the 10th/50th/90th percentiles and mean of the delays
 *       (`wake_*`) and of the held times (`held_*`) of all sleepers' wake-ups, and the CPU time of the
 *       first sleeper and of each spinner.
 *
 * Prints one JSON object. The spinners end when the measuring process sets a shared flag, and with it
 * (PR_SET_PDEATHSIG).
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

#define MAX_SPINNERS 8
#define MAX_RUNS 100000
#define LD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

static int64_t now_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Shared by the spinners and the measuring process. */
struct shared {
    int64_t go_ns, end_ns;              /* the measuring window (CLOCK_MONOTONIC) */
    int64_t last_start[MAX_SPINNERS];   /* when spinner i last began a run */
    int64_t cpu_ns[MAX_SPINNERS];       /* spinner i's CPU time over the window */
    size_t count[MAX_SPINNERS];         /* slices recorded by spinner i */
    size_t handoffs[MAX_SPINNERS];      /* of which ended by another spinner's run */
    uint32_t stop;                      /* wake mode: the spinners end when set */
    double runs[MAX_SPINNERS][MAX_RUNS]; /* slice lengths, ns */
};

static void die_with_parent(void) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        perror("prctl(PR_SET_PDEATHSIG)");
        _exit(1);
    }
}

/* Spinner i of the slices mode: records its runs between gaps of at least gap_ns inside the window. */
static void slice_loop(struct shared *s, int i, int n, int64_t gap_ns) {
    while (now_ns(CLOCK_MONOTONIC) < s->go_ns) {
    }
    int64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    int64_t prev = now_ns(CLOCK_MONOTONIC), run_start = prev;
    int first = 1;
    ST(&s->last_start[i], prev);
    for (;;) {
        int64_t t = now_ns(CLOCK_MONOTONIC);
        if (t >= s->end_ns) break;
        if (t - prev >= gap_ns) {
            if (!first && s->count[i] < MAX_RUNS) {
                int handoff = 0;
                for (int j = 0; j < n; j++) {
                    int64_t ls = LD(&s->last_start[j]);
                    if (j != i && ls > prev && ls <= t) handoff = 1;
                }
                s->runs[i][s->count[i]++] = (double)(prev - run_start);
                s->handoffs[i] += (size_t)handoff;
            }
            first = 0;
            run_start = t;
            ST(&s->last_start[i], t);
        }
        prev = t;
    }
    s->cpu_ns[i] = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
}

static pid_t spawn(void) {
    pid_t p = fork();
    if (p < 0) {
        perror("fork");
        exit(1);
    }
    if (p == 0) die_with_parent();
    return p;
}

static int reap(pid_t p) {
    int st = 0;
    if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "cosched-timeshare: a spinner failed\n");
        return 1;
    }
    return 0;
}


static int slices_main(struct shared *s, int cpu, int n, double seconds, double gap_us) {
    pin(cpu);
    /* The window opens 20 ms after the forks, so every spinner is in its loop by then. */
    s->go_ns = now_ns(CLOCK_MONOTONIC) + 20000000;
    s->end_ns = s->go_ns + (int64_t)(seconds * 1e9);
    pid_t kids[MAX_SPINNERS];
    for (int i = 1; i < n; i++) {
        kids[i] = spawn();
        if (kids[i] == 0) {
            slice_loop(s, i, n, (int64_t)(gap_us * 1e3));
            _exit(0);
        }
    }
    slice_loop(s, 0, n, (int64_t)(gap_us * 1e3));
    int bad = 0;
    for (int i = 1; i < n; i++) bad |= reap(kids[i]);
    if (bad) return 1;
    size_t total = 0, handoffs = 0;
    static double all[MAX_SPINNERS * MAX_RUNS];
    for (int i = 0; i < n; i++) {
        memcpy(all + total, s->runs[i], s->count[i] * sizeof(double));
        total += s->count[i];
        handoffs += s->handoffs[i];
    }
    double mean, sd;
    mean_sd(all, total, &mean, &sd);
    qsort(all, total, sizeof(double), cmp);
    double window = (double)(s->end_ns - s->go_ns);
    printf("{\"mode\": \"slices\", \"cpu\": %d, \"spinners\": %d, \"seconds\": %.6f, \"gap_us\": %.1f, "
           "\"slice_count\": %zu, \"slice_mean_us\": %.3f, \"slice_sd_us\": %.3f, \"slice_cv\": %.6f, "
           "\"slice_p10_us\": %.3f, \"slice_p50_us\": %.3f, \"slice_p90_us\": %.3f, \"handoff_share\": %.6f, "
           "\"cpu_share\": [",
           cpu, n, seconds, gap_us, total, mean / 1e3, sd / 1e3, mean > 0 ? sd / mean : 0.0, pct(all, total, 0.1) / 1e3,
           pct(all, total, 0.5) / 1e3, pct(all, total, 0.9) / 1e3, total ? (double)handoffs / (double)total : 0.0);
    for (int i = 0; i < n; i++) printf("%s%.6f", i ? ", " : "", (double)s->cpu_ns[i] / window);
    printf("]}\n");
    return 0;
}

/* SplitMix64 (Steele, Lea, Flood, OOPSLA 2014): a uniform in (0, 1]. */
static double uniform(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return ((double)(z >> 11) + 1.0) / 9007199254740992.0;
}

/* An Erlang-k draw of mean `mean`: the sum of k exponentials of mean mean / k. */
static double erlang(uint64_t *state, double mean, int k) {
    double sum = 0;
    for (int i = 0; i < k; i++) sum -= log(uniform(state));
    return sum * mean / k;
}

/* Spinner i of the wake mode: records its runs (start, end; ns) between gaps of at least WAKE_GAP_NS until
 * the stop flag; the sleeper's delays are then split into the time a spinner held the CPU and the rest. */
#define WAKE_GAP_NS 5000
static void wake_spin(struct shared *s, int i) {
    int64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    int64_t prev = now_ns(CLOCK_MONOTONIC), run_start = prev;
    size_t n = 0;
    while (!LD(&s->stop)) {
        int64_t t = now_ns(CLOCK_MONOTONIC);
        if (t - prev >= WAKE_GAP_NS) {
            if (n + 2 <= MAX_RUNS) {
                s->runs[i][n++] = (double)run_start;
                s->runs[i][n++] = (double)prev;
            }
            run_start = t;
        }
        prev = t;
    }
    if (n + 2 <= MAX_RUNS) {
        s->runs[i][n++] = (double)run_start;
        s->runs[i][n++] = (double)prev;
    }
    s->count[i] = n / 2;
    s->cpu_ns[i] = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
}

/* The time spinner i held the CPU within [a, b] (its runs are in time order). */
static double held(const struct shared *s, int i, double a, double b) {
    double sum = 0;
    for (size_t r = 0; r < s->count[i]; r++) {
        double lo = s->runs[i][2 * r] > a ? s->runs[i][2 * r] : a;
        double hi = s->runs[i][2 * r + 1] < b ? s->runs[i][2 * r + 1] : b;
        if (hi > lo) sum += hi - lo;
    }
    return sum;
}

static void print_pcts(const char *name, double *v, long n) {
    double sum = 0;
    for (long r = 0; r < n; r++) sum += v[r];
    qsort(v, (size_t)n, sizeof(double), cmp);
    printf("\"%s_p10_us\": %.3f, \"%s_p50_us\": %.3f, \"%s_p90_us\": %.3f, \"%s_mean_us\": %.3f, ", name,
           pct(v, (size_t)n, 0.1) / 1e3, name, pct(v, (size_t)n, 0.5) / 1e3, name, pct(v, (size_t)n, 0.9) / 1e3, name,
           sum / (double)n / 1e3);
}

/* One sleeper: `rounds` cycles of a burst and a sleep; per round its deadline and when it ran again (ns)
 * into at[2r], at[2r + 1]. */
static void sleeper(double *at, long rounds, double sleep_us, double burst_us, int k, uint64_t seed) {
    uint64_t state = seed;
    for (long r = 0; r < rounds; r++) {
        int64_t until = now_ns(CLOCK_THREAD_CPUTIME_ID) + (int64_t)(erlang(&state, burst_us, k) * 1e3);
        while (now_ns(CLOCK_THREAD_CPUTIME_ID) < until) {
        }
        int64_t deadline = now_ns(CLOCK_MONOTONIC) + (int64_t)(sleep_us * 1e3);
        struct timespec d = {(time_t)(deadline / 1000000000), (long)(deadline % 1000000000)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &d, NULL) != 0) {
        }
        at[2 * r] = (double)deadline;
        at[2 * r + 1] = (double)now_ns(CLOCK_MONOTONIC);
    }
}

static int wake_main(struct shared *s, int cpu, int spinners, int sleepers, long rounds, double sleep_us,
                     double burst_us, int k, uint64_t seed) {
    pin(cpu);
    if (prctl(PR_SET_TIMERSLACK, 1UL) != 0) {
        perror("prctl(PR_SET_TIMERSLACK)");
        return 1;
    }
    long n = rounds * sleepers;
    /* Per sleeper and round: deadline, when the sleeper ran (shared: the sleepers are processes). */
    double *at = mmap(NULL, sizeof(double) * 2 * (size_t)n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    double *lat = malloc(sizeof(double) * (size_t)n), *hold = malloc(sizeof(double) * (size_t)n);
    if (at == MAP_FAILED || !lat || !hold) {
        perror("mmap/malloc");
        return 1;
    }
    pid_t kids[2 * MAX_SPINNERS];
    for (int i = 0; i < spinners; i++) {
        kids[i] = spawn();
        if (kids[i] == 0) {
            wake_spin(s, i);
            _exit(0);
        }
    }
    /* The spinners settle on the CPU (20 ms, several of their slices). */
    struct timespec settle = {0, 20000000};
    nanosleep(&settle, NULL);
    int64_t start = now_ns(CLOCK_MONOTONIC), cpu_start = now_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int j = 1; j < sleepers; j++) {
        kids[spinners + j - 1] = spawn();
        if (kids[spinners + j - 1] == 0) {
            sleeper(at + 2 * rounds * j, rounds, sleep_us, burst_us, k, seed + (uint64_t)j);
            _exit(0);
        }
    }
    sleeper(at, rounds, sleep_us, burst_us, k, seed);
    int bad = 0;
    for (int j = 1; j < sleepers; j++) bad |= reap(kids[spinners + j - 1]);
    double wall = (double)(now_ns(CLOCK_MONOTONIC) - start);
    double mine = (double)(now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start);
    ST(&s->stop, 1u);
    for (int i = 0; i < spinners; i++) bad |= reap(kids[i]);
    if (bad) return 1;
    for (long r = 0; r < n; r++) {
        lat[r] = at[2 * r + 1] - at[2 * r];
        hold[r] = 0;
        for (int i = 0; i < spinners; i++) hold[r] += held(s, i, at[2 * r], at[2 * r + 1]);
    }
    printf("{\"mode\": \"wake\", \"cpu\": %d, \"spinners\": %d, \"sleepers\": %d, \"rounds\": %ld, \"sleep_us\": %.1f, "
           "\"burst_us\": %.1f, \"k\": %d, \"seed\": %llu, \"samples\": %ld, ",
           cpu, spinners, sleepers, rounds, sleep_us, burst_us, k, (unsigned long long)seed, n);
    print_pcts("wake", lat, n);
    print_pcts("held", hold, n);
    printf("\"wall_s\": %.6f, \"sleeper_cpu_share\": %.6f, \"spinner_cpu_s\": [", wall / 1e9, mine / wall);
    /* The spinners ran from their fork (20 ms before the first round) to the stop flag. */
    for (int i = 0; i < spinners; i++) printf("%s%.6f", i ? ", " : "", (double)s->cpu_ns[i] / 1e9);
    printf("]}\n");
    munmap(at, sizeof(double) * 2 * (size_t)n);
    free(lat);
    free(hold);
    return 0;
}

static int usage(void) {
    fprintf(stderr, "usage: cosched-timeshare slices CPU N SECONDS [GAP_US]   (2 <= N <= %d)\n"
                    "       cosched-timeshare wake CPU SPINNERS SLEEPERS ROUNDS [SLEEP_US [BURST_US [K [SEED]]]]   "
                    "(0 <= SPINNERS <= %d, 1 <= SLEEPERS <= %d)\n",
            MAX_SPINNERS, MAX_SPINNERS, MAX_SPINNERS);
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 5) return usage();
    struct shared *s = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    int cpu = atoi(argv[2]);
    if (strcmp(argv[1], "slices") == 0) {
        int n = atoi(argv[3]);
        double seconds = atof(argv[4]), gap = argc > 5 ? atof(argv[5]) : 50.0;
        if (n < 2 || n > MAX_SPINNERS || !(seconds > 0) || !(gap > 0)) return usage();
        return slices_main(s, cpu, n, seconds, gap);
    }
    if (strcmp(argv[1], "wake") == 0 && argc > 5) {
        int spinners = atoi(argv[3]), sleepers = atoi(argv[4]);
        long rounds = atol(argv[5]);
        double sleep_us = argc > 6 ? atof(argv[6]) : 20000.0, burst_us = argc > 7 ? atof(argv[7]) : 5000.0;
        int k = argc > 8 ? atoi(argv[8]) : 5;
        uint64_t seed = argc > 9 ? strtoull(argv[9], NULL, 10) : 1;
        if (spinners < 0 || spinners > MAX_SPINNERS || sleepers < 1 || sleepers > MAX_SPINNERS || rounds < 1 ||
            !(sleep_us > 0) || !(burst_us >= 0) || k < 1)
            return usage();
        return wake_main(s, cpu, spinners, sleepers, rounds, sleep_us, burst_us, k, seed);
    }
    return usage();
}

/*
 * cosched-wakeup: what waking a process blocked in a futex costs on this machine (the shim's BLOCK wait:
 * FUTEX_WAIT on a shared word, woken by FUTEX_WAKE from the sender), in wall time from just before the
 * waker's FUTEX_WAKE to the woken process running again (both read CLOCK_MONOTONIC; the waker writes its
 * time into shared memory before the wake). Four cases, each ROUNDS hand-overs:
 *
 *   spin    two processes pinned to CPU_A and CPU_B pass a token by spinning on a shared word (no
 *           sleep): the cost of seeing another CPU's store and reading the clock, the floor of the others
 *   cross   the same two processes, but the receiver sleeps in FUTEX_WAIT and the sender wakes it with
 *           FUTEX_WAKE: a wake-up of a process whose CPU is idle (the sleeper's CPU has nothing else to
 *           run, so it halts; the wake-up is an inter-processor interrupt that brings it out of idle)
 *   same    a futex ping-pong of two processes both pinned to CPU_A: the woken process runs when the
 *           waker blocks (one wake-up, one block, one context switch)
 *   busy    the sleeper is pinned to CPU_B together with a compute loop (nice 0); the waker, on CPU_A,
 *           wakes it PERIOD_US after it last ran: how long a woken process waits for a CPU that runs
 *           another task (the native scheduler's wake-up preemption: at once, or at the running task's
 *           slice end or next tick)
 *
 * Per case: the 10th, 50th and 90th percentiles and the mean of the samples (us). Usage:
 * cosched-wakeup [CPU_A [CPU_B [ROUNDS [PERIOD_US]]]] (default 0 1 5000 200). Prints one JSON object.
 * Run it with nothing else on the two CPUs: another task there adds its slices to the samples.
 */
#include <linux/futex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "timing.h"

#define LD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

/* Shared by the processes of one case. */
struct shared {
    uint32_t word[2]; /* side i sleeps (or spins) on word[i]; the other side bumps it */
    double t0[2];     /* the time the other side stamped just before bumping word[i] */
    uint32_t stop;    /* the compute loop of `busy` ends when set */
    uint32_t acks;    /* `busy`: wake-ups the sleeper has seen */
    double acked_at;  /* `busy`: when it last saw one */
};

static long futex(uint32_t *addr, int op, uint32_t val) { return syscall(SYS_futex, addr, op, val, NULL, NULL, 0); }

/* Waits until word[i] differs from `seen` (sleeping in the futex, or spinning); returns its new value. */
static uint32_t await(struct shared *s, int i, uint32_t seen, int spin) {
    uint32_t v;
    while ((v = LD(&s->word[i])) == seen)
        if (!spin) futex(&s->word[i], FUTEX_WAIT, seen);
    return v;
}

/* Stamps the time, bumps word[i] and wakes its sleeper. */
static void hand_over(struct shared *s, int i, int spin) {
    s->t0[i] = mono_now();
    __atomic_fetch_add(&s->word[i], 1u, __ATOMIC_SEQ_CST);
    if (!spin) futex(&s->word[i], FUTEX_WAKE, 1);
}

/* One side of a ping-pong: `rounds` receptions, each sample the delay from the other side's stamp. */
static void pingpong_side(struct shared *s, int i, long rounds, int spin, double *out) {
    uint32_t seen = 0;
    if (i == 0) hand_over(s, 1, spin);
    for (long r = 0; r < rounds; r++) {
        seen = await(s, i, seen, spin);
        out[r] = (mono_now() - s->t0[i]) * 1e6;
        if (i == 1 || r + 1 < rounds) hand_over(s, 1 - i, spin);
    }
}

static pid_t spawn(int cpu) {
    pid_t p = fork();
    if (p < 0) {
        perror("fork");
        exit(1);
    }
    if (p == 0) pin(cpu);
    return p;
}

static void reap(pid_t p) {
    int st = 0;
    if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "cosched-wakeup: a child process failed\n");
        exit(1);
    }
}

/* A ping-pong between CPU a (side 0) and CPU b (side 1); the samples of both sides into out[0..2*rounds). */
static void pingpong(struct shared *s, int a, int b, long rounds, int spin, double *out) {
    memset(s, 0, sizeof *s);
    pid_t c = spawn(b);
    if (c == 0) {
        pingpong_side(s, 1, rounds, spin, out + rounds);
        _exit(0);
    }
    pin(a);
    pingpong_side(s, 0, rounds, spin, out);
    reap(c);
}

/* `busy`: the sleeper and a compute loop on CPU b, the waker on CPU a. */
static void busy(struct shared *s, int a, int b, long rounds, double period_us, double *out) {
    memset(s, 0, sizeof *s);
    pid_t hog = spawn(b);
    if (hog == 0) {
        volatile uint64_t x = 0;
        while (!LD(&s->stop)) x++;
        _exit(0);
    }
    pid_t sleeper = spawn(b);
    if (sleeper == 0) {
        uint32_t seen = 0;
        for (long r = 0; r < rounds; r++) {
            seen = await(s, 0, seen, 0);
            double t = mono_now();
            out[r] = (t - s->t0[0]) * 1e6;
            s->acked_at = t;
            ST(&s->acks, (uint32_t)(r + 1));
        }
        _exit(0);
    }
    pin(a);
    double warm = mono_now() + 0.05; /* the compute loop settles on its CPU */
    while (mono_now() < warm) {
    }
    s->acked_at = mono_now();
    for (long r = 0; r < rounds; r++) {
        while (mono_now() < s->acked_at + period_us * 1e-6) {
        }
        hand_over(s, 0, 0);
        while (LD(&s->acks) != (uint32_t)(r + 1)) {
        }
    }
    reap(sleeper);
    ST(&s->stop, 1u);
    reap(hog);
}

static void stats(const char *name, double *v, long n, const char *sep) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    double sum = 0;
    for (long i = 0; i < n; i++) sum += v[i];
    printf("\"%s\": {\"samples\": %ld, \"p10_us\": %.3f, \"p50_us\": %.3f, \"p90_us\": %.3f, \"mean_us\": %.3f}%s", name,
           n, v[n / 10], v[n / 2], v[n * 9 / 10], sum / (double)n, sep);
}

int main(int argc, char **argv) {
    int a = argc > 1 ? atoi(argv[1]) : 0, b = argc > 2 ? atoi(argv[2]) : 1;
    long rounds = argc > 3 ? atol(argv[3]) : 5000;
    double period = argc > 4 ? atof(argv[4]) : 200.0;
    if (a == b || rounds < 10 || period <= 0) {
        fprintf(stderr, "usage: cosched-wakeup [CPU_A [CPU_B [ROUNDS [PERIOD_US]]]] (two different CPUs)\n");
        return 2;
    }
    size_t bytes = sizeof(struct shared) + 2 * (size_t)rounds * sizeof(double);
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    struct shared *s = mem;
    double *out = (double *)((char *)mem + sizeof(struct shared));
    printf("{\"cpu_a\": %d, \"cpu_b\": %d, \"rounds\": %ld, \"period_us\": %.1f, ", a, b, rounds, period);
    pingpong(s, a, b, rounds, 1, out);
    stats("spin", out, 2 * rounds, ", ");
    pingpong(s, a, b, rounds, 0, out);
    stats("cross", out, 2 * rounds, ", ");
    pingpong(s, a, a, rounds, 0, out);
    stats("same", out, 2 * rounds, ", ");
    busy(s, a, b, rounds, period, out);
    stats("busy", out, rounds, "}\n");
    munmap(mem, bytes);
    return 0;
}

/*
 * cosched-ctxswitch: the cost of a context switch between two processes on one CPU of this machine,
 * the lmbench lat_ctx method (two processes pass a one-byte token through two pipes):
 *
 *   pair_us     wall time per hand-over when both processes are pinned to CPU `cpu`: each hand-over is
 *               one write, one read and one switch from the writer (now blocked) to the reader
 *   self_us     wall time of one write and one read of the same pipe in a single process on that CPU
 *               (the pipe's cost without a switch)
 *   switch_us   pair_us - self_us: one context switch, including the wake-up of the blocked reader
 *
 * Each figure is the median of BATCHES batches of ROUNDS hand-overs. Usage: cosched-ctxswitch [CPU [ROUNDS]]
 * (default CPU 0, 20,000 rounds). Prints one JSON object. Run it on an idle CPU: another task on the
 * same CPU adds its slices to pair_us.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

#define BATCHES 5


static void xfer(int rfd, int wfd) {
    char c = 0;
    if (write(wfd, &c, 1) != 1 || read(rfd, &c, 1) != 1) {
        perror("pipe");
        exit(1);
    }
}

int main(int argc, char **argv) {
    int cpu = argc > 1 ? atoi(argv[1]) : 0;
    long rounds = argc > 2 ? atol(argv[2]) : 20000;
    pin(cpu);
    double self[BATCHES], pair[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        int p[2];
        if (pipe(p) != 0) {
            perror("pipe");
            return 1;
        }
        double t0 = mono_now();
        for (long i = 0; i < rounds; i++) xfer(p[0], p[1]);
        self[b] = (mono_now() - t0) / rounds * 1e6;
        close(p[0]);
        close(p[1]);
    }
    for (int b = 0; b < BATCHES; b++) {
        int ab[2], ba[2];
        if (pipe(ab) != 0 || pipe(ba) != 0) {
            perror("pipe");
            return 1;
        }
        pid_t child = fork();
        if (child < 0) {
            perror("fork");
            return 1;
        }
        if (child == 0) {  // echoes every token back until EOF; inherits the pinning
            close(ab[1]);
            close(ba[0]);
            char c;
            while (read(ab[0], &c, 1) == 1)
                if (write(ba[1], &c, 1) != 1) _exit(1);
            _exit(0);
        }
        close(ab[0]);
        close(ba[1]);
        double t0 = mono_now();
        for (long i = 0; i < rounds; i++) xfer(ba[0], ab[1]);
        // Two hand-overs per round (there and back).
        pair[b] = (mono_now() - t0) / (2.0 * rounds) * 1e6;
        close(ab[1]);
        close(ba[0]);
        waitpid(child, NULL, 0);
    }
    qsort(self, BATCHES, sizeof self[0], cmp);
    qsort(pair, BATCHES, sizeof pair[0], cmp);
    double s = self[BATCHES / 2], q = pair[BATCHES / 2];
    printf("{\"cpu\": %d, \"rounds\": %ld, \"pair_us\": %.4f, \"self_us\": %.4f, \"switch_us\": %.4f}\n", cpu,
           rounds, q, s, q - s);
    return 0;
}

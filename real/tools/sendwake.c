/*
 * cosched-sendwake: the two per-node costs of the gang-scale model (python/coscheduling/experiments/scale.py),
 * measured on this machine; run it on an idle machine.
 *
 *   send_us           CPU time of one UDP sendto of a 64-byte datagram on loopback (a coordinator's
 *                     per-message cost), the median over 5 batches of 20,000 sends
 *   wake_p50_us/p99   lateness of an absolute CLOCK_MONOTONIC clock_nanosleep 1 ms ahead at normal priority
 *                     (an agent's switch timer), over 2,000 wake-ups
 *
 * Prints one JSON object. Talks only to 127.0.0.1.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}


int main(void) {
    int s = socket(AF_INET, SOCK_DGRAM, 0), r = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0 || r < 0) {
        perror("socket");
        return 1;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(r, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(r, (struct sockaddr *)&a, &len) != 0) {
        perror("bind");
        return 1;
    }
    char buf[64] = {0};
    enum { BATCHES = 5, SENDS = 20000, WAKES = 2000 };
    double per[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        double cpu = 0;
        for (int i = 0; i < SENDS; i++) {
            double t0 = cpu_now();
            if (sendto(s, buf, sizeof buf, 0, (struct sockaddr *)&a, sizeof a) != (ssize_t)sizeof buf) {
                perror("sendto");
                return 1;
            }
            cpu += cpu_now() - t0;
            if (i % 64 == 63) /* drain, so the receive buffer never fills (not timed) */
                while (recv(r, buf, sizeof buf, MSG_DONTWAIT) > 0) {
                }
        }
        per[b] = cpu / SENDS;
    }
    qsort(per, BATCHES, sizeof per[0], cmp);
    double *late = malloc(WAKES * sizeof *late);
    for (int i = 0; i < WAKES; i++) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        t.tv_nsec += 1000000;
        if (t.tv_nsec >= 1000000000) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000;
        }
        double target = t.tv_sec + t.tv_nsec * 1e-9;
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
        late[i] = mono_now() - target;
    }
    qsort(late, WAKES, sizeof *late, cmp);
    printf("{\"send_us\": %.3f, \"wake_p50_us\": %.1f, \"wake_p99_us\": %.1f}\n", per[BATCHES / 2] * 1e6,
           late[WAKES / 2] * 1e6, late[WAKES * 99 / 100] * 1e6);
    free(late);
    return 0;
}

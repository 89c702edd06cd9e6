/*
 * cosched-collwake-<mpi>: how late a rank blocked in the shim is woken when its partner arrives, in a
 * collective and in a point-to-point receive (run it with 2 ranks under libcosched, COSCHED_WAIT=block).
 *
 * Each round: both ranks meet in a barrier; then rank 0 enters the measured operation at once and
 * blocks, while rank 1 sleeps DELAY_US (long enough for rank 0 to be asleep in the futex), reads
 * CLOCK_MONOTONIC and enters the operation itself. Rank 0 reads the clock when the operation returns;
 * the sample is rank 0's return time minus rank 1's entry time (both on this machine's monotonic clock;
 * rank 1 sends its time afterwards, outside the measurement). Operations:
 *
 *   p2p        rank 0 MPI_Recv, rank 1 MPI_Send (the shim wakes the receiver on the send it sees)
 *   barrier    MPI_Barrier on MPI_COMM_WORLD
 *   allreduce  MPI_Allreduce of one double on MPI_COMM_WORLD
 *   bcast      MPI_Bcast of one double from rank 1
 *
 * Usage: cosched-collwake-<mpi> [ROUNDS [DELAY_US [OP]]] (default 200 2000, every operation). Rank 0 prints one JSON object:
 * per operation the 10th/50th/90th percentiles and the mean (us), and how many samples were at least
 * 900 us (a wake-up that came only from a ~1 ms timeout, not from the partner's arrival).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

enum { P2P, BARRIER, ALLREDUCE, BCAST, OPS };
static const char *names[OPS] = {"p2p", "barrier", "allreduce", "bcast"};

static void op(int which, int rank) {
    double x = rank, y = 0;
    switch (which) {
    case P2P:
        if (rank == 0)
            MPI_Recv(&x, 1, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(&x, 1, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD);
        break;
    case BARRIER:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    case ALLREDUCE:
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        break;
    case BCAST:
        MPI_Bcast(&x, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
        break;
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    long delay_us = argc > 2 ? atol(argv[2]) : 2000;
    int only = -1;
    for (int w = 0; argc > 3 && w < OPS; w++)
        if (!strcmp(argv[3], names[w])) only = w;
    if (size != 2 || rounds < 1 || delay_us < 0 || (argc > 3 && only < 0)) {
        /* Every rank sees the same arguments and size: rank 0 says why, and all end normally with status 2
         * (an MPI_Abort could tear the job down before the launcher has forwarded rank 0's message). */
        if (rank == 0)
            fprintf(stderr, "usage: run with 2 ranks: cosched-collwake [ROUNDS [DELAY_US [p2p|barrier|allreduce|bcast]]]\n");
        MPI_Finalize();
        return 2;
    }
    double *lat = malloc(sizeof(double) * (size_t)rounds);
    struct timespec d = {.tv_sec = delay_us / 1000000, .tv_nsec = (delay_us % 1000000) * 1000};
    int printed = 0;
    if (rank == 0) printf("{");
    for (int w = 0; w < OPS; w++) {
        if (only >= 0 && w != only) continue;
        for (int i = 0; i < rounds; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t_enter = 0;
            if (rank == 1) {
                nanosleep(&d, NULL);
                t_enter = mono_now();
            }
            op(w, rank);
            double t_done = mono_now();
            if (rank == 1)
                MPI_Send(&t_enter, 1, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD);
            else {
                MPI_Recv(&t_enter, 1, MPI_DOUBLE, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                lat[i] = (t_done - t_enter) * 1e6;
            }
        }
        if (rank == 0) {
            double sum = 0;
            int late = 0;
            for (int i = 0; i < rounds; i++) {
                sum += lat[i];
                late += lat[i] >= 900.0;
            }
            qsort(lat, (size_t)rounds, sizeof lat[0], cmp);
            printf("%s\"%s\":{\"n\":%d,\"p10_us\":%.2f,\"p50_us\":%.2f,\"p90_us\":%.2f,\"mean_us\":%.2f,"
                   "\"late\":%d}",
                   printed++ ? "," : "", names[w], rounds, lat[rounds / 10], lat[rounds / 2], lat[rounds * 9 / 10],
                   sum / rounds, late);
        }
    }
    if (rank == 0) printf("}\n");
    free(lat);
    MPI_Finalize();
    return 0;
}

/* A fine-grained bulk-synchronous MPI program for the real-execution tests: ITERS times, every rank
 * computes GRAIN_US microseconds of its own CPU time, then exchanges one small message with each
 * neighbour of a ring (MPI_Sendrecv both ways). Usage: real_finegrain ITERS GRAIN_US */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static uint64_t cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long iters = argc > 1 ? atol(argv[1]) : 1000;
    uint64_t grain = (uint64_t)(argc > 2 ? atol(argv[2]) : 200) * 1000ull;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    volatile double x = 1.0;
    char s = 1, r = 0;
    for (long i = 0; i < iters; i++) {
        uint64_t t0 = cpu_ns();
        while (cpu_ns() - t0 < grain) x = x * 1.0000001 + 1e-9;
        MPI_Sendrecv(&s, 1, MPI_CHAR, right, 0, &r, 1, MPI_CHAR, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&s, 1, MPI_CHAR, left, 1, &r, 1, MPI_CHAR, right, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}

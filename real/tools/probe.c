/*
 * cosched-probe: small MPI programs that exercise the shim (tests and `cosched bench real`).
 *
 *   cosched-probe pingpong ITERS BYTES   ranks 0 and 1 ping-pong; rank 0 prints
 *                                        {"half_rtt_ns": median half round trip, ...} as JSON
 *   cosched-probe oneway ITERS GAP_US    ranks 0 and 1 take turns sending 8 bytes; the sender first
 *                                        computes GAP_US (so the receiver is settled in its wait:
 *                                        asleep in a blocking mode) and puts its CLOCK_MONOTONIC time
 *                                        in the message; the receiver takes the delay to its return
 *                                        from MPI_Recv. Rank 0 prints {"oneway_ns": median, "oneway_p10_ns",
 *                                        "oneway_p90_ns"} over the ITERS messages it receives
 *   cosched-probe sleepwait SECONDS      rank 1 sleeps SECONDS then sends; rank 0 waits in MPI_Recv;
 *                                        rank 0 prints its CPU time (utime+stime) and its time ready
 *                                        on a run queue (schedstat) over the wait
 *   cosched-probe calls                  one of each wrapped C call (point to point, waits, collectives)
 *   cosched-probe colls                  the collectives at the sizes that pick each algorithm the shim
 *                                        lists (shim/coll_algo.c): MPI_Alltoall of 1, 64 and 65536 ints per
 *                                        pair, MPI_Allgather of 1 and 65536 ints, MPI_Gather to rank 1,
 *                                        MPI_Scatter from rank 2 (mod size)
 *   cosched-probe sendcount ITERS        rank 1 sends ITERS messages to rank 0 (MPI_Send, one int); after each
 *                                        receive rank 0 reads its segment (/dev/shm/cosched.RUN.JOB.0 from
 *                                        COSCHED_RUN and COSCHED_JOB: an agent keeps it) and prints
 *                                        {"receives": ITERS, "uncounted": the receives after which its
 *                                        `consumed` exceeded its `arrivals`}
 *   cosched-probe bcastlag MS            MPI_Bcast of one int from rank 0 (then a barrier); rank 2 enters the
 *                                        broadcast MS milliseconds after the others
 *   cosched-probe gatherahead MS         on 4 ranks: MPI_Gather of one int to rank 0, rank 3 entering it MS
 *                                        milliseconds after the others; then two MPI_Gathers to rank 1, an
 *                                        MPI_Bcast from rank 1 and a barrier
 *   cosched-probe crash RANK             rank RANK raises SIGSEGV after MPI_Init; the others wait in a barrier
 *   cosched-probe exit RANK CODE         rank RANK exits with CODE without MPI_Finalize; the others wait
 */
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cosched_proto.h"

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

/* Time this thread spent waiting on a run queue (ready but not running), from schedstat. */
static uint64_t runq_ns(void) {
    unsigned long long run = 0, wait = 0;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &run, &wait) != 2) wait = 0;
        fclose(f);
    }
    return wait;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void usage(void) {
    fprintf(stderr, "usage: cosched-probe pingpong ITERS BYTES | oneway ITERS GAP_US | sleepwait SECONDS | calls | "
                    "colls | sendcount ITERS | bcastlag MS | gatherahead MS | crash RANK | exit RANK CODE\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) usage();
    const char *cmd = argv[1];
    if (!strcmp(cmd, "pingpong") && argc == 4) {
        int iters = atoi(argv[2]);
        int bytes = atoi(argv[3]);
        char *buf = calloc((size_t)(bytes > 0 ? bytes : 1), 1);
        uint64_t *rt = calloc((size_t)iters, sizeof *rt);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = -10; i < iters; i++) { /* 10 warm-up rounds */
            uint64_t t0 = now_ns();
            if (rank == 0) {
                MPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
            if (i >= 0) rt[i] = now_ns() - t0;
        }
        if (rank == 0) {
            qsort(rt, (size_t)iters, sizeof *rt, cmp_u64);
            printf("{\"iters\": %d, \"bytes\": %d, \"half_rtt_ns\": %llu, \"half_rtt_p10_ns\": %llu, "
                   "\"half_rtt_p90_ns\": %llu}\n",
                   iters, bytes, (unsigned long long)rt[iters / 2] / 2, (unsigned long long)rt[iters / 10] / 2,
                   (unsigned long long)rt[iters * 9 / 10] / 2);
        }
        free(buf);
        free(rt);
    } else if (!strcmp(cmd, "oneway") && argc == 4 && size >= 2) {
        int iters = atoi(argv[2]);
        uint64_t gap = (uint64_t)atoll(argv[3]) * 1000ull;
        if (iters < 1) usage();
        uint64_t *d = calloc((size_t)iters, sizeof *d);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = -10; i < iters; i++) { /* 10 warm-up rounds */
            for (int from = 0; from < 2; from++) {
                uint64_t stamp = 0;
                if (rank == from) {
                    uint64_t t = now_ns();
                    while (now_ns() - t < gap) {
                    }
                    stamp = now_ns();
                    MPI_Send(&stamp, 1, MPI_UINT64_T, 1 - from, 0, MPI_COMM_WORLD);
                } else if (rank == 1 - from) {
                    MPI_Recv(&stamp, 1, MPI_UINT64_T, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    uint64_t t = now_ns();
                    if (rank == 0 && i >= 0) d[i] = t - stamp;
                }
            }
        }
        if (rank == 0) {
            qsort(d, (size_t)iters, sizeof *d, cmp_u64);
            printf("{\"iters\": %d, \"gap_us\": %llu, \"oneway_ns\": %llu, \"oneway_p10_ns\": %llu, "
                   "\"oneway_p90_ns\": %llu}\n",
                   iters, (unsigned long long)(gap / 1000), (unsigned long long)d[iters / 2],
                   (unsigned long long)d[iters / 10], (unsigned long long)d[iters * 9 / 10]);
        }
        free(d);
    } else if (!strcmp(cmd, "sleepwait") && argc == 3) {
        double secs = atof(argv[2]);
        int v = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            uint64_t c0 = cpu_ns(), q0 = runq_ns(), t0 = now_ns();
            MPI_Recv(&v, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            uint64_t c1 = cpu_ns(), q1 = runq_ns(), t1 = now_ns();
            printf("{\"wait_ns\": %llu, \"cpu_ns\": %llu, \"runq_ns\": %llu}\n", (unsigned long long)(t1 - t0),
                   (unsigned long long)(c1 - c0), (unsigned long long)(q1 - q0));
        } else if (rank == 1) {
            struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
            nanosleep(&ts, NULL);
            MPI_Send(&v, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
        }
    } else if (!strcmp(cmd, "calls") && argc == 2) {
        int peer = rank ^ 1, x = rank, y = 0;
        double d = 1.0, e = 0.0;
        MPI_Request r[2];
        if (peer < size) {
            if (rank % 2 == 0) {
                MPI_Send(&x, 1, MPI_INT, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(&y, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Ssend(&x, 1, MPI_INT, peer, 2, MPI_COMM_WORLD);
            } else {
                MPI_Recv(&y, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&x, 1, MPI_INT, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(&y, 1, MPI_INT, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            MPI_Irecv(&y, 1, MPI_INT, peer, 3, MPI_COMM_WORLD, &r[0]);
            MPI_Isend(&x, 1, MPI_INT, peer, 3, MPI_COMM_WORLD, &r[1]);
            MPI_Status sts[2];
            MPI_Waitall(2, r, sts);
            MPI_Irecv(&y, 1, MPI_INT, peer, 4, MPI_COMM_WORLD, &r[0]);
            MPI_Isend(&x, 1, MPI_INT, peer, 4, MPI_COMM_WORLD, &r[1]);
            MPI_Wait(&r[0], MPI_STATUS_IGNORE);
            MPI_Wait(&r[1], MPI_STATUS_IGNORE);
            MPI_Sendrecv(&x, 1, MPI_INT, peer, 5, &y, 1, MPI_INT, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        int *all = calloc((size_t)size, sizeof(int)), *all2 = calloc((size_t)size, sizeof(int));
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Reduce(&d, &e, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Allreduce(&d, &e, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Alltoall(all, 1, MPI_INT, all2, 1, MPI_INT, MPI_COMM_WORLD);
        MPI_Allgather(&x, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
        /* A sub-communicator: ranks translate to world ranks. */
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
        int hr, hs;
        MPI_Comm_rank(half, &hr);
        MPI_Comm_size(half, &hs);
        if (hs >= 2) {
            if (hr == 0) MPI_Send(&x, 1, MPI_INT, 1, 6, half);
            if (hr == 1) MPI_Recv(&y, 1, MPI_INT, 0, 6, half, MPI_STATUS_IGNORE);
        }
        MPI_Comm_free(&half);
        if (rank == 0 && e != (double)size) {
            fprintf(stderr, "allreduce gave %g, expected %d\n", e, size);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        free(all);
        free(all2);
    } else if (!strcmp(cmd, "colls") && argc == 2) {
        const int big = 65536;
        int *a = calloc((size_t)big * (size_t)size, sizeof(int)), *b = calloc((size_t)big * (size_t)size, sizeof(int));
        if (!a || !b) MPI_Abort(MPI_COMM_WORLD, 4);
        MPI_Alltoall(a, 1, MPI_INT, b, 1, MPI_INT, MPI_COMM_WORLD);
        MPI_Alltoall(a, 64, MPI_INT, b, 64, MPI_INT, MPI_COMM_WORLD);
        MPI_Alltoall(a, big, MPI_INT, b, big, MPI_INT, MPI_COMM_WORLD);
        MPI_Allgather(a, 1, MPI_INT, b, 1, MPI_INT, MPI_COMM_WORLD);
        MPI_Allgather(a, big, MPI_INT, b, big, MPI_INT, MPI_COMM_WORLD);
        MPI_Gather(a, 1, MPI_INT, b, 1, MPI_INT, 1 % size, MPI_COMM_WORLD);
        MPI_Scatter(a, 1, MPI_INT, b, 1, MPI_INT, 2 % size, MPI_COMM_WORLD);
        free(a);
        free(b);
    } else if (!strcmp(cmd, "sendcount") && argc == 3) {
        int iters = atoi(argv[2]), v = 0;
        if (iters < 1 || size < 2) usage();
        if (rank == 0) {
            char name[256];
            const char *run = getenv("COSCHED_RUN"), *job = getenv("COSCHED_JOB");
            snprintf(name, sizeof name, "/dev/shm/cosched.%s.%s.0", run ? run : "", job ? job : "");
            int fd = open(name, O_RDONLY);
            struct cosched_rank_shm *seg =
                fd < 0 ? MAP_FAILED : mmap(NULL, sizeof *seg, PROT_READ, MAP_SHARED, fd, 0);
            if (seg == MAP_FAILED) {
                fprintf(stderr, "sendcount: cannot map %s\n", name);
                MPI_Abort(MPI_COMM_WORLD, 5);
            }
            close(fd);
            int uncounted = 0;
            for (int i = 0; i < iters; i++) {
                MPI_Recv(&v, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                uint64_t consumed = __atomic_load_n(&seg->consumed, __ATOMIC_SEQ_CST);
                uncounted += consumed > __atomic_load_n(&seg->arrivals, __ATOMIC_SEQ_CST);
            }
            printf("{\"receives\": %d, \"uncounted\": %d}\n", iters, uncounted);
            munmap(seg, sizeof *seg);
        } else if (rank == 1) {
            for (int i = 0; i < iters; i++) MPI_Send(&v, 1, MPI_INT, 0, 8, MPI_COMM_WORLD);
        }
    } else if (!strcmp(cmd, "bcastlag") && argc == 3) {
        int v = rank;
        if (rank == 2) usleep((useconds_t)atoi(argv[2]) * 1000u);
        MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(cmd, "gatherahead") && argc == 3) {
        int v = rank, all[4];
        if (size != 4) usage();
        if (rank == 3) usleep((useconds_t)atoi(argv[2]) * 1000u);
        MPI_Gather(&v, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Gather(&v, 1, MPI_INT, all, 1, MPI_INT, 1, MPI_COMM_WORLD);
        MPI_Gather(&v, 1, MPI_INT, all, 1, MPI_INT, 1, MPI_COMM_WORLD);
        MPI_Bcast(&v, 1, MPI_INT, 1, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(cmd, "crash") && argc == 3) {
        if (rank == atoi(argv[2])) {
            usleep(200000);
            raise(SIGSEGV);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(cmd, "exit") && argc == 4) {
        if (rank == atoi(argv[2])) {
            usleep(200000);
            exit(atoi(argv[3]));
        }
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        usage();
    }
    MPI_Finalize();
    return 0;
}

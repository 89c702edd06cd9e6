/*
 * cosched-ir-run: executes one job of the simulator's program IR for real (one MPI rank per
 * IR rank). Usage: cosched-ir-run [--seed N] PROGRAM_FILE   (PROGRAM_FILE from `cosched apps export`)
 *
 * Semantics (the simulator's, docs/formats/program.md):
 *   compute NS   burns NS of this thread's CPU time (CLOCK_THREAD_CPUTIME_ID), walking over the
 *                memory footprint, so a descheduled rank does not progress.
 *   burst M K    a compute burst drawn from Erlang-K of mean M (own generator seeded by --seed and
 *                the rank: the same seed gives the same draws, not the simulator's draws).
 *   io NS        sleeps NS without using a CPU (the block device is not exercised).
 *   send/isend/recv/irecv/reply/wait   MPI_Send / MPI_Isend / MPI_Recv / MPI_Irecv / MPI_Send to the
 *                source of the last received message / MPI_Waitall of every pending request.
 *   loop C L     repeats the next L lines C times. loopuntil S L: repeats them until a receive
 *                in the body gets a message tagged S instead (two receives posted, MPI_Waitany).
 *   coll ...     the MPI library's own collective (MPI_Barrier, MPI_Allreduce of doubles,
 *                MPI_Alltoall / MPI_Bcast of bytes). collbegin/collend: markers, nothing runs.
 *   memory_mb    allocated and touched at start (per rank).
 *   noise_cv     every compute burst is multiplied by a log-normal factor of mean 1.
 * Output (rank 0, stdout): one JSON object: wall time between a barrier before and one after the
 * program, compute asked and CPU used (sums over ranks), messages sent.
 */
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ir.h"

static struct ir_program P;
static int rank, size;
static int tag_ub = 32767;
static char *sendbuf, *recvbuf, *collbuf, *collbuf2;
static size_t buflen;
static volatile uint64_t *mem;
static size_t mem_words, mem_pos;
static uint64_t rng_state;
static int last_source = -1;
static uint64_t msgs_sent, compute_asked_ns, compute_cpu_ns;

struct pending {
    MPI_Request req;
    char *buf;
    int is_recv;
};
static struct pending *pend;
static int n_pend, cap_pend;

/* Stash of messages received by a loopuntil's second receive that was not the one used. */
struct stashed {
    int source, tag;
};
static struct stashed stash[16];
static int n_stash;

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t next_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(void) { return ((double)(next_u64() >> 11) + 0.5) / 9007199254740992.0; }

static double normal(void) { return sqrt(-2.0 * log(uniform01())) * cos(2.0 * M_PI * uniform01()); }

static int tag_of(int64_t t) { return (int)(t % ((int64_t)tag_ub + 1)); }

/* Burns `ns` of thread CPU time, walking the memory footprint one cache line at a time. */
static void burn(int64_t ns) {
    if (ns <= 0) return;
    if (P.noise_cv > 0) {
        double s2 = log(1.0 + P.noise_cv * P.noise_cv);
        ns = (int64_t)llround((double)ns * exp(sqrt(s2) * normal() - s2 / 2.0));
    }
    compute_asked_ns += (uint64_t)ns;
    uint64_t start = thread_cpu_ns(), end = start + (uint64_t)ns, now = start;
    while (now < end) {
        for (int i = 0; i < 256; i++) { /* 256 cache lines, a few microseconds */
            mem[mem_pos] += 1;
            mem_pos += 8;
            if (mem_pos >= mem_words) mem_pos = (mem_pos + 1) % 8;
        }
        now = thread_cpu_ns();
    }
    compute_cpu_ns += now - start;
}

static void push_pending(MPI_Request r, char *buf, int is_recv) {
    if (n_pend == cap_pend) {
        cap_pend = cap_pend ? 2 * cap_pend : 16;
        pend = realloc(pend, sizeof *pend * (size_t)cap_pend);
        if (!pend) {
            fprintf(stderr, "cosched-ir-run: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    pend[n_pend++] = (struct pending){r, buf, is_recv};
}

static void wait_all(void) {
    if (!n_pend) return;
    MPI_Request *r = malloc(sizeof *r * (size_t)n_pend);
    MPI_Status *st = malloc(sizeof *st * (size_t)n_pend);
    for (int i = 0; i < n_pend; i++) r[i] = pend[i].req;
    MPI_Waitall(n_pend, r, st);
    for (int i = 0; i < n_pend; i++) {
        if (pend[i].is_recv) last_source = st[i].MPI_SOURCE;
        free(pend[i].buf);
    }
    free(r);
    free(st);
    n_pend = 0;
}

static int take_stash(int source, int tag) {
    for (int i = 0; i < n_stash; i++)
        if ((source < 0 || stash[i].source == source) && stash[i].tag == tag) {
            last_source = stash[i].source;
            stash[i] = stash[--n_stash];
            return 1;
        }
    return 0;
}

/* Receive from `from` tagged `tag`, or tagged `stop` when stop >= 0. Returns 1 if the stop came. */
static int receive(int64_t from, int64_t tag, int64_t stop) {
    int src = from < 0 ? MPI_ANY_SOURCE : (int)from;
    if (stop >= 0 && take_stash(src, tag_of(stop))) return 1;
    if (take_stash(src, tag_of(tag))) return 0;
    MPI_Status st;
    if (stop < 0) {
        MPI_Recv(recvbuf, (int)buflen, MPI_BYTE, src, tag_of(tag), MPI_COMM_WORLD, &st);
        last_source = st.MPI_SOURCE;
        return 0;
    }
    char *stopbuf = malloc(buflen);
    MPI_Request r[2];
    MPI_Irecv(recvbuf, (int)buflen, MPI_BYTE, src, tag_of(tag), MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(stopbuf, (int)buflen, MPI_BYTE, src, tag_of(stop), MPI_COMM_WORLD, &r[1]);
    int idx;
    MPI_Waitany(2, r, &idx, &st);
    last_source = st.MPI_SOURCE;
    int other = 1 - idx, cancelled = 0;
    MPI_Status ost;
    MPI_Cancel(&r[other]);
    MPI_Wait(&r[other], &ost);
    MPI_Test_cancelled(&ost, &cancelled);
    if (!cancelled && n_stash < 16) stash[n_stash++] = (struct stashed){ost.MPI_SOURCE, ost.MPI_TAG};
    free(stopbuf);
    return idx == 1;
}

static void collective(const struct ir_op *o) {
    int bytes = (int)o->c;
    switch (o->a) {
    case IR_BARRIER:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    case IR_ALLREDUCE: {
        int n = (bytes + 7) / 8;
        MPI_Allreduce(collbuf, collbuf2, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        break;
    }
    case IR_ALLTOALL:
        MPI_Alltoall(collbuf, bytes, MPI_BYTE, collbuf2, bytes, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case IR_BCAST:
        MPI_Bcast(collbuf, bytes, MPI_BYTE, (int)o->b, MPI_COMM_WORLD);
        break;
    case IR_REDUCE:
        MPI_Reduce(collbuf, collbuf2, bytes, MPI_BYTE, MPI_BOR, (int)o->b, MPI_COMM_WORLD);
        break;
    }
}

/* Runs ops[0..n); returns 1 when a loopuntil's stop message was received (leave that loop). */
static int exec(const struct ir_op *ops, int n, int64_t stop) {
    for (int i = 0; i < n; i++) {
        const struct ir_op *o = &ops[i];
        switch (o->kind) {
        case IR_COMPUTE:
            burn(o->a);
            break;
        case IR_BURST: {
            double t = 0;
            for (int k = 0; k < o->b; k++) t += -log(uniform01());
            burn((int64_t)llround(t * (double)o->a / (double)o->b));
            break;
        }
        case IR_IO: {
            struct timespec ts = {(time_t)(o->a / 1000000000), (long)(o->a % 1000000000)};
            while (nanosleep(&ts, &ts) && errno == EINTR) {
            }
            break;
        }
        case IR_SEND:
            MPI_Send(sendbuf, (int)o->b, MPI_BYTE, (int)o->a, tag_of(o->c), MPI_COMM_WORLD);
            msgs_sent++;
            break;
        case IR_REPLY:
            if (last_source < 0) {
                fprintf(stderr, "cosched-ir-run: line %d: reply before any message was received\n", o->line);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            MPI_Send(sendbuf, (int)o->b, MPI_BYTE, last_source, tag_of(o->c), MPI_COMM_WORLD);
            msgs_sent++;
            break;
        case IR_ISEND: {
            MPI_Request r;
            MPI_Isend(sendbuf, (int)o->b, MPI_BYTE, (int)o->a, tag_of(o->c), MPI_COMM_WORLD, &r);
            push_pending(r, NULL, 0);
            msgs_sent++;
            break;
        }
        case IR_RECV:
            if (receive(o->a, o->c, stop)) return 1;
            break;
        case IR_IRECV: {
            MPI_Request r;
            char *b = malloc(buflen);
            MPI_Irecv(b, (int)buflen, MPI_BYTE, o->a < 0 ? MPI_ANY_SOURCE : (int)o->a, tag_of(o->c), MPI_COMM_WORLD,
                      &r);
            push_pending(r, b, 1);
            break;
        }
        case IR_WAIT:
            wait_all();
            break;
        case IR_LOOP:
            for (int64_t c = 0; c < o->a; c++)
                if (exec(o + 1, (int)o->b, stop)) return 1;
            i += (int)o->b;
            break;
        case IR_LOOPUNTIL:
            while (!exec(o + 1, (int)o->b, o->a)) {
            }
            i += (int)o->b;
            break;
        case IR_COLL:
            collective(o);
            break;
        default: /* collbegin / collend markers */
            break;
        }
    }
    return 0;
}

static uint64_t process_cpu_ns(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    uint64_t seed = 1;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!path && argv[i][0] != '-') path = argv[i];
        else path = NULL, i = argc;
    }
    if (!path) {
        if (rank == 0) fprintf(stderr, "usage: cosched-ir-run [--seed N] PROGRAM_FILE\n");
        MPI_Finalize();
        return 2;
    }
    char err[512];
    if (ir_parse(path, rank, &P, err, sizeof err)) {
        if (rank == 0) fprintf(stderr, "cosched-ir-run: %s\n", err);
        MPI_Finalize();
        return 2;
    }
    if (P.ranks != size) {
        if (rank == 0)
            fprintf(stderr, "cosched-ir-run: %s: the program has %d ranks, the MPI job %d (mpiexec -n %d)\n", path,
                    P.ranks, size, P.ranks);
        MPI_Finalize();
        return 2;
    }
    void *v;
    int flag;
    if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag) == MPI_SUCCESS && flag) tag_ub = *(int *)v;
    rng_state = seed * 0x100000001b3ull + (uint64_t)rank;
    buflen = P.max_bytes > 0 ? P.max_bytes : 1;
    sendbuf = calloc(buflen, 1);
    recvbuf = malloc(buflen);
    collbuf = calloc((size_t)size * buflen + 8, 1);
    collbuf2 = calloc((size_t)size * buflen + 8, 1);
    size_t mem_bytes = (size_t)(P.memory_mb * 1048576.0);
    if (mem_bytes < 65536) mem_bytes = 65536;
    mem_words = mem_bytes / sizeof(uint64_t);
    mem = calloc(mem_words, sizeof(uint64_t));
    if (!sendbuf || !recvbuf || !collbuf || !collbuf2 || !mem) {
        fprintf(stderr, "cosched-ir-run: rank %d: cannot allocate %.1f MB of memory footprint and buffers\n", rank,
                P.memory_mb);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < mem_words; i += 512) mem[i] = i; /* touch every page */

    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t t0 = mono_ns(), c0 = process_cpu_ns();
    exec(P.ops, P.n_ops, -1);
    wait_all();
    uint64_t c1 = process_cpu_ns();
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t t1 = mono_ns();

    uint64_t mine[4] = {compute_asked_ns, compute_cpu_ns, c1 - c0, msgs_sent}, sum[4];
    MPI_Reduce(mine, sum, 4, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("{\"program\": \"%s\", \"ranks\": %d, \"scale\": %g, \"wall_ns\": %llu, \"compute_asked_ns\": %llu, "
               "\"compute_cpu_ns\": %llu, \"cpu_ns\": %llu, \"messages\": %llu}\n",
               P.name, size, P.scale, (unsigned long long)(t1 - t0), (unsigned long long)sum[0],
               (unsigned long long)sum[1], (unsigned long long)sum[2], (unsigned long long)sum[3]);
        fflush(stdout);
    }
    free(P.ops);
    MPI_Finalize();
    return 0;
}

/*
 * libcosched core: the mechanism layer between an MPI rank and the node agent.
 *
 * Set-up (after PMPI_Init, in cs_after_init):
 *   1. Identity: COSCHED_RUN / COSCHED_JOB (when COSCHED_RUN is unset every rank takes rank 0's
 *      "p<pid>" broadcast on MPI_COMM_WORLD, job 0), world rank and size.
 *   2. Agent: when COSCHED_AGENT names a socket, connect (SOCK_SEQPACKET). Unreachable: standalone,
 *      or abort naming the socket when COSCHED_REQUIRED=1.
 *   3. Segment "/cosched.<run>.<job>.<rank>" created and filled; REGISTER sent, ACK awaited (5 s).
 *   4. Barrier; every rank maps the segments of its peers that exist on this machine; barrier.
 *      Without an agent serving the rank, the segment name is unlinked right away (the mappings
 *      stay valid), so no rank death, not even SIGKILL, can leave it in /dev/shm.
 *
 * Waiting (cs_wait): SPIN tests in a loop; SPINBLOCK spins for spin_ns[kind], then blocks; YIELD tests
 * in a loop that calls sched_yield between tests (spin time; the CPU goes to any other runnable task of
 * the rank's CPU); BLOCK blocks at once: state BLOCKED, then { seq = wake_seq; test; futex_wait(seq, 1 ms) } until
 * complete, where every return from the futex is followed by two tests before the next sleep (below). While spinning (SPIN or SPINBLOCK) every test also loads `spin_until`: a word tagged
 * with this wait's wait_id sets when the spin ends (the node policy's spin change, written by the
 * agent), cutting or extending it, and turns SPIN into spin-then-block. A call that completes at its first test is not a wait. LIBRARY leaves the
 * library's own blocking call untouched (its whole duration counts as wait time). With
 * COSCHED_LIBRARY_WAITS=1 every wait is LIBRARY whatever the agent asks (the library's own wait mode,
 * e.g. Open MPI's mpi_yield_when_idle, as a baseline); events and counters are kept.
 *
 * Wake-ups: a send to a rank of the same job adds to the receiver's `arrivals` before the library has
 * the message (so the receiver can never take it before it is counted) and, once the send is posted,
 * bumps its `wake_seq`; FUTEX_WAKE only when the receiver is BLOCKED (state is stored before wake_seq is
 * read, both sequentially consistent, so no wake-up is lost). Posting or completing a receive
 * wakes its sender when that sender is blocked in a send wait (rendezvous).
 *
 * Collectives: the library's own messages inside a collective are invisible to the shim, and the library
 * sends them from its own calls (the non-blocking collective's start and its progress in each test), not
 * when the rank enters the wrapper. So a rank about to sleep in a collective wait first wakes the members
 * of the communicator blocked in a collective (its start and tests may just have sent them what they wait
 * for), at most 1 + ceil(log2 size) times per wait (the rounds of the recursive-doubling, dissemination
 * and binomial algorithms; the bound stops two members with nothing to exchange from waking each other
 * forever); leaving a collective wakes them too. Entering one wakes nobody (nothing is sent yet).
 * A woken rank tests twice before sleeping again: MPICH's progress (ch4 progress_test) runs its
 * collective schedules before polling the network, so a schedule sees a message the network delivered in
 * one test only in the next; with a single test, the request completed at the test after the 1 ms
 * timeout (about half of MPICH's blocking collective waits). The 1 ms fallback stays for what the shim
 * cannot see (a library-mode peer, ranks on another machine). COSCHED_LOG counts wake-ups, timeouts and
 * the blocking waits that ended only after a timeout (timeout_ends).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define LD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)
#define RADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

int cs_ready = 0;
__thread int cs_in_fortran = 0;

static struct {
    char run[40];
    int job, rank, size, pid;
    struct cosched_rank_shm *me;         /* own segment (or a private page if none) */
    int me_shared;                       /* the segment is a named shm segment */
    int unlinked;
    char shm_name[96];
    struct cosched_rank_shm **peers;     /* world rank -> mapped segment or NULL */
    int sock;                            /* agent socket or -1 */
    char agent_path[108];
    uint32_t env_mode;                   /* standalone wait mode (COSCHED_WAIT) */
    int library_waits;                   /* COSCHED_LIBRARY_WAITS=1: every wait is the library's */
    uint64_t env_spin_ns;
    const char *mode_text;
    MPI_Group world_group;
    uint64_t calls[CS_CALLS][2];
    uint64_t events_dropped;
    uint64_t events_skipped; /* MESSAGE events not posted: the policy does nothing with them (message_wanted) */
    /* Blocking waits: futex sleeps ended by a wake-up / by the fallback timeout; futex calls that returned
     * at once (a wake-up came between the test and the sleep); waits completed at the passes right after a
     * timeout (nothing woke them); wake-ups passed on to blocked collective members. Collective messages
     * this rank took, leaving a tree, before any member had posted them (shim/coll.c). */
    uint64_t wakeups, timeouts, no_sleeps, timeout_ends, coll_forwards, coll_taken_first;
} g = {.sock = -1};

/* The collective this thread is in (set by cs_coll_enter, cleared by the matching cs_coll_exit): its
 * communicator, kind, root and number, and whether its messages were worked out (shim/coll.c). */
static __thread int coll_nesting;
static __thread MPI_Comm coll_comm;
static __thread int coll_kind, coll_root, coll_modelled;
static __thread uint64_t coll_number, coll_bytes;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *call_names[CS_CALLS] = {
    "init", "finalize", "send", "ssend", "rsend", "recv", "isend", "issend", "irecv", "wait",
    "waitall", "waitany", "test", "testall", "sendrecv", "probe", "barrier", "bcast", "reduce",
    "allreduce", "alltoall", "allgather", "gather", "scatter"};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cs_count_call(enum cs_call c, int fortran) { RADD(&g.calls[c][fortran ? 1 : 0], 1); }

/* ---------------------------------------------------------------- environment */

static int parse_mode(const char *s) {
    g.env_spin_ns = 0;
    g.mode_text = s ? s : "library";
    if (!s || !*s || !strcmp(s, "library")) {
        g.env_mode = COSCHED_MODE_LIBRARY;
        g.mode_text = "library";
    } else if (!strcmp(s, "spin")) {
        g.env_mode = COSCHED_MODE_SPIN;
    } else if (!strcmp(s, "block")) {
        g.env_mode = COSCHED_MODE_BLOCK;
    } else if (!strncmp(s, "spinblock:", 10)) {
        char *end;
        errno = 0;
        unsigned long long us = strtoull(s + 10, &end, 10);
        if (errno || end == s + 10 || *end) return -1;
        g.env_mode = COSCHED_MODE_SPINBLOCK;
        g.env_spin_ns = us * 1000ull;
    } else {
        return -1;
    }
    return 0;
}

static int valid_run_id(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 32) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-'))
            return 0;
    }
    return 1;
}

/* One write(2) of the whole message, then abort the job. */
static void die(const char *fmt, const char *arg) {
    char msg[768];
    int n = snprintf(msg, sizeof msg, "libcosched (rank %d): ", g.rank);
    if (n > 0 && n < (int)sizeof msg) n += snprintf(msg + n, sizeof msg - (size_t)n, fmt, arg);
    if (n > (int)sizeof msg - 2) n = (int)sizeof msg - 2;
    msg[n++] = '\n';
    if (write(2, msg, (size_t)n) < 0) { /* nothing more to do */
    }
    /* Let the launcher forward the message before the abort tears the job down (MPICH's hydra
     * may otherwise drop it). */
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 300000000};
    nanosleep(&ts, NULL);
    PMPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

/* ---------------------------------------------------------------- agent socket */

static void send_event(uint32_t type, int32_t rank, int32_t arg, uint64_t a, uint64_t b) {
    if (g.sock < 0 || !(LD(&g.me->event_mask) & (1u << type))) return;
    struct cosched_msg m = {.type = type,
                            .version = COSCHED_PROTO_VERSION,
                            .job = g.job,
                            .rank = rank,
                            .pid = g.pid,
                            .arg = arg,
                            .t_ns = now_ns(),
                            .a = a,
                            .b = b};
    ssize_t r = send(g.sock, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r == (ssize_t)sizeof m) return;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        RADD(&g.events_dropped, 1);
        return;
    }
    /* The agent is gone: continue standalone. */
    close(g.sock);
    g.sock = -1;
    ST(&g.me->agent_gen, 0u);
}

static int agent_connect(void) {
    const char *path = getenv("COSCHED_AGENT");
    if (!path || !*path) return -1;
    snprintf(g.agent_path, sizeof g.agent_path, "%s", path);
    int required = getenv("COSCHED_REQUIRED") && !strcmp(getenv("COSCHED_REQUIRED"), "1");
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) {
        if (required) die("COSCHED_AGENT socket path too long: %s", path);
        return -1;
    }
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        if (required) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s (%s)", path, strerror(e));
            die("COSCHED_REQUIRED=1 but the node agent cannot be reached at %s", msg);
        }
        return -1;
    }
    return fd;
}

static void agent_register(void) {
    struct cosched_msg m = {.type = COSCHED_MSG_REGISTER,
                            .version = COSCHED_PROTO_VERSION,
                            .job = g.job,
                            .rank = g.rank,
                            .pid = g.pid,
                            .arg = g.size,
                            .t_ns = now_ns()};
    struct timeval tv = {.tv_sec = 5};
    setsockopt(g.sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int err = 0;
    if (send(g.sock, &m, sizeof m, MSG_NOSIGNAL) != (ssize_t)sizeof m) {
        err = errno ? errno : EIO;
    } else {
        struct cosched_msg ack;
        /* A rank frozen by a gang slot while it waits (a receive with a timeout is not restarted after
         * the freezer thaws it) or hit by a signal gets EINTR: wait again, within the same 5 s overall. */
        uint64_t give_up = now_ns() + 5000000000ull;
        ssize_t r;
        do {
            r = recv(g.sock, &ack, sizeof ack, 0);
        } while (r < 0 && errno == EINTR && now_ns() < give_up);
        if (r != (ssize_t)sizeof ack || ack.type != COSCHED_MSG_ACK)
            err = r < 0 ? errno : EPROTO;
        else if (ack.arg != 0)
            err = ack.arg;
    }
    if (err) {
        close(g.sock);
        g.sock = -1;
        if (getenv("COSCHED_REQUIRED") && !strcmp(getenv("COSCHED_REQUIRED"), "1")) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s (%s)", g.agent_path, strerror(err));
            die("COSCHED_REQUIRED=1 but the node agent refused or did not answer the registration at %s",
                msg);
        }
    }
}

/* ---------------------------------------------------------------- segments */

static void seg_name(char *out, size_t n, int rank) {
    snprintf(out, n, "/cosched.%s.%d.%d", g.run, g.job, rank);
}

static struct cosched_rank_shm *seg_create(void) {
    seg_name(g.shm_name, sizeof g.shm_name, g.rank);
    int fd = shm_open(g.shm_name, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
    void *p = MAP_FAILED;
    if (fd >= 0) {
        if (ftruncate(fd, sizeof(struct cosched_rank_shm)) == 0)
            p = mmap(NULL, sizeof(struct cosched_rank_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p == MAP_FAILED) shm_unlink(g.shm_name);
    }
    if (p == MAP_FAILED) {
        /* No /dev/shm: keep the counters in private memory; peers cannot wake this rank. */
        fprintf(stderr, "libcosched (rank %d): cannot create %s (%s); continuing without it\n", g.rank,
                g.shm_name, strerror(errno));
        p = mmap(NULL, sizeof(struct cosched_rank_shm), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
        if (p == MAP_FAILED) return NULL;
        g.me_shared = 0;
    } else {
        g.me_shared = 1;
    }
    struct cosched_rank_shm *s = p;
    memset(s, 0, sizeof *s);
    s->version = COSCHED_PROTO_VERSION;
    s->job = g.job;
    s->rank = g.rank;
    s->size = g.size;
    s->pid = g.pid;
    for (int k = 0; k < COSCHED_WAIT_KINDS; k++) {
        s->wait_mode[k] = g.env_mode;
        s->spin_ns[k] = g.env_spin_ns;
    }
    ST(&s->magic, COSCHED_SHM_MAGIC);
    return s;
}

static struct cosched_rank_shm *seg_open_peer(int rank) {
    char name[96];
    seg_name(name, sizeof name, rank);
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) return NULL;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(struct cosched_rank_shm))
        p = mmap(NULL, sizeof(struct cosched_rank_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return NULL;
    struct cosched_rank_shm *s = p;
    if (LD(&s->magic) != COSCHED_SHM_MAGIC || s->rank != rank) {
        munmap(p, sizeof *s);
        return NULL;
    }
    return s;
}

static void seg_unlink_once(void) {
    if (g.me_shared && !g.unlinked) {
        shm_unlink(g.shm_name);
        g.unlinked = 1;
    }
}

/* ---------------------------------------------------------------- init / finalize */

static void write_log(void);

/* A rank that exits between MPI_Init and MPI_Finalize says so (the launcher may only give a code). */
static void exit_report(int status, void *arg) {
    (void)arg;
    if (!cs_ready) return;
    char msg[160];
    int n = snprintf(msg, sizeof msg, "libcosched: rank %d (pid %d) of job %d exits with status %d before MPI_Finalize\n",
                     g.rank, g.pid, g.job, status);
    if (n > 0 && write(2, msg, (size_t)n) < 0) { /* nothing more to do */
    }
}

void cs_after_init(void) {
    if (cs_ready || g.me) return;
    int flag = 0;
    PMPI_Initialized(&flag);
    if (!flag) return;
    g.pid = (int)getpid();
    PMPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &g.size);
    PMPI_Comm_group(MPI_COMM_WORLD, &g.world_group);
    if (parse_mode(getenv("COSCHED_WAIT")) != 0) {
        if (g.rank == 0)
            fprintf(stderr,
                    "libcosched: COSCHED_WAIT=%s is not one of library, spin, block, spinblock:<us>; "
                    "using library\n",
                    getenv("COSCHED_WAIT"));
        parse_mode("library");
    }
    g.library_waits = getenv("COSCHED_LIBRARY_WAITS") && !strcmp(getenv("COSCHED_LIBRARY_WAITS"), "1");
    if (g.library_waits) g.mode_text = "library";
    const char *run = getenv("COSCHED_RUN");
    const char *job = getenv("COSCHED_JOB");
    if (run && *run) {
        if (!valid_run_id(run)) die("COSCHED_RUN=%s is not [A-Za-z0-9_-]{1,32}", run);
        snprintf(g.run, sizeof g.run, "%s", run);
    } else {
        /* Every rank must name the same segments: take rank 0's. */
        char buf[40] = {0};
        if (g.rank == 0) snprintf(buf, sizeof buf, "p%d", g.pid);
        PMPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
        memcpy(g.run, buf, sizeof g.run);
    }
    g.job = 0;
    if (job && *job) {
        char *end;
        long v = strtol(job, &end, 10);
        if (*end || v < 0 || v > INT32_MAX) die("COSCHED_JOB=%s is not a non-negative int32", job);
        g.job = (int)v;
    }
    g.sock = agent_connect();
    g.me = seg_create();
    if (!g.me) return; /* no memory at all: stay out of the way */
    if (g.sock >= 0) agent_register();
    g.peers = calloc((size_t)g.size, sizeof *g.peers);
    PMPI_Barrier(MPI_COMM_WORLD);
    if (g.peers)
        for (int r = 0; r < g.size; r++) g.peers[r] = r == g.rank ? g.me : seg_open_peer(r);
    PMPI_Barrier(MPI_COMM_WORLD);
    if (g.sock < 0) seg_unlink_once();
    on_exit(exit_report, NULL);
    cs_ready = 1;
}

void cs_before_finalize(void) {
    if (!cs_ready) return;
    ST(&g.me->state, (uint32_t)COSCHED_STATE_FINISHED);
    write_log();
    cs_ready = 0;
    if (g.sock >= 0) {
        struct cosched_msg m = {.type = COSCHED_MSG_UNREGISTER,
                                .version = COSCHED_PROTO_VERSION,
                                .job = g.job,
                                .rank = g.rank,
                                .pid = g.pid,
                                .t_ns = now_ns()};
        send(g.sock, &m, sizeof m, MSG_NOSIGNAL);
        close(g.sock);
        g.sock = -1;
    } else {
        seg_unlink_once();
    }
}

/* One JSON line per rank appended to $COSCHED_LOG (a single write: lines never interleave). */
static void write_log(void) {
    const char *path = getenv("COSCHED_LOG");
    if (!path || !*path) return;
    struct cosched_rank_shm *s = g.me;
    char buf[4096];
    int n = snprintf(buf, sizeof buf,
                     "{\"run\":\"%s\",\"job\":%d,\"rank\":%d,\"size\":%d,\"pid\":%d,\"mpi\":\"%s\","
                     "\"wait\":\"%s\",\"agent\":%s,\"msgs_sent\":%llu,\"bytes_sent\":%llu,\"msgs_recv\":%llu,"
                     "\"bytes_recv\":%llu,\"arrivals\":%llu,\"consumed\":%llu,\"waits\":%llu,\"wait_ns\":%llu,"
                     "\"spin_ns\":%llu,\"block_ns\":%llu,\"blocks\":%llu,\"collectives\":%llu,"
                     "\"spin_changes\":%llu,\"changed_spin_ns\":%llu,\"events_dropped\":%llu,\"events_skipped\":%llu,"
                     "\"wakeups\":%llu,"
                     "\"timeouts\":%llu,\"no_sleeps\":%llu,\"timeout_ends\":%llu,\"coll_forwards\":%llu,"
                     "\"coll_taken_first\":%llu,\"calls\":{",
                     g.run, g.job, g.rank, g.size, g.pid, COSCHED_MPI_NAME, g.mode_text,
                     LD(&s->agent_gen) ? "true" : "false", (unsigned long long)LD(&s->msgs_sent),
                     (unsigned long long)LD(&s->bytes_sent), (unsigned long long)LD(&s->msgs_recv),
                     (unsigned long long)LD(&s->bytes_recv), (unsigned long long)LD(&s->arrivals),
                     (unsigned long long)LD(&s->consumed), (unsigned long long)LD(&s->waits),
                     (unsigned long long)LD(&s->wait_ns), (unsigned long long)LD(&s->spin_ns_total),
                     (unsigned long long)LD(&s->block_ns), (unsigned long long)LD(&s->blocks),
                     (unsigned long long)LD(&s->collectives), (unsigned long long)LD(&s->spin_changes),
                     (unsigned long long)LD(&s->changed_spin_ns), (unsigned long long)g.events_dropped,
                     (unsigned long long)LD(&g.events_skipped),
                     (unsigned long long)g.wakeups, (unsigned long long)g.timeouts, (unsigned long long)g.no_sleeps,
                     (unsigned long long)g.timeout_ends, (unsigned long long)g.coll_forwards,
                     (unsigned long long)g.coll_taken_first);
    int first = 1;
    for (int c = 0; c < CS_CALLS && n < (int)sizeof buf - 200; c++) {
        if (!g.calls[c][0] && !g.calls[c][1]) continue;
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s\"%s\":[%llu,%llu]", first ? "" : ",", call_names[c],
                      (unsigned long long)g.calls[c][0], (unsigned long long)g.calls[c][1]);
        first = 0;
    }
    n += snprintf(buf + n, sizeof buf - (size_t)n, "}}\n");
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "libcosched (rank %d): cannot open COSCHED_LOG %s: %s\n", g.rank, path, strerror(errno));
        return;
    }
    if (write(fd, buf, (size_t)n) != n)
        fprintf(stderr, "libcosched (rank %d): short write to %s\n", g.rank, path);
    close(fd);
}

/* ---------------------------------------------------------------- communicators */

struct comm_entry {
    MPI_Comm comm;
    int size;
    int *world; /* comm rank -> world rank; NULL for intercommunicators */
    int used;
};
#define COMM_CACHE 64
static struct comm_entry comm_cache[COMM_CACHE];

static int comm_eq(MPI_Comm a, MPI_Comm b) { return memcmp(&a, &b, sizeof a) == 0; }

/* World rank of `rank` of `comm`, or -1 (intercommunicator, MPI_PROC_NULL, unknown). Caller holds g_lock. */
static int world_rank(MPI_Comm comm, int rank) {
    if (rank < 0) return -1;
    if (comm_eq(comm, MPI_COMM_WORLD)) return rank < g.size ? rank : -1;
    for (int i = 0; i < COMM_CACHE; i++)
        if (comm_cache[i].used && comm_eq(comm_cache[i].comm, comm)) {
            struct comm_entry *e = &comm_cache[i];
            return e->world && rank < e->size ? e->world[rank] : -1;
        }
    int inter = 0, size = 0;
    PMPI_Comm_test_inter(comm, &inter);
    struct comm_entry e = {.comm = comm, .used = 1};
    if (!inter) {
        PMPI_Comm_size(comm, &size);
        MPI_Group grp;
        PMPI_Comm_group(comm, &grp);
        int *in = malloc(sizeof(int) * (size_t)size), *out = malloc(sizeof(int) * (size_t)size);
        if (in && out) {
            for (int i = 0; i < size; i++) in[i] = i;
            PMPI_Group_translate_ranks(grp, size, in, g.world_group, out);
            for (int i = 0; i < size; i++)
                if (out[i] == MPI_UNDEFINED) out[i] = -1;
            e.world = out;
            e.size = size;
            out = NULL;
        }
        free(in);
        free(out);
        PMPI_Group_free(&grp);
    }
    int slot = -1;
    for (int i = 0; i < COMM_CACHE; i++)
        if (!comm_cache[i].used) {
            slot = i;
            break;
        }
    if (slot < 0) { /* full: evict one (round robin) */
        static int victim;
        slot = victim++ % COMM_CACHE;
        free(comm_cache[slot].world);
    }
    comm_cache[slot] = e;
    return e.world && rank < e.size ? e.world[rank] : -1;
}

void cs_comm_forget(MPI_Comm comm) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < COMM_CACHE; i++)
        if (comm_cache[i].used && comm_eq(comm_cache[i].comm, comm)) {
            free(comm_cache[i].world);
            comm_cache[i] = (struct comm_entry){0};
        }
    pthread_mutex_unlock(&g_lock);
}

/* ---------------------------------------------------------------- wake-ups */

static long futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts) {
    return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

static void wake(struct cosched_rank_shm *s) {
    ADD(&s->wake_seq, 1u);
    if (LD(&s->state) == COSCHED_STATE_BLOCKED) futex(&s->wake_seq, FUTEX_WAKE, 1, NULL);
}

static struct cosched_rank_shm *peer(int w) {
    return g.peers && w >= 0 && w < g.size && w != g.rank ? g.peers[w] : NULL;
}

/* Whether process `pid`'s main thread is running or runnable (`R` in /proc/PID/stat): -1 if unreadable. */
static int proc_running(int32_t pid) {
    char path[40], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    const char *e = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    return e && e[1] == ' ' && e[2] ? e[2] == 'R' : -1;
}

/* Whether to post a MESSAGE event to world rank `w`: not when a COSCHED_SKIP_* bit of the event mask names the
 * destination's state (its node policy does nothing with the message; cosched_proto.h says how the state is
 * told). The agent's own reading of the state (rank_on_cpu) is the same, so an event is skipped only where the
 * agent would have found nothing to do at the send; a computing destination that is not `R` gets its event
 * (another of its threads may be, which the agent counts as running). */
static int message_wanted(int w) {
    uint32_t m = LD(&g.me->event_mask) & (COSCHED_SKIP_OFF_CPU | COSCHED_SKIP_ON_CPU_WAITING | COSCHED_SKIP_ON_CPU_BUSY);
    struct cosched_rank_shm *p = m ? cs_shm_of(w) : NULL;
    if (!p) return 1;
    uint32_t skip;
    switch (LD(&p->state)) {
    case COSCHED_STATE_SPINNING: {
        uint64_t now = now_ns(), seen = LD(&p->spin_seen_ns); /* seen may be stamped after now was read */
        skip = seen >= now || now - seen <= COSCHED_ON_CPU_FRESH_NS ? COSCHED_SKIP_ON_CPU_WAITING : COSCHED_SKIP_OFF_CPU;
        break;
    }
    case COSCHED_STATE_BLOCKED:
        skip = COSCHED_SKIP_OFF_CPU;
        break;
    case COSCHED_STATE_FINISHED:
        /* Past MPI_Finalize (a send is counted after the library posted it, so its receiver may have taken
         * it and finished): nothing to do for it, skipped under any skip bit. */
        skip = m;
        break;
    case COSCHED_STATE_COMPUTING:
        /* Off a CPU by /proc is not enough to skip (another thread may be R, which the agent takes as
         * running); when both are skipped there is nothing to tell. */
        if (!(m & COSCHED_SKIP_ON_CPU_BUSY)) return 1;
        if (!(m & COSCHED_SKIP_OFF_CPU) && proc_running(LD(&p->pid)) != 1) return 1;
        skip = COSCHED_SKIP_ON_CPU_BUSY;
        break;
    default:
        return 1;
    }
    if (!(m & skip)) return 1;
    RADD(&g.events_skipped, 1);
    return 0;
}

int cs_send_begin(MPI_Comm comm, int dest) {
    if (!cs_ready || dest == MPI_PROC_NULL) return CS_NO_SEND;
    pthread_mutex_lock(&g_lock);
    int w = world_rank(comm, dest);
    pthread_mutex_unlock(&g_lock);
    struct cosched_rank_shm *p = w >= 0 ? peer(w) : NULL;
    if (p) ADD(&p->arrivals, 1);
    return w;
}

void cs_send_end(int w, int rc, int count, MPI_Datatype type) {
    if (w == CS_NO_SEND) return;
    struct cosched_rank_shm *p = w >= 0 ? peer(w) : NULL;
    if (rc != MPI_SUCCESS) {
        if (p) __atomic_fetch_sub(&p->arrivals, 1, __ATOMIC_SEQ_CST);
        return;
    }
    int tsize = 0;
    PMPI_Type_size(type, &tsize);
    uint64_t bytes = (uint64_t)(count > 0 ? count : 0) * (uint64_t)(tsize > 0 ? tsize : 0);
    RADD(&g.me->msgs_sent, 1);
    RADD(&g.me->bytes_sent, bytes);
    if (w < 0) return;
    if (p) wake(p);
    if (message_wanted(w)) send_event(COSCHED_MSG_MESSAGE, w, g.rank, bytes, p ? 1 : 0);
}

static void wake_blocked_sender(int w) {
    struct cosched_rank_shm *p = peer(w);
    if (!p || LD(&p->state) != COSCHED_STATE_BLOCKED) return;
    uint32_t k = LD(&p->wait_kind);
    if (k == COSCHED_WAIT_SEND_ACK || k == COSCHED_WAIT_SEND_COMPLETION) wake(p);
}

void cs_on_recv_posted(MPI_Comm comm, int source) {
    if (!cs_ready || source < 0) return; /* MPI_ANY_SOURCE, MPI_PROC_NULL */
    pthread_mutex_lock(&g_lock);
    int w = world_rank(comm, source);
    pthread_mutex_unlock(&g_lock);
    wake_blocked_sender(w);
}

void cs_on_recv_done(MPI_Comm comm, const MPI_Status *st, MPI_Datatype type) {
    if (!cs_ready || !st || st->MPI_SOURCE == MPI_PROC_NULL || st->MPI_SOURCE < 0) return;
    int count = 0, tsize = 0;
    PMPI_Get_count(st, type, &count);
    PMPI_Type_size(type, &tsize);
    uint64_t bytes = count == MPI_UNDEFINED || count < 0 ? 0 : (uint64_t)count * (uint64_t)(tsize > 0 ? tsize : 0);
    RADD(&g.me->msgs_recv, 1);
    RADD(&g.me->bytes_recv, bytes);
    RADD(&g.me->consumed, 1);
    pthread_mutex_lock(&g_lock);
    int w = world_rank(comm, st->MPI_SOURCE);
    pthread_mutex_unlock(&g_lock);
    wake_blocked_sender(w);
}

/* ---------------------------------------------------------------- pending receives */

struct req_entry {
    MPI_Request req;
    MPI_Comm comm;
    MPI_Datatype type;
    int used;
};
#define REQ_TABLE 4096
static struct req_entry reqs[REQ_TABLE];

static int req_eq(MPI_Request a, MPI_Request b) { return memcmp(&a, &b, sizeof a) == 0; }

static unsigned req_hash(MPI_Request r) {
    uint64_t k = 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    k ^= k >> 29;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 32;
    return (unsigned)(k % REQ_TABLE);
}

void cs_req_track_recv(MPI_Request req, MPI_Comm comm, MPI_Datatype type) {
    if (!cs_ready || req_eq(req, MPI_REQUEST_NULL)) return;
    pthread_mutex_lock(&g_lock);
    unsigned h = req_hash(req);
    for (int i = 0; i < REQ_TABLE; i++) {
        struct req_entry *e = &reqs[(h + (unsigned)i) % REQ_TABLE];
        if (!e->used || req_eq(e->req, req)) {
            *e = (struct req_entry){.req = req, .comm = comm, .type = type, .used = 1};
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
}

/* Linear probing with backward-shift deletion. Caller holds g_lock. */
static int req_find(MPI_Request req) {
    unsigned h = req_hash(req);
    for (int i = 0; i < REQ_TABLE; i++) {
        unsigned j = (h + (unsigned)i) % REQ_TABLE;
        if (!reqs[j].used) return -1;
        if (req_eq(reqs[j].req, req)) return (int)j;
    }
    return -1;
}

static void req_remove(unsigned j) {
    reqs[j].used = 0;
    unsigned i = j;
    for (;;) {
        i = (i + 1) % REQ_TABLE;
        if (!reqs[i].used) return;
        unsigned h = req_hash(reqs[i].req);
        /* Move back if its home is not in (j, i]. */
        int in_range = j <= i ? (h > j && h <= i) : (h > j || h <= i);
        if (!in_range) {
            reqs[j] = reqs[i];
            reqs[i].used = 0;
            j = i;
        }
    }
}

int cs_req_take(MPI_Request req, MPI_Comm *comm, MPI_Datatype *type) {
    if (req_eq(req, MPI_REQUEST_NULL)) return 0;
    pthread_mutex_lock(&g_lock);
    int j = req_find(req);
    if (j >= 0) {
        *comm = reqs[j].comm;
        *type = reqs[j].type;
        req_remove((unsigned)j);
    }
    pthread_mutex_unlock(&g_lock);
    return j >= 0;
}

int cs_req_is_recv(MPI_Request req) {
    if (req_eq(req, MPI_REQUEST_NULL)) return 0;
    pthread_mutex_lock(&g_lock);
    int j = req_find(req);
    pthread_mutex_unlock(&g_lock);
    return j >= 0;
}

/* ---------------------------------------------------------------- waiting */

static void wake_comm_collective(MPI_Comm comm);
static int coll_forward_budget(MPI_Comm comm);

uint32_t cs_mode(int kind) {
    if (!cs_ready || g.library_waits) return COSCHED_MODE_LIBRARY;
    if (LD(&g.me->agent_gen) != 0) {
        uint32_t m = LD(&g.me->wait_mode[kind]);
        return m <= COSCHED_MODE_YIELD ? m : COSCHED_MODE_LIBRARY;
    }
    return g.env_mode;
}

int cs_wait(int kind, cs_test_fn test, void *ctx) {
    struct cosched_rank_shm *s = g.me;
    int flag = 0;
    int rc = test(ctx, &flag);
    if (rc != MPI_SUCCESS || flag) return rc;
    uint32_t mode = cs_mode(kind);
    uint64_t t0 = now_ns();
    /* Only this thread writes wait_id; the agent tags its spin changes with it. */
    uint64_t id = LD(&s->wait_id) + 1;
    ST(&s->wait_id, id);
    ST(&s->wait_kind, (uint32_t)kind);
    ST(&s->wait_start_ns, t0);
    send_event(COSCHED_MSG_WAIT_BEGIN, g.rank, kind, 0, 0);
    uint64_t spun = 0, blocked = 0;
    int changed = 0;
    if (mode != COSCHED_MODE_BLOCK) {
        ST(&s->state, (uint32_t)COSCHED_STATE_SPINNING);
        uint64_t budget = mode == COSCHED_MODE_SPIN || mode == COSCHED_MODE_YIELD
                              ? UINT64_MAX
                              : (LD(&s->agent_gen) ? LD(&s->spin_ns[kind]) : g.env_spin_ns);
        const uint64_t tag = id & ((1ull << (64 - COSCHED_SPIN_UNTIL_SHIFT)) - 1);
        const uint64_t end_mask = (1ull << COSCHED_SPIN_UNTIL_SHIFT) - 1;
        for (;;) {
            rc = test(ctx, &flag);
            if (rc != MPI_SUCCESS || flag) break;
            ST(&s->spin_seen_ns, now_ns()); /* on a CPU now (the agent's test, see cosched_proto.h) */
            uint64_t u = LD(&s->spin_until);
            if (u && u >> COSCHED_SPIN_UNTIL_SHIFT == tag) {
                budget = u & end_mask;
                changed = 1;
            }
            if (mode == COSCHED_MODE_YIELD) sched_yield();
            if (budget == UINT64_MAX) continue; /* SPIN or YIELD, unchanged */
            if (now_ns() - t0 >= budget) break;
        }
        spun = now_ns() - t0;
    }
    if (rc == MPI_SUCCESS && !flag) {
        uint64_t tb = now_ns();
        ST(&s->state, (uint32_t)COSCHED_STATE_BLOCKED);
        /* In a collective: how many more times this wait passes a wake-up on before it sleeps. */
        int forwards = coll_nesting > 0 ? coll_forward_budget(coll_comm) : 0;
        int woke = 0;      /* the futex has returned; one more progress pass is owed before sleeping */
        int timed_out = 0; /* the last futex return was the fallback timeout */
        for (;;) {
            uint32_t seq = LD(&s->wake_seq);
            rc = test(ctx, &flag);
            if (rc != MPI_SUCCESS || flag) break;
            if (woke) {
                woke = 0;
                continue;
            }
            if (forwards > 0) {
                forwards--;
                g.coll_forwards++;
                wake_comm_collective(coll_comm);
            }
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};
            long r = futex(&s->wake_seq, FUTEX_WAIT, seq, &ts);
            timed_out = r < 0 && errno == ETIMEDOUT;
            if (timed_out)
                g.timeouts++;
            else if (r < 0 && errno == EAGAIN)
                g.no_sleeps++;
            else
                g.wakeups++;
            woke = 1;
        }
        if (timed_out) g.timeout_ends++;
        blocked = now_ns() - tb;
        RADD(&s->blocks, 1);
    }
    ST(&s->state, (uint32_t)COSCHED_STATE_COMPUTING);
    uint64_t total = now_ns() - t0;
    RADD(&s->waits, 1);
    RADD(&s->wait_ns, total);
    RADD(&s->spin_ns_total, spun);
    RADD(&s->block_ns, blocked);
    if (changed) {
        RADD(&s->spin_changes, 1);
        RADD(&s->changed_spin_ns, spun);
    }
    send_event(COSCHED_MSG_WAIT_END, g.rank, kind, spun, blocked);
    return rc;
}

uint64_t cs_lib_wait_begin(int kind) {
    if (!cs_ready) return 0;
    uint64_t t0 = now_ns();
    ST(&g.me->wait_kind, (uint32_t)kind);
    ST(&g.me->wait_start_ns, t0);
    send_event(COSCHED_MSG_WAIT_BEGIN, g.rank, kind, 0, 0);
    return t0;
}

void cs_lib_wait_end(int kind, uint64_t t0) {
    if (!cs_ready || !t0) return;
    uint64_t d = now_ns() - t0;
    RADD(&g.me->waits, 1);
    RADD(&g.me->wait_ns, d);
    send_event(COSCHED_MSG_WAIT_END, g.rank, kind, 0, 0);
}

/* ---------------------------------------------------------------- collectives */

/* Wakes the members of `comm` blocked in a collective wait. */
static void wake_comm_collective(MPI_Comm comm) {
    if (!g.peers) return;
    pthread_mutex_lock(&g_lock);
    int n = 0;
    if (comm_eq(comm, MPI_COMM_WORLD)) {
        n = g.size;
    } else {
        world_rank(comm, 0);
        for (int i = 0; i < COMM_CACHE; i++)
            if (comm_cache[i].used && comm_eq(comm_cache[i].comm, comm)) n = comm_cache[i].world ? comm_cache[i].size : 0;
    }
    for (int r = 0; r < n; r++) {
        int w = comm_eq(comm, MPI_COMM_WORLD) ? r : world_rank(comm, r);
        struct cosched_rank_shm *p = peer(w);
        if (p && LD(&p->state) == COSCHED_STATE_BLOCKED && LD(&p->coll_depth) > 0) wake(p);
    }
    pthread_mutex_unlock(&g_lock);
}

/* 1 + ceil(log2(size of comm)): the rounds of the recursive-doubling, dissemination and binomial-tree
 * algorithms MPICH and Open MPI use for small messages, plus the start. */
static int coll_forward_budget(MPI_Comm comm) {
    int size = 0;
    PMPI_Comm_size(comm, &size);
    int rounds = 0;
    while ((1 << rounds) < size && rounds < 30) rounds++;
    return 1 + rounds;
}

void cs_count_taken_first(uint64_t n) { g.coll_taken_first += n; }

struct cosched_rank_shm *cs_shm_of(int w) { return w == g.rank ? g.me : peer(w); }

int cs_world_of(MPI_Comm comm, int rank) {
    pthread_mutex_lock(&g_lock);
    int w = world_rank(comm, rank);
    pthread_mutex_unlock(&g_lock);
    return w;
}

/* A collective's message from world rank `from` to world rank `to`, of 0 bytes (shim/coll.c); `to` may be
 * this rank (another member completed its sender's dependencies by entering). The event says "counted"
 * (b = 1) whatever the destination: shim/coll.c counts a collective message's arrival and its consumption
 * on one machine or not at all, so the agent of a destination on another machine must not add it to the
 * destination's `arrivals` (its leaving would never consume it). */
void cs_post_message(int to, int from) {
    if (to < 0 || from < 0 || to == from) return;
    if (message_wanted(to)) send_event(COSCHED_MSG_MESSAGE, to, from, 0, 1);
}

/* Entering wakes nobody: the library has sent none of the collective's messages yet (a member woken
 * now finds nothing and sleeps again). The wait (cs_wait) passes the wake-up on once its own calls have
 * had the chance to send them. The agents are told of the collective's messages this entry lets the
 * simulator's algorithm send (shim/coll.c); the count of collectives entered is bumped first (sequentially
 * consistent), so of two members entering at once at least one sees the other. */
uint64_t cs_coll_bytes(int count, MPI_Datatype type) {
    int size = 0;
    if (count <= 0 || type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS || size < 0) return 0;
    return (uint64_t)count * (uint64_t)size;
}

void cs_coll_enter(MPI_Comm comm, int coll, int root, uint64_t bytes) {
    if (!cs_ready) return;
    uint64_t number = ADD(&g.me->collectives, 1) + 1;
    ADD(&g.me->coll_depth, 1u);
    int outer = coll_nesting++ == 0;
    if (outer) coll_comm = comm;
    send_event(COSCHED_MSG_COLL_ENTER, g.rank, coll, 0, 0);
    /* Served by an agent, every member works out the messages (their events, and the unconsumed messages
     * the policies read); standalone, none does. */
    if (outer) {
        coll_kind = coll, coll_root = root, coll_number = number, coll_bytes = bytes;
        coll_modelled = g.sock >= 0;
        if (coll_modelled) cs_coll_messages(comm, coll, root, bytes, number);
    }
}

void cs_coll_exit(MPI_Comm comm, int coll) {
    if (!cs_ready) return;
    __atomic_fetch_sub(&g.me->coll_depth, 1u, __ATOMIC_SEQ_CST);
    if (coll_nesting > 0 && --coll_nesting == 0 && coll_modelled)
        cs_coll_taken(comm, coll_kind, coll_root, coll_bytes, coll_number);
    send_event(COSCHED_MSG_COLL_EXIT, g.rank, coll, 0, 0);
    wake_comm_collective(comm);
}

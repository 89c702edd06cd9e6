/*
 * libcosched C wrappers (PMPI interposition). Each blocking call becomes its non-blocking form plus
 * the wait loop of core.c (cs_wait) unless the wait mode is LIBRARY, in which case the library's own
 * blocking call runs untouched. Sends count their arrival before the library's call and bump the receiver after it
 * (cs_send_begin, cs_send_end); receives are counted when they
 * complete. Collectives send enter/exit events and use MPI_I<collective> + the RECV wait mode.
 */
#include <stdlib.h>
#include <string.h>

#include "shim.h"

#define COUNT(c)                                     \
    do {                                             \
        if (!cs_in_fortran) cs_count_call((c), 0);   \
    } while (0)

/* ---------------------------------------------------------------- test functions */

struct one {
    MPI_Request *req;
    MPI_Status *st;
};
static int test_one(void *c, int *flag) {
    struct one *x = c;
    return PMPI_Test(x->req, flag, x->st);
}

struct all {
    int n;
    MPI_Request *reqs;
    MPI_Status *sts;
};
static int test_all(void *c, int *flag) {
    struct all *x = c;
    return PMPI_Testall(x->n, x->reqs, flag, x->sts);
}

struct any {
    int n;
    MPI_Request *reqs;
    int *index;
    MPI_Status *st;
};
static int test_any(void *c, int *flag) {
    struct any *x = c;
    return PMPI_Testany(x->n, x->reqs, x->index, flag, x->st);
}

struct probe {
    int source, tag;
    MPI_Comm comm;
    MPI_Status *st;
};
static int test_probe(void *c, int *flag) {
    struct probe *x = c;
    return PMPI_Iprobe(x->source, x->tag, x->comm, flag, x->st);
}

static int wait_one(int kind, MPI_Request *req, MPI_Status *st) {
    struct one x = {req, st};
    return cs_wait(kind, test_one, &x);
}

/* ---------------------------------------------------------------- init / finalize */

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) cs_after_init();
    COUNT(CS_INIT);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) cs_after_init();
    COUNT(CS_INIT);
    return rc;
}

int MPI_Finalize(void) {
    COUNT(CS_FINALIZE);
    cs_before_finalize();
    return PMPI_Finalize();
}

/* ---------------------------------------------------------------- point to point */

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    COUNT(CS_SEND);
    if (cs_mode(COSCHED_WAIT_SEND_ACK) == COSCHED_MODE_LIBRARY) {
        int w = cs_send_begin(comm, dest);
        int rc = PMPI_Send(buf, count, type, dest, tag, comm);
        cs_send_end(w, rc, count, type);
        return rc;
    }
    MPI_Request r;
    int w = cs_send_begin(comm, dest);
    int rc = PMPI_Isend(buf, count, type, dest, tag, comm, &r);
    cs_send_end(w, rc, count, type);
    if (rc != MPI_SUCCESS) return rc;
    return wait_one(COSCHED_WAIT_SEND_ACK, &r, MPI_STATUS_IGNORE);
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    COUNT(CS_RSEND);
    int w = cs_send_begin(comm, dest);
    int rc = PMPI_Rsend(buf, count, type, dest, tag, comm);
    cs_send_end(w, rc, count, type);
    return rc;
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    COUNT(CS_SSEND);
    if (cs_mode(COSCHED_WAIT_SEND_ACK) == COSCHED_MODE_LIBRARY) {
        int w = cs_send_begin(comm, dest);
        uint64_t t0 = cs_lib_wait_begin(COSCHED_WAIT_SEND_ACK);
        int rc = PMPI_Ssend(buf, count, type, dest, tag, comm);
        cs_lib_wait_end(COSCHED_WAIT_SEND_ACK, t0);
        cs_send_end(w, rc, count, type);
        return rc;
    }
    MPI_Request r;
    int w = cs_send_begin(comm, dest);
    int rc = PMPI_Issend(buf, count, type, dest, tag, comm, &r);
    cs_send_end(w, rc, count, type);
    if (rc != MPI_SUCCESS) return rc;
    return wait_one(COSCHED_WAIT_SEND_ACK, &r, MPI_STATUS_IGNORE);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *req) {
    COUNT(CS_ISEND);
    int w = cs_send_begin(comm, dest);
    int rc = PMPI_Isend(buf, count, type, dest, tag, comm, req);
    cs_send_end(w, rc, count, type);
    return rc;
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request *req) {
    COUNT(CS_ISSEND);
    int w = cs_send_begin(comm, dest);
    int rc = PMPI_Issend(buf, count, type, dest, tag, comm, req);
    cs_send_end(w, rc, count, type);
    return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req) {
    COUNT(CS_IRECV);
    int rc = PMPI_Irecv(buf, count, type, source, tag, comm, req);
    if (rc == MPI_SUCCESS) {
        cs_req_track_recv(*req, comm, type);
        cs_on_recv_posted(comm, source);
    }
    return rc;
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status) {
    COUNT(CS_RECV);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc;
    if (cs_mode(COSCHED_WAIT_RECV) == COSCHED_MODE_LIBRARY) {
        cs_on_recv_posted(comm, source);
        uint64_t t0 = cs_lib_wait_begin(COSCHED_WAIT_RECV);
        rc = PMPI_Recv(buf, count, type, source, tag, comm, st);
        cs_lib_wait_end(COSCHED_WAIT_RECV, t0);
    } else {
        MPI_Request r;
        rc = PMPI_Irecv(buf, count, type, source, tag, comm, &r);
        if (rc != MPI_SUCCESS) return rc;
        cs_on_recv_posted(comm, source);
        rc = wait_one(COSCHED_WAIT_RECV, &r, st);
    }
    if (rc == MPI_SUCCESS) cs_on_recv_done(comm, st, type);
    return rc;
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
                 MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status *status) {
    COUNT(CS_SENDRECV);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc;
    if (cs_mode(COSCHED_WAIT_RECV) == COSCHED_MODE_LIBRARY) {
        cs_on_recv_posted(comm, source);
        int w = cs_send_begin(comm, dest);
        uint64_t t0 = cs_lib_wait_begin(COSCHED_WAIT_RECV);
        rc = PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, st);
        cs_lib_wait_end(COSCHED_WAIT_RECV, t0);
        cs_send_end(w, rc, scount, stype);
    } else {
        MPI_Request r[2];
        MPI_Status sts[2];
        rc = PMPI_Irecv(rbuf, rcount, rtype, source, rtag, comm, &r[0]);
        if (rc != MPI_SUCCESS) return rc;
        cs_on_recv_posted(comm, source);
        int w = cs_send_begin(comm, dest);
        rc = PMPI_Isend(sbuf, scount, stype, dest, stag, comm, &r[1]);
        cs_send_end(w, rc, scount, stype);
        if (rc != MPI_SUCCESS) return rc;
        struct all x = {2, r, sts};
        rc = cs_wait(COSCHED_WAIT_RECV, test_all, &x);
        *st = sts[0];
    }
    if (rc == MPI_SUCCESS) cs_on_recv_done(comm, st, rtype);
    return rc;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
    COUNT(CS_PROBE);
    if (cs_mode(COSCHED_WAIT_RECV) == COSCHED_MODE_LIBRARY) {
        uint64_t t0 = cs_lib_wait_begin(COSCHED_WAIT_RECV);
        int rc = PMPI_Probe(source, tag, comm, status);
        cs_lib_wait_end(COSCHED_WAIT_RECV, t0);
        return rc;
    }
    struct probe x = {source, tag, comm, status};
    return cs_wait(COSCHED_WAIT_RECV, test_probe, &x);
}

/* ---------------------------------------------------------------- completion */

/* Counts the receives among `n` completed requests whose handles were `orig`. */
static void completed(int n, const MPI_Request *orig, const MPI_Status *sts) {
    for (int i = 0; i < n; i++) {
        MPI_Comm comm;
        MPI_Datatype type;
        if (cs_req_take(orig[i], &comm, &type)) cs_on_recv_done(comm, sts ? &sts[i] : NULL, type);
    }
}

int MPI_Wait(MPI_Request *req, MPI_Status *status) {
    COUNT(CS_WAIT);
    if (!cs_ready) return PMPI_Wait(req, status);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    MPI_Request orig = *req;
    int kind = cs_req_is_recv(orig) ? COSCHED_WAIT_RECV_COMPLETION : COSCHED_WAIT_SEND_COMPLETION;
    int rc;
    if (cs_mode(kind) == COSCHED_MODE_LIBRARY) {
        uint64_t t0 = cs_lib_wait_begin(kind);
        rc = PMPI_Wait(req, st);
        cs_lib_wait_end(kind, t0);
    } else {
        rc = wait_one(kind, req, st);
    }
    if (rc == MPI_SUCCESS) completed(1, &orig, st);
    return rc;
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
    COUNT(CS_WAITALL);
    if (!cs_ready || n <= 0) return PMPI_Waitall(n, reqs, sts);
    MPI_Request orig_small[16];
    MPI_Status sts_small[16];
    MPI_Request *orig = n <= 16 ? orig_small : malloc(sizeof *orig * (size_t)n);
    MPI_Status *st = sts != MPI_STATUSES_IGNORE ? sts : n <= 16 ? sts_small : malloc(sizeof *st * (size_t)n);
    if (!orig || !st) {
        if (orig != orig_small) free(orig);
        return PMPI_Waitall(n, reqs, sts);
    }
    memcpy(orig, reqs, sizeof *orig * (size_t)n);
    int kind = COSCHED_WAIT_SEND_COMPLETION;
    for (int i = 0; i < n; i++)
        if (cs_req_is_recv(orig[i])) {
            kind = COSCHED_WAIT_RECV_COMPLETION;
            break;
        }
    int rc;
    if (cs_mode(kind) == COSCHED_MODE_LIBRARY) {
        uint64_t t0 = cs_lib_wait_begin(kind);
        rc = PMPI_Waitall(n, reqs, st);
        cs_lib_wait_end(kind, t0);
    } else {
        struct all x = {n, reqs, st};
        rc = cs_wait(kind, test_all, &x);
    }
    if (rc == MPI_SUCCESS) completed(n, orig, st);
    if (orig != orig_small) free(orig);
    if (st != sts && st != sts_small) free(st);
    return rc;
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status) {
    COUNT(CS_WAITANY);
    if (!cs_ready || n <= 0) return PMPI_Waitany(n, reqs, index, status);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    MPI_Request orig_small[16];
    MPI_Request *orig = n <= 16 ? orig_small : malloc(sizeof *orig * (size_t)n);
    if (!orig) return PMPI_Waitany(n, reqs, index, status);
    memcpy(orig, reqs, sizeof *orig * (size_t)n);
    int kind = COSCHED_WAIT_SEND_COMPLETION;
    for (int i = 0; i < n; i++)
        if (cs_req_is_recv(orig[i])) {
            kind = COSCHED_WAIT_RECV_COMPLETION;
            break;
        }
    int rc;
    if (cs_mode(kind) == COSCHED_MODE_LIBRARY) {
        uint64_t t0 = cs_lib_wait_begin(kind);
        rc = PMPI_Waitany(n, reqs, index, st);
        cs_lib_wait_end(kind, t0);
    } else {
        struct any x = {n, reqs, index, st};
        rc = cs_wait(kind, test_any, &x);
    }
    if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED) completed(1, &orig[*index], st);
    if (orig != orig_small) free(orig);
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
    COUNT(CS_TEST);
    if (!cs_ready) return PMPI_Test(req, flag, status);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    MPI_Request orig = *req;
    int rc = PMPI_Test(req, flag, st);
    if (rc == MPI_SUCCESS && *flag) completed(1, &orig, st);
    return rc;
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]) {
    COUNT(CS_TESTALL);
    if (!cs_ready || n <= 0) return PMPI_Testall(n, reqs, flag, sts);
    MPI_Request orig_small[16];
    MPI_Status sts_small[16];
    MPI_Request *orig = n <= 16 ? orig_small : malloc(sizeof *orig * (size_t)n);
    MPI_Status *st = sts != MPI_STATUSES_IGNORE ? sts : n <= 16 ? sts_small : malloc(sizeof *st * (size_t)n);
    if (!orig || !st) {
        if (orig != orig_small) free(orig);
        return PMPI_Testall(n, reqs, flag, sts);
    }
    memcpy(orig, reqs, sizeof *orig * (size_t)n);
    int rc = PMPI_Testall(n, reqs, flag, st);
    if (rc == MPI_SUCCESS && *flag) completed(n, orig, st);
    if (orig != orig_small) free(orig);
    if (st != sts && st != sts_small) free(st);
    return rc;
}

int MPI_Request_free(MPI_Request *req) {
    MPI_Comm comm;
    MPI_Datatype type;
    if (cs_ready) cs_req_take(*req, &comm, &type);
    return PMPI_Request_free(req);
}

int MPI_Comm_free(MPI_Comm *comm) {
    if (cs_ready) cs_comm_forget(*comm);
    return PMPI_Comm_free(comm);
}

/* ---------------------------------------------------------------- collectives */

/* A blocking collective: enter/exit events, then the library's call (LIBRARY) or its non-blocking
 * form waited for with the RECV wait mode. */
#define COLLECTIVE(CALL, COLL, ROOT, BYTES, BLOCKING, NONBLOCKING)       \
    do {                                                                 \
        COUNT(CALL);                                                     \
        if (!cs_ready) return BLOCKING;                                  \
        int own = !cs_in_fortran;                                        \
        if (own) cs_coll_enter(comm, COLL, ROOT, BYTES);                 \
        int rc;                                                          \
        if (cs_mode(COSCHED_WAIT_RECV) == COSCHED_MODE_LIBRARY) {        \
            uint64_t t0 = cs_lib_wait_begin(COSCHED_WAIT_RECV);          \
            rc = BLOCKING;                                               \
            cs_lib_wait_end(COSCHED_WAIT_RECV, t0);                      \
        } else {                                                         \
            MPI_Request r;                                               \
            rc = NONBLOCKING;                                            \
            if (rc == MPI_SUCCESS) rc = wait_one(COSCHED_WAIT_RECV, &r, MPI_STATUS_IGNORE); \
        }                                                                \
        if (own) cs_coll_exit(comm, COLL);                               \
        return rc;                                                       \
    } while (0)

int MPI_Barrier(MPI_Comm comm) {
    COLLECTIVE(CS_BARRIER, COSCHED_COLL_BARRIER, -1, 0, PMPI_Barrier(comm), PMPI_Ibarrier(comm, &r));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    COLLECTIVE(CS_BCAST, COSCHED_COLL_BCAST, root, 0, PMPI_Bcast(buf, count, type, root, comm),
               PMPI_Ibcast(buf, count, type, root, comm, &r));
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
    COLLECTIVE(CS_REDUCE, COSCHED_COLL_REDUCE, root, 0, PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm),
               PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, &r));
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    COLLECTIVE(CS_ALLREDUCE, COSCHED_COLL_ALLREDUCE, -1, 0,
               PMPI_Allreduce(sbuf, rbuf, count, type, op, comm),
               PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, &r));
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                 MPI_Comm comm) {
    COLLECTIVE(CS_ALLTOALL, COSCHED_COLL_ALLTOALL, -1, cs_coll_bytes(rcount, rtype),
               PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm),
               PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, &r));
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
    COLLECTIVE(CS_ALLGATHER, COSCHED_COLL_ALLGATHER, -1, cs_coll_bytes(rcount, rtype),
               PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm),
               PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, &r));
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
               int root, MPI_Comm comm) {
    COLLECTIVE(CS_GATHER, COSCHED_COLL_GATHER, root, 0,
               PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm),
               PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &r));
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                int root, MPI_Comm comm) {
    COLLECTIVE(CS_SCATTER, COSCHED_COLL_SCATTER, root, 0,
               PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm),
               PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, &r));
}

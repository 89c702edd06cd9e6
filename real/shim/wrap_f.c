/*
 * libcosched Fortran wrappers (mpif.h / `use mpi` names, in the four usual manglings: mpi_send_,
 * mpi_send__, mpi_send, MPI_SEND). Open MPI's Fortran bindings call PMPI_* directly, so the C
 * wrappers never see Fortran calls there; MPICH's call the C MPI_* names (the C wrappers would see
 * them, but the Fortran wrappers below take precedence either way and count them as Fortran).
 *
 * Point to point and waits: handles converted with MPI_*_f2c/c2f, then the C wrappers run (all
 * wait modes). Collectives: under Open MPI, whose Fortran sentinels MPI_IN_PLACE and MPI_BOTTOM are
 * the exported common blocks mpi_fortran_in_place_ / mpi_fortran_bottom_ (found with dlsym), the
 * arguments are converted and the C wrappers run (all wait modes); elsewhere the library's own
 * Fortran binding is called (dlsym(RTLD_NEXT)) so its sentinels keep working, and the wrapper adds
 * the enter/exit events and counters (MPICH's binding reaches the C wrappers, which apply the wait
 * mode). MPI_Init and MPI_Finalize always call the library's binding. The Fortran 2008 bindings
 * (`use mpi_f08`) are not wrapped.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "shim.h"

#ifdef MPI_F_STATUS_SIZE
#define FSTATUS MPI_F_STATUS_SIZE
#else
#define FSTATUS ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif

typedef MPI_Fint F;

#define ALIASES(fn, lower, upper)                                             \
    extern __typeof__(fn) lower##_ __attribute__((alias(#fn)));              \
    extern __typeof__(fn) lower##__ __attribute__((alias(#fn)));             \
    extern __typeof__(fn) lower __attribute__((alias(#fn)));                 \
    extern __typeof__(fn) upper __attribute__((alias(#fn)));

/* The library's own Fortran entry point `name` (first mangling found after this library). */
static void *next_fortran(const char *lower) {
    char buf[64];
    const char *forms[] = {"%s_", "%s__", "%s"};
    for (int i = 0; i < 3; i++) {
        snprintf(buf, sizeof buf, forms[i], lower);
        void *p = dlsym(RTLD_NEXT, buf);
        if (p) return p;
    }
    for (int i = 0; buf[i] && i < (int)sizeof buf; i++) buf[i] = (char)(buf[i] >= 'a' && buf[i] <= 'z' ? buf[i] - 32 : buf[i]);
    void *p = dlsym(RTLD_NEXT, buf);
    if (!p) {
        fprintf(stderr, "libcosched: the MPI library has no Fortran entry point %s\n", lower);
        abort();
    }
    return p;
}

#define NEXT(var, type, name)         \
    static type var;                  \
    if (!var) var = (type)next_fortran(name);

/* Open MPI's Fortran MPI_IN_PLACE and MPI_BOTTOM (NULL elsewhere). */
static void *f_in_place, *f_bottom;
static int f_sentinels = -1;

static int ompi_sentinels(void) {
    if (f_sentinels < 0) {
        f_in_place = dlsym(RTLD_DEFAULT, "mpi_fortran_in_place_");
        f_bottom = dlsym(RTLD_DEFAULT, "mpi_fortran_bottom_");
        f_sentinels = f_in_place && f_bottom;
    }
    return f_sentinels;
}

/* A Fortran buffer argument as C sees it. */
static void *fbuf(void *p) {
    if (ompi_sentinels()) {
        if (p == f_in_place) return MPI_IN_PLACE;
        if (p == f_bottom) return MPI_BOTTOM;
    }
    return p;
}

static void status_out(const MPI_Status *c, F *f) {
    if (f != MPI_F_STATUS_IGNORE) MPI_Status_c2f(c, f);
}

/* ---------------------------------------------------------------- init / finalize */

void cs_f_init(F *ierr) {
    void (*next)(F *) = (void (*)(F *))next_fortran("mpi_init");
    cs_in_fortran = 1;
    next(ierr);
    cs_in_fortran = 0;
    if (*ierr == MPI_SUCCESS) cs_after_init();
    cs_count_call(CS_INIT, 1);
}
ALIASES(cs_f_init, mpi_init, MPI_INIT)

void cs_f_init_thread(F *required, F *provided, F *ierr) {
    void (*next)(F *, F *, F *) = (void (*)(F *, F *, F *))next_fortran("mpi_init_thread");
    cs_in_fortran = 1;
    next(required, provided, ierr);
    cs_in_fortran = 0;
    if (*ierr == MPI_SUCCESS) cs_after_init();
    cs_count_call(CS_INIT, 1);
}
ALIASES(cs_f_init_thread, mpi_init_thread, MPI_INIT_THREAD)

void cs_f_finalize(F *ierr) {
    void (*next)(F *) = (void (*)(F *))next_fortran("mpi_finalize");
    cs_count_call(CS_FINALIZE, 1);
    cs_before_finalize();
    cs_in_fortran = 1;
    next(ierr);
    cs_in_fortran = 0;
}
ALIASES(cs_f_finalize, mpi_finalize, MPI_FINALIZE)

/* ---------------------------------------------------------------- point to point */

void cs_f_send(void *buf, F *count, F *type, F *dest, F *tag, F *comm, F *ierr) {
    cs_count_call(CS_SEND, 1);
    cs_in_fortran = 1;
    *ierr = MPI_Send(fbuf(buf), *count, MPI_Type_f2c(*type), *dest, *tag, MPI_Comm_f2c(*comm));
    cs_in_fortran = 0;
}
ALIASES(cs_f_send, mpi_send, MPI_SEND)

void cs_f_ssend(void *buf, F *count, F *type, F *dest, F *tag, F *comm, F *ierr) {
    cs_count_call(CS_SSEND, 1);
    cs_in_fortran = 1;
    *ierr = MPI_Ssend(fbuf(buf), *count, MPI_Type_f2c(*type), *dest, *tag, MPI_Comm_f2c(*comm));
    cs_in_fortran = 0;
}
ALIASES(cs_f_ssend, mpi_ssend, MPI_SSEND)

void cs_f_recv(void *buf, F *count, F *type, F *source, F *tag, F *comm, F *status, F *ierr) {
    cs_count_call(CS_RECV, 1);
    MPI_Status st;
    cs_in_fortran = 1;
    *ierr = MPI_Recv(fbuf(buf), *count, MPI_Type_f2c(*type), *source, *tag, MPI_Comm_f2c(*comm), &st);
    cs_in_fortran = 0;
    if (*ierr == MPI_SUCCESS) status_out(&st, status);
}
ALIASES(cs_f_recv, mpi_recv, MPI_RECV)

void cs_f_isend(void *buf, F *count, F *type, F *dest, F *tag, F *comm, F *req, F *ierr) {
    cs_count_call(CS_ISEND, 1);
    MPI_Request r;
    cs_in_fortran = 1;
    *ierr = MPI_Isend(fbuf(buf), *count, MPI_Type_f2c(*type), *dest, *tag, MPI_Comm_f2c(*comm), &r);
    cs_in_fortran = 0;
    if (*ierr == MPI_SUCCESS) *req = MPI_Request_c2f(r);
}
ALIASES(cs_f_isend, mpi_isend, MPI_ISEND)

void cs_f_irecv(void *buf, F *count, F *type, F *source, F *tag, F *comm, F *req, F *ierr) {
    cs_count_call(CS_IRECV, 1);
    MPI_Request r;
    cs_in_fortran = 1;
    *ierr = MPI_Irecv(fbuf(buf), *count, MPI_Type_f2c(*type), *source, *tag, MPI_Comm_f2c(*comm), &r);
    cs_in_fortran = 0;
    if (*ierr == MPI_SUCCESS) *req = MPI_Request_c2f(r);
}
ALIASES(cs_f_irecv, mpi_irecv, MPI_IRECV)

void cs_f_sendrecv(void *sbuf, F *scount, F *stype, F *dest, F *stag, void *rbuf, F *rcount, F *rtype, F *source,
                   F *rtag, F *comm, F *status, F *ierr) {
    cs_count_call(CS_SENDRECV, 1);
    MPI_Status st;
    cs_in_fortran = 1;
    *ierr = MPI_Sendrecv(fbuf(sbuf), *scount, MPI_Type_f2c(*stype), *dest, *stag, fbuf(rbuf), *rcount, MPI_Type_f2c(*rtype),
                         *source, *rtag, MPI_Comm_f2c(*comm), &st);
    cs_in_fortran = 0;
    if (*ierr == MPI_SUCCESS) status_out(&st, status);
}
ALIASES(cs_f_sendrecv, mpi_sendrecv, MPI_SENDRECV)

void cs_f_wait(F *req, F *status, F *ierr) {
    cs_count_call(CS_WAIT, 1);
    MPI_Request r = MPI_Request_f2c(*req);
    MPI_Status st;
    cs_in_fortran = 1;
    *ierr = MPI_Wait(&r, &st);
    cs_in_fortran = 0;
    if (*ierr == MPI_SUCCESS) {
        *req = MPI_Request_c2f(r);
        status_out(&st, status);
    }
}
ALIASES(cs_f_wait, mpi_wait, MPI_WAIT)

void cs_f_waitall(F *count, F *reqs, F *statuses, F *ierr) {
    cs_count_call(CS_WAITALL, 1);
    int n = *count;
    MPI_Request rs[16];
    MPI_Status ss[16];
    MPI_Request *r = n <= 16 ? rs : malloc(sizeof *r * (size_t)(n > 0 ? n : 1));
    MPI_Status *s = n <= 16 ? ss : malloc(sizeof *s * (size_t)(n > 0 ? n : 1));
    if (!r || !s) {
        *ierr = MPI_ERR_NO_MEM;
        if (r != rs) free(r);
        if (s != ss) free(s);
        return;
    }
    for (int i = 0; i < n; i++) r[i] = MPI_Request_f2c(reqs[i]);
    cs_in_fortran = 1;
    *ierr = MPI_Waitall(n, r, s);
    cs_in_fortran = 0;
    if (*ierr == MPI_SUCCESS)
        for (int i = 0; i < n; i++) {
            reqs[i] = MPI_Request_c2f(r[i]);
            if (statuses != MPI_F_STATUSES_IGNORE) MPI_Status_c2f(&s[i], &statuses[i * FSTATUS]);
        }
    if (r != rs) free(r);
    if (s != ss) free(s);
}
ALIASES(cs_f_waitall, mpi_waitall, MPI_WAITALL)

/* ---------------------------------------------------------------- collectives */

typedef void (*t_next_barrier)(F *, F *);
typedef void (*t_next_bcast)(void *, F *, F *, F *, F *, F *);
typedef void (*t_next_reduce)(void *, void *, F *, F *, F *, F *, F *, F *);
typedef void (*t_next_allreduce)(void *, void *, F *, F *, F *, F *, F *);
typedef void (*t_next_alltoall)(void *, F *, F *, void *, F *, F *, F *, F *);
typedef void (*t_next_allgather)(void *, F *, F *, void *, F *, F *, F *, F *);

/* Open MPI: convert and run the C wrapper (NATIVE); elsewhere: the library's binding (CALLNEXT). */
#define FCOLL(CALL, COLL, ROOT, BYTES, NATIVE, CALLNEXT) \
    do {                                         \
        cs_count_call(CALL, 1);                  \
        MPI_Comm c = MPI_Comm_f2c(*comm);        \
        cs_coll_enter(c, COLL, ROOT, BYTES);     \
        cs_in_fortran = 1;                       \
        if (ompi_sentinels()) {                  \
            *ierr = NATIVE;                      \
        } else {                                 \
            CALLNEXT;                            \
        }                                        \
        cs_in_fortran = 0;                       \
        cs_coll_exit(c, COLL);                   \
    } while (0)

void cs_f_barrier(F *comm, F *ierr) {
    NEXT(next_barrier, t_next_barrier, "mpi_barrier")
    FCOLL(CS_BARRIER, COSCHED_COLL_BARRIER, -1, 0, MPI_Barrier(c), next_barrier(comm, ierr));
}
ALIASES(cs_f_barrier, mpi_barrier, MPI_BARRIER)

void cs_f_bcast(void *buf, F *count, F *type, F *root, F *comm, F *ierr) {
    NEXT(next_bcast, t_next_bcast, "mpi_bcast")
    FCOLL(CS_BCAST, COSCHED_COLL_BCAST, *root, 0, MPI_Bcast(fbuf(buf), *count, MPI_Type_f2c(*type), *root, c),
          next_bcast(buf, count, type, root, comm, ierr));
}
ALIASES(cs_f_bcast, mpi_bcast, MPI_BCAST)

void cs_f_reduce(void *sbuf, void *rbuf, F *count, F *type, F *op, F *root, F *comm, F *ierr) {
    NEXT(next_reduce, t_next_reduce, "mpi_reduce")
    FCOLL(CS_REDUCE, COSCHED_COLL_REDUCE, *root, 0,
          MPI_Reduce(fbuf(sbuf), fbuf(rbuf), *count, MPI_Type_f2c(*type), MPI_Op_f2c(*op), *root, c),
          next_reduce(sbuf, rbuf, count, type, op, root, comm, ierr));
}
ALIASES(cs_f_reduce, mpi_reduce, MPI_REDUCE)

void cs_f_allreduce(void *sbuf, void *rbuf, F *count, F *type, F *op, F *comm, F *ierr) {
    NEXT(next_allreduce, t_next_allreduce, "mpi_allreduce")
    FCOLL(CS_ALLREDUCE, COSCHED_COLL_ALLREDUCE, -1, 0,
          MPI_Allreduce(fbuf(sbuf), fbuf(rbuf), *count, MPI_Type_f2c(*type), MPI_Op_f2c(*op), c),
          next_allreduce(sbuf, rbuf, count, type, op, comm, ierr));
}
ALIASES(cs_f_allreduce, mpi_allreduce, MPI_ALLREDUCE)

void cs_f_alltoall(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm, F *ierr) {
    NEXT(next_alltoall, t_next_alltoall, "mpi_alltoall")
    FCOLL(CS_ALLTOALL, COSCHED_COLL_ALLTOALL, -1, cs_coll_bytes(*rcount, MPI_Type_f2c(*rtype)),
          MPI_Alltoall(fbuf(sbuf), *scount, MPI_Type_f2c(*stype), fbuf(rbuf), *rcount, MPI_Type_f2c(*rtype), c),
          next_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr));
}
ALIASES(cs_f_alltoall, mpi_alltoall, MPI_ALLTOALL)

void cs_f_allgather(void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype, F *comm, F *ierr) {
    NEXT(next_allgather, t_next_allgather, "mpi_allgather")
    FCOLL(CS_ALLGATHER, COSCHED_COLL_ALLGATHER, -1, cs_coll_bytes(*rcount, MPI_Type_f2c(*rtype)),
          MPI_Allgather(fbuf(sbuf), *scount, MPI_Type_f2c(*stype), fbuf(rbuf), *rcount, MPI_Type_f2c(*rtype), c),
          next_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, ierr));
}
ALIASES(cs_f_allgather, mpi_allgather, MPI_ALLGATHER)

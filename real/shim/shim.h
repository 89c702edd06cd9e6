/*
 * libcosched internals shared by the C and Fortran wrappers (see core.c for the mechanism and
 * real/include/cosched_proto.h for the protocol with the node agent).
 */
#ifndef COSCHED_SHIM_H
#define COSCHED_SHIM_H

#include <mpi.h>
#include <stdint.h>

#include "cosched_proto.h"

/* Calls counted for the shim log (COSCHED_LOG), C and Fortran entry points separately. */
enum cs_call {
    CS_INIT, CS_FINALIZE, CS_SEND, CS_SSEND, CS_RSEND, CS_RECV, CS_ISEND, CS_ISSEND, CS_IRECV,
    CS_WAIT, CS_WAITALL, CS_WAITANY, CS_TEST, CS_TESTALL, CS_SENDRECV, CS_PROBE, CS_BARRIER,
    CS_BCAST, CS_REDUCE, CS_ALLREDUCE, CS_ALLTOALL, CS_ALLGATHER, CS_GATHER, CS_SCATTER,
    CS_CALLS
};

/* 1 once MPI_Init has returned and the shim is set up, 0 before and after MPI_Finalize. */
extern int cs_ready;
/* Set (per thread) while a Fortran wrapper runs: the C wrappers it reaches neither count the call
 * nor send collective enter/exit (the Fortran wrapper does). */
extern __thread int cs_in_fortran;

void cs_count_call(enum cs_call c, int fortran);
void cs_after_init(void);
void cs_before_finalize(void);

/* The wait mode to use now for a wait of `kind`. */
uint32_t cs_mode(int kind);

/* Waiting: a test function and its context; cs_wait runs the mode's loop until it completes. */
typedef int (*cs_test_fn)(void *ctx, int *flag);
int cs_wait(int kind, cs_test_fn test, void *ctx);
/* Library mode bookkeeping around a blocking call of the MPI library. */
uint64_t cs_lib_wait_begin(int kind);
void cs_lib_wait_end(int kind, uint64_t t0);

/* Message bookkeeping. */
/* Before a send to `dest` of `comm`: counts its arrival at once when the destination is on this machine,
 * before the library has the message, so the destination can never take it uncounted. Returns the
 * destination's world rank (-1: unknown), or CS_NO_SEND (no shim ready, MPI_PROC_NULL). */
#define CS_NO_SEND (-2)
int cs_send_begin(MPI_Comm comm, int dest);
/* After the library's send call returned `rc`: a posted send's counters, wake-up and MESSAGE event; a
 * failed one takes its arrival back. `w` is cs_send_begin's answer. */
void cs_send_end(int w, int rc, int count, MPI_Datatype type);
void cs_on_recv_posted(MPI_Comm comm, int source);
void cs_on_recv_done(MPI_Comm comm, const MPI_Status *st, MPI_Datatype type);
void cs_comm_forget(MPI_Comm comm);

/* Pending receive requests (to tell receive from send completions and count bytes). */
void cs_req_track_recv(MPI_Request req, MPI_Comm comm, MPI_Datatype type);
/* Removes `req` if tracked; returns 1 and fills comm/type if it was a receive. */
int cs_req_take(MPI_Request req, MPI_Comm *comm, MPI_Datatype *type);
int cs_req_is_recv(MPI_Request req);

/* Collectives: `root` is the root of a rooted collective, -1 otherwise; `bytes` the data per member the
 * algorithm's choice depends on (alltoall, allgather: the receive count times its type's size), else 0. */
void cs_coll_enter(MPI_Comm comm, int coll, int root, uint64_t bytes);
/* `count` elements of `type` in bytes (0 for a null type). */
uint64_t cs_coll_bytes(int count, MPI_Datatype type);
void cs_coll_exit(MPI_Comm comm, int coll);

/* A collective's messages as MESSAGE events (coll.c): those the simulator's algorithm for `coll` sends once
 * this member, whose count of collectives entered is now `number`, has entered. */
void cs_coll_messages(MPI_Comm comm, int coll, int root, uint64_t bytes, uint64_t number);
/* Leaving collective `number`: adds to this member's `consumed` the messages to it, and to its `arrivals`
 * those nobody had posted yet (every member on this machine). */
void cs_coll_taken(MPI_Comm comm, int coll, int root, uint64_t bytes, uint64_t number);
/* For coll.c: the segment of world rank `w` on this machine (this rank's own included; NULL if none), the
 * world rank of `rank` of `comm` (-1 if none), and posting a 0-byte MESSAGE event from `from` to `to`. */
struct cosched_rank_shm *cs_shm_of(int w);
int cs_world_of(MPI_Comm comm, int rank);
void cs_post_message(int to, int from);
/* For coll.c: counts collective messages this rank took, leaving, before any member had posted them. */
void cs_count_taken_first(uint64_t n);

#endif

/*
 * libcosched: the simulator's collective algorithms as lists of messages (coll_algo.c), for the posting and
 * counting of a collective's messages (coll.c).
 */
#ifndef COSCHED_SHIM_COLL_H
#define COSCHED_SHIM_COLL_H

#include <stdint.h>

#include <mpi.h>

/* The communicator's view of one collective: its size, this member's rank in it, the collective's number
 * (this member's count of collectives entered), the communicator (world ranks are looked up in it), the
 * root of a rooted collective and the bytes per member the algorithm's choice depends on. */
struct coll_ctx {
    MPI_Comm comm;
    int n, me, root;
    uint64_t number, bytes;
    int arrivals;       /* posted messages count in the receivers' arrivals (every member here) */
    uint64_t taken;     /* leaving: messages to this member */
    uint64_t own_count; /* leaving: messages to this member nobody had posted (their arrival counted now) */
    int all_enter;      /* leaving: no member can leave before every member has entered (not a tree) */
};

/* Message `slot` (0..31) of sender `s` to `t` (ranks of the communicator) is sent once every member x with
 * `dep(c, s, x, arg)` has entered. A visitor acts on each message. */
typedef int (*coll_dep_fn)(const struct coll_ctx *c, int s, int x, uint64_t arg);
typedef void (*coll_visit_fn)(struct coll_ctx *c, int s, int t, int slot, coll_dep_fn dep, uint64_t arg);

/* Runs `visit` on every message of collective `coll` as the simulator (or, for the collectives its programs
 * do not have, MPICH) sends it; 0 if the shim has no message list for it (`coll` unknown, or a communicator
 * too large for the algorithm's dependency masks). */
int cs_coll_each_message(struct coll_ctx *c, int coll, coll_visit_fn visit);

#endif

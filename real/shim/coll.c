/*
 * libcosched: a collective's messages as MESSAGE events for the agents.
 *
 * The seeds' NIC saw a collective's messages arrive like any other, so the node policies that act on
 * messages (DCS, CC, ICS) get `on_message` for them in the simulator, which runs a collective as the
 * point-to-point rounds of its algorithm (crates/cosched-model/src/program.rs). The MPI library sends a
 * real collective's messages itself, invisibly to the shim. So the shim posts, for each collective, the
 * messages the simulator's algorithm for it sends, at the moment that algorithm would send them: a message
 * is sent once every member it depends on has entered the collective (its sender and, through the rounds
 * before it, the members whose data it carries). When a member enters, it posts every message whose
 * dependencies it completes:
 *   barrier    dissemination: round k (d = 2^k < n), member s sends to s + d; depends on s, s - 1, ...,
 *              s - d + 1 (mod n).
 *   allreduce  recursive doubling over pof2 = the largest power of two <= n, MPICH's scheme for the
 *              n - pof2 extra ranks: extra r sends to r - pof2 (depends on r); round k, s < pof2 sends to
 *              s xor 2^k (depends on the members of s's block of 2^k, {x < pof2 : x >> k == s >> k}, and
 *              the extras x + pof2 of those x < n - pof2); s < n - pof2 sends the result to s + pof2
 *              (depends on every member).
 *   bcast      binomial tree from the root (relative ranks): s sends to s + m for every m below the lowest
 *              set bit of s (the root: every m < n); depends on s and its ancestors (s with its lowest set
 *              bits cleared one by one, down to the root).
 *   reduce     binomial tree to the root: s != root sends to s - (lowest set bit of s); depends on its
 *              subtree, s .. s + lowest bit - 1 (below n).
 *   others     (alltoall, allgather, gather, scatter; the simulator's programs use none but alltoall,
 *              whose algorithm depends on the message size): the member's first message only, to member
 *              (rank + 1) mod n, at its entry.
 * For 2 members this is each member's one message at its entry (barrier, allreduce), and for bcast and
 * reduce the one message of the tree.
 *
 * "Entered" is read from the members' segments: a member has entered this collective when its count of
 * collectives entered (`collectives`, bumped at entry before anything is read, sequentially consistent)
 * is at least this member's own. This assumes the members have entered the same collectives before (every
 * collective on one communicator, as in the simulator's programs); a member whose segment is not on this
 * machine is never known to have entered, so a message that depends on one is not posted (round 0's
 * messages, which depend on their sender only, always are). Two members entering at once may both see
 * a message's dependencies complete: the message is claimed in its sender's segment (`coll_posted`, a
 * compare-and-swap of one bit per message under the collective's number), so each is posted once.
 *
 * A claim is refused when the sender's word already holds a later collective (a member can run ahead
 * through bcasts and reduces, which do not wait for everyone): that message is not posted rather than
 * posted twice.
 *
 * Unconsumed messages (PB's scan, CC's pick read them), for the barrier and allreduce: when every member
 * has a segment on this machine, a posted message also adds to its receiver's `arrivals`, and a member
 * leaving the collective adds to its `consumed` every message of the algorithm to it. Every member has
 * entered, so posted them, before any member can leave: each was claimed in its poster's entry, before that
 * poster's library call. Between the two the message is unconsumed, as in the simulator between its arrival
 * and the receive that takes it. Not for bcast and reduce: a member can leave them before the members the
 * simulator's tree makes it wait for have entered (the library's tree may differ), so a message could be
 * posted to it after it left and stay unconsumed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>

#include "shim.h"

#define LD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)

/* The communicator's view of one collective: its size, this member's rank in it, the collective's number
 * (this member's count of collectives entered) and the communicator (world ranks are looked up in it). */
struct coll_ctx {
    MPI_Comm comm;
    int n, me;
    uint64_t number;
    int arrivals;   /* posted messages count in the receivers' arrivals (barrier, allreduce, all local) */
    uint64_t taken; /* messages to this member (leaving) */
};

static int lowbit(int x) { return x & -x; }

/* Whether member `x` (rank of the communicator) has entered this collective: its segment's count has
 * reached the collective's number. Unknown (no segment here) counts as not entered. */
static int entered(const struct coll_ctx *c, int x) {
    if (x == c->me) return 1;
    struct cosched_rank_shm *s = cs_shm_of(cs_world_of(c->comm, x));
    return s && LD(&s->collectives) >= c->number;
}

/* Claims message `slot` of sender `s` for this collective in `s`'s segment: 1 if this member is the first
 * to claim it (and so posts it). Two words by the parity of the number: a sender is never more than one
 * collective ahead of a member that completes one of its messages' dependencies (it cannot finish this
 * one, nor so the next, before that member's library call sends what it needs). */
static uint64_t *posted_word(const struct coll_ctx *c, int s) {
    struct cosched_rank_shm *seg = cs_shm_of(cs_world_of(c->comm, s));
    return seg ? &seg->coll_posted[c->number & 1] : NULL;
}

static int claim(const struct coll_ctx *c, int s, int slot) {
    uint64_t *w = posted_word(c, s);
    if (!w) return 0;
    uint64_t bit = 1ull << slot, cur = LD(w);
    for (;;) {
        uint64_t at = cur >> 32, now = c->number & 0xffffffffu, next;
        if (at == now) {
            if (cur & bit) return 0;
            next = cur | bit;
        } else if (at < now) {
            next = (now << 32) | bit;
        } else {
            return 0; /* the sender is already in a later collective of this parity */
        }
        if (__atomic_compare_exchange_n(w, &cur, next, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return 1;
    }
}

/* The algorithms enumerate their messages: message `slot` from `s` to `t` (ranks of the communicator),
 * sent once every member x with `dep(c, s, x, arg)` has entered. A visitor acts on each. */
typedef int (*dep_fn)(const struct coll_ctx *c, int s, int x, int arg);
typedef void (*visit_fn)(struct coll_ctx *c, int s, int t, int slot, dep_fn dep, int arg);

/* Entering: posts the message if this member completes its dependencies. */
static void post_if_due(struct coll_ctx *c, int s, int t, int slot, dep_fn dep, int arg) {
    if (!dep(c, s, c->me, arg)) return;
    for (int x = 0; x < c->n; x++)
        if (dep(c, s, x, arg) && !entered(c, x)) return;
    if (!claim(c, s, slot)) return;
    int to = cs_world_of(c->comm, t);
    if (c->arrivals) ADD(&cs_shm_of(to)->arrivals, 1);
    cs_post_message(to, cs_world_of(c->comm, s));
}

/* Leaving: counts a message to this member. */
static void take(struct coll_ctx *c, int s, int t, int slot, dep_fn dep, int arg) {
    if (t == c->me) c->taken++;
}

/* ------------------------------------------------------------------ barrier: dissemination */

static int barrier_dep(const struct coll_ctx *c, int s, int x, int d) { return (s - x + c->n) % c->n < d; }

static void barrier_messages(struct coll_ctx *c, visit_fn visit) {
    for (int k = 0, d = 1; d < c->n && k < 32; k++, d <<= 1)
        for (int s = 0; s < c->n; s++) visit(c, s, (s + d) % c->n, k, barrier_dep, d);
}

/* ------------------------------------------------------------------ allreduce: recursive doubling */

static int pof2_of(int n) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
}

/* Member x is in the block of 2^k of s (arg = k), or is the extra rank of one in it. */
static int allreduce_dep(const struct coll_ctx *c, int s, int x, int k) {
    int pof2 = pof2_of(c->n), base = x >= pof2 ? x - pof2 : x;
    return (base >> k) == (s >> k);
}

static int everyone(const struct coll_ctx *c, int s, int x, int arg) { return 1; }
static int self_only(const struct coll_ctx *c, int s, int x, int arg) { return x == s; }

static void allreduce_messages(struct coll_ctx *c, visit_fn visit) {
    int n = c->n, pof2 = pof2_of(n), extra = n - pof2, rounds = 0;
    while ((1 << rounds) < pof2) rounds++;
    for (int r = pof2; r < n; r++) visit(c, r, r - pof2, 0, self_only, 0);
    for (int k = 0; k < rounds && k < 30; k++)
        for (int s = 0; s < pof2; s++) visit(c, s, s ^ (1 << k), 1 + k, allreduce_dep, k);
    for (int s = 0; s < extra; s++) visit(c, s, s + pof2, 31, everyone, 0);
}

/* ------------------------------------------------------------------ bcast and reduce: binomial trees */

/* Relative ranks (root 0) for the tree functions; arg = the root. */
static int rel(const struct coll_ctx *c, int x, int root) { return (x - root + c->n) % c->n; }

/* x is s or one of s's ancestors in the broadcast tree. */
static int bcast_dep(const struct coll_ctx *c, int s, int x, int root) {
    int a = rel(c, s, root), b = rel(c, x, root);
    for (;;) {
        if (a == b) return 1;
        if (a == 0) return 0;
        a -= lowbit(a);
    }
}

static void bcast_messages(struct coll_ctx *c, int root, visit_fn visit) {
    for (int s = 0; s < c->n; s++) {
        int a = rel(c, s, root), top = a ? lowbit(a) : c->n, slot = 0;
        for (int m = 1; m < top && m < c->n; m <<= 1, slot++)
            if (a + m < c->n) visit(c, s, (a + m + root) % c->n, slot, bcast_dep, root);
    }
}

/* x is in s's subtree of the reduction tree. */
static int reduce_dep(const struct coll_ctx *c, int s, int x, int root) {
    int a = rel(c, s, root), b = rel(c, x, root);
    return b >= a && b < a + lowbit(a);
}

static void reduce_messages(struct coll_ctx *c, int root, visit_fn visit) {
    for (int s = 0; s < c->n; s++) {
        int a = rel(c, s, root);
        if (a) visit(c, s, (a - lowbit(a) + root) % c->n, 0, reduce_dep, root);
    }
}

/* Runs `visit` on every message of the modelled collective `coll`; 0 if it is not modelled. */
static int each_message(struct coll_ctx *c, int coll, int root, visit_fn visit) {
    int rooted = root >= 0 && root < c->n;
    switch (coll) {
    case COSCHED_COLL_BARRIER:
        barrier_messages(c, visit);
        return 1;
    case COSCHED_COLL_ALLREDUCE:
        allreduce_messages(c, visit);
        return 1;
    case COSCHED_COLL_BCAST:
        if (rooted) bcast_messages(c, root, visit);
        return 1;
    case COSCHED_COLL_REDUCE:
        if (rooted) reduce_messages(c, root, visit);
        return 1;
    default:
        return 0;
    }
}

/* This member's view of collective `coll` number `number` on `comm`; 0 if it has no messages (fewer than 2
 * members). */
static int context(struct coll_ctx *c, MPI_Comm comm, int coll, uint64_t number) {
    *c = (struct coll_ctx){.comm = comm, .number = number};
    PMPI_Comm_rank(comm, &c->me);
    PMPI_Comm_size(comm, &c->n);
    if (c->me < 0 || c->n < 2) return 0;
    c->arrivals = coll == COSCHED_COLL_BARRIER || coll == COSCHED_COLL_ALLREDUCE;
    for (int x = 0; x < c->n && c->arrivals; x++) c->arrivals = cs_shm_of(cs_world_of(comm, x)) != NULL;
    return 1;
}

void cs_coll_messages(MPI_Comm comm, int coll, int root, uint64_t number) {
    struct coll_ctx c;
    if (!context(&c, comm, coll, number)) return;
    if (!each_message(&c, coll, root, post_if_due))
        cs_post_message(cs_world_of(comm, (c.me + 1) % c.n), cs_world_of(comm, c.me));
}

void cs_coll_taken(MPI_Comm comm, int coll, int root, uint64_t number) {
    struct coll_ctx c;
    if (!context(&c, comm, coll, number) || !c.arrivals) return;
    each_message(&c, coll, root, take);
    if (c.taken) ADD(&cs_shm_of(cs_world_of(comm, c.me))->consumed, c.taken);
}

/*
 * libcosched: a collective's messages as MESSAGE events for the agents, and as unconsumed messages.
 *
 * The seeds' NIC saw a collective's messages arrive like any other, so the node policies that act on
 * messages (DCS, CC, ICS) get `on_message` for them in the simulator, which runs a collective as the
 * point-to-point rounds of its algorithm (crates/cosched-model/src/program.rs). The MPI library sends a
 * real collective's messages itself, invisibly to the shim. So the shim posts, for each collective, the
 * messages the simulator's algorithm for it sends (coll_algo.c lists them, with the members each depends
 * on), at the moment that algorithm would send them: once every member it depends on has entered the
 * collective. When a member enters, it posts every message whose dependencies it completes.
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
 * through bcasts, reduces, gathers and scatters, which do not wait for everyone): that message is not
 * posted rather than posted twice.
 *
 * Unconsumed messages (PB's scan, CC's pick read them), for every listed collective when every member has
 * a segment on this machine: a posted message adds to its receiver's `arrivals`; a member leaving the
 * collective adds to its `consumed` every message of the algorithm to it. Between the two the message is
 * unconsumed, as in the simulator between its arrival and the receive that takes it. In a barrier,
 * allreduce, alltoall or allgather every member has entered, so its messages were posted, before any member
 * can leave (each is claimed in its poster's entry, before that poster's library call). In a tree (bcast,
 * reduce, gather, scatter) a member can leave before the members the simulator's tree makes it wait for
 * have entered (the library's tree may differ): so the leaving member claims each message to it that is
 * still unclaimed, posts it and counts its arrival itself (it has the data: the message has arrived; it is
 * on a CPU, so the policies that act only for a waiting or descheduled destination get no event, by the
 * skip bits), and the member whose entry would have posted it later finds it claimed and neither posts nor
 * counts it. Each message is so posted at most once. A leaving member whose sender has already moved two
 * collectives ahead (its claim word holds a later collective) cannot read there whether the message was posted:
 * in a barrier, allreduce, alltoall or allgather it was (see above), so it counts it as consumed; in a tree it
 * neither posts nor counts it. If that tree message was posted, its arrival stays counted with no
 * consumption (one unconsumed message too many, for the rest of the run); this happens only when it was
 * posted before its sender moved two collectives ahead. Otherwise a posted message counts once in `arrivals`
 * and once in `consumed`.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>

#include "coll.h"
#include "shim.h"

#define LD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)

/* Whether member `x` (rank of the communicator) has entered this collective: its segment's count has
 * reached the collective's number. Unknown (no segment here) counts as not entered. */
static int entered(const struct coll_ctx *c, int x) {
    if (x == c->me) return 1;
    struct cosched_rank_shm *s = cs_shm_of(cs_world_of(c->comm, x));
    return s && LD(&s->collectives) >= c->number;
}

/* Claims message `slot` of sender `s` for this collective in `s`'s segment. Two words by the parity of
 * the number: a sender is never more than one collective ahead of a member that completes one of its
 * messages' dependencies (it cannot finish this one, nor so the next, before that member's library call
 * sends what it needs). A member leaving a tree can meet a sender two collectives ahead, though: its word
 * then holds that later collective, and whether this one's message was posted is no longer known. */
static uint64_t *posted_word(const struct coll_ctx *c, int s) {
    struct cosched_rank_shm *seg = cs_shm_of(cs_world_of(c->comm, s));
    return seg ? &seg->coll_posted[c->number & 1] : NULL;
}

enum claim_outcome {
    CLAIMED,  /* this member is the first to claim the message, and so posts it */
    TAKEN,    /* another member claimed (and posted) it already */
    UNKNOWN,  /* no word (the sender's segment is not here), or the word holds a later collective */
};

static enum claim_outcome claim(const struct coll_ctx *c, int s, int slot) {
    uint64_t *w = posted_word(c, s);
    if (!w) return UNKNOWN;
    uint64_t bit = 1ull << slot, cur = LD(w);
    for (;;) {
        uint64_t at = cur >> 32, now = c->number & 0xffffffffu, next;
        if (at == now) {
            if (cur & bit) return TAKEN;
            next = cur | bit;
        } else if (at < now) {
            next = (now << 32) | bit;
        } else {
            return UNKNOWN; /* the sender is already in a later collective of this parity */
        }
        if (__atomic_compare_exchange_n(w, &cur, next, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return CLAIMED;
    }
}

/* Entering: posts the message if this member completes its dependencies. */
static void post_if_due(struct coll_ctx *c, int s, int t, int slot, coll_dep_fn dep, uint64_t arg) {
    if (!dep(c, s, c->me, arg)) return;
    for (int x = 0; x < c->n; x++)
        if (dep(c, s, x, arg) && !entered(c, x)) return;
    if (claim(c, s, slot) != CLAIMED) return;
    int to = cs_world_of(c->comm, t);
    if (c->arrivals) ADD(&cs_shm_of(to)->arrivals, 1);
    cs_post_message(to, cs_world_of(c->comm, s));
}

/* Leaving: claims a message to this member if nobody has posted it yet: this member posts it then, and
 * counts its arrival (the data is here: the library's tree brought it). The message counts as consumed
 * only when its arrival is known to be counted: claimed now, claimed before, or (the sender's word holding
 * a later collective) in a collective no member leaves before every member has entered, where every
 * message was posted at entry. In a tree, a sender's word holding a later collective tells nothing: the
 * message may never have been posted, and counting it consumed would hide one genuine unconsumed message
 * of this member for the rest of the run (the counts are cumulative). */
static void take(struct coll_ctx *c, int s, int t, int slot, coll_dep_fn dep, uint64_t arg) {
    if (t != c->me) return;
    enum claim_outcome o = claim(c, s, slot);
    if (o == UNKNOWN && !c->all_enter) return;
    c->taken++;
    if (o != CLAIMED) return;
    c->own_count++;
    cs_post_message(cs_world_of(c->comm, t), cs_world_of(c->comm, s));
}

/* This member's view of collective `coll` number `number` on `comm`; 0 if it has no messages (fewer than 2
 * members). */
static int context(struct coll_ctx *c, MPI_Comm comm, int root, uint64_t bytes, uint64_t number) {
    *c = (struct coll_ctx){.comm = comm, .root = root, .number = number, .bytes = bytes, .arrivals = 1};
    PMPI_Comm_rank(comm, &c->me);
    PMPI_Comm_size(comm, &c->n);
    if (c->me < 0 || c->n < 2) return 0;
    for (int x = 0; x < c->n && c->arrivals; x++) c->arrivals = cs_shm_of(cs_world_of(comm, x)) != NULL;
    return 1;
}

void cs_coll_messages(MPI_Comm comm, int coll, int root, uint64_t bytes, uint64_t number) {
    struct coll_ctx c;
    if (!context(&c, comm, root, bytes, number)) return;
    if (!cs_coll_each_message(&c, coll, post_if_due))
        cs_post_message(cs_world_of(comm, (c.me + 1) % c.n), cs_world_of(comm, c.me));
}

void cs_coll_taken(MPI_Comm comm, int coll, int root, uint64_t bytes, uint64_t number) {
    struct coll_ctx c;
    if (!context(&c, comm, root, bytes, number) || !c.arrivals) return;
    c.all_enter = coll == COSCHED_COLL_BARRIER || coll == COSCHED_COLL_ALLREDUCE || coll == COSCHED_COLL_ALLTOALL ||
                  coll == COSCHED_COLL_ALLGATHER;
    if (!cs_coll_each_message(&c, coll, take)) return;
    struct cosched_rank_shm *me = cs_shm_of(cs_world_of(comm, c.me));
    if (c.own_count) {
        ADD(&me->arrivals, c.own_count);
        cs_count_taken_first(c.own_count);
    }
    if (c.taken) ADD(&me->consumed, c.taken);
}

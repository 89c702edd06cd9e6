/*
 * libcosched: each collective's messages, as the simulator's programs send them
 * (crates/cosched-model/src/program.rs, `Builder`), and, for the collectives those programs do not have,
 * as MPICH sends them. A message goes once every member it depends on has entered the collective: its
 * sender and, through the receives its sender made before it, the members whose entry those receives
 * waited for (data flow only: a send never waits for its receiver, as for the eager messages of the
 * simulator's collectives).
 *
 *   barrier    dissemination (`Builder::barrier`): round k (d = 2^k < n), member s sends to s + d; depends
 *              on s, s - 1, ..., s - d + 1 (mod n).
 *   allreduce  recursive doubling (`Builder::allreduce`) over pof2 = the largest power of two <= n, MPICH's
 *              scheme for the n - pof2 extra ranks: extra r sends to r - pof2 (depends on r); round k, s < pof2
 *              sends to s xor 2^k (depends on s's block of 2^k, {x < pof2 : x >> k == s >> k}, and the extras
 *              x + pof2 of those x); s < n - pof2 sends the result to s + pof2 (depends on every member).
 *   bcast      binomial tree from the root (`Builder::bcast`, relative ranks): s sends to s + m for every m
 *              below the lowest set bit of s (the root: every m < n); depends on s and its ancestors (s with
 *              its lowest set bits cleared one by one, down to the root).
 *   reduce     binomial tree to the root (`Builder::reduce`): s != root sends to s - (lowest set bit of s);
 *              depends on its subtree, s .. s + lowest bit - 1 (below n).
 *   alltoall   `Builder::alltoall`, MPICH 1.2.5's choice by the data a member sends in all, N = bytes per
 *              pair x n (the program's receive count x its type's size, which MPI makes equal to the send's):
 *              N <= 128 (ALLTOALL_SHORT_MSG): recursive doubling, `Builder::alltoall_short`: step i
 *                (m = 2^i < n), s sends to s xor m when that exists, carrying all s holds (depends on
 *                everyone whose data s has received); with n not a power of two, the members whose partner
 *                does not exist get the step's data from their subtree by recursive halving, as the
 *                builder works it out. The dependency sets are computed as the builder computes the data
 *                sizes, as 64-bit masks: up to 64 members.
 *              N < 262144 (ALLTOALL_MEDIUM_MSG): every send posted at once (`Builder::alltoall_post_all`):
 *                s sends to s + k for k = 1 .. n - 1; depends on s.
 *              else pairwise exchange: step k = 1 .. n - 1, s sends to s + k and receives from s - k; the
 *                step-k send follows the receives of steps 1 .. k - 1 from s - j, whose senders had the
 *                data of s - j - 0 .. s - j - (j - 1)j/2, so it depends on s, s - 1, ..., s - k(k - 1)/2.
 *   allgather  not in the simulator's programs: MPICH's `MPIR_Allgather_intra_auto` (src/mpi/coll/allgather/
 *              allgather.c), by T = receive count x type size x n, with the documented defaults of
 *              MPIR_CVAR_ALLGATHER_LONG_MSG_SIZE (524288) and MPIR_CVAR_ALLGATHER_SHORT_MSG_SIZE (81920):
 *              T < 524288 and n a power of two: recursive doubling, step i, s sends to s xor 2^i; depends
 *                on s's block of 2^i;
 *              else T < 81920: Bruck, steps d = 1, 2, 4, ... while d <= n / 2, s sends to s - d, then, if
 *                pof2 < n, a last step to s - pof2; a step of distance d depends on s, s + 1, ..., s + d - 1;
 *              else ring, step j = 0 .. n - 2, s sends to s + 1; depends on s, s - 1, ..., s - j.
 *   gather     MPICH's binomial gather (`MPIR_Gather_intra_binomial`, its only intracommunicator
 *              algorithm): the reduce's tree.
 *   scatter    MPICH's binomial scatter (`MPIR_Scatter_intra_binomial`): the bcast's tree.
 * For 2 members: barrier, allreduce, alltoall and allgather have one message each way, bcast, reduce,
 * gather and scatter one message. A sender's messages in one collective are numbered 0..31 (its claim
 * word's bits, coll.c): the messages after a sender's 32nd are not listed (a pairwise or post-all alltoall
 * or a ring allgather on more than 33 members).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "coll.h"
#include "shim.h"

#define SLOTS 32                      /* bits of a sender's claim word */
#define MASK_MEMBERS 64               /* members a 64-bit dependency mask holds */
#define ALLTOALL_SHORT_MSG 128u       /* MPICH 1.2.5, program.rs's ALLTOALL_SHORT_MSG */
#define ALLTOALL_MEDIUM_MSG 262144u   /* MPICH 1.2.5, program.rs's ALLTOALL_MEDIUM_MSG */
#define ALLGATHER_SHORT_MSG 81920u    /* MPICH's MPIR_CVAR_ALLGATHER_SHORT_MSG_SIZE default */
#define ALLGATHER_LONG_MSG 524288u    /* MPICH's MPIR_CVAR_ALLGATHER_LONG_MSG_SIZE default */

static int lowbit(int x) { return x & -x; }

static int pof2_of(int n) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
}

/* x is within `arg` members before s (mod n): s - arg < x <= s. */
static int behind_dep(const struct coll_ctx *c, int s, int x, uint64_t arg) {
    return (uint64_t)((s - x + c->n) % c->n) < arg;
}

/* x is within `arg` members after s (mod n): s <= x < s + arg. */
static int ahead_dep(const struct coll_ctx *c, int s, int x, uint64_t arg) {
    return (uint64_t)((x - s + c->n) % c->n) < arg;
}

static int everyone(const struct coll_ctx *c, int s, int x, uint64_t arg) { return 1; }
static int self_only(const struct coll_ctx *c, int s, int x, uint64_t arg) { return x == s; }
static int mask_dep(const struct coll_ctx *c, int s, int x, uint64_t arg) { return x < 64 && (arg >> x) & 1; }

/* ------------------------------------------------------------------ barrier: dissemination */

static void barrier_messages(struct coll_ctx *c, coll_visit_fn visit) {
    for (int k = 0, d = 1; d < c->n && k < SLOTS; k++, d <<= 1)
        for (int s = 0; s < c->n; s++) visit(c, s, (s + d) % c->n, k, behind_dep, (uint64_t)d);
}

/* ------------------------------------------------------------------ recursive doubling */

/* Member x is in the block of 2^k of s (arg = k), or is the extra rank of one in it (pof2 < n). */
static int block_dep(const struct coll_ctx *c, int s, int x, uint64_t k) {
    int pof2 = pof2_of(c->n), base = x >= pof2 ? x - pof2 : x;
    return (base >> k) == (s >> k);
}

static void allreduce_messages(struct coll_ctx *c, coll_visit_fn visit) {
    int n = c->n, pof2 = pof2_of(n), extra = n - pof2, rounds = 0;
    while ((1 << rounds) < pof2) rounds++;
    for (int r = pof2; r < n; r++) visit(c, r, r - pof2, 0, self_only, 0);
    for (int k = 0; k < rounds && k < 30; k++)
        for (int s = 0; s < pof2; s++) visit(c, s, s ^ (1 << k), 1 + k, block_dep, (uint64_t)k);
    for (int s = 0; s < extra; s++) visit(c, s, s + pof2, 31, everyone, 0);
}

/* ------------------------------------------------------------------ binomial trees (relative ranks) */

static int rel(const struct coll_ctx *c, int x) { return (x - c->root + c->n) % c->n; }

/* x is s or one of s's ancestors in the broadcast tree. */
static int bcast_dep(const struct coll_ctx *c, int s, int x, uint64_t arg) {
    int a = rel(c, s), b = rel(c, x);
    for (;;) {
        if (a == b) return 1;
        if (a == 0) return 0;
        a -= lowbit(a);
    }
}

static void bcast_messages(struct coll_ctx *c, coll_visit_fn visit) {
    for (int s = 0; s < c->n; s++) {
        int a = rel(c, s), top = a ? lowbit(a) : c->n, slot = 0;
        for (int m = 1; m < top && m < c->n; m <<= 1, slot++)
            if (a + m < c->n) visit(c, s, (a + m + c->root) % c->n, slot, bcast_dep, 0);
    }
}

/* x is in s's subtree of the reduction tree. */
static int reduce_dep(const struct coll_ctx *c, int s, int x, uint64_t arg) {
    int a = rel(c, s), b = rel(c, x);
    return b >= a && b < a + lowbit(a);
}

static void reduce_messages(struct coll_ctx *c, coll_visit_fn visit) {
    for (int s = 0; s < c->n; s++) {
        int a = rel(c, s);
        if (a) visit(c, s, (a - lowbit(a) + c->root) % c->n, 0, reduce_dep, 0);
    }
}

/* ------------------------------------------------------------------ alltoall */

/* One step of the short alltoall's recursive halving for members whose partner at `mask` does not exist
 * (`Builder::alltoall_short`'s inner loop, level k, distance sub): senders pass on what they hold. */
static void alltoall_halving(struct coll_ctx *c, coll_visit_fn visit, uint64_t *held, int *slot, int mask,
                             int i, int k, int sub) {
    int p = c->n;
    uint64_t before[MASK_MEMBERS];
    memcpy(before, held, sizeof(uint64_t) * (size_t)p);
    for (int r = 0; r < p; r++) {
        int dst_root = ((r ^ mask) >> i) << i, my_root = (r >> i) << i;
        if (dst_root + mask <= p) continue;
        int done = p - my_root - mask, tree = (r >> (k + 1)) << (k + 1), peer = r ^ sub;
        if (peer >= p) continue;
        if (peer > r && r < tree + done && peer >= tree + done) {
            if (slot[r] < SLOTS) visit(c, r, peer, slot[r], mask_dep, before[r]);
            slot[r]++;
        } else if (peer < r && peer < tree + done && r >= tree + done) {
            held[r] |= before[peer];
        }
    }
}

/* MPICH 1.2.5's short-message alltoall as `Builder::alltoall_short` builds it; `held[r]` is the mask of the
 * members whose data r holds (their entry it has waited for). */
static void alltoall_short_messages(struct coll_ctx *c, coll_visit_fn visit) {
    int p = c->n, slot[MASK_MEMBERS] = {0};
    uint64_t held[MASK_MEMBERS], before[MASK_MEMBERS];
    for (int r = 0; r < p; r++) held[r] = 1ull << r;
    for (int mask = 1, i = 0; mask < p; mask <<= 1, i++) {
        memcpy(before, held, sizeof(uint64_t) * (size_t)p);
        for (int r = 0; r < p; r++) {
            int dst = r ^ mask;
            if (dst >= p) continue;
            if (slot[r] < SLOTS) visit(c, r, dst, slot[r], mask_dep, before[r]);
            slot[r]++;
            held[r] |= before[dst];
        }
        for (int sub = mask >> 1, k = i; sub > 0 && k > 0; sub >>= 1) {
            k--;
            alltoall_halving(c, visit, held, slot, mask, i, k, sub);
        }
    }
}

/* Every send at once (k = 1 .. n - 1) or pairwise exchange (step k's send depends on s .. s - k(k-1)/2). */
static void alltoall_spread_messages(struct coll_ctx *c, coll_visit_fn visit, int pairwise) {
    for (int k = 1; k < c->n && k - 1 < SLOTS; k++) {
        uint64_t reach = (uint64_t)k * (uint64_t)(k - 1) / 2 + 1;
        for (int s = 0; s < c->n; s++)
            visit(c, s, (s + k) % c->n, k - 1, pairwise ? behind_dep : self_only, pairwise ? reach : 0);
    }
}

static int alltoall_messages(struct coll_ctx *c, coll_visit_fn visit) {
    uint64_t total = c->bytes * (uint64_t)c->n;
    if (total <= ALLTOALL_SHORT_MSG) {
        if (c->n > MASK_MEMBERS) return 0;
        alltoall_short_messages(c, visit);
    } else {
        alltoall_spread_messages(c, visit, total >= ALLTOALL_MEDIUM_MSG);
    }
    return 1;
}

/* ------------------------------------------------------------------ allgather (MPICH) */

static void allgather_messages(struct coll_ctx *c, coll_visit_fn visit) {
    int n = c->n, pof2 = pof2_of(n);
    uint64_t total = c->bytes * (uint64_t)n;
    if (total < ALLGATHER_LONG_MSG && pof2 == n) {
        for (int k = 0; (1 << k) < n; k++)
            for (int s = 0; s < n; s++) visit(c, s, s ^ (1 << k), k, block_dep, (uint64_t)k);
    } else if (total < ALLGATHER_SHORT_MSG) {
        int k = 0, d = 1;
        for (; d <= n / 2; d <<= 1, k++)
            for (int s = 0; s < n; s++) visit(c, s, (s - d + n) % n, k, ahead_dep, (uint64_t)d);
        if (d < n)
            for (int s = 0; s < n; s++) visit(c, s, (s - d + n) % n, k, ahead_dep, (uint64_t)d);
    } else {
        for (int j = 0; j < n - 1 && j < SLOTS; j++)
            for (int s = 0; s < n; s++) visit(c, s, (s + 1) % n, j, behind_dep, (uint64_t)j + 1);
    }
}

int cs_coll_each_message(struct coll_ctx *c, int coll, coll_visit_fn visit) {
    int rooted = c->root >= 0 && c->root < c->n;
    switch (coll) {
    case COSCHED_COLL_BARRIER:
        barrier_messages(c, visit);
        return 1;
    case COSCHED_COLL_ALLREDUCE:
        allreduce_messages(c, visit);
        return 1;
    case COSCHED_COLL_BCAST:
    case COSCHED_COLL_SCATTER:
        if (rooted) bcast_messages(c, visit);
        return 1;
    case COSCHED_COLL_REDUCE:
    case COSCHED_COLL_GATHER:
        if (rooted) reduce_messages(c, visit);
        return 1;
    case COSCHED_COLL_ALLTOALL:
        return alltoall_messages(c, visit);
    case COSCHED_COLL_ALLGATHER:
        allgather_messages(c, visit);
        return 1;
    default:
        return 0;
    }
}

/*
 * cosched real-execution protocol, version 1: what the MPI shim (libcosched), the node agent and
 * the launcher agree on. The Rust side mirrors these layouts in crates/cosched-real/src/proto.rs;
 * a test compares sizes and offsets (the shim's `cosched-proto-layout` prints them).
 *
 * Roles
 *   launcher  starts each rank with the environment below (cosched run, or the Slurm SPANK plugin).
 *   shim      LD_PRELOADed into every rank; interposes MPI through PMPI; implements the wait mode the
 *             node policy asks for; publishes its state and counters in a shared-memory segment; sends
 *             the events the policy subscribed to over the agent's socket.
 *   agent     one per (virtual) node; hosts the node policy (the same Rust code as the simulator);
 *             applies its decisions with Linux mechanisms (cgroup weights, freezer, cpusets).
 *
 * Environment of a rank
 *   COSCHED_AGENT     path of the node agent's Unix socket (SOCK_SEQPACKET). Unset or empty: the shim
 *                     runs standalone with the wait mode of COSCHED_WAIT.
 *   COSCHED_RUN       run id, [A-Za-z0-9_-]{1,32}; names the shared memory segments. Unset: every
 *                     rank takes "p<pid of world rank 0>" (broadcast in MPI_Init).
 *   COSCHED_JOB       job id, a decimal int32 >= 0, unique within the run (unset: 0).
 *   COSCHED_WAIT      standalone wait mode: "library" (default: call the MPI library's own blocking
 *                     call untouched), "spin", "block", or "spinblock:<microseconds>".
 *   COSCHED_REQUIRED  "1": if the agent cannot be reached at MPI_Init, the rank aborts with a clear
 *                     message naming the socket; otherwise it continues standalone (uncoscheduled).
 *   COSCHED_LOG       optional file: at MPI_Finalize each rank appends one JSON line with its
 *                     counters and the number of calls of each wrapped function ([C, Fortran]).
 *
 * Shared memory (one segment per rank)
 *   Name: "/cosched.<run>.<job>.<rank>" (shm_open; appears as /dev/shm/cosched.<run>.<job>.<rank>),
 *   size sizeof(struct cosched_rank_shm), created by the shim in MPI_Init (after PMPI_Init) before it
 *   registers. Ranks of the same job on the same machine open each other's segments by name (a sender
 *   adds to the receiver's `arrivals` and bumps its `wake_seq`). An agent serves ranks of several runs
 *   (under Slurm each job step is a run, "s<job>-<step>", named by the SPANK plugin): on REGISTER it maps
 *   the segment "/cosched.*.<job>.<rank>" whose `pid` field is the registering pid. The agent maps it on REGISTER and
 *   unlinks it on UNREGISTER, on connection close, and at its next start for segments of dead pids.
 *   Order in MPI_Init: create segment, REGISTER/ACK, barrier, map every peer's segment that exists
 *   on this machine, barrier. A rank no agent serves then unlinks its own segment name at once (the
 *   mappings stay valid), so a rank's death, even by SIGKILL, leaves nothing in /dev/shm.
 *   Every field is accessed with atomic loads/stores (C: __atomic_*, Rust: AtomicU32/AtomicU64/AtomicI64).
 *
 * Waiting (shim)
 *   A blocking MPI call becomes its non-blocking form plus a test loop. Mode per wait kind, read from
 *   `wait_mode[kind]` at the start of each wait (when `agent_gen` != 0, else from COSCHED_WAIT):
 *     SPIN       test in a loop until complete (sched_yield-free busy wait).
 *     SPINBLOCK  spin for `spin_ns[kind]`, then block.
 *     BLOCK      block at once.
 *   Each wait is numbered: the shim stores `wait_id` + 1 in `wait_id` (before `wait_start_ns`, then
 *   `state`) at its start. A spin change (the node policy's SpinFor: ICS's conditional spin) is one
 *   64-bit word the agent stores in `spin_until` while the rank spins:
 *     bits 63..40  the low 24 bits of the `wait_id` of the wait it applies to,
 *     bits 39..0   when that wait's spin ends, in ns from its `wait_start_ns` (2^40-1: 18 minutes).
 *   The shim loads `spin_until` at every test of its spin loop (SPIN and SPINBLOCK; a plain atomic
 *   load, no system call); when the tag is its current wait's, the word's end replaces the mode's
 *   spin time (earlier: the spin is cut; later: extended; a SPIN wait becomes spin-then-block). A
 *   word of another wait is ignored, so a change that reaches a rank after its wait ended never
 *   applies to the next one. The agent reads the wait it changes as `wait_id`, `state` (SPINNING),
 *   `wait_start_ns`, `wait_id` again, and changes nothing unless both `wait_id` loads agree. The
 *   shim counts the waits whose spin was changed (`spin_changes`) and their spin time
 *   (`changed_spin_ns`).
 *   Blocking: state = BLOCKED, then loop { seq = wake_seq; test; if done break; futex_wait(&wake_seq,
 *   seq, timeout 1 ms) } (the timeout is the fallback for progress the MPI library makes only when
 *   called; a peer's send wakes the futex at once). Counters are updated at the end of each wait.
 *   A call that completes at its first test is not a wait (no events, no counters, no wait_id).
 *   If the agent's socket breaks, the shim stores agent_gen = 0 and continues standalone.
 *
 * Socket messages (SOCK_SEQPACKET, one struct cosched_msg per packet, little-endian host order)
 *   shim -> agent: REGISTER (arg = world size; the agent answers ACK with arg = 0, or arg = errno and the
 *   shim continues standalone), then events, then UNREGISTER at MPI_Finalize. A closed connection
 *   without UNREGISTER means the rank died: the agent restores everything it changed for that rank.
 *   Events are sent only when their bit (1 << type) is set in the rank's `event_mask`; a MESSAGE event
 *   also not when a COSCHED_SKIP_* bit of the mask names its destination's state.
 */
#ifndef COSCHED_PROTO_H
#define COSCHED_PROTO_H

#include <stdint.h>

#define COSCHED_PROTO_VERSION 3u /* 2: spin_seen_ns and the collective's first-message event; 3: coll_posted */
#define COSCHED_SHM_MAGIC 0x4d485343u /* "CSHM" little-endian */
#define COSCHED_SPIN_UNTIL_SHIFT 40    /* spin_until: tag << 40 | end in ns from wait_start_ns */

/* `event_mask` bits above the event bits: MESSAGE events the rank's node policy does nothing with, by the
 * destination's state, which the sender's shim does not post (the seeds' NIC interrupts the host only for a
 * message whose destination is not the running process, seed 000 §4; a posted event wakes the agent, whose
 * real-time wake-up preempts a rank). The agent sets them from the policy's on_message on probe views. The
 * sender tells the destination's state as the agent would: SPINNING and its spin_seen_ns at most
 * COSCHED_ON_CPU_FRESH_NS old: on a CPU, waiting; SPINNING with an older one, or BLOCKED: off a CPU;
 * COMPUTING: on a CPU, not waiting, when /proc/PID/stat says R (else the event is posted and the agent
 * decides). A destination without a segment here (another node) always gets its event. */
#define COSCHED_SKIP_OFF_CPU (1u << 24)        /* no MESSAGE for a destination off a CPU */
#define COSCHED_SKIP_ON_CPU_WAITING (1u << 25) /* ... on a CPU and in a wait */
#define COSCHED_SKIP_ON_CPU_BUSY (1u << 26)    /* ... on a CPU and not in a wait */
#define COSCHED_ON_CPU_FRESH_NS 100000ull      /* a spin loop's test takes a few microseconds */

/* Wait kinds: the same order as the node-policy contract's WaitKind. */
enum cosched_wait_kind {
    COSCHED_WAIT_RECV = 0,            /* blocking receive (MPI_Recv, MPI_Probe, receive side of collectives) */
    COSCHED_WAIT_SEND_ACK = 1,        /* blocking send that has not completed (rendezvous / MPI_Ssend) */
    COSCHED_WAIT_RECV_COMPLETION = 2, /* MPI_Wait* on a set containing a pending receive */
    COSCHED_WAIT_SEND_COMPLETION = 3, /* MPI_Wait* on sends only */
    COSCHED_WAIT_KINDS = 4
};

enum cosched_wait_mode {
    COSCHED_MODE_SPIN = 0,
    COSCHED_MODE_SPINBLOCK = 1,
    COSCHED_MODE_BLOCK = 2,
    COSCHED_MODE_LIBRARY = 3, /* leave the MPI library's own blocking call untouched */
    COSCHED_MODE_YIELD = 4    /* test in a loop, calling sched_yield between tests */
};

enum cosched_rank_state {
    COSCHED_STATE_COMPUTING = 0,
    COSCHED_STATE_SPINNING = 1,
    COSCHED_STATE_BLOCKED = 2,
    COSCHED_STATE_FINISHED = 3
};

enum cosched_msg_type {
    COSCHED_MSG_REGISTER = 1,   /* shim -> agent; arg = world size */
    COSCHED_MSG_ACK = 2,        /* agent -> shim; arg = 0 or errno */
    COSCHED_MSG_UNREGISTER = 3, /* shim -> agent, at MPI_Finalize */
    COSCHED_MSG_WAIT_BEGIN = 4, /* arg = wait kind */
    COSCHED_MSG_WAIT_END = 5,   /* arg = wait kind; a = ns spun; b = ns blocked (0: did not block) */
    COSCHED_MSG_COLL_ENTER = 6, /* arg = collective id (enum cosched_coll) */
    COSCHED_MSG_COLL_EXIT = 7,  /* arg = collective id */
    COSCHED_MSG_MESSAGE = 8,    /* a message was sent to `rank` of `job`; arg = source rank; a = bytes; b = 1 if
                                   the agent must not add it to the receiver's `arrivals`: the sender
                                   did (same machine), or it is a collective's message, whose arrival
                                   and consumption the shims count on one machine or not at all */
    COSCHED_MSG_JOB = 9,        /* launcher -> agent: struct cosched_job_msg, declares a job's node policy */
    COSCHED_MSG_JOB_END = 10,   /* launcher -> agent: struct cosched_job_msg (spec empty), the job is over */
    /* Types below 32 may be event bits (`event_mask` bit 1u << type); launcher-only types start at 64 and
     * are never event bits. The shim never sends or receives them. */
    COSCHED_MSG_SLOT = 64,      /* launcher -> agent: a gang slot switch of `job` on every node of the agent;
                                   arg 1 = run, 0 = freeze. Answered by ACK (arg 0 or errno) once the kernel
                                   reports the switch done; on an error the nodes already switched are switched
                                   back before the answer. Only from root or the uid that declared the job. */
    COSCHED_MSG_ADOPT = 65,     /* launcher -> agent: put process `pid` (a rank the launcher started that does
                                   not use the shim) under node `arg`'s mechanisms as `rank` of `job`. Only a
                                   descendant of the sending process, from root or the uid that declared the
                                   job; a bound (job, rank) is refused with EBUSY. ACK as for SLOT. */
    COSCHED_MSG_FORWARD = 66    /* launcher -> agent: `arg` messages (MESSAGE events) arrived from another node for
                                   `rank` of `job`; b = how many of them the senders did not add to `arrivals`;
                                   t_ns = the latest one's send time on this machine's CLOCK_MONOTONIC (0:
                                   unknown), so that they apply only to a wait begun by then. Only from root or
                                   the uid that declared the job; not answered. */
};

enum cosched_coll {
    COSCHED_COLL_BARRIER = 0, COSCHED_COLL_BCAST = 1, COSCHED_COLL_REDUCE = 2, COSCHED_COLL_ALLREDUCE = 3,
    COSCHED_COLL_ALLTOALL = 4, COSCHED_COLL_ALLGATHER = 5, COSCHED_COLL_GATHER = 6, COSCHED_COLL_SCATTER = 7,
    COSCHED_COLL_OTHER = 15
};

struct cosched_msg {          /* 48 bytes */
    uint32_t type;            /* enum cosched_msg_type */
    uint32_t version;         /* COSCHED_PROTO_VERSION */
    int32_t job;
    int32_t rank;             /* for MESSAGE: the destination rank */
    int32_t pid;              /* sender's pid */
    int32_t arg;
    uint64_t t_ns;            /* CLOCK_MONOTONIC when the event happened */
    uint64_t a;
    uint64_t b;
};

/* Launcher -> agent (cosched run's controller, the Slurm SPANK plugin): before a job's ranks register,
 * its launcher declares the job and the node policy spec that hosts it (`name[k=v,...]`, as in the
 * simulator's registry). The agent answers with a struct cosched_msg of type ACK: arg = 0, EINVAL for an
 * unknown or invalid spec, EBUSY when the job is declared already with another spec. Declaring a job again
 * with the same spec (several job steps of one Slurm job) is accepted and counted; each JOB_END (spec empty)
 * takes one back, and the last one ends the job: the agent restores everything it changed for its ranks. A rank whose job was never declared runs
 * under the agent's default policy (the agent's --default-policy, NLS if not given). Packets are told
 * apart by their first field and their length. */
#define COSCHED_SPEC_MAX 120
#define COSCHED_JOB_OPTIONAL 1u /* flags: if the spec cannot be hosted, run the job uncoscheduled */
/* flags: the job takes part in gang scheduling across nodes: the agent tells its gang coordinator, which places
 * the job in its Ousterhout matrix once the agents of all `nnodes` nodes declared it, and switches its slots
 * (docs/real-slurm.md). An agent without a coordinator refuses it with ENOTCONN. */
#define COSCHED_JOB_GANG 2u
/* flags: MESSAGE events to ranks on other nodes are forwarded, through the gang coordinator, to the agent of
 * the destination's node (docs/real-slurm.md). Without it such events are dropped. */
#define COSCHED_JOB_FORWARD 4u
struct cosched_job_msg {      /* 140 bytes */
    uint32_t type;            /* COSCHED_MSG_JOB or COSCHED_MSG_JOB_END */
    uint32_t version;         /* COSCHED_PROTO_VERSION */
    int32_t job;
    uint32_t flags;           /* COSCHED_JOB_OPTIONAL, COSCHED_JOB_GANG, COSCHED_JOB_FORWARD */
    char spec[COSCHED_SPEC_MAX]; /* NUL-terminated policy spec */
    uint32_t nnodes;          /* with COSCHED_JOB_GANG: nodes of the job step (each node's agent declares it) */
};

struct cosched_rank_shm {     /* 256 bytes, no padding */
    /* Written once by the shim at creation. */
    uint32_t magic;           /* COSCHED_SHM_MAGIC */
    uint32_t version;         /* COSCHED_PROTO_VERSION */
    int32_t job;
    int32_t rank;
    int32_t size;             /* world size */
    int32_t pid;
    /* Written by the agent. */
    uint32_t wait_mode[COSCHED_WAIT_KINDS]; /* enum cosched_wait_mode per wait kind */
    uint64_t spin_ns[COSCHED_WAIT_KINDS];   /* spin time of SPINBLOCK per wait kind */
    uint64_t spin_until;      /* a spin change of the current wait: tag << 40 | end (see Waiting) */
    uint32_t event_mask;      /* bit (1u << enum cosched_msg_type) for each event the agent wants */
    uint32_t agent_gen;       /* != 0 while an agent serves the rank (0: standalone, COSCHED_WAIT) */
    /* Futex word: bumped (and FUTEX_WAKE'd) by a peer's send, by the agent to interrupt or end a spin. */
    uint32_t wake_seq;
    /* Written by the shim. */
    uint32_t state;           /* enum cosched_rank_state */
    uint32_t wait_kind;       /* kind of the current wait (valid while SPINNING or BLOCKED) */
    uint32_t coll_depth;      /* > 0 inside a collective */
    uint64_t wait_start_ns;   /* CLOCK_MONOTONIC start of the current wait */
    /* Counters. `arrivals` is added to by senders (atomic add); the rest by the rank itself. */
    uint64_t arrivals;        /* messages sent to this rank by its peers */
    uint64_t consumed;        /* messages this rank has received (arrivals - consumed = unconsumed) */
    uint64_t msgs_sent;
    uint64_t bytes_sent;
    uint64_t msgs_recv;
    uint64_t bytes_recv;
    uint64_t waits;           /* completed waits */
    uint64_t wait_ns;         /* total time in waits */
    uint64_t spin_ns_total;   /* of which spinning */
    uint64_t block_ns;        /* of which blocked */
    uint64_t blocks;          /* waits that blocked */
    uint64_t collectives;     /* collectives entered */
    uint64_t wait_id;         /* number of the current (or last) wait, from 1 */
    uint64_t spin_changes;    /* waits whose spin a `spin_until` of the agent changed */
    uint64_t changed_spin_ns; /* time spun in those waits */
    uint64_t spin_seen_ns;    /* CLOCK_MONOTONIC time of the latest test of a spinning wait: the agent
                               * takes a rank SPINNING with an old one as waiting for a CPU, not on one */
    /* The collective's messages this rank sends that a member has posted as MESSAGE events (shim/coll.c), by
     * the parity of the collective's number: (number << 32) | one bit per message. Written by any member of
     * the rank's communicators on this machine (compare-and-swap). */
    uint64_t coll_posted[2];
};

#endif /* COSCHED_PROTO_H */

//! The state of a process-level run besides the event queue: each process
//! ([`Proc`]: its place in its program, what it waits for, its messages, CPU
//! accounting and memory), each CPU ([`Cpu`]) and each node ([`Node`]: CPUs,
//! native scheduler, disk, NIC, memory, page-in queue, policy timers).

use super::net;
use crate::os::{NativeScheduler, Pid};
use cosched_contract::node::{Ops, WaitKind, WaitMode};
use cosched_des::{RngStream, SimTime};
use cosched_model::program::{Op, Rank};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PState {
    Ready,
    Running(u32),
    Blocked,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cond {
    Msg {
        from: Option<Rank>,
        tag: u32,
    },
    /// A receive inside a [`Op::LoopUntil`]: a message tagged `tag` or `stop`.
    MsgOr {
        from: Option<Rank>,
        tag: u32,
        stop: u32,
    },
    Ack,
    Completion,
    Io,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Waiting {
    pub(super) cond: Cond,
    /// What the policy was told (`None` for a disk burst).
    pub(super) kind: Option<WaitKind>,
    pub(super) mode: WaitMode,
    pub(super) since: SimTime,
    /// The process's spin time when the wait began (its spin in this wait is the
    /// difference).
    pub(super) spin_at: i64,
    /// Whether it blocked during the wait.
    pub(super) blocked: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum After {
    Next,
    Depart {
        to: Rank,
        bytes: u64,
        tag: u32,
        blocking: bool,
    },
}

pub(super) struct Proc<'a> {
    pub(super) job: usize,
    pub(super) rank: Rank,
    pub(super) node: u32,
    pub(super) ops: &'a [Op],
    pub(super) pc: usize,
    /// Active loops: (body start, body end, iterations left after this one).
    pub(super) loops: Vec<(usize, usize, u32)>,
    /// Active [`Op::LoopUntil`]s: (index in `loops`, stop tag); their `loops`
    /// entries never count down.
    pub(super) untils: Vec<(usize, u32)>,
    /// Compute time asked for so far (after noise and drawn bursts).
    pub(super) compute_ns: i64,
    /// The stream of [`Op::Burst`] draws, created at the first one.
    pub(super) bursts: Option<RngStream>,
    /// Messages sent to this process and not yet arrived.
    pub(super) in_flight: u32,
    pub(super) state: PState,
    pub(super) cpu_left: i64,
    pub(super) after: After,
    pub(super) wait: Option<Waiting>,
    /// Arrived, unconsumed messages: (from, tag, bytes, where the MPI library
    /// holds them: [`net::Landed`]).
    pub(super) mailbox: Vec<(Rank, u32, u64, net::Landed)>,
    /// Bytes of the eager messages in `mailbox` copied out to the MPI library's
    /// unexpected buffers ([`net::Landed::Twice`]).
    pub(super) saved_bytes: u64,
    pub(super) posted: Vec<(Option<Rank>, u32)>,
    pub(super) acks_pending: u32,
    /// Non-blocking rendezvous sends not complete yet ([`net`]).
    pub(super) sends_pending: u32,
    /// Rendezvous requests that reached this process and are not answered yet (ids).
    pub(super) rts: Vec<u32>,
    /// Rendezvous it answered whose data has not arrived: (from, tag).
    pub(super) granted: Vec<(Rank, u32)>,
    pub(super) last_from: Option<Rank>,
    pub(super) blocked_at: SimTime,
    pub(super) cpu_ns: i64,
    pub(super) spin_ns: i64,
    /// Time spent blocked (off every CPU, not runnable) so far, up to its last
    /// change of state, ns.
    pub(super) slept_ns: i64,
    pub(super) end: SimTime,
    /// Footprint and resident part, KB.
    pub(super) mem_kb: i64,
    pub(super) resident_kb: i64,
    /// Part of the footprint never touched yet (neither resident nor in swap): it
    /// costs no read when it is made resident (zero-filled pages).
    pub(super) fresh_kb: i64,
    /// Where its missing pages are and how fast it touches its pages ([`super::paging`]).
    pub(super) pages: super::paging::Pages,
    /// Waiting for memory or for its fault read: blocked until the read completes.
    pub(super) paging: bool,
    /// Its fault read is under way (it left the fault queue): the pages being
    /// read are not taken.
    pub(super) reading: bool,
    /// Its last fault read is done and it has not computed since: the cluster read
    /// is not taken (each read serves at least some computation).
    pub(super) pinned: bool,
    /// Last time the process was taken off a CPU or placed (LRU order).
    pub(super) last_ran: SimTime,
    /// Compute noise: the process's stream and the log-normal sigma.
    pub(super) noise: Option<(RngStream, f64)>,
    /// OS noise draws (`"os-noise/{job}/{rank}"`), made on first use.
    pub(super) os_noise_rng: Option<RngStream>,
    /// Boosted until it next gets a CPU ([`NodeAction::BoostUntilRun`]).
    pub(super) boost_until_run: bool,
    /// Boosts until run given so far: the re-check chain of the latest one
    /// ([`Ev::BoostCheck`](super::Ev)) carries this number, earlier chains stop.
    pub(super) boosts_until_run: u32,
    /// Since when it is in its current state (the timeline's ready and blocked segments).
    pub(super) state_since: SimTime,
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Cpu {
    pub(super) cur: Option<Pid>,
    pub(super) last: Option<Pid>,
    /// When the running process got this CPU.
    pub(super) dispatched_at: SimTime,
    /// Time up to which the CPU's busy time has been accounted.
    pub(super) acct_at: SimTime,
    /// Progress of the running process counts from here (after the context switch).
    pub(super) since: SimTime,
    pub(super) slice_end: SimTime,
    pub(super) busy_ns: i64,
}

pub(super) struct Node {
    pub(super) cpus: Vec<Cpu>,
    pub(super) sched: Box<dyn NativeScheduler>,
    pub(super) procs: Vec<Pid>,
    pub(super) disk_free_at: SimTime,
    pub(super) load: u32,
    /// Free job memory, KB.
    pub(super) free_kb: i64,
    /// Sum of the footprints of the node's processes, KB.
    pub(super) committed_kb: i64,
    /// Processes waiting to page in, in order.
    pub(super) page_queue: std::collections::VecDeque<Pid>,
    /// The optional policy ops the node's policy implements.
    pub(super) ops: Ops,
    /// A policy timer (`on_timer`) is pending.
    pub(super) timer_armed: bool,
    /// An OS timer tick (`tick` op) is pending.
    pub(super) tick_armed: bool,
    /// The node's OS timer boundaries fall at `tick_phase + i * tick`.
    pub(super) tick_phase: SimTime,
}

/// Memory is accounted in KB (integers), so that it adds up exactly.
pub(super) fn kb(mb: f64) -> i64 {
    (mb * 1000.0).round() as i64
}

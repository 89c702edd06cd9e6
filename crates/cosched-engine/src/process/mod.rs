//! The process-level engine: nodes that time-share the processes of several
//! parallel jobs, exchange messages and run a native OS scheduler.
//!
//! Coscheduling effects emerge here from mechanisms only: a process progresses
//! only while it holds a CPU; a message lands in the receiver's buffer without
//! the receiver running (user-level NIC), but the receiver must run to consume it
//! and to answer; a waiting process spins (holding its CPU), spins then blocks,
//! or blocks at once, as its node's [`NodePolicy`] says; a blocked process is
//! woken by the message's interrupt and the native scheduler decides when it
//! runs again.
//!
//! Mechanism details (the contract of [`cosched_model::program::Op`]):
//! - a send costs the sender `send_overhead` of CPU; a message below the
//!   platform's eager limit is eager: the send is complete at once, the sender
//!   node's NIC transmits it (bytes / bandwidth, one message at a time, in order)
//!   and it reaches the receiver's buffer `latency` later; a larger one is a
//!   rendezvous: its send completes only after the receiver, running inside an
//!   MPI wait with a matching receive posted, has answered the request and the
//!   data has been delivered ([`net`]);
//! - consuming a message costs the receiver `recv_overhead` of CPU;
//! - a process woken from blocking pays `interrupt` of CPU when it next runs;
//! - switching a CPU to a different process costs `context_switch` (busy, no progress);
//! - a spin-then-block wait blocks once `spin` has elapsed since the wait began;
//! - disk bursts (`Io`) are served one at a time per node, first come first served.
//!
//! Memory: each process has the footprint of its program and a resident part.
//! A new process gets as much of its footprint as is free at start; the rest is
//! fresh (never touched: zero-filled, it costs no read). Paging is page-granular
//! ([`paging`]): a process touches its pages as it computes (one sweep of its
//! footprint per main-loop iteration) and faults when it reaches a non-resident
//! page; the fault blocks it for one read of the platform's read-ahead cluster
//! while the native scheduler runs another process, and the read's completion wakes
//! it like an interrupt. Frames are taken from the node's other processes, least
//! recently run first (running processes last), their oldest pages first, a process
//! waiting in the fault queue included; the pages being read and a cluster not run
//! since are kept. Dirty pages are written to the node's disk before their frames
//! are reused ([`memory`]: each request costs the disk's access time plus its
//! transfer at `disk_mb_s`; the disk serves writes, reads and I/O bursts first come
//! first served). With `memory_aware` admission a job is placed only on nodes
//! whose processes' footprints leave room for it, so no paging happens.
//!
//! Background jobs ([`ProcJob::background`], e.g. seed 002's competing loads) run
//! like the others but do not keep the run going: when the last foreground job
//! ends, the engine stops every background process where it is (mid-burst if need
//! be: the CPU work it had left is counted as abandoned, its unconsumed and
//! in-flight messages as dropped, its memory is returned) and the run ends; a
//! background job that never started gets an empty record at that instant.
//! Background jobs take admission slots like the others: one that holds the slots
//! a foreground job needs keeps it out until the time limit stops the run.
//!
//! Admission ([`admit`]): an admission policy (`ProcOptions::admission`,
//! the contract `cosched_contract::admission`) decides which queued job starts
//! when; the engine validates each start and places it: a job of P processes
//! gets P distinct nodes each holding fewer than `mpl` processes (with
//! [`ProcJob::ranks_per_node`] `k`: `ceil(P / k)` nodes each with room for `k`
//! more, consecutive ranks together) by the run's placement rule ([`place`]:
//! PACKING, the least-loaded layer's emptiest contiguous run; NO PACKING,
//! eligible nodes drawn at random from the seeded stream "placement"). Without a
//! policy, the reference strict FCFS admits. Under a slot policy
//! (`ProcOptions::slots`, [`slots`]: gang scheduling with an Ousterhout
//! matrix and global slot switches) the slot policy admits and picks instead;
//! each node then runs the [`gang`] dispatcher.

pub mod admit;
pub mod check;
mod cpu;
mod deadlock;
mod error;
mod events;
mod fragment;
pub mod gang;
pub mod gangedness;
mod hooks;
mod interp;
mod invariants;
mod inversion;
mod io_interrupts;
mod job;
mod lifecycle;
mod memory;
mod net;
pub mod observe;
mod observers;
mod osnoise;
mod output;
mod paging;
pub mod perturb;
pub mod place;
mod setup;
pub mod slots;
mod state;
mod timeline;
mod view;
mod wait;
mod wait_time;
/// The node-policy contract (defined in `cosched-contract`).
pub mod policy {
    pub use cosched_contract::node::*;
}
pub mod testkit;

#[cfg(test)]
mod boost_tests;
#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod flexgang_tests;
#[cfg(test)]
mod gang_tests;
#[cfg(test)]
mod net_tests;
#[cfg(test)]
mod paging_tests;
#[cfg(test)]
mod perturb_tests;
#[cfg(test)]
mod place_tests;
#[cfg(test)]
mod tests;

use crate::os::{self, Pick, Pid, Stop, Wake};
use cosched_contract::admission::{AdmissionEvent, AdmissionPolicy};
use cosched_des::{EventQueue, RngStream, RngStreams, SimTime, TimerSlots};
use cosched_model::node::NodePlatform;
use cosched_model::program::Rank;
use policy::{DequeueReason, EnqueueReason, NodeAction, NodePolicy};
// Names the test modules take from here with `use super::*`.
#[cfg(test)]
use {
    cosched_model::program::{Op, Program},
    cosched_model::Placement,
    interp::erlang,
};

pub use error::ProcError;
pub use job::{ProcJob, ProcOptions, DEFAULT_EVENT_LIMIT, DEFAULT_TIME_LIMIT_S};
pub use output::{ProcCounters, ProcJobRecord, ProcOutput, Segment, SegmentKind};
use state::{kb, After, Cond, Cpu, Node, PState, Proc, Waiting};
use view::{Apply, View};

#[derive(Clone, Copy, Debug)]
enum Ev {
    Arrive(usize),
    /// The admission policy's wake-up ([`admit`]; `AdmissionControl::wake_at`),
    /// the `gen`-th asked for.
    AdmitWake {
        gen: u64,
    },
    /// The end of a CPU's planned segment. Kept in the CPU's timer slot
    /// ([`Sim::segs`]), never in the queue: re-planning the CPU replaces it.
    SegEnd {
        node: u32,
        cpu: u32,
    },
    Msg {
        to: Pid,
        from: Rank,
        tag: u32,
        bytes: u64,
    },
    Ack {
        to: Pid,
    },
    /// A rendezvous request reaches its receiver ([`net`]).
    Rts {
        id: u32,
    },
    IoDone {
        to: Pid,
    },
    SendDone {
        to: Pid,
    },
    PageDone {
        to: Pid,
    },
    Timer {
        node: u32,
    },
    /// The node's OS timer interrupt (the policy's `tick` op).
    Tick {
        node: u32,
    },
    /// The re-check of `pid`'s boost until run number `boost`, given at `since`,
    /// that was checked `checks` times already (platforms with
    /// `boost_recheck = "agent"`, [`hooks`]).
    BoostCheck {
        pid: Pid,
        boost: u32,
        checks: u32,
        since: SimTime,
    },
    /// The gang slot policy's slot timer ([`slots`]: the end of a slot, or a
    /// re-plan such as an emptied row).
    GangSwitch {
        gen: u64,
    },
    /// End of the global switch ([`slots`]): the slot policy picks the next slot.
    GangResume {
        gen: u64,
    },
}

struct Sim<'a> {
    plat: &'a NodePlatform,
    jobs: &'a [ProcJob],
    opts: ProcOptions,
    q: EventQueue<Ev>,
    /// The pending segment end of each CPU (slot `node * cpus_per_node + cpu`),
    /// ordered with the queue's events by the sequence it reserved there.
    segs: TimerSlots,
    nodes: Vec<Node>,
    policies: Vec<Box<dyn NodePolicy>>,
    procs: Vec<Proc<'a>>,
    /// First pid of each admitted job.
    job_pids: Vec<Option<Pid>>,
    ranks_left: Vec<u32>,
    /// Gang mode: the slot policy, the engine's slot state and the observers
    /// of the gang schedule ([`slots`]).
    slots: Option<slots::Slots>,
    /// The run's observers ([`observe`]).
    obs: observe::Observers,
    records: Vec<Option<ProcJobRecord>>,
    /// Whether each job has ended (set once, checked: a job ends exactly once).
    ended: Vec<bool>,
    /// The admission policy (outside gang mode; taken out while it decides).
    admission: Option<Box<dyn AdmissionPolicy>>,
    /// The admission policy's pending wake-up, if any: (time, generation).
    admit_wake: Option<(SimTime, u64)>,
    /// Wake-ups the admission policy has asked for (the next generation).
    admit_wakes: u64,
    /// Events that happened while the admission policy was deciding (a start
    /// ran a job to its end at once), told to it when it returns.
    admit_later: Vec<AdmissionEvent>,
    /// The first refused decision; it stops the run.
    failure: Option<ProcError>,
    /// Jobs whose submission event has not happened yet.
    arrivals_left: usize,
    jobs_done: usize,
    counters: ProcCounters,
    /// Foreground jobs not finished yet; the run ends when none is left.
    fg_left: usize,
    /// CPU work stopped background processes still had to do, ns.
    abandoned_ns: i64,
    /// Send overheads charged to stopped background processes whose message never left, ns.
    unsent_ns: i64,
    /// Per-byte messaging CPU charged so far (sends and consumed receives), ns.
    byte_cpu_ns: i64,
    /// Messages to stopped background processes, never consumed.
    dropped: u64,
    rng: RngStream,
    streams: RngStreams,
    actions: Vec<NodeAction>,
    timeline: Option<Vec<Segment>>,
    /// The period of the nodes' OS timer ([`os::timer_tick`]).
    tick: SimTime,
    /// The CPU time the OS timer takes from computing processes ([`osnoise`]).
    os_noise: osnoise::OsNoise,
    // Platform constants in ns.
    send_ns: i64,
    recv_ns: i64,
    /// CPU per message byte at each end (`NodePlatform::byte_overhead_ns`).
    byte_ns: f64,
    /// CPU per eager message byte at each end, on top of `byte_ns`
    /// (`NodePlatform::eager_copy_ns`).
    eager_copy_ns: f64,
    interrupt_ns: i64,
    cs_ns: i64,
    latency_ns: i64,
    ns_per_byte: f64,
    /// Messages of at least this many bytes go by rendezvous (`u64::MAX`: none).
    eager_limit: u64,
    /// The rendezvous in progress.
    rndv: net::Rndvs,
    /// The nodes' receiving NICs ([`net`]).
    links: net::Links,
    /// Positioning cost of a paging disk request, and the pages one fault reads (KB).
    disk_access: SimTime,
    readahead_kb: i64,
    /// A job found deadlocked ([`deadlock`]): ends the run after the current event.
    fatal: Option<ProcError>,
}

fn us(x: f64) -> i64 {
    (x * 1000.0).round() as i64
}

/// Runs `jobs` (sorted by submit time) on `plat`, each node with its own policy
/// from `make_policy`.
pub fn simulate_processes(
    plat: &NodePlatform,
    jobs: &[ProcJob],
    make_policy: &dyn Fn() -> Box<dyn NodePolicy>,
    opts: &ProcOptions,
) -> Result<ProcOutput, ProcError> {
    plat.validate().map_err(ProcError::Platform)?;
    // Programs express compute for the reference CPU; run it at this platform's speed.
    let at_speed: Vec<ProcJob>;
    let jobs = if plat.cpu_speed == 1.0 {
        jobs
    } else {
        at_speed = jobs
            .iter()
            .map(|j| ProcJob {
                program: j.program.at_speed(plat.cpu_speed),
                ..*j
            })
            .collect();
        &at_speed
    };
    let slots = slots::Slots::of(opts, plat.nodes, plat.cpus_per_node, jobs.len());
    setup::validate(plat, jobs, opts, slots.as_ref().map(slots::Slots::policy))?;
    let tick = os::timer_tick(&plat.os);
    let streams = RngStreams::new(opts.seed);
    let policies: Vec<Box<dyn NodePolicy>> = (0..plat.nodes).map(|_| make_policy()).collect();
    let nodes = new_nodes(plat, opts, &policies, &streams, tick);
    let obs = observers::of((plat.nodes, jobs.len()), slots.as_ref(), opts);
    let mut sim = Sim {
        plat,
        jobs,
        opts: opts.clone(),
        q: EventQueue::new(),
        segs: TimerSlots::new((plat.nodes * plat.cpus_per_node) as usize),
        nodes,
        policies,
        procs: Vec::new(),
        job_pids: vec![None; jobs.len()],
        ranks_left: vec![0; jobs.len()],
        slots,
        obs,
        records: vec![None; jobs.len()],
        ended: vec![false; jobs.len()],
        admission: admit::policy_of(opts),
        admit_wake: None,
        admit_wakes: 0,
        admit_later: Vec::new(),
        failure: None,
        arrivals_left: jobs.len(),
        jobs_done: 0,
        counters: ProcCounters::default(),
        fg_left: jobs.iter().filter(|j| !j.background).count(),
        abandoned_ns: 0,
        unsent_ns: 0,
        byte_cpu_ns: 0,
        dropped: 0,
        rng: RngStreams::new(opts.seed).stream("placement"),
        streams: RngStreams::new(opts.seed),
        actions: Vec::new(),
        timeline: opts.record_timeline.then(Vec::new),
        tick,
        os_noise: osnoise::OsNoise::new(plat.os_noise_tick_us, tick),
        send_ns: us(plat.send_overhead_us),
        recv_ns: us(plat.recv_overhead_us),
        byte_ns: plat.byte_overhead_ns,
        eager_copy_ns: plat.eager_copy_ns,
        interrupt_ns: us(plat.interrupt_us),
        cs_ns: us(plat.context_switch_us),
        latency_ns: us(plat.latency_us),
        ns_per_byte: 1000.0 / plat.bandwidth_mb_s,
        eager_limit: plat.eager_limit_bytes.unwrap_or(u64::MAX),
        rndv: Default::default(),
        links: net::Links::new(plat.nodes as usize),
        disk_access: SimTime::from_secs_f64(plat.swap.access_ms / 1000.0),
        readahead_kb: i64::from(plat.swap.readahead_kb),
        fatal: None,
    };
    for (j, job) in jobs.iter().enumerate() {
        sim.q.schedule(job.submit, Ev::Arrive(j)).map_err(|_| {
            ProcError::Options(format!("job {j}: negative submit time {}", job.submit))
        })?;
    }
    sim.run()?;
    sim.finish()
}

/// The nodes of a run, idle. Each node's timer ticks with its own phase (nodes
/// boot at different times): uniform in [0, tick) from the seeded stream
/// "tick-phase/<node>". The policy `tick` op falls on the same boundaries.
fn new_nodes(
    plat: &NodePlatform,
    opts: &ProcOptions,
    policies: &[Box<dyn NodePolicy>],
    streams: &RngStreams,
    tick: SimTime,
) -> Vec<Node> {
    (0..plat.nodes)
        .map(|k| {
            use rand::Rng;
            let phase = SimTime(
                streams
                    .stream(&format!("tick-phase/{k}"))
                    .gen_range(0..tick.as_ns().max(1)),
            );
            (k, phase)
        })
        .map(|(k, phase)| Node {
            cpus: vec![Cpu::default(); plat.cpus_per_node as usize],
            sched: slots::node_scheduler(opts).unwrap_or_else(|| {
                let rng = streams.stream(&format!("cfs-slice/{k}"));
                os::build_on_node(&plat.os, phase, rng)
            }),
            ops: policies[k as usize].ops(),
            timer_armed: false,
            tick_armed: false,
            tick_phase: phase,
            procs: Vec::new(),
            disk_free_at: SimTime::ZERO,
            load: 0,
            free_kb: kb(plat.job_memory_mb),
            committed_kb: 0,
            page_queue: Default::default(),
        })
        .collect()
}

impl<'a> Sim<'a> {
    /// The event loop: handles events in (time, sequence) order until every
    /// foreground job has ended or the run fails.
    fn run(&mut self) -> Result<(), ProcError> {
        let mut last = SimTime::ZERO;
        while self.fg_left > 0 {
            if let Some(e) = self.failure.take() {
                return Err(e);
            }
            let (now, ev) = self.next_event()?;
            // Timers that cannot make a process progress: after them, the run
            // may be stuck ([`Sim::stuck`]).
            let timer = matches!(
                ev,
                Ev::Timer { .. }
                    | Ev::Tick { .. }
                    | Ev::BoostCheck { .. }
                    | Ev::GangSwitch { .. }
                    | Ev::GangResume { .. }
            );
            debug_assert!(now >= last, "time went backwards: {now} after {last}");
            last = now;
            self.check_limits(now)?;
            match ev {
                Ev::Arrive(j) => {
                    self.arrivals_left -= 1;
                    self.admit(AdmissionEvent::Arrived(j), now);
                }
                Ev::AdmitWake { gen } => self.admit_wake_fired(gen, now),
                Ev::SegEnd { node, cpu } => self.seg_end(node, cpu, now),
                Ev::Msg {
                    to,
                    from,
                    tag,
                    bytes,
                } => self.msg_arrived(to, from, tag, bytes, now),
                Ev::Rts { id } => self.rts_arrived(id, now),
                Ev::SendDone { to } => {
                    self.procs[to as usize].sends_pending -= 1;
                    self.condition_changed(to, now);
                }
                Ev::Ack { to } => self.ack_arrived(to, now),
                Ev::PageDone { to } => self.page_done(to, now),
                Ev::IoDone { to } => {
                    let p = &mut self.procs[to as usize];
                    debug_assert!(matches!(p.wait, Some(Waiting { cond: Cond::Io, .. })));
                    p.wait = None;
                    self.slot_io_wake(to);
                    self.signal_io_done(to);
                    self.wake(to, EnqueueReason::IoDone, now);
                }
                Ev::GangSwitch { gen } => self.slot_timer(gen, now),
                Ev::GangResume { gen } => self.slot_switch_done(gen, now),
                Ev::Timer { node } => self.policy_timer(node, now),
                Ev::Tick { node } => self.os_tick(node, now),
                Ev::BoostCheck {
                    pid,
                    boost,
                    checks,
                    since,
                } => self.boost_check(pid, boost, checks, since, now),
            }
            if timer && self.stuck() {
                return Err(self.deadlock());
            }
            if let Some(e) = self.fatal.take() {
                return Err(e);
            }
        }
        self.failure.take().map_or(Ok(()), Err)
    }
}

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
//! fresh (never touched: zero-filled, it costs no read). When a node's job memory
//! is short, pages are taken from the other processes of the node, least recently
//! run first (running processes last), a process waiting in the page-in queue
//! included; only a process whose read is under way or that was paged in and has
//! not run since keeps its pages. Pages taken are swapped out: written to the
//! node's disk at `disk_mb_s` before their frames serve the process that took them.
//! A process picked by the native scheduler with part of its footprint not
//! resident does not run: it blocks while the frames it takes are written out and
//! its swapped-out part is read back (the disk serves writes, reads and I/O bursts
//! first come first served), and the scheduler picks another process meanwhile;
//! the page-in completion wakes it like an interrupt. Paging is per process, not
//! per page: a process runs only with its whole footprint resident (the NAS codes
//! sweep all their data every iteration), and it does not fault mid-slice. With `memory_aware` admission a job is placed only on nodes
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
//! policy, the reference strict FCFS admits. Gang scheduling ([`gang`]: an
//! Ousterhout matrix with global slot switches, `ProcOptions::gang`) admits
//! through its matrix instead.

pub mod admit;
pub mod check;
mod deadlock;
mod error;
pub mod flexgang;
pub mod gang;
pub mod gangedness;
mod invariants;
mod inversion;
mod job;
mod net;
mod osnoise;
mod output;
pub mod perturb;
pub mod place;
mod setup;
/// The node-policy contract (defined in `cosched-contract`).
pub mod policy {
    pub use cosched_contract::node::*;
}
pub mod testkit;

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
#[cfg(test)]
mod contract_tests;

use crate::os::{self, NativeScheduler, Pick, Pid, Stop, Wake};
use cosched_des::{EventQueue, RngStream, RngStreams, SimTime, TimerSlots};
use cosched_model::node::NodePlatform;
use cosched_model::program::{Op, Rank};
use policy::{
    ActionError, DequeueReason, EnqueueReason, NodeAction, NodePolicy,
    NodeView, Ops, WaitEnd, WaitEndCause, WaitKind, WaitMode,
};
use cosched_contract::admission::{AdmissionEvent, AdmissionPolicy};
// Names the test modules take from here with `use super::*`.
#[cfg(test)]
use {cosched_model::program::Program, cosched_model::Placement};

pub use error::ProcError;
pub use job::{ProcJob, ProcOptions, DEFAULT_EVENT_LIMIT, DEFAULT_TIME_LIMIT_S};
pub use output::{ProcCounters, ProcJobRecord, ProcOutput, Segment, SegmentKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PState {
    Ready,
    Running(u32),
    Blocked,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cond {
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

/// Memory is accounted in KB (integers), so that it adds up exactly.
fn kb(mb: f64) -> i64 {
    (mb * 1000.0).round() as i64
}

#[derive(Clone, Copy, Debug)]
struct Waiting {
    cond: Cond,
    /// What the policy was told (`None` for a disk burst).
    kind: Option<WaitKind>,
    mode: WaitMode,
    since: SimTime,
    /// The process's spin time when the wait began (its spin in this wait is the
    /// difference).
    spin_at: i64,
    /// Whether it blocked during the wait.
    blocked: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    Next,
    Depart {
        to: Rank,
        bytes: u64,
        tag: u32,
        blocking: bool,
    },
}

struct Proc<'a> {
    job: usize,
    rank: Rank,
    node: u32,
    ops: &'a [Op],
    pc: usize,
    /// Active loops: (body start, body end, iterations left after this one).
    loops: Vec<(usize, usize, u32)>,
    /// Active [`Op::LoopUntil`]s: (index in `loops`, stop tag); their `loops`
    /// entries never count down.
    untils: Vec<(usize, u32)>,
    /// Compute time asked for so far (after noise and drawn bursts).
    compute_ns: i64,
    /// The stream of [`Op::Burst`] draws, created at the first one.
    bursts: Option<RngStream>,
    /// Messages sent to this process and not yet arrived.
    in_flight: u32,
    state: PState,
    cpu_left: i64,
    after: After,
    wait: Option<Waiting>,
    /// Arrived, unconsumed messages: (from, tag).
    mailbox: Vec<(Rank, u32)>,
    posted: Vec<(Option<Rank>, u32)>,
    acks_pending: u32,
    /// Non-blocking rendezvous sends not complete yet ([`net`]).
    sends_pending: u32,
    /// Rendezvous requests that reached this process and are not answered yet (ids).
    rts: Vec<u32>,
    /// Rendezvous it answered whose data has not arrived: (from, tag).
    granted: Vec<(Rank, u32)>,
    last_from: Option<Rank>,
    blocked_at: SimTime,
    cpu_ns: i64,
    spin_ns: i64,
    end: SimTime,
    /// Footprint and resident part, KB.
    mem_kb: i64,
    resident_kb: i64,
    /// Part of the footprint never touched yet (neither resident nor in swap): it
    /// costs no read when it is made resident (zero-filled pages).
    fresh_kb: i64,
    /// Waiting for memory or for its page-in: blocked until the read completes.
    paging: bool,
    /// Its page-in read is under way (it left the page-in queue): the pages being
    /// read are not taken.
    reading: bool,
    /// Paged in but not run since: its pages are not taken (no livelock).
    pinned: bool,
    /// Last time the process was taken off a CPU or placed (LRU order).
    last_ran: SimTime,
    /// Compute noise: the process's stream and the log-normal sigma.
    noise: Option<(RngStream, f64)>,
    /// OS noise draws (`"os-noise/{job}/{rank}"`), made on first use.
    os_noise_rng: Option<RngStream>,
    /// Boosted until it next gets a CPU ([`NodeAction::BoostUntilRun`]).
    boost_until_run: bool,
    /// Since when it is in its current state (the timeline's ready and blocked segments).
    state_since: SimTime,
}

/// An Erlang-`k` draw of mean `mean_ns` (the sum of `k` exponential phases of mean
/// `mean_ns / k`), rounded to the nanosecond.
fn erlang(mean_ns: i64, k: u32, rng: &mut RngStream) -> i64 {
    use rand::Rng;
    let k = k.max(1);
    let phase = mean_ns.max(0) as f64 / k as f64;
    let sum: f64 = (0..k).map(|_| -(1.0 - rng.gen::<f64>()).ln() * phase).sum();
    sum.round() as i64
}

/// A compute burst of `ns` scaled by a log-normal factor of mean 1 and log-sigma
/// `sigma` (Box-Muller on the process's stream).
fn noisy(ns: i64, sigma: f64, rng: &mut RngStream) -> i64 {
    use rand::Rng;
    let (u1, u2): (f64, f64) = (rng.gen::<f64>().max(f64::MIN_POSITIVE), rng.gen());
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    let factor = (sigma * z - sigma * sigma / 2.0).exp();
    (ns.max(0) as f64 * factor).round() as i64
}

#[derive(Clone, Copy, Debug, Default)]
struct Cpu {
    cur: Option<Pid>,
    last: Option<Pid>,
    /// When the running process got this CPU.
    dispatched_at: SimTime,
    /// Time up to which the CPU's busy time has been accounted.
    acct_at: SimTime,
    /// Progress of the running process counts from here (after the context switch).
    since: SimTime,
    slice_end: SimTime,
    busy_ns: i64,
}

struct Node {
    cpus: Vec<Cpu>,
    sched: Box<dyn NativeScheduler>,
    procs: Vec<Pid>,
    disk_free_at: SimTime,
    /// When the NIC finishes transmitting what it was given.
    nic_free_at: SimTime,
    load: u32,
    /// Free job memory, KB.
    free_kb: i64,
    /// Sum of the footprints of the node's processes, KB.
    committed_kb: i64,
    /// Processes waiting to page in, in order.
    page_queue: std::collections::VecDeque<Pid>,
    /// The optional policy ops the node's policy implements.
    ops: Ops,
    /// A policy timer (`on_timer`) is pending.
    timer_armed: bool,
    /// An OS timer tick (`tick` op) is pending.
    tick_armed: bool,
    /// The node's OS timer boundaries fall at `tick_phase + i * tick`.
    tick_phase: SimTime,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Arrive(usize),
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
    /// End of a gang slot: every CPU is taken back and the global switch starts.
    GangSwitch {
        gen: u64,
    },
    /// End of the global switch: the next row's slot starts.
    GangResume {
        gen: u64,
    },
}

/// When a policy's actions take effect ([`policy`] module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Apply {
    /// A boost of a runnable process may preempt at once; the node is rescheduled.
    Now,
    /// No preemption; the node is rescheduled (ops called while a process executes).
    NextPoint,
    /// Priorities change; no preemption, no rescheduling (ops called during a CPU
    /// hand-over: `enqueue`, `dequeue`, `running`, `stopping`).
    Deferred,
}

struct View<'s, 'a> {
    now: SimTime,
    node: &'s Node,
    procs: &'s [Proc<'a>],
}

impl NodeView for View<'_, '_> {
    fn now(&self) -> SimTime {
        self.now
    }
    fn processes(&self) -> &[Pid] {
        &self.node.procs
    }
    fn is_running(&self, p: Pid) -> bool {
        matches!(self.procs[p as usize].state, PState::Running(_))
    }
    fn unconsumed(&self, p: Pid) -> usize {
        let q = &self.procs[p as usize];
        q.mailbox.len() + q.rts.len()
    }
    fn job_of(&self, p: Pid) -> Option<u32> {
        self.procs.get(p as usize).map(|q| q.job as u32)
    }
    fn waited(&self, p: Pid) -> Option<SimTime> {
        let w = self.procs.get(p as usize)?.wait?;
        w.kind.map(|_| self.now - w.since)
    }
    fn cpu_time(&self, p: Pid) -> Option<SimTime> {
        let q = self.procs.get(p as usize)?;
        // A running process is accounted lazily: add what it ran since.
        let since = match q.state {
            PState::Running(cpu) if self.node.procs.contains(&p) => {
                (self.now - self.node.cpus[cpu as usize].since).as_ns().max(0)
            }
            _ => 0,
        };
        Some(SimTime(q.cpu_ns + since))
    }
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
    /// The gang matrix, in gang mode.
    gang: Option<gang::Matrix>,
    /// The perturbation harness ([`perturb`]), gang mode only.
    perturb: Option<perturb::Perturber>,
    /// Priority inversion of disk-woken processes ([`inversion`]).
    inversion: inversion::Inversion,
    records: Vec<Option<ProcJobRecord>>,
    /// Whether each job has ended (set once, checked: a job ends exactly once).
    ended: Vec<bool>,
    /// Gang mode: jobs waiting for a matrix row, in FCFS order.
    pending: std::collections::VecDeque<usize>,
    /// The admission policy (outside gang mode; taken out while it decides).
    admission: Option<Box<dyn AdmissionPolicy>>,
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
    interrupt_ns: i64,
    cs_ns: i64,
    latency_ns: i64,
    ns_per_byte: f64,
    /// Messages of at least this many bytes go by rendezvous (`u64::MAX`: none).
    eager_limit: u64,
    /// The rendezvous in progress.
    rndv: net::Rndvs,
    /// The nodes' receiving NICs ([`net`]).
    rx: net::Receivers,
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
    setup::validate(plat, jobs, opts)?;
    // Each node's timer ticks with its own phase (nodes boot at different times):
    // uniform in [0, tick) from the seeded stream "tick-phase/<node>". The policy
    // `tick` op falls on the same boundaries.
    let tick = os::timer_tick(&plat.os);
    let streams = RngStreams::new(opts.seed);
    let policies: Vec<Box<dyn NodePolicy>> = (0..plat.nodes).map(|_| make_policy()).collect();
    let nodes = (0..plat.nodes)
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
            sched: match opts.gang {
                Some(_) => Box::new(gang::Dispatcher::default()),
                None => os::build_on_node(&plat.os, phase),
            },
            ops: policies[k as usize].ops(),
            timer_armed: false,
            tick_armed: false,
            tick_phase: phase,
            procs: Vec::new(),
            disk_free_at: SimTime::ZERO,
            nic_free_at: SimTime::ZERO,
            load: 0,
            free_kb: kb(plat.job_memory_mb),
            committed_kb: 0,
            page_queue: Default::default(),
        })
        .collect();
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
        gang: opts
            .gang
            .clone()
            .map(|g| gang::Matrix::new(g, plat.nodes, plat.cpus_per_node, jobs.len())),
        perturb: opts.perturb.clone().map(perturb::Perturber::new),
        inversion: inversion::Inversion::new(plat.nodes),
        records: vec![None; jobs.len()],
        ended: vec![false; jobs.len()],
        pending: Default::default(),
        admission: admit::policy_of(opts),
        failure: None,
        arrivals_left: jobs.len(),
        jobs_done: 0,
        counters: ProcCounters::default(),
        fg_left: jobs.iter().filter(|j| !j.background).count(),
        abandoned_ns: 0,
        unsent_ns: 0,
        dropped: 0,
        rng: RngStreams::new(opts.seed).stream("placement"),
        streams: RngStreams::new(opts.seed),
        actions: Vec::new(),
        timeline: opts.record_timeline.then(Vec::new),
        tick,
        os_noise: osnoise::OsNoise::new(plat.os_noise_tick_us, tick),
        send_ns: us(plat.send_overhead_us),
        recv_ns: us(plat.recv_overhead_us),
        interrupt_ns: us(plat.interrupt_us),
        cs_ns: us(plat.context_switch_us),
        latency_ns: us(plat.latency_us),
        ns_per_byte: 1000.0 / plat.bandwidth_mb_s,
        eager_limit: plat.eager_limit_bytes.unwrap_or(u64::MAX),
        rndv: Default::default(),
        rx: net::Receivers::new(plat.nodes as usize),
        fatal: None,
    };
    for (j, job) in jobs.iter().enumerate() {
        sim.q
            .schedule(job.submit, Ev::Arrive(j))
            .map_err(|_| ProcError::Options(format!("job {j}: negative submit time {}", job.submit)))?;
    }
    sim.run()?;
    sim.finish()
}

impl Sim<'_> {
    /// The run's output, after its end-of-run checks; background jobs that never
    /// started (every foreground job ended first) get an empty record at the end.
    fn finish(mut self) -> Result<ProcOutput, ProcError> {
        // Background jobs that never started (every foreground job ended first).
        let end = self.q.now();
        for r in self.records.iter_mut().filter(|r| r.is_none()) {
            *r = Some(ProcJobRecord {
                start: end,
                end,
                nodes: Vec::new(),
            });
        }
        self.check_invariants()?;
        let node_busy_ns = self
            .nodes
            .iter()
            .map(|n| n.cpus.iter().map(|c| c.busy_ns).sum())
            .collect();
        Ok(ProcOutput {
            jobs: self
                .records
                .into_iter()
                .map(|r| r.expect("every job ended"))
                .collect(),
            counters: self.counters,
            node_busy_ns,
            proc_cpu_ns: self.procs.iter().map(|p| p.cpu_ns).collect(),
            proc_spin_ns: self.procs.iter().map(|p| p.spin_ns).collect(),
            proc_compute_ns: self.procs.iter().map(|p| p.compute_ns).collect(),
            proc_end: self.procs.iter().map(|p| p.end).collect(),
            timeline: self.timeline.unwrap_or_default(),
            end: self.q.now(),
            perturb: self.perturb.map(perturb::Perturber::finish),
            gangedness: self.gang.map(|g| g.gangedness(self.jobs.len())),
        })
    }
}

impl<'a> Sim<'a> {
    fn run(&mut self) -> Result<(), ProcError> {
        let mut last = SimTime::ZERO;
        let cpus = self.plat.cpus_per_node;
        while self.fg_left > 0 {
            if let Some(e) = self.failure.take() {
                return Err(e);
            }
            // The next event in (time, sequence) order: a CPU's segment end (its timer
            // slot) or the queue's next event.
            let seg = self.segs.peek().filter(|&(t, seq, _)| {
                self.q
                    .peek_key()
                    .is_none_or(|(qt, id)| (t, seq) < (qt, id.0))
            });
            let (now, ev) = if let Some((t, _, slot)) = seg {
                self.segs.clear(slot);
                self.q.advance_to(t).expect("the earliest event");
                let (node, cpu) = (slot as u32 / cpus, slot as u32 % cpus);
                (t, Ev::SegEnd { node, cpu })
            } else if let Some(ev) = self.q.pop() {
                (ev.time, ev.event)
            } else {
                return Err(self.deadlock());
            };
            debug_assert!(now >= last, "time went backwards: {now} after {last}");
            last = now;
            self.counters.events += 1;
            if self.counters.events > self.opts.event_limit {
                return Err(ProcError::EventLimit {
                    limit: self.opts.event_limit,
                    time: now,
                    unfinished: self.fg_left,
                });
            }
            if cosched_des::interrupt::requested() {
                return Err(ProcError::Interrupted { time: now });
            }
            if now > self.opts.time_limit {
                let ProcError::Deadlock { first, dump, .. } = self.deadlock() else {
                    unreachable!()
                };
                return Err(ProcError::TimeLimit {
                    limit: self.opts.time_limit,
                    unfinished: self.fg_left,
                    first,
                    dump,
                });
            }
            match ev {
                Ev::Arrive(j) => {
                    self.arrivals_left -= 1;
                    self.admit(AdmissionEvent::Arrived(j), now);
                }
                Ev::SegEnd { node, cpu } => self.seg_end(node, cpu, now),
                Ev::Msg { to, from, tag } => self.msg_arrived(to, from, tag, now),
                Ev::Rts { id } => self.rts_arrived(id, now),
                Ev::SendDone { to } => {
                    self.procs[to as usize].sends_pending -= 1;
                    self.condition_changed(to, now);
                }
                Ev::Ack { to } => {
                    self.procs[to as usize].acks_pending -= 1;
                    let node = self.procs[to as usize].node;
                    if self.nodes[node as usize].ops.contains(Ops::ON_ACK) {
                        let running = matches!(self.procs[to as usize].state, PState::Running(_));
                        let boosts = self.counters.boosts;
                        self.with_policy(node, now, Apply::Now, |p, v, out| {
                            p.on_ack(v, to, running, out)
                        });
                        self.counters.ack_boosts += self.counters.boosts - boosts;
                    }
                    self.condition_changed(to, now);
                }
                Ev::PageDone { to } => {
                    let p = &mut self.procs[to as usize];
                    (p.paging, p.reading, p.pinned) = (false, false, true);
                    self.wake(to, EnqueueReason::PagedIn, now);
                }
                Ev::IoDone { to } => {
                    let p = &mut self.procs[to as usize];
                    debug_assert!(matches!(p.wait, Some(Waiting { cond: Cond::Io, .. })));
                    p.wait = None;
                    if let Some(g) = &mut self.gang {
                        g.flex_io_done(to);
                    }
                    self.inversion_io_woken(to, now);
                    self.wake(to, EnqueueReason::IoDone, now);
                }
                Ev::GangSwitch { gen } => self.gang_switch(gen, now),
                Ev::GangResume { gen } => self.gang_resume(gen, now),
                Ev::Timer { node } => {
                    self.nodes[node as usize].timer_armed = false;
                    self.with_policy(node, now, Apply::Now, |p, v, out| p.on_timer(v, out));
                    self.arm_timer(node, now);
                    if self.stuck() {
                        return Err(self.deadlock());
                    }
                }
                Ev::Tick { node } => {
                    // A tick pending when the node emptied is dropped.
                    self.nodes[node as usize].tick_armed = false;
                    if self.nodes[node as usize].load > 0 {
                        self.with_policy(node, now, Apply::Now, |p, v, out| p.tick(v, out));
                        self.arm_tick(node, now);
                    }
                    if self.stuck() {
                        return Err(self.deadlock());
                    }
                }
            }
            if let Some(e) = self.fatal.take() {
                return Err(e);
            }
        }
        self.failure.take().map_or(Ok(()), Err)
    }

    fn deadlock(&self) -> ProcError {
        let waiting: Vec<&Proc> = self
            .procs
            .iter()
            .filter(|p| p.state != PState::Done)
            .collect();
        let first = waiting
            .first()
            .map(|p| {
                format!(
                    "job {} rank {} at op {} waiting {:?}",
                    p.job,
                    p.rank,
                    p.pc,
                    p.wait.map(|w| w.cond)
                )
            })
            .unwrap_or_default();
        ProcError::Deadlock {
            time: self.q.now(),
            waiting: waiting.len(),
            first,
            dump: self.dump_nodes(),
        }
    }

    /// The state of every node that still holds processes: its native scheduler's
    /// dump and, when not empty, its policy's (as sched_ext's debug dump), one line
    /// each, for the deadlock and time-limit errors.
    fn dump_nodes(&self) -> String {
        let mut out = String::new();
        for (k, n) in self.nodes.iter().enumerate() {
            let policy = self.policies[k].dump();
            if n.procs.is_empty() && policy.is_empty() {
                continue;
            }
            let running: Vec<String> = n
                .cpus
                .iter()
                .map(|c| c.cur.map_or("-".into(), |p| p.to_string()))
                .collect();
            out.push_str(&format!(
                "\n  node {k}: processes {:?}, running [{}]; native: {}",
                n.procs,
                running.join(" "),
                n.sched.dump()
            ));
            if !policy.is_empty() {
                out.push_str(&format!("; policy {}: {policy}", self.policies[k].name()));
            }
        }
        out
    }

    /// Whether no process can ever progress although policy timers are still
    /// pending: no job is still to arrive, no CPU runs anything, nothing is runnable,
    /// and every unfinished process sleeps in a wait with no message, acknowledgement
    /// or send completion on the way and no disk burst or page-in under way. Policy
    /// timers and ticks cannot change that (their actions change priorities and
    /// charge interrupts; they never satisfy a wait). Gang mode is left to the time
    /// limit.
    fn stuck(&self) -> bool {
        if self.gang.is_some() || self.arrivals_left > 0 {
            return false;
        }
        if self
            .nodes
            .iter()
            .any(|n| n.sched.runnable() > 0 || n.cpus.iter().any(|c| c.cur.is_some()))
        {
            return false;
        }
        self.procs.iter().all(|p| {
            p.state == PState::Done
                || (p.state == PState::Blocked
                    && !p.paging
                    && p.in_flight == 0
                    && p.acks_pending == 0
                    && p.sends_pending == 0
                    && p.wait.is_some_and(|w| w.cond != Cond::Io))
        })
    }

    /// Starts the node's chain of policy timers if it holds processes, the policy
    /// has a period and no timer of the node is pending.
    fn arm_timer(&mut self, node: u32, now: SimTime) {
        let n = &self.nodes[node as usize];
        if n.timer_armed || n.load == 0 {
            return;
        }
        if let Some(period) = self.policies[node as usize].period() {
            self.nodes[node as usize].timer_armed = true;
            self.q
                .schedule(now + period, Ev::Timer { node })
                .expect("future");
        }
    }

    /// Schedules the node's next OS timer tick (after `now`) for a policy with the
    /// `tick` op, if the node holds processes and no tick is pending.
    fn arm_tick(&mut self, node: u32, now: SimTime) {
        let n = &self.nodes[node as usize];
        if n.tick_armed || n.load == 0 || !n.ops.contains(Ops::TICK) {
            return;
        }
        let (tick, phase) = (self.tick.as_ns(), n.tick_phase.as_ns());
        let next = phase + ((now.as_ns() - phase).div_euclid(tick) + 1) * tick;
        self.nodes[node as usize].tick_armed = true;
        self.q
            .schedule(SimTime(next), Ev::Tick { node })
            .expect("future");
    }

    /// Calls a policy op with a view of its node, then applies its actions as
    /// `apply` says (the timing of each op's actions: [`policy`] module doc).
    fn with_policy(
        &mut self,
        node: u32,
        now: SimTime,
        apply: Apply,
        f: impl FnOnce(&mut dyn NodePolicy, &dyn NodeView, &mut Vec<NodeAction>),
    ) {
        let mut out = std::mem::take(&mut self.actions);
        out.clear();
        {
            let view = View {
                now,
                node: &self.nodes[node as usize],
                procs: &self.procs,
            };
            f(self.policies[node as usize].as_mut(), &view, &mut out);
        }
        let mut resched = false;
        for a in out.drain(..) {
            let p = a.pid();
            let refused = match self.procs.get(p as usize) {
                Some(pr) if pr.node != node => Some(ActionError::NotOnNode(p)),
                None => Some(ActionError::NotOnNode(p)),
                Some(pr) if pr.state == PState::Done => Some(ActionError::Finished(p)),
                Some(_) => None,
            };
            if let Some(e) = refused {
                self.counters.action_errors.add(e);
                continue;
            }
            match a {
                NodeAction::Boost(_) | NodeAction::BoostUntilRun(_) => {
                    self.counters.boosts += 1;
                    self.nodes[node as usize].sched.boost(p, now);
                    if matches!(a, NodeAction::BoostUntilRun(_)) {
                        self.procs[p as usize].boost_until_run = true;
                    }
                    if apply == Apply::Now
                        && self.procs[p as usize].state == PState::Ready
                        && self.preempt_for(node, p, now)
                    {
                        self.counters.boost_preemptions += 1;
                    }
                    resched = apply != Apply::Deferred;
                }
                NodeAction::Unboost(_) => {
                    self.procs[p as usize].boost_until_run = false;
                    self.nodes[node as usize].sched.unboost(p);
                }
                NodeAction::Interrupt(_) => self.policy_interrupt(p),
                NodeAction::SpinFor(_, d) => {
                    if let Err(e) = self.spin_for(p, d, apply, now) {
                        self.counters.action_errors.add(e);
                    }
                }
            }
        }
        self.actions = out;
        if resched {
            self.schedule(node, now);
        }
    }

    /// [`NodeAction::SpinFor`]: `p`, spinning in a wait, spins until `now + d`.
    /// A running process's CPU is re-planned at once, except in a deferred op
    /// (its CPU is being handed over and is planned right after).
    fn spin_for(&mut self, p: Pid, d: SimTime, apply: Apply, now: SimTime) -> Result<(), ActionError> {
        let pr = &mut self.procs[p as usize];
        let blocked = pr.state == PState::Blocked;
        let Some(w) = pr.wait.as_mut().filter(|w| w.kind.is_some() && !blocked) else {
            return Err(ActionError::NotSpinning(p));
        };
        w.mode = WaitMode::SpinBlock((now + d.max(SimTime::ZERO)) - w.since);
        if let (PState::Running(cpu), true) = (pr.state, apply != Apply::Deferred) {
            let node = pr.node;
            self.account(node, cpu, now);
            self.plan(node, cpu, now);
        }
        Ok(())
    }

    /// Tells the policy of `pid`'s node that the wait `w` ended (only with
    /// [`Ops::WAIT_END`]; not for a disk burst).
    fn hook_wait_end(&mut self, pid: Pid, w: Waiting, by: WaitEndCause, now: SimTime) {
        let node = self.procs[pid as usize].node;
        let Some(kind) = w.kind else { return };
        if !self.nodes[node as usize].ops.contains(Ops::WAIT_END) {
            return;
        }
        let end = WaitEnd {
            kind,
            waited: now - w.since,
            spun: SimTime(self.procs[pid as usize].spin_ns - w.spin_at),
            blocked: w.blocked,
            by,
        };
        let apply = if by == WaitEndCause::Dispatched {
            Apply::Deferred
        } else {
            Apply::NextPoint
        };
        self.with_policy(node, now, apply, |pol, v, out| {
            pol.on_wait_end(v, pid, &end, out)
        });
    }

    /// A policy's NIC interrupt for `p` (see [`NodeAction::Interrupt`]).
    fn policy_interrupt(&mut self, p: Pid) {
        let pr = &self.procs[p as usize];
        let woken_by_it = pr.state == PState::Blocked
            && !pr.paging
            && pr
                .wait
                .is_some_and(|w| w.cond != Cond::Io && self.satisfied(p, w.cond));
        if matches!(pr.state, PState::Running(_)) || woken_by_it {
            return;
        }
        self.counters.policy_interrupts += 1;
        self.procs[p as usize].cpu_left += self.interrupt_ns;
    }

    // ----- gang slots ------------------------------------------------------

    /// End of a slot: every CPU of the machine is taken back, and the machine
    /// idles for the global switch; with an empty matrix the cycle stops.
    fn gang_switch(&mut self, gen: u64, now: SimTime) {
        let g = self.gang.as_mut().expect("gang mode");
        if g.gen != gen {
            return;
        }
        if g.next_row().is_none() {
            g.active = None;
            return;
        }
        g.switching = true;
        g.switches += 1;
        self.counters.gang_switches += 1;
        let resume = now + g.switch_cost();
        for node in 0..self.plat.nodes {
            for cpu in 0..self.plat.cpus_per_node {
                if let Some(pid) = self.nodes[node as usize].cpus[cpu as usize].cur {
                    self.account(node, cpu, now);
                    self.release_cpu(node, cpu, pid, Stop::Preempted, now);
                    self.nodes[node as usize]
                        .sched
                        .enqueue(pid, Wake::Preempted, now);
                }
            }
        }
        if let Some(pt) = &mut self.perturb {
            pt.slot_end(now);
        }
        self.gang.as_mut().expect("gang mode").est_slot_end(now);
        self.q
            .schedule(resume, Ev::GangResume { gen })
            .expect("future");
    }

    /// End of the global switch: the next non-empty row's slot starts.
    fn gang_resume(&mut self, gen: u64, now: SimTime) {
        let g = self.gang.as_mut().expect("gang mode");
        if g.gen != gen {
            return;
        }
        g.switching = false;
        g.active = g.next_row();
        if g.active.is_none() {
            return;
        }
        let quantum = g.slot_quantum();
        g.est.slot_start(now);
        self.q
            .schedule(now + quantum, Ev::GangSwitch { gen })
            .expect("future");
        if let Some(pt) = &mut self.perturb {
            pt.slot_start(self.gang.as_ref().expect("gang mode"), now);
        }
        for node in 0..self.plat.nodes {
            self.schedule(node, now);
        }
    }

    fn start_job(&mut self, j: usize, nodes: Vec<u32>, now: SimTime) {
        let first = self.procs.len() as Pid;
        self.job_pids[j] = Some(first);
        self.ranks_left[j] = nodes.len() as u32;
        for (rank, &node) in nodes.iter().enumerate() {
            let pid = self.procs.len() as Pid;
            self.procs.push(Proc {
                job: j,
                rank: rank as Rank,
                node,
                ops: &self.jobs[j].program.ranks[rank],
                pc: 0,
                loops: Vec::new(),
                untils: Vec::new(),
                compute_ns: 0,
                bursts: None,
                in_flight: 0,
                state: PState::Ready,
                cpu_left: 0,
                after: After::Next,
                wait: None,
                mailbox: Vec::new(),
                posted: Vec::new(),
                acks_pending: 0,
                sends_pending: 0,
                rts: Vec::new(),
                granted: Vec::new(),
                last_from: None,
                blocked_at: now,
                cpu_ns: 0,
                spin_ns: 0,
                end: SimTime::MAX,
                mem_kb: kb(self.jobs[j].program.memory_mb),
                resident_kb: 0,
                fresh_kb: 0,
                paging: false,
                reading: false,
                pinned: false,
                last_ran: now,
                noise: (self.jobs[j].program.noise_cv > 0.0).then(|| {
                    let cv = self.jobs[j].program.noise_cv;
                    (
                        self.streams.stream(&format!("noise/{j}/{rank}")),
                        (1.0 + cv * cv).ln().sqrt(),
                    )
                }),
                os_noise_rng: None,
                boost_until_run: false,
                state_since: now,
            });
            // Fresh pages: as much of the footprint as free memory holds; the rest
            // is made room for (swapping other processes' pages out) when the
            // process is first picked, and costs no read.
            let need = self.procs[pid as usize].mem_kb;
            let got = need.min(self.nodes[node as usize].free_kb);
            self.procs[pid as usize].resident_kb = got;
            self.procs[pid as usize].fresh_kb = need - got;
            self.nodes[node as usize].free_kb -= got;
            self.nodes[node as usize].committed_kb += need;
            let n = &mut self.nodes[node as usize];
            n.load += 1;
            n.procs.push(pid);
            self.debug_check_memory(node);
            let n = &mut self.nodes[node as usize];
            n.sched.add(pid, now);
            if self.jobs[j].nice != 0 {
                n.sched.set_nice(pid, self.jobs[j].nice);
            }
            self.hook_enqueue(pid, EnqueueReason::Admitted, now);
            self.nodes[node as usize].sched.enqueue(pid, Wake::New, now);
            self.arm_timer(node, now);
            self.arm_tick(node, now);
        }
        self.records[j] = Some(ProcJobRecord {
            start: now,
            end: now,
            nodes: nodes.clone(),
        });
        for node in nodes {
            self.schedule(node, now);
        }
    }

    fn finish_rank(&mut self, pid: Pid, now: SimTime) {
        let (j, node) = (self.procs[pid as usize].job, self.procs[pid as usize].node);
        self.set_state(pid, PState::Done, now);
        self.procs[pid as usize].end = now;
        let (resident, mem) = (
            self.procs[pid as usize].resident_kb,
            self.procs[pid as usize].mem_kb,
        );
        self.procs[pid as usize].resident_kb = 0;
        self.procs[pid as usize].fresh_kb = 0;
        let n = &mut self.nodes[node as usize];
        n.free_kb += resident;
        n.committed_kb -= mem;
        n.sched.exit(pid);
        n.procs.retain(|&p| p != pid);
        if let Some(g) = &mut self.gang {
            g.flex_blocked(pid);
            g.est.on_finished(pid);
        }
        n.load -= 1;
        self.debug_check_memory(node);
        self.pump_paging(node, now);
        self.ranks_left[j] -= 1;
        if self.ranks_left[j] > 0 {
            // The others may wait for this one.
            self.check_program_deadlock(pid, now);
        }
        if self.ranks_left[j] == 0 {
            debug_assert!(!self.ended[j], "job {j} ends twice");
            self.ended[j] = true;
            self.records[j].as_mut().expect("started").end = now;
            self.jobs_done += 1;
            if let Some(pt) = &mut self.perturb {
                pt.job_done(j, now);
            }
            if let Some(g) = &mut self.gang {
                g.free(j);
            }
            if !self.jobs[j].background {
                self.fg_left -= 1;
                if self.fg_left == 0 {
                    self.stop_background(now);
                    return;
                }
            }
            self.admit(AdmissionEvent::Ended(j), now);
            // The active row emptied: switch to the next row at once.
            if let Some(g) = &mut self.gang {
                if !g.switching && g.active.is_some() && g.active_empty() {
                    g.gen += 1;
                    let gen = g.gen;
                    self.q.schedule(now, Ev::GangSwitch { gen }).expect("now");
                }
            }
        }
    }

    /// Every foreground job has finished: background jobs waiting for admission are
    /// dropped and every running background process is stopped where it is.
    fn stop_background(&mut self, now: SimTime) {
        self.pending.clear();
        // Only background processes are left: no page-in starts any more.
        for n in &mut self.nodes {
            n.page_queue.clear();
        }
        for pid in 0..self.procs.len() as Pid {
            let p = &self.procs[pid as usize];
            if p.state == PState::Done {
                continue;
            }
            debug_assert!(
                self.jobs[p.job].background,
                "only background processes are left"
            );
            let node = p.node;
            match p.state {
                PState::Running(cpu) => {
                    self.account(node, cpu, now);
                    self.release_cpu(node, cpu, pid, Stop::Blocked, now);
                    self.hook_dequeue(pid, DequeueReason::Stopped, now);
                }
                PState::Ready => {
                    self.nodes[node as usize].sched.remove(pid, now);
                    self.hook_dequeue(pid, DequeueReason::Stopped, now);
                }
                PState::Blocked | PState::Done => {}
            }
            let send_ns = self.send_ns;
            let p = &mut self.procs[pid as usize];
            self.abandoned_ns += p.cpu_left;
            p.cpu_left = 0;
            if matches!(p.after, After::Depart { .. }) {
                self.unsent_ns += send_ns;
            }
            p.after = After::Next;
            p.wait = None;
            p.paging = false;
            p.reading = false;
            self.dropped += p.mailbox.len() as u64 + p.in_flight as u64;
            p.mailbox.clear();
            p.posted.clear();
            p.rts.clear();
            p.granted.clear();
            self.finish_rank(pid, now);
        }
    }

    // ----- priority inversion ([`inversion`]) ------------------------------

    /// Settles `node`'s priority inversion at `now` (before its CPUs change what
    /// they run).
    fn inversion_settle(&mut self, node: u32, now: SimTime) {
        let (cpus, procs) = (&self.nodes[node as usize].cpus, &self.procs);
        let inverted = |p: Pid| {
            let j = procs[p as usize].job;
            cpus.iter()
                .any(|c| c.cur.is_some_and(|q| procs[q as usize].job != j))
        };
        self.inversion
            .settle(node, now, &mut self.counters.priority_inversion_ns, inverted);
    }

    /// A disk completion is about to wake `pid`: it waits from now until it runs.
    fn inversion_io_woken(&mut self, pid: Pid, now: SimTime) {
        let p = &self.procs[pid as usize];
        if p.state != PState::Blocked || p.paging {
            return; // the wake-up will not make it runnable
        }
        let node = p.node;
        self.inversion_settle(node, now);
        self.inversion.woken(node, pid);
    }

    /// `pid` gets a CPU of `node` (before the dispatch changes the CPU).
    fn inversion_dispatch(&mut self, node: u32, pid: Pid, now: SimTime) {
        self.inversion_settle(node, now);
        self.inversion.dispatched(node, pid);
    }

    // ----- CPUs ------------------------------------------------------------

    /// Fills the node's idle CPUs from its native scheduler.
    fn schedule(&mut self, node: u32, now: SimTime) {
        let mut cpu = 0;
        while cpu < self.plat.cpus_per_node {
            if self.nodes[node as usize].cpus[cpu as usize].cur.is_some() {
                cpu += 1;
                continue;
            }
            let hint = if let Some(g) = &self.gang {
                // Gang mode: the slot dispatcher decides, the node's Dispatcher obeys.
                let procs = &self.procs;
                let ok =
                    |p: Pid| procs[p as usize].state == PState::Ready && !procs[p as usize].paging;
                let curs: Vec<Option<Pid>> = self.nodes[node as usize]
                    .cpus
                    .iter()
                    .map(|c| c.cur)
                    .collect();
                let hint = g.choose(node, &curs, ok);
                match &self.perturb {
                    Some(pt) => pt.choose(g, node, hint, ok),
                    None => hint,
                }
            } else {
                let view = View {
                    now,
                    node: &self.nodes[node as usize],
                    procs: &self.procs,
                };
                self.policies[node as usize].recommend(&view)
            };
            let n = &mut self.nodes[node as usize];
            n.sched.set_active_mm(n.cpus[cpu as usize].last);
            let Some(pick) = n.sched.pick(now, hint) else {
                return;
            };
            let p = &self.procs[pick.pid as usize];
            let missing = p.mem_kb - p.resident_kb;
            let n = &self.nodes[node as usize];
            if missing > 0 && missing == p.fresh_kb && missing <= n.free_kb && n.page_queue.is_empty() {
                // Only fresh pages missing, and free memory for them: zero-filled at once.
                self.nodes[node as usize].free_kb -= missing;
                let p = &mut self.procs[pick.pid as usize];
                (p.resident_kb, p.fresh_kb) = (p.mem_kb, 0);
                self.debug_check_memory(node);
            } else if missing > 0 {
                self.page_in(node, pick.pid, now);
                continue;
            }
            self.dispatch(node, cpu, pick, now);
            cpu += 1;
        }
    }

    /// Frees at least `need` KB on `node` by taking pages from its other processes,
    /// least recently run first, running ones last; never from `except`, from a
    /// process whose page-in read is under way, or from one paged in that has not
    /// run since. Returns whether enough was freed.
    ///
    /// Swap-out: the pages taken are written to swap on the node's disk (at
    /// `disk_mb_s`, first come first served with page-ins and I/O bursts; a page-in
    /// queued after the writes starts when they are done). Every page taken is
    /// written: a process that has run since its pages were read has written its
    /// arrays (the NAS codes update their whole data every iteration), and one that
    /// has not is not a victim, so no page taken is still clean in the swap cache
    /// (the case Linux 2.4's `try_to_swap_out` drops without I/O).
    ///
    /// A process waiting in the page-in queue, its read not started, is a victim
    /// like any other: Linux 2.4's reclaim (`mm/vmscan.c`, 2.4.17: `swap_out` walks
    /// every address space on `mmlist` whatever its task's state, and
    /// `try_to_swap_out` spares only a page whose pte is young, of a `VM_LOCKED`
    /// area, active, or locked for I/O by `TryLockPage`) takes pages from a task
    /// asleep in a page fault and spares only the pages being read. Sparing the
    /// queued processes instead would let the queue's head wait forever for pages
    /// that only a process queued behind it holds.
    fn make_room(&mut self, node: u32, need: i64, except: Pid, now: SimTime) -> bool {
        while self.nodes[node as usize].free_kb < need {
            let victim = self.nodes[node as usize]
                .procs
                .iter()
                .copied()
                .filter(|&q| {
                    let p = &self.procs[q as usize];
                    q != except && !p.reading && !p.pinned && p.resident_kb > 0
                })
                .min_by_key(|&q| {
                    let p = &self.procs[q as usize];
                    (matches!(p.state, PState::Running(_)), p.last_ran, q)
                });
            let Some(v) = victim else { break };
            let short = need - self.nodes[node as usize].free_kb;
            let take = short.min(self.procs[v as usize].resident_kb);
            self.procs[v as usize].resident_kb -= take;
            let disk = self.disk_time(take);
            let n = &mut self.nodes[node as usize];
            n.free_kb += take;
            let start = n.disk_free_at.max(now);
            let done = start + disk;
            n.disk_free_at = done;
            self.debug_check_memory(node);
            self.record_disk(node, v, start, done, SegmentKind::SwapOut);
            self.counters.paged_out_kb += take;
        }
        self.nodes[node as usize].free_kb >= need
    }

    /// `pid` was picked with pages missing: it blocks until they are read back.
    fn page_in(&mut self, node: u32, pid: Pid, now: SimTime) {
        self.nodes[node as usize]
            .sched
            .stop(pid, SimTime::ZERO, Stop::Blocked, now);
        self.set_state(pid, PState::Blocked, now);
        let p = &mut self.procs[pid as usize];
        p.paging = true;
        p.blocked_at = now;
        self.hook_dequeue(pid, DequeueReason::PageIn, now);
        self.nodes[node as usize].page_queue.push_back(pid);
        self.pump_paging(node, now);
    }

    /// How long the node's disk takes to read or write `kb` KB.
    fn disk_time(&self, kb: i64) -> SimTime {
        SimTime::from_secs_f64(kb as f64 / 1000.0 / self.plat.disk_mb_s)
    }

    /// Starts the disk reads of waiting page-ins, in order, while memory can be made
    /// (the pages taken for one are written out before its read). The fresh part of
    /// a footprint is not read: a page-in of fresh pages only ends when the frames
    /// it takes are written out.
    fn pump_paging(&mut self, node: u32, now: SimTime) {
        while let Some(&pid) = self.nodes[node as usize].page_queue.front() {
            let p = &self.procs[pid as usize];
            let (missing, read) = (p.mem_kb - p.resident_kb, p.mem_kb - p.resident_kb - p.fresh_kb);
            if !self.make_room(node, missing, pid, now) {
                return;
            }
            let disk = self.disk_time(read);
            let n = &mut self.nodes[node as usize];
            n.page_queue.pop_front();
            n.free_kb -= missing;
            let start = n.disk_free_at.max(now);
            let done = start + disk;
            n.disk_free_at = done;
            let p = &mut self.procs[pid as usize];
            p.resident_kb = p.mem_kb;
            p.fresh_kb = 0;
            p.reading = true;
            self.debug_check_memory(node);
            if read > 0 {
                self.record_disk(node, pid, start, done, SegmentKind::PageIn);
            }
            self.counters.page_ins += 1;
            self.counters.paged_in_kb += read;
            self.q
                .schedule(done, Ev::PageDone { to: pid })
                .expect("future");
        }
    }

    fn dispatch(&mut self, node: u32, cpu: u32, pick: Pick, now: SimTime) {
        let pid = pick.pid;
        debug_assert_eq!(
            self.procs[pid as usize].state,
            PState::Ready,
            "a process runs on one CPU at a time"
        );
        debug_assert!(
            self.nodes[node as usize].cpus[cpu as usize].cur.is_none(),
            "a CPU runs one process at a time"
        );
        self.inversion_dispatch(node, pid, now);
        if pick.followed_hint {
            self.counters.hints_followed += 1;
        }
        if std::mem::take(&mut self.procs[pid as usize].boost_until_run) {
            self.nodes[node as usize].sched.unboost(pid);
        }
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        let switch = if c.last == Some(pid) { 0 } else { self.cs_ns };
        if switch > 0 {
            self.counters.context_switches += 1;
        }
        c.cur = Some(pid);
        c.last = Some(pid);
        let unpinned = std::mem::take(&mut self.procs[pid as usize].pinned);
        c.dispatched_at = now;
        c.acct_at = now;
        c.since = now + SimTime(switch);
        c.slice_end = now + SimTime(switch) + pick.slice;
        self.set_state(pid, PState::Running(cpu), now);
        if self.nodes[node as usize].ops.contains(Ops::RUNNING) {
            self.with_policy(node, now, Apply::Deferred, |p, v, out| {
                p.running(v, pid, out)
            });
        }
        // A waiting process re-checks its condition when it gets the CPU back.
        if let Some(w) = self.procs[pid as usize].wait {
            if w.cond != Cond::Io && self.satisfied(pid, w.cond) {
                self.procs[pid as usize].wait = None;
                self.resume_after_wait(pid, w.cond);
                self.hook_wait_end(pid, w, WaitEndCause::Dispatched, now);
            } else if w.cond != Cond::Io {
                self.answer_rts(pid, w.cond, now);
            }
        }
        if unpinned {
            self.pump_paging(node, now);
        }
        self.plan(node, cpu, now);
    }

    /// Charges the time since the last accounting to the CPU's running process.
    fn account(&mut self, node: u32, cpu: u32, now: SimTime) {
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        let Some(pid) = c.cur else { return };
        let (from, progress_from) = (c.acct_at, c.since.min(now));
        c.busy_ns += (now - c.acct_at).as_ns();
        c.acct_at = now;
        let elapsed = (now - c.since).as_ns().max(0);
        c.since = c.since.max(now);
        let p = &mut self.procs[pid as usize];
        p.cpu_ns += elapsed;
        let used = elapsed.min(p.cpu_left.max(0));
        p.cpu_left -= used;
        self.counters.useful_ns += used;
        if let Some(pt) = &mut self.perturb {
            pt.on_progress(pid, used);
        }
        if let Some(g) = &mut self.gang {
            g.est.on_progress(pid, used, now);
        }
        let spun = elapsed - used;
        p.spin_ns += spun;
        self.counters.spin_ns += spun;
        if let Some(t) = &mut self.timeline {
            let (job, rank) = (p.job, p.rank);
            let mut seg = |start: SimTime, end: SimTime, kind| {
                if end > start {
                    t.push(Segment {
                        node,
                        cpu: Some(cpu),
                        pid,
                        job,
                        rank,
                        start,
                        end,
                        kind,
                    });
                }
            };
            seg(from, progress_from, SegmentKind::Switch);
            let u = progress_from.max(from) + SimTime(used);
            seg(progress_from.max(from), u, SegmentKind::Useful);
            seg(u, now, SegmentKind::Spin);
        }
    }

    fn record_disk(
        &mut self,
        node: u32,
        pid: Pid,
        start: SimTime,
        end: SimTime,
        kind: SegmentKind,
    ) {
        if let Some(t) = &mut self.timeline {
            let p = &self.procs[pid as usize];
            t.push(Segment {
                node,
                cpu: None,
                pid,
                job: p.job,
                rank: p.rank,
                start,
                end,
                kind,
            });
        }
    }

    /// Plans the running process's next segment: runs ops that need no time,
    /// then schedules the end of its CPU work, spin deadline or slice.
    fn plan(&mut self, node: u32, cpu: u32, now: SimTime) {
        let Some(pid) = self.nodes[node as usize].cpus[cpu as usize].cur else {
            return;
        };
        if self.procs[pid as usize].wait.is_none() && self.procs[pid as usize].cpu_left == 0 {
            self.step(pid, now);
        }
        let c = self.nodes[node as usize].cpus[cpu as usize];
        if c.cur != Some(pid) {
            return; // it blocked or finished; the CPU was refilled
        }
        let p = &self.procs[pid as usize];
        let mut end = c.slice_end;
        if p.cpu_left > 0 {
            end = end.min(c.since + SimTime(p.cpu_left));
        } else if let Some(Waiting {
            mode: WaitMode::SpinBlock(spin),
            since,
            ..
        }) = p.wait
        {
            end = end.min((since + spin).max(now));
        } else if let Some(Waiting {
            mode: WaitMode::Block,
            ..
        }) = p.wait
        {
            // Woken by a rendezvous request it has now answered: it sleeps again.
            end = now;
        }
        let at = end.max(now);
        let id = self.q.reserve(at).expect("future");
        self.segs
            .set((node * self.plat.cpus_per_node + cpu) as usize, at, id.0);
    }

    fn seg_end(&mut self, node: u32, cpu: u32, now: SimTime) {
        self.account(node, cpu, now);
        let c = self.nodes[node as usize].cpus[cpu as usize];
        let pid = c.cur.expect("segment of a running process");
        let (cpu_left, wait) = (
            self.procs[pid as usize].cpu_left,
            self.procs[pid as usize].wait,
        );
        if cpu_left == 0 && wait.is_none() {
            self.step(pid, now);
            if self.nodes[node as usize].cpus[cpu as usize].cur != Some(pid) {
                return;
            }
        } else if let Some(Waiting {
            mode: WaitMode::SpinBlock(spin),
            since,
            ..
        }) = wait
        {
            if now >= since + spin {
                self.block(pid, now);
                return;
            }
        } else if let Some(Waiting {
            mode: WaitMode::Block,
            ..
        }) = wait
        {
            if cpu_left == 0 {
                self.block(pid, now);
                return;
            }
        }
        if now >= c.slice_end {
            self.release_cpu(node, cpu, pid, Stop::Expired, now);
            self.nodes[node as usize]
                .sched
                .enqueue(pid, Wake::Expired, now);
            self.schedule(node, now);
        } else {
            self.plan(node, cpu, now);
        }
    }

    /// Takes `pid` off its CPU (accounted up to now) and tells the native scheduler.
    /// The process becomes ready (preempted, expired: the caller queues it again) or
    /// blocked (it sleeps or ends: the caller says why).
    fn release_cpu(&mut self, node: u32, cpu: u32, pid: Pid, why: Stop, now: SimTime) {
        self.inversion_settle(node, now);
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        let ran = now - c.dispatched_at;
        self.procs[pid as usize].last_ran = now;
        c.cur = None;
        self.segs
            .clear((node * self.plat.cpus_per_node + cpu) as usize);
        if let Some(g) = &mut self.gang {
            if g.flex_ran(pid, self.procs[pid as usize].job, ran, now) {
                self.counters.gang_fragment_ns += ran.as_ns();
            }
        }
        let state = match why {
            Stop::Preempted | Stop::Expired => PState::Ready,
            Stop::Blocked => PState::Blocked,
        };
        self.set_state(pid, state, now);
        self.nodes[node as usize].sched.stop(pid, ran, why, now);
        if self.nodes[node as usize].ops.contains(Ops::STOPPING) {
            self.with_policy(node, now, Apply::Deferred, |p, v, out| {
                p.stopping(v, pid, why, out)
            });
        }
    }

    /// Moves `pid` to `state`, recording on the timeline the ready or blocked
    /// interval it leaves.
    fn set_state(&mut self, pid: Pid, state: PState, now: SimTime) {
        let p = &mut self.procs[pid as usize];
        if let Some(t) = &mut self.timeline {
            let kind = match p.state {
                PState::Ready => Some(SegmentKind::Ready),
                PState::Blocked => Some(SegmentKind::Blocked),
                PState::Running(_) | PState::Done => None,
            };
            if let Some(kind) = kind.filter(|_| now > p.state_since) {
                t.push(Segment {
                    node: p.node,
                    cpu: None,
                    pid,
                    job: p.job,
                    rank: p.rank,
                    start: p.state_since,
                    end: now,
                    kind,
                });
            }
        }
        p.state = state;
        p.state_since = now;
    }

    /// The policy's `enqueue` op, if it has it: `pid` becomes runnable.
    fn hook_enqueue(&mut self, pid: Pid, why: EnqueueReason, now: SimTime) {
        let node = self.procs[pid as usize].node;
        if self.nodes[node as usize].ops.contains(Ops::ENQUEUE) {
            self.with_policy(node, now, Apply::Deferred, |p, v, out| {
                p.enqueue(v, pid, why, out)
            });
        }
    }

    /// The policy's `dequeue` op, if it has it: `pid` leaves the runnable set.
    fn hook_dequeue(&mut self, pid: Pid, why: DequeueReason, now: SimTime) {
        let node = self.procs[pid as usize].node;
        if self.nodes[node as usize].ops.contains(Ops::DEQUEUE) {
            self.with_policy(node, now, Apply::Deferred, |p, v, out| {
                p.dequeue(v, pid, why, out)
            });
        }
    }

    /// Debug builds: the node's memory accounting is consistent after a change (no
    /// negative free, resident or committed memory; free plus resident memory is the
    /// node's job memory; resident memory never exceeds a footprint).
    fn debug_check_memory(&self, node: u32) {
        if !cfg!(debug_assertions) {
            return;
        }
        let n = &self.nodes[node as usize];
        assert!(n.free_kb >= 0, "node {node}: {} KB free", n.free_kb);
        assert!(
            n.committed_kb >= 0,
            "node {node}: {} KB committed",
            n.committed_kb
        );
        let mut resident = 0;
        for &q in &n.procs {
            let p = &self.procs[q as usize];
            assert!(
                (0..=p.mem_kb - p.fresh_kb).contains(&p.resident_kb) && p.fresh_kb >= 0,
                "pid {q}: {} KB resident and {} KB fresh of {} KB",
                p.resident_kb,
                p.fresh_kb,
                p.mem_kb
            );
            resident += p.resident_kb;
        }
        assert_eq!(
            n.free_kb + resident,
            kb(self.plat.job_memory_mb),
            "node {node}: free + resident memory is the node's job memory"
        );
    }

    // ----- program execution ---------------------------------------------

    /// Executes operations of a running process that has no CPU work left, until
    /// it needs CPU time, waits, blocks or ends.
    // Longer than the function-length cap (clippy.toml): the program IR interpreter, one arm per op; to be split with process/mod.rs.
    #[allow(clippy::too_many_lines)]
    fn step(&mut self, pid: Pid, now: SimTime) {
        loop {
            let p = &mut self.procs[pid as usize];
            debug_assert!(p.cpu_left == 0 && p.wait.is_none());
            if let After::Depart {
                to,
                bytes,
                tag,
                blocking,
            } = std::mem::replace(&mut p.after, After::Next)
            {
                self.depart(pid, to, bytes, tag, blocking, now);
                if blocking && self.procs[pid as usize].acks_pending > 0 {
                    self.begin_wait(pid, Cond::Ack, WaitKind::SendAck, now);
                    return;
                }
                continue;
            }
            let Some(op) = self.next_op(pid) else {
                let (node, cpu) = self.where_running(pid);
                self.release_cpu(node, cpu, pid, Stop::Blocked, now);
                self.hook_dequeue(pid, DequeueReason::Finished, now);
                self.finish_rank(pid, now);
                self.schedule(node, now);
                return;
            };
            let p = &mut self.procs[pid as usize];
            match op {
                Op::Compute { ns } => {
                    let ns = match &mut p.noise {
                        Some((rng, sigma)) => noisy(ns, *sigma, rng),
                        None => ns.max(0),
                    };
                    let ns = ns + self.os_noise_extra(pid, ns, now);
                    self.counters.compute_ns += ns;
                    self.procs[pid as usize].compute_ns += ns;
                    if ns > 0 {
                        self.procs[pid as usize].cpu_left = ns;
                        return;
                    }
                }
                Op::Burst { mean_ns, k } => {
                    let (job, rank) = (p.job, p.rank);
                    let streams = &self.streams;
                    let rng = p
                        .bursts
                        .get_or_insert_with(|| streams.stream(&format!("burst/{job}/{rank}")));
                    let ns = erlang(mean_ns, k, rng);
                    self.counters.compute_ns += ns;
                    p.compute_ns += ns;
                    if ns > 0 {
                        p.cpu_left = ns;
                        return;
                    }
                }
                Op::Send { to, bytes, tag } | Op::Isend { to, bytes, tag } => {
                    p.after = After::Depart {
                        to,
                        bytes,
                        tag,
                        blocking: matches!(op, Op::Send { .. }),
                    };
                    if self.send_ns > 0 {
                        p.cpu_left = self.send_ns;
                        return;
                    }
                }
                Op::Reply { bytes, tag } => {
                    let to = p.last_from.expect("a reply follows a receive");
                    p.after = After::Depart {
                        to,
                        bytes,
                        tag,
                        blocking: true,
                    };
                    if self.send_ns > 0 {
                        p.cpu_left = self.send_ns;
                        return;
                    }
                }
                Op::Recv { from, tag } => {
                    let cond = match p.untils.last() {
                        Some(&(_, stop)) => Cond::MsgOr { from, tag, stop },
                        None => Cond::Msg { from, tag },
                    };
                    if self.satisfied(pid, cond) {
                        self.resume_after_wait(pid, cond);
                        if self.procs[pid as usize].cpu_left > 0 {
                            return;
                        }
                    } else {
                        self.begin_wait(pid, cond, WaitKind::Recv, now);
                        return;
                    }
                }
                Op::Irecv { from, tag } => p.posted.push((from, tag)),
                Op::Wait => {
                    if self.satisfied(pid, Cond::Completion) {
                        self.resume_after_wait(pid, Cond::Completion);
                        if self.procs[pid as usize].cpu_left > 0 {
                            return;
                        }
                    } else {
                        let kind = if self.posted_matched(pid) {
                            WaitKind::SendCompletion
                        } else {
                            WaitKind::RecvCompletion
                        };
                        self.begin_wait(pid, Cond::Completion, kind, now);
                        return;
                    }
                }
                Op::CollBegin(_) | Op::CollEnd(_) => {
                    let node = p.node;
                    let enter = matches!(op, Op::CollBegin(_));
                    self.with_policy(node, now, Apply::NextPoint, |pol, v, out| {
                        pol.on_collective(v, pid, enter, out)
                    });
                }
                Op::Io { ns } => {
                    let node = p.node as usize;
                    let start = self.nodes[node].disk_free_at.max(now);
                    let done = start + SimTime(ns.max(0));
                    self.nodes[node].disk_free_at = done;
                    self.record_disk(node as u32, pid, start, done, SegmentKind::Io);
                    self.procs[pid as usize].wait = Some(Waiting {
                        cond: Cond::Io,
                        kind: None,
                        mode: WaitMode::Block,
                        since: now,
                        spin_at: 0,
                        blocked: false,
                    });
                    self.q
                        .schedule(done, Ev::IoDone { to: pid })
                        .expect("future");
                    self.block(pid, now);
                    return;
                }
                Op::Loop { .. } | Op::LoopUntil { .. } => {
                    unreachable!("next_op expands loops")
                }
            }
        }
    }

    /// The next operation of a process, expanding loops; `None` at the end.
    /// The OS noise a compute burst of `ns` that `pid` starts now meets ([`osnoise`]).
    fn os_noise_extra(&mut self, pid: Pid, ns: i64, now: SimTime) -> i64 {
        if !self.os_noise.is_on() {
            return 0;
        }
        let p = &mut self.procs[pid as usize];
        let phase = self.nodes[p.node as usize].tick_phase;
        let (job, rank, streams) = (p.job, p.rank, &self.streams);
        let rng = p
            .os_noise_rng
            .get_or_insert_with(|| streams.stream(&format!("os-noise/{job}/{rank}")));
        self.os_noise.extra(ns, now, phase, rng)
    }

    fn next_op(&mut self, pid: Pid) -> Option<Op> {
        let p = &mut self.procs[pid as usize];
        loop {
            if let Some(&(start, end, left)) = p.loops.last() {
                if p.pc == end {
                    if p.untils
                        .last()
                        .is_some_and(|&(d, _)| d + 1 == p.loops.len())
                    {
                        p.pc = start; // a LoopUntil repeats until its stop message
                    } else if left > 0 {
                        p.loops.last_mut().expect("nonempty").2 -= 1;
                        p.pc = start;
                    } else {
                        p.loops.pop();
                    }
                    continue;
                }
            }
            let op = *p.ops.get(p.pc)?;
            p.pc += 1;
            if let Op::Loop { count, len } = op {
                if count == 0 || len == 0 {
                    p.pc += len as usize;
                } else {
                    p.loops.push((p.pc, p.pc + len as usize, count - 1));
                }
                continue;
            }
            if let Op::LoopUntil { stop_tag, len } = op {
                if len > 0 {
                    p.untils.push((p.loops.len(), stop_tag));
                    p.loops.push((p.pc, p.pc + len as usize, 0));
                }
                continue;
            }
            return Some(op);
        }
    }

    fn where_running(&self, pid: Pid) -> (u32, u32) {
        let p = &self.procs[pid as usize];
        match p.state {
            PState::Running(cpu) => (p.node, cpu),
            _ => (p.node, u32::MAX),
        }
    }

    fn find_msg(&self, pid: Pid, from: Option<Rank>, tag: u32, skip: &[usize]) -> Option<usize> {
        self.procs[pid as usize]
            .mailbox
            .iter()
            .enumerate()
            .position(|(k, &(f, t))| t == tag && from.is_none_or(|x| x == f) && !skip.contains(&k))
    }

    fn satisfied(&self, pid: Pid, cond: Cond) -> bool {
        let p = &self.procs[pid as usize];
        match cond {
            Cond::Msg { from, tag } => self.find_msg(pid, from, tag, &[]).is_some(),
            Cond::MsgOr { from, tag, stop } => {
                self.find_msg(pid, from, tag, &[]).is_some()
                    || self.find_msg(pid, from, stop, &[]).is_some()
            }
            Cond::Ack => p.acks_pending == 0,
            Cond::Completion => {
                p.acks_pending == 0 && p.sends_pending == 0 && self.posted_matched(pid)
            }
            Cond::Io => false,
        }
    }

    /// Whether every posted non-blocking receive of `pid` has a distinct buffered
    /// message to complete it.
    fn posted_matched(&self, pid: Pid) -> bool {
        let p = &self.procs[pid as usize];
        match p.posted.as_slice() {
            [] => return true,
            &[(from, tag)] => return self.find_msg(pid, from, tag, &[]).is_some(),
            _ => {}
        }
        let mut used = Vec::with_capacity(p.posted.len());
        for &(from, tag) in &p.posted {
            match self.find_msg(pid, from, tag, &used) {
                Some(k) => used.push(k),
                None => return false,
            }
        }
        true
    }

    /// The condition holds: consume what it waited for and charge the CPU cost.
    fn resume_after_wait(&mut self, pid: Pid, cond: Cond) {
        match cond {
            Cond::Msg { from, tag } => self.consume(pid, from, tag),
            Cond::MsgOr { from, tag, stop } => {
                // The earlier of the two kinds in arrival order.
                let p = &self.procs[pid as usize];
                let first = p
                    .mailbox
                    .iter()
                    .find(|&&(f, t)| (t == tag || t == stop) && from.is_none_or(|x| x == f))
                    .map(|&(_, t)| t)
                    .expect("a matching message is buffered");
                self.consume(pid, from, first);
                if first == stop {
                    // Leave the innermost LoopUntil: resume after its body.
                    let p = &mut self.procs[pid as usize];
                    let (depth, _) = p.untils.pop().expect("inside a LoopUntil");
                    p.pc = p.loops[depth].1;
                    p.loops.truncate(depth);
                }
            }
            Cond::Completion => {
                for (from, tag) in std::mem::take(&mut self.procs[pid as usize].posted) {
                    self.consume(pid, from, tag);
                }
            }
            Cond::Ack | Cond::Io => {}
        }
    }

    /// Takes the first matching message out of `pid`'s buffer, paying the receive overhead.
    fn consume(&mut self, pid: Pid, from: Option<Rank>, tag: u32) {
        let k = self
            .find_msg(pid, from, tag, &[])
            .expect("a matching message is buffered");
        let p = &mut self.procs[pid as usize];
        let (f, _) = p.mailbox.remove(k);
        p.last_from = Some(f);
        p.cpu_left += self.recv_ns;
        self.counters.consumed += 1;
    }

    fn begin_wait(&mut self, pid: Pid, cond: Cond, kind: WaitKind, now: SimTime) {
        let node = self.procs[pid as usize].node;
        // Inside an MPI call, on its CPU: answer the rendezvous its receives match.
        self.answer_rts(pid, cond, now);
        let mode = {
            let view = View {
                now,
                node: &self.nodes[node as usize],
                procs: &self.procs,
            };
            self.policies[node as usize].wait_mode(&view, pid, kind)
        };
        self.procs[pid as usize].wait = Some(Waiting {
            cond,
            kind: Some(kind),
            mode,
            since: now,
            spin_at: self.procs[pid as usize].spin_ns,
            blocked: false,
        });
        self.with_policy(node, now, Apply::NextPoint, |pol, v, out| {
            pol.on_wait_begin(v, pid, kind, out)
        });
        if mode == WaitMode::Block && self.procs[pid as usize].wait.is_some() {
            self.block(pid, now);
        }
        self.check_program_deadlock(pid, now);
    }

    /// The running process `pid` gives up its CPU and sleeps.
    fn block(&mut self, pid: Pid, now: SimTime) {
        let (node, cpu) = self.where_running(pid);
        if cpu == u32::MAX {
            return;
        }
        self.account(node, cpu, now);
        self.release_cpu(node, cpu, pid, Stop::Blocked, now);
        if let Some(g) = &mut self.gang {
            g.flex_blocked(pid);
        }
        let p = &mut self.procs[pid as usize];
        p.blocked_at = now;
        if let Some(w) = &mut p.wait {
            w.blocked = true;
        }
        let why = match p.wait {
            Some(Waiting {
                kind: Some(kind), ..
            }) => DequeueReason::Blocked(kind),
            _ => DequeueReason::Io,
        };
        self.hook_dequeue(pid, why, now);
        self.schedule(node, now);
    }

    /// Wakes a blocked process (NIC interrupt or disk completion).
    fn wake(&mut self, pid: Pid, why: EnqueueReason, now: SimTime) {
        let p = &self.procs[pid as usize];
        if p.state != PState::Blocked || p.paging {
            return;
        }
        self.set_state(pid, PState::Ready, now);
        let p = &mut self.procs[pid as usize];
        p.cpu_left += self.interrupt_ns;
        let slept = now - p.blocked_at;
        let node = p.node;
        self.counters.interrupts += 1;
        self.hook_enqueue(pid, why, now);
        self.nodes[node as usize]
            .sched
            .enqueue(pid, Wake::Woken { slept }, now);
        if !self.preempt_for(node, pid, now) {
            self.flex_preempt(pid, now);
        }
        self.schedule(node, now);
    }

    /// Wake-up preemption for the runnable `pid`: when every CPU is busy, the first
    /// running process the native scheduler ranks lower is preempted (the caller
    /// then refills the CPU with [`Sim::schedule`]). Returns whether one was.
    fn preempt_for(&mut self, node: u32, pid: Pid, now: SimTime) -> bool {
        let n = &self.nodes[node as usize];
        if n.cpus.iter().any(|c| c.cur.is_none()) {
            return false;
        }
        let victim = n.cpus.iter().enumerate().find_map(|(k, c)| {
            let r = c.cur.expect("all busy");
            n.sched
                .should_preempt(pid, r, now - c.dispatched_at)
                .then_some((k as u32, r))
        });
        let Some((cpu, r)) = victim else {
            return false;
        };
        self.account(node, cpu, now);
        self.release_cpu(node, cpu, r, Stop::Preempted, now);
        self.nodes[node as usize]
            .sched
            .enqueue(r, Wake::Preempted, now);
        true
    }

    /// A message, acknowledgement or completion changed what `pid` may be waiting for.
    fn condition_changed(&mut self, pid: Pid, now: SimTime) {
        let Some(w) = self.procs[pid as usize].wait else {
            return;
        };
        if w.cond == Cond::Io {
            return;
        }
        if !self.satisfied(pid, w.cond) {
            self.check_program_deadlock(pid, now);
            return;
        }
        match self.procs[pid as usize].state {
            PState::Running(cpu) => {
                let node = self.procs[pid as usize].node;
                self.account(node, cpu, now);
                self.procs[pid as usize].wait = None;
                self.resume_after_wait(pid, w.cond);
                self.plan(node, cpu, now);
                self.hook_wait_end(pid, w, WaitEndCause::Spinning, now);
            }
            PState::Blocked => {
                self.procs[pid as usize].wait = None;
                self.resume_after_wait(pid, w.cond);
                self.wake(pid, EnqueueReason::Woken, now);
                self.hook_wait_end(pid, w, WaitEndCause::Woken, now);
            }
            // Queued while spinning: it notices when it runs again.
            PState::Ready | PState::Done => {}
        }
    }
}

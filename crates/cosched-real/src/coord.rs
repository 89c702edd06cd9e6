//! The gang coordinator of real execution across nodes (under Slurm): cosched's
//! own gang scheduling at quanta of tens to hundreds of milliseconds.
//!
//! Algorithm: the simulator's gang slot policy object
//! (`cosched_policies::process::gang::Gang`, picked by the same `gang[...]`
//! string; `--rows R --quantum-ms Q` is short for
//! `gang[rows=R,quantum_ms=Q,switch_us=0]`) in the real-time host
//! [`crate::slothost`], with one column per node agent that connected. A job
//! is declared by the agents of its nodes ([`ToCoord::Job`] with the step's
//! node count; the SPANK plugin declares it on every node of the step); once
//! all of its nodes declared it, it arrives at the policy, which admits it
//! (FCFS) into the first row whose cells on exactly those nodes are free (the
//! resource manager chose the nodes: the view answers that the job fits only
//! on them; the policy chooses the row). A job the policy has not admitted
//! runs outside the matrix (in every slot, never frozen). The host runs the
//! policy `lead` ahead of CLOCK_REALTIME: each slot the policy decides (its
//! timers, an arrival, an end) is sent to every agent as a schedule that
//! starts `lead` later ([`ToAgent::Schedule`]: from that instant, its jobs'
//! rows and the active row, until the next one); the agents switch at the
//! agreed times by their own clocks ([`crate::gangnet`]). A global switch's
//! idle time (`switch_us`) is a schedule whose active row no job has (every
//! placed job frozen). Heartbeats every lease/4 keep the agents' lease; on
//! exit (SIGTERM, SIGINT, SIGHUP) the coordinator sends every agent a
//! release, which thaws every job.
//!
//! Message forwarding: an agent reports the jobs declared on its node whose
//! MESSAGE events cross nodes ([`ToCoord::Forward`]) and the ranks of those
//! jobs it serves ([`ToCoord::Rank`]); a batch of such events from one agent
//! ([`ToCoord::Messages`]) is split by destination: each entry goes to the
//! other agents that reported its (job, rank), or, while none did (a rank
//! that has not registered yet), to every other agent that reported the job;
//! one [`ToAgent::Messages`] line per receiving agent and batch. The receiving
//! agent applies an entry to its ranks of that number, if it has any.
//!
//! Parameters: `policy` (the gang policy string; its `rows` should be at
//! least Slurm's over-subscription MPL, more leave room for fragmentation),
//! `lead` (how far ahead a schedule is sent: more than the channel's
//! latency), `lease` (how long an agent keeps switching without hearing from
//! the coordinator), `max_nodes` and `max_jobs` (the policy's columns and the
//! jobs it holds at once; more are refused with an error in the log).

use crate::gangnet::{line, realtime_ns, MsgEntry, Schedule, ToAgent, ToCoord};
use crate::slothost::{gang_policy, Key, Slot, SlotHost, SlotMechanism};
use nix::sys::signal::{SigSet, Signal};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

/// How the coordinator runs.
#[derive(Clone, Debug)]
pub struct CoordOptions {
    /// Address to listen on (default 127.0.0.1:7460).
    pub listen: String,
    /// The gang slot policy, `gang[...]`.
    pub policy: String,
    pub lead_ns: u64,
    pub lease_ns: u64,
    /// Columns of the policy's matrix: node agents at most.
    pub max_nodes: u32,
    /// Jobs the policy holds at once at most.
    pub max_jobs: usize,
}

/// The default of [`CoordOptions::max_nodes`].
pub const MAX_NODES: u32 = 1024;
/// The default of [`CoordOptions::max_jobs`].
pub const MAX_JOBS: usize = 4096;

impl CoordOptions {
    /// `gang[rows=R,quantum_ms=Q,switch_us=0]`: the matrix of `rows` rows and
    /// slots of `quantum_ns`, switching without idle time.
    pub fn gang(rows: usize, quantum_ns: u64) -> String {
        format!(
            "gang[rows={rows},quantum_ms={},switch_us=0]",
            quantum_ns as f64 / 1e6
        )
    }
}

enum Ev {
    Conn(u64, TcpStream),
    Msg(u64, ToCoord),
    Closed(u64),
    Stop,
}

struct Job {
    nnodes: u32,
    /// Nodes (columns) whose agents declare the job now.
    nodes: BTreeSet<u32>,
}

/// The slot policy's mechanism under Slurm: the jobs as the agents declared
/// them (a job fits only on its own nodes, which it starts on), and the slots
/// to send.
#[derive(Default)]
struct Declared {
    jobs: BTreeMap<i32, Job>,
    outbox: Vec<Slot>,
}

impl SlotMechanism for Declared {
    fn eligible(&self, key: Key, node: u32) -> bool {
        self.jobs
            .get(&(key as i32))
            .is_some_and(|j| j.nodes.contains(&node))
    }

    fn choose(&mut self, key: Key, among: &[u32], size: usize) -> Result<Vec<u32>, String> {
        let nodes: Vec<u32> = self
            .jobs
            .get(&(key as i32))
            .map(|j| j.nodes.iter().copied().collect())
            .unwrap_or_default();
        if nodes.len() != size || nodes.iter().any(|n| !among.contains(n)) {
            return Err(format!(
                "its nodes {nodes:?} are not {size} of the policy's {among:?}"
            ));
        }
        Ok(nodes)
    }

    /// The job runs already (Slurm started it); the slot of this instant
    /// says whether it keeps running.
    fn start(&mut self, key: Key, nodes: &[u32], row: Option<usize>, _run: bool) -> Result<(), String> {
        match row {
            Some(r) => eprintln!("cosched-coord: job {key} on columns {nodes:?} placed in row {r}"),
            None => eprintln!("cosched-coord: job {key} on columns {nodes:?} admitted"),
        }
        Ok(())
    }

    fn slot(&mut self, slot: &Slot) -> Result<(), String> {
        self.outbox.push(slot.clone());
        Ok(())
    }
}

/// The active row of a schedule during a switch or a stop: no job has it.
const NO_ROW: u32 = u32::MAX;

/// The coordinator's state: the policy's host, the agents.
pub struct Coord {
    opts: CoordOptions,
    host: SlotHost<Declared>,
    /// The policy's column of each node.
    cols: HashMap<String, u32>,
    conns: HashMap<u64, (Option<u32>, TcpStream)>,
    /// The last schedule sent on each connection.
    sent: HashMap<u64, Schedule>,
    /// Connections that reported each forwarding job.
    forward: BTreeMap<i32, BTreeSet<u64>>,
    /// Connections that reported each (job, rank) of a forwarding job.
    placed: BTreeMap<(i32, i32), BTreeSet<u64>>,
    /// MESSAGE events relayed (counted once per receiving agent).
    pub relayed: u64,
    /// Decisions of the policy that could not be carried out (logged).
    pub errors: u64,
}

impl Coord {
    pub fn new(opts: CoordOptions) -> Result<Coord, String> {
        let params = gang_policy(&opts.policy, false)?;
        let f = cosched_policies::process::gang::factory(params);
        Ok(Coord {
            host: SlotHost::new(&f, opts.max_nodes, opts.max_jobs, Declared::default()),
            opts,
            cols: HashMap::new(),
            conns: HashMap::new(),
            sent: HashMap::new(),
            forward: BTreeMap::new(),
            placed: BTreeMap::new(),
            relayed: 0,
            errors: 0,
        })
    }

    /// The host's clock: CLOCK_REALTIME plus the lead.
    fn clock(&self) -> u64 {
        realtime_ns() + self.opts.lead_ns
    }

    /// The next instant (CLOCK_REALTIME) the host's timers need a call of
    /// [`Self::tick`].
    pub fn next_wake(&self) -> Option<u64> {
        self.host
            .next_wake()
            .map(|t| t.saturating_sub(self.opts.lead_ns))
    }

    /// Fires the policy's timers due by `now` (the host's clock) and sends
    /// the slots.
    pub fn tick(&mut self, now: u64) {
        let r = self.host.advance(now);
        self.done(r);
    }

    /// Logs a refused decision, then sends what the policy decided.
    fn done(&mut self, r: Result<(), String>) {
        if let Err(e) = r {
            self.errors += 1;
            eprintln!("cosched-coord: error: gang slot policy: {e}");
        }
        let slots = std::mem::take(&mut self.host.mech.outbox);
        for s in &slots {
            let ids: Vec<u64> = self.conns.keys().copied().collect();
            for id in ids {
                self.send_slot(id, s);
            }
        }
    }

    /// Handles one message of connection `id` at `now` (the host's clock).
    pub fn on_msg_at(&mut self, id: u64, m: ToCoord, now: u64) {
        match m {
            ToCoord::Hello { node } => {
                let n = self.cols.len() as u32;
                let col = *self.cols.entry(node.clone()).or_insert(n);
                if col >= self.opts.max_nodes {
                    self.cols.remove(&node);
                    self.errors += 1;
                    eprintln!(
                        "cosched-coord: error: node {node}: the policy has {} columns; its jobs are not gang-scheduled",
                        self.opts.max_nodes
                    );
                    return;
                }
                // A node that reconnects replaces its old connection.
                let old: Vec<u64> = self
                    .conns
                    .iter()
                    .filter(|(&k, (c, _))| k != id && *c == Some(col))
                    .map(|(&k, _)| k)
                    .collect();
                for k in old {
                    self.closed_at(k, now);
                }
                if let Some(c) = self.conns.get_mut(&id) {
                    c.0 = Some(col);
                }
                eprintln!("cosched-coord: node {node} connected (column {col})");
                // The new agent needs the current schedule of its jobs (none yet).
                self.send_schedule(id);
            }
            ToCoord::Job { job, nnodes } => {
                let Some(col) = self.conns.get(&id).and_then(|c| c.0) else {
                    return;
                };
                let j = self.host.mech.jobs.entry(job).or_insert(Job {
                    nnodes,
                    nodes: BTreeSet::new(),
                });
                j.nnodes = nnodes;
                let new_node = j.nodes.insert(col);
                let complete = j.nodes.len() as u32 >= j.nnodes;
                let again = new_node && self.host.row_of(Key::from(job)).is_some();
                if complete && !self.host.has(Key::from(job)) {
                    let r = self.host.arrive(Key::from(job), nnodes, "", now);
                    self.done(r);
                    if self.host.waiting(Key::from(job)) {
                        eprintln!(
                            "cosched-coord: job {job}: not admitted yet (no row has room on its nodes, or a job waits before it); it runs outside the matrix for now"
                        );
                    }
                } else if again {
                    // A node that reconnected reports a job the matrix still
                    // holds (its other nodes kept it there): this node needs
                    // the job's row again.
                    self.send_schedule(id);
                }
            }
            ToCoord::JobEnd { job } => {
                let Some(col) = self.conns.get(&id).and_then(|c| c.0) else {
                    return;
                };
                self.end_on(job, col, now);
            }
            ToCoord::Forward { job, on: true } => {
                self.forward.entry(job).or_default().insert(id);
            }
            ToCoord::Forward { job, on: false } => {
                if let Some(s) = self.forward.get_mut(&job) {
                    s.remove(&id);
                    if s.is_empty() {
                        self.forward.remove(&job);
                    }
                }
                self.placed.retain(|&(j, _), s| {
                    if j == job {
                        s.remove(&id);
                    }
                    !s.is_empty()
                });
            }
            ToCoord::Rank {
                job,
                rank,
                on: true,
            } => {
                self.placed.entry((job, rank)).or_default().insert(id);
            }
            ToCoord::Rank {
                job,
                rank,
                on: false,
            } => {
                if let Some(s) = self.placed.get_mut(&(job, rank)) {
                    s.remove(&id);
                    if s.is_empty() {
                        self.placed.remove(&(job, rank));
                    }
                }
            }
            ToCoord::Messages { to } => {
                self.relay(id, to);
            }
        }
    }

    /// Relays a batch of connection `from`: each entry to the other agents
    /// that serve its destination rank, or to every other agent of its job
    /// while none reported that rank.
    fn relay(&mut self, from: u64, to: Vec<MsgEntry>) {
        let mut out: BTreeMap<u64, Vec<MsgEntry>> = BTreeMap::new();
        for e in to {
            let dests = match self.placed.get(&(e.0, e.1)) {
                Some(s) if !s.is_empty() => s,
                _ => match self.forward.get(&e.0) {
                    Some(s) => s,
                    None => continue,
                },
            };
            for &id in dests {
                if id != from {
                    out.entry(id).or_default().push(e);
                }
            }
        }
        for (id, to) in out {
            self.relayed += to.iter().map(|e| e.2 as u64).sum::<u64>();
            self.send(id, &ToAgent::Messages { to });
        }
    }

    /// Job `job` ended on column `col`; its last end ends it for the policy.
    fn end_on(&mut self, job: i32, col: u32, now: u64) {
        let Some(j) = self.host.mech.jobs.get_mut(&job) else {
            return;
        };
        j.nodes.remove(&col);
        if !j.nodes.is_empty() {
            return;
        }
        self.host.mech.jobs.remove(&job);
        let row = self.host.row_of(Key::from(job));
        let r = self.host.end(Key::from(job), now);
        if let Some(r) = row {
            eprintln!("cosched-coord: job {job} left row {r}");
        }
        self.done(r);
    }

    /// A connection closed: its node's jobs end there.
    pub fn closed_at(&mut self, id: u64, now: u64) {
        let Some((col, _)) = self.conns.remove(&id) else {
            return;
        };
        self.sent.remove(&id);
        self.forward.retain(|_, s| {
            s.remove(&id);
            !s.is_empty()
        });
        self.placed.retain(|_, s| {
            s.remove(&id);
            !s.is_empty()
        });
        let Some(col) = col else { return };
        let jobs: Vec<i32> = self
            .host
            .mech
            .jobs
            .iter()
            .filter(|(_, j)| j.nodes.contains(&col))
            .map(|(&k, _)| k)
            .collect();
        for k in jobs {
            self.end_on(k, col, now);
        }
    }

    /// Sends the agent of connection `id` the last slot (always: a new or
    /// reconnected agent).
    fn send_schedule(&mut self, id: u64) {
        self.sent.remove(&id);
        if let Some(s) = self.host.last_slot().cloned() {
            self.send_slot(id, &s);
        }
    }

    /// Slot `s` as the agent of connection `id` runs it: from the slot's
    /// start, the active row and then the other non-empty rows in the
    /// matrix's cycle order, a quantum each, and the agent's jobs in the
    /// matrix with their rows. Not sent when the agent's last schedule
    /// already gives exactly that (plain gang between matrix changes: the
    /// agent switches by its own clock, no message per switch).
    fn send_slot(&mut self, id: u64, s: &Slot) {
        let Some((Some(col), _)) = self.conns.get(&id) else {
            return;
        };
        let col = *col;
        let active = s.row.map_or(NO_ROW, |r| r as u32);
        let jobs: BTreeMap<i32, u32> = s
            .rows
            .iter()
            .filter(|(k, _)| self.host.mech.eligible(*k, col))
            .map(|&(k, r)| {
                // A job's own row runs it; a job frozen in the active row
                // (the policy ran it on no node) gets a row that does not run.
                let row = if s.run.contains(&k) {
                    active
                } else if r as u32 == active {
                    NO_ROW - 1
                } else {
                    r as u32
                };
                (k as i32, row)
            })
            .collect();
        let mut cycle = vec![active];
        if let Some(r) = s.row {
            let rows = self.host.rows();
            let busy: BTreeSet<usize> = s.rows.iter().map(|&(_, r)| r).collect();
            cycle.extend(
                (1..rows)
                    .map(|k| (r + k) % rows)
                    .filter(|q| busy.contains(q))
                    .map(|q| q as u32),
            );
        }
        let next = Schedule {
            from_ns: s.since,
            quantum_ns: s.until.map_or(1 << 62, |u| u.saturating_sub(s.since).max(1)),
            cycle,
            jobs,
        };
        if self.sent.get(&id).is_some_and(|p| predicts(p, &next)) {
            return;
        }
        let m = ToAgent::Schedule {
            from_ns: next.from_ns,
            quantum_ns: next.quantum_ns,
            cycle: next.cycle.clone(),
            jobs: next.jobs.iter().map(|(&k, &r)| (k, r)).collect(),
            lease_ns: self.opts.lease_ns,
        };
        self.send(id, &m);
        self.sent.insert(id, next);
    }

    fn send(&mut self, id: u64, m: &ToAgent) {
        let ok = self
            .conns
            .get_mut(&id)
            .is_some_and(|(_, s)| s.write_all(&line(m)).is_ok());
        if !ok {
            // The reader thread reports the close; nothing more goes there.
            if let Some((_, s)) = self.conns.get(&id) {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    fn broadcast(&mut self, m: &ToAgent) {
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.send(id, m);
        }
    }
}

/// Whether an agent holding schedule `p` already runs `next`: the same jobs
/// and rows, and every slot of `next`'s cycle at the same instants.
fn predicts(p: &Schedule, next: &Schedule) -> bool {
    let q = next.quantum_ns;
    p.jobs == next.jobs
        && p.quantum_ns == q
        && p.cycle.len() == next.cycle.len()
        && next.from_ns >= p.from_ns
        && (next.from_ns - p.from_ns).is_multiple_of(q)
        && (0..next.cycle.len() as u64)
            .all(|k| p.row_at(next.from_ns + k * q) == Some(next.cycle[k as usize]))
}

/// Runs the coordinator until SIGTERM, SIGINT or SIGHUP; then every agent is
/// told to release (thaw) its jobs.
#[expect(clippy::too_many_lines, reason = "the coordinator's event loop: agents, slot schedules, heartbeats, forwarding and release in one loop")]
pub fn serve(opts: CoordOptions) -> Result<(), String> {
    if opts.lease_ns == 0 {
        return Err("the lease must be > 0".into());
    }
    let mut c = Coord::new(opts.clone())?;
    let listener =
        TcpListener::bind(&opts.listen).map_err(|e| format!("listen on {}: {e}", opts.listen))?;
    // Signals go to the signal thread only (the mask is inherited by the threads).
    let mut set = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(s);
    }
    set.thread_block().map_err(|e| format!("signals: {e}"))?;
    let (tx, rx) = mpsc::channel::<Ev>();
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = set.wait();
            let _ = tx.send(Ev::Stop);
        });
    }
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for (id, s) in listener.incoming().enumerate() {
                let Ok(s) = s else { continue };
                let id = id as u64;
                let _ = s.set_nodelay(true);
                let Ok(r) = s.try_clone() else { continue };
                if tx.send(Ev::Conn(id, s)).is_err() {
                    return;
                }
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for l in BufReader::new(r).lines() {
                        let Ok(l) = l else { break };
                        match serde_json::from_str::<ToCoord>(&l) {
                            Ok(m) => {
                                if tx.send(Ev::Msg(id, m)).is_err() {
                                    return;
                                }
                            }
                            Err(e) => eprintln!("cosched-coord: bad message {l:?}: {e}"),
                        }
                    }
                    let _ = tx.send(Ev::Closed(id));
                });
            }
        });
    }
    eprintln!(
        "cosched-coord: listening on {} (slot policy {}, lead {} ms)",
        opts.listen,
        c.host.name(),
        opts.lead_ns as f64 / 1e6
    );
    eprintln!("cosched-coord: policy {}", opts.policy);
    let beat = Duration::from_nanos(opts.lease_ns / 4).max(Duration::from_millis(1));
    // Heartbeats are due by the clock, not by a quiet channel: relayed
    // message batches may keep it busy all the time.
    let mut next_beat = std::time::Instant::now() + beat;
    loop {
        let now = std::time::Instant::now();
        if now >= next_beat {
            let lease_ns = c.opts.lease_ns;
            c.broadcast(&ToAgent::Heartbeat { lease_ns });
            next_beat = now + beat;
        }
        // Wake for the next heartbeat or the policy's next timer (a lead
        // time before it takes effect), whichever is first.
        let mut wait = next_beat.saturating_duration_since(now);
        if let Some(t) = c.next_wake() {
            wait = wait.min(Duration::from_nanos(t.saturating_sub(realtime_ns())));
        }
        match rx.recv_timeout(wait) {
            Ok(Ev::Conn(id, s)) => {
                c.conns.insert(id, (None, s));
            }
            Ok(Ev::Msg(id, m)) => {
                let t = c.clock();
                c.on_msg_at(id, m, t);
            }
            Ok(Ev::Closed(id)) => {
                let t = c.clock();
                c.closed_at(id, t);
            }
            Ok(Ev::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let t = c.clock();
        c.tick(t);
    }
    c.broadcast(&ToAgent::Release);
    for (_, s) in c.conns.values() {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
    if c.errors > 0 {
        eprintln!(
            "cosched-coord: {} decisions of the slot policy could not be carried out (see the errors above)",
            c.errors
        );
    }
    if c.relayed > 0 {
        eprintln!(
            "cosched-coord: relayed {} message events between nodes",
            c.relayed
        );
    }
    eprintln!("cosched-coord: stopped; every agent was told to thaw its jobs");
    Ok(())
}


#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn opts() -> CoordOptions {
        CoordOptions {
            listen: String::new(),
            policy: CoordOptions::gang(2, 100 * MS),
            lead_ns: 20 * MS,
            lease_ns: 1000 * MS,
            max_nodes: 8,
            max_jobs: 16,
        }
    }

    /// A coordinator with agents `cn0`, `cn1`, ... on connections 0, 1, ...
    /// (loopback pairs, so that schedules can be read back).
    fn with_nodes(n: u64) -> (Coord, Vec<TcpStream>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = Coord::new(opts()).unwrap();
        let mut keep = vec![];
        for id in 0..n {
            let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (server, _) = l.accept().unwrap();
            c.conns.insert(id, (None, server));
            keep.push(client);
            c.on_msg_at(
                id,
                ToCoord::Hello {
                    node: format!("cn{id}"),
                },
                0,
            );
        }
        (c, keep)
    }

    fn job(c: &mut Coord, id: u64, job: i32, nnodes: u32, t: u64) {
        c.on_msg_at(id, ToCoord::Job { job, nnodes }, t);
    }

    fn end(c: &mut Coord, id: u64, job: i32, t: u64) {
        c.on_msg_at(id, ToCoord::JobEnd { job }, t);
    }

    /// The lines a test agent got within 200 ms.
    fn lines_of(k: &mut TcpStream) -> Vec<ToAgent> {
        use std::io::Read;
        k.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = k.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8(got)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// A schedule in short: (from ms, quantum ms, cycle, jobs).
    type Short = (u64, u64, Vec<u32>, Vec<(i32, u32)>);

    /// Each schedule an agent got, in short.
    fn schedules(got: &[ToAgent]) -> Vec<Short> {
        got.iter()
            .filter_map(|m| match m {
                ToAgent::Schedule {
                    from_ns,
                    quantum_ns,
                    cycle,
                    jobs,
                    ..
                } => Some((from_ns / MS, quantum_ns / MS, cycle.clone(), jobs.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_job_is_placed_once_every_node_declared_it_and_rows_alternate() {
        let (mut c, mut k) = with_nodes(3);
        job(&mut c, 0, 10, 2, 0);
        assert!(!c.host.has(10));
        job(&mut c, 1, 10, 2, 0);
        // Job 10 on cn0, cn1: row 0, whose slot starts now (the host's clock
        // is a lead ahead of the agents': they switch at this instant).
        assert_eq!(c.host.row_of(10), Some(0));
        assert_eq!(c.next_wake(), Some(80 * MS), "100 ms less the lead");
        // Job 11 on cn1, cn2 collides with job 10 on cn1: row 1, frozen.
        job(&mut c, 1, 11, 2, 50 * MS);
        job(&mut c, 2, 11, 2, 50 * MS);
        assert_eq!(c.host.row_of(11), Some(1));
        c.tick(100 * MS);
        c.tick(200 * MS);
        // The policy switched at 100 and 200, but the agents' schedules from
        // the slot starting at 0 already said so: no message per switch.
        let got = lines_of(&mut k[1]);
        assert_eq!(
            schedules(&got),
            vec![
                (0, 100, vec![0], vec![(10, 0)]),
                (0, 100, vec![0, 1], vec![(10, 0), (11, 1)]),
            ]
        );
        let mut plan = crate::gangnet::Plan::default();
        for m in got {
            if let ToAgent::Schedule { from_ns, quantum_ns, cycle, jobs, .. } = m {
                plan.add(Schedule { from_ns, quantum_ns, cycle, jobs: jobs.into_iter().collect() });
            }
        }
        assert!(plan.runs(10, 60 * MS) && !plan.runs(11, 60 * MS));
        assert!(!plan.runs(10, 150 * MS) && plan.runs(11, 150 * MS));
        assert!(plan.runs(10, 250 * MS) && !plan.runs(11, 250 * MS));
        // cn2 hears only of its own job.
        assert_eq!(
            schedules(&lines_of(&mut k[2])).last(),
            Some(&(0, 100, vec![0, 1], vec![(11, 1)]))
        );
        // Job 12 on cn0, cn2 fits in no row (cn0 is taken in row 0, cn2 in row 1).
        job(&mut c, 0, 12, 2, 210 * MS);
        job(&mut c, 2, 12, 2, 210 * MS);
        assert!(c.host.waiting(12));
        // Job 10 ends on both nodes: row 0 frees, job 12 takes it.
        end(&mut c, 0, 10, 250 * MS);
        assert!(c.host.has(10));
        end(&mut c, 1, 10, 250 * MS);
        assert_eq!(c.host.row_of(12), Some(0));
        assert_eq!(c.errors, 0);
    }

    #[test]
    fn an_emptied_running_row_ends_its_slot_at_once() {
        let (mut c, mut k) = with_nodes(2);
        for id in 0..2 {
            job(&mut c, id, 1, 2, 0);
        }
        for id in 0..2 {
            job(&mut c, id, 2, 2, 30 * MS);
        }
        c.tick(250 * MS);
        // Row 0 runs [200, 300); job 1 (row 0) ends at 250: row 1 runs from
        // 250 for a full quantum.
        end(&mut c, 0, 1, 250 * MS);
        end(&mut c, 1, 1, 250 * MS);
        let got = schedules(&lines_of(&mut k[0]));
        assert_eq!(got.last(), Some(&(250, 100, vec![1], vec![(2, 1)])), "{got:?}");
    }

    #[test]
    fn a_switch_with_idle_time_freezes_every_placed_job_for_it() {
        let mut o = opts();
        o.policy = "gang[rows=2,quantum_ms=100,switch_us=5000]".into();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = Coord::new(o).unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        c.conns.insert(0, (None, server));
        c.on_msg_at(0, ToCoord::Hello { node: "cn0".into() }, 0);
        job(&mut c, 0, 1, 1, 0);
        job(&mut c, 0, 2, 1, 0);
        c.tick(200 * MS);
        // 0: job 1; 100: the switch, nobody; 105: job 2; 205: the switch; 210: job 1.
        let got: Vec<(u64, u32)> = schedules(&lines_of(&mut client))
            .into_iter()
            .map(|(t, _, r, _)| (t, r[0]))
            .collect();
        assert_eq!(
            got,
            vec![(0, 0), (0, 0), (100, NO_ROW), (105, 1)],
            "the slot at 205 is not due at 200"
        );
    }

    #[test]
    fn options_the_coordinator_cannot_carry_out_are_refused_with_what_is_missing() {
        for (policy, missing) in [
            ("gang[quanta=cg:50]", "application"),
            ("gang[low=auto]", "gangedness"),
            ("gang[io_preempt=true]", "disk completions"),
            ("gang[alternate=true]", "whole jobs"),
            ("fcfs", "gang[...] only"),
        ] {
            let o = CoordOptions {
                policy: policy.into(),
                ..opts()
            };
            let e = Coord::new(o).err().unwrap();
            assert!(e.contains(missing), "{policy}: {e}");
        }
    }

    #[test]
    fn a_reconnected_agent_gets_the_row_of_a_job_the_matrix_kept() {
        let (mut c, _k) = with_nodes(2);
        for id in 0..2 {
            job(&mut c, id, 5, 2, 0);
        }
        // cn0 comes back on connection 2: its old connection is replaced (job 5
        // stays on cn1, so it keeps row 0), then it reports job 5 again.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        c.conns.insert(2, (None, server));
        c.on_msg_at(2, ToCoord::Hello { node: "cn0".into() }, 10 * MS);
        assert_eq!(c.host.row_of(5), Some(0));
        job(&mut c, 2, 5, 2, 10 * MS);
        // Nothing changed in the matrix, yet cn0 was sent a schedule with job 5's row.
        let got = schedules(&lines_of(&mut client));
        assert_eq!(got.last().map(|s| s.3.clone()), Some(vec![(5, 0)]), "{got:?}");
    }

    fn messages(got: &[ToAgent]) -> Vec<Vec<MsgEntry>> {
        got.iter()
            .filter_map(|m| match m {
                ToAgent::Messages { to } => Some(to.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_message_batch_goes_to_the_other_agents_of_each_job_only() {
        let (mut c, mut k) = with_nodes(3);
        // Job 7 forwards on cn0 and cn1, job 8 on cn0 and cn2, job 9 only on cn0.
        for (id, job) in [(0, 7), (1, 7), (0, 8), (2, 8), (0, 9)] {
            c.on_msg_at(id, ToCoord::Forward { job, on: true }, 0);
        }
        let batch = vec![(7, 1, 5, 5, 715), (8, 0, 2, 0, 802), (9, 1, 4, 4, 914), (7, 3, 1, 0, 731)];
        c.on_msg_at(0, ToCoord::Messages { to: batch }, 0);
        // One line per receiving agent; the sender and job 9 (no other node) get none.
        assert_eq!(
            messages(&lines_of(&mut k[1])),
            vec![vec![(7, 1, 5, 5, 715), (7, 3, 1, 0, 731)]]
        );
        assert_eq!(messages(&lines_of(&mut k[2])), vec![vec![(8, 0, 2, 0, 802)]]);
        assert!(messages(&lines_of(&mut k[0])).is_empty());
        assert_eq!(c.relayed, 8);
        // cn1 ends job 7 and cn2's connection closes: nothing goes to them any more.
        c.on_msg_at(1, ToCoord::Forward { job: 7, on: false }, 0);
        c.closed_at(2, 0);
        c.on_msg_at(
            0,
            ToCoord::Messages {
                to: vec![(7, 1, 1, 1, 711), (8, 0, 1, 1, 801)],
            },
            0,
        );
        assert!(messages(&lines_of(&mut k[1])).is_empty());
        assert_eq!(c.relayed, 8);
        // Only cn0 (connection 0) holds jobs 7 and 8 now.
        assert_eq!(c.forward[&7], BTreeSet::from([0]));
        assert_eq!(c.forward[&8], BTreeSet::from([0]));
    }

    #[test]
    fn a_message_batch_goes_to_the_node_of_each_destination_rank() {
        let (mut c, mut k) = with_nodes(3);
        // Job 7 forwards on cn0, cn1 and cn2, which serve its ranks 0, 1 and 2.
        for id in 0..3 {
            c.on_msg_at(id, ToCoord::Forward { job: 7, on: true }, 0);
            c.on_msg_at(
                id,
                ToCoord::Rank {
                    job: 7,
                    rank: id as i32,
                    on: true,
                },
                0,
            );
        }
        // Rank 5 was reported by no agent (not registered yet): its entry goes to every other agent of the job.
        let batch = vec![(7, 1, 3, 0, 713), (7, 2, 2, 2, 722), (7, 5, 1, 0, 751)];
        c.on_msg_at(0, ToCoord::Messages { to: batch }, 0);
        assert_eq!(
            messages(&lines_of(&mut k[1])),
            vec![vec![(7, 1, 3, 0, 713), (7, 5, 1, 0, 751)]]
        );
        assert_eq!(
            messages(&lines_of(&mut k[2])),
            vec![vec![(7, 2, 2, 2, 722), (7, 5, 1, 0, 751)]]
        );
        assert!(messages(&lines_of(&mut k[0])).is_empty());
        assert_eq!(c.relayed, 3 + 2 + 1 + 1);
        // cn2's rank 2 is gone: its entries go to every other agent of the job again.
        c.on_msg_at(
            2,
            ToCoord::Rank {
                job: 7,
                rank: 2,
                on: false,
            },
            0,
        );
        c.on_msg_at(
            0,
            ToCoord::Messages {
                to: vec![(7, 2, 1, 0, 721)],
            },
            0,
        );
        assert_eq!(messages(&lines_of(&mut k[1])), vec![vec![(7, 2, 1, 0, 721)]]);
        assert_eq!(messages(&lines_of(&mut k[2])), vec![vec![(7, 2, 1, 0, 721)]]);
        // cn1's connection closes: its rank 1 is no longer placed, and cn2 is the only other agent of the job.
        c.closed_at(1, 0);
        c.on_msg_at(
            0,
            ToCoord::Messages {
                to: vec![(7, 1, 4, 4, 714)],
            },
            0,
        );
        assert_eq!(messages(&lines_of(&mut k[2])), vec![vec![(7, 1, 4, 4, 714)]]);
        assert_eq!(c.placed.keys().copied().collect::<Vec<_>>(), [(7, 0)]);
    }

    #[test]
    fn a_lost_agent_ends_its_jobs_there_and_the_last_end_frees_the_row() {
        let (mut c, _k) = with_nodes(2);
        for id in 0..2 {
            job(&mut c, id, 5, 2, 0);
        }
        assert_eq!(c.host.row_of(5), Some(0));
        c.closed_at(0, 10 * MS);
        assert!(c.host.has(5));
        c.closed_at(1, 10 * MS);
        assert!(!c.host.has(5) && c.host.mech.jobs.is_empty());
        // The cycle stopped: the last slot freezes nothing.
        let last = c.host.last_slot().unwrap();
        assert_eq!((last.row, last.rows.len()), (None, 0));
    }
}

//! The gang coordinator of real execution across nodes (under Slurm): cosched's
//! own gang scheduling at quanta of tens to hundreds of milliseconds.
//!
//! Algorithm: an Ousterhout matrix ([`cosched_contract::gang::Ousterhout`], the
//! simulator's) with `rows` rows and one column per node agent that connected.
//! A job is declared by the agents of its nodes ([`ToCoord::Job`] with the
//! step's node count; the SPANK plugin declares it on every node of the step);
//! once all of its nodes declared it, it takes the first row whose cells on
//! exactly those nodes are free (the resource manager chose the nodes; the
//! matrix chooses the row). A job for which no row has room runs outside the
//! matrix (in every slot, never frozen) and is placed when a row frees up.
//! Slots cycle over the non-empty rows. Instead of a message per switch, each
//! change of the matrix sends every agent a schedule (its jobs' rows, the
//! cycle, the quantum and the CLOCK_REALTIME start of the new cycle), which
//! takes effect at the next slot boundary at least `lead` ahead (at once plus
//! `lead` when the running row emptied); the agents switch at the agreed
//! times by their own clocks ([`crate::gangnet`]). Heartbeats every lease/4
//! keep the agents' lease; on exit (SIGTERM, SIGINT, SIGHUP) the coordinator
//! sends every agent a release, which thaws every job.
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
//! Parameters: `rows` (the matrix's rows; at least Slurm's over-subscription
//! MPL, more leave room for fragmentation), `quantum` (slot length), `lead`
//! (how far ahead a schedule is sent: more than the channel's latency),
//! `lease` (how long an agent keeps switching without hearing from the
//! coordinator).

use crate::gangnet::{line, realtime_ns, ToAgent, ToCoord};
use cosched_contract::gang::Ousterhout;
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
    pub rows: usize,
    pub quantum_ns: u64,
    pub lead_ns: u64,
    pub lease_ns: u64,
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
    row: Option<usize>,
}

/// A schedule sent: from `from_ns`, slot k runs `cycle[k % len]`.
#[derive(Clone, Debug, Default)]
struct Sent {
    from_ns: u64,
    cycle: Vec<u32>,
}

/// The coordinator's state: the matrix, the jobs, the agents.
pub struct Coord {
    opts: CoordOptions,
    grid: Ousterhout<i32>,
    cols: HashMap<String, u32>,
    conns: HashMap<u64, (Option<u32>, TcpStream)>,
    jobs: BTreeMap<i32, Job>,
    /// The last two schedules sent (the later may not have started yet).
    prev: Sent,
    cur: Sent,
    /// Slot boundaries are `origin + k·quantum`.
    origin: u64,
    /// Connections that reported each forwarding job.
    forward: BTreeMap<i32, BTreeSet<u64>>,
    /// Connections that reported each (job, rank) of a forwarding job.
    placed: BTreeMap<(i32, i32), BTreeSet<u64>>,
    /// MESSAGE events relayed (counted once per receiving agent).
    pub relayed: u64,
}

impl Sent {
    fn row_at(&self, t: u64, q: u64) -> Option<u32> {
        if self.cycle.is_empty() || t < self.from_ns {
            return None;
        }
        let k = (t - self.from_ns) / q;
        Some(self.cycle[(k % self.cycle.len() as u64) as usize])
    }
}

impl Coord {
    pub fn new(opts: CoordOptions) -> Coord {
        Coord {
            grid: Ousterhout::new(opts.rows.max(1), 0, 1),
            opts,
            cols: HashMap::new(),
            conns: HashMap::new(),
            jobs: BTreeMap::new(),
            prev: Sent::default(),
            cur: Sent::default(),
            origin: 0,
            forward: BTreeMap::new(),
            placed: BTreeMap::new(),
            relayed: 0,
        }
    }

    fn row_at(&self, t: u64) -> Option<u32> {
        let q = self.opts.quantum_ns.max(1);
        if t >= self.cur.from_ns {
            self.cur.row_at(t, q)
        } else {
            self.prev.row_at(t, q)
        }
    }

    /// Handles one message of connection `id`; returns whether the matrix changed.
    pub fn on_msg(&mut self, id: u64, m: ToCoord) -> bool {
        match m {
            ToCoord::Hello { node } => {
                let n = self.cols.len() as u32;
                let col = *self.cols.entry(node.clone()).or_insert(n);
                self.grid.grow(col + 1);
                // A node that reconnects replaces its old connection.
                let old: Vec<u64> = self
                    .conns
                    .iter()
                    .filter(|(&k, (c, _))| k != id && *c == Some(col))
                    .map(|(&k, _)| k)
                    .collect();
                let mut changed = false;
                for k in old {
                    changed |= self.closed(k);
                }
                if let Some(c) = self.conns.get_mut(&id) {
                    c.0 = Some(col);
                }
                eprintln!("cosched-coord: node {node} connected (column {col})");
                if changed {
                    return true;
                }
                // The new agent needs the current schedule of its jobs (none yet).
                self.send_schedule(id);
                false
            }
            ToCoord::Job { job, nnodes } => {
                let Some(col) = self.conns.get(&id).and_then(|c| c.0) else {
                    return false;
                };
                let j = self.jobs.entry(job).or_insert(Job {
                    nnodes,
                    nodes: BTreeSet::new(),
                    row: None,
                });
                j.nnodes = nnodes;
                let again = j.nodes.insert(col) && j.row.is_some();
                let changed = self.place_waiting();
                // A node that reconnected reports a job the matrix still holds
                // (its other nodes kept it there): the matrix is unchanged, but
                // this node needs the job's row again.
                if again && !changed {
                    self.send_schedule(id);
                }
                changed
            }
            ToCoord::JobEnd { job } => {
                let Some(col) = self.conns.get(&id).and_then(|c| c.0) else {
                    return false;
                };
                self.end_on(job, col)
            }
            ToCoord::Forward { job, on: true } => {
                self.forward.entry(job).or_default().insert(id);
                false
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
                false
            }
            ToCoord::Rank {
                job,
                rank,
                on: true,
            } => {
                self.placed.entry((job, rank)).or_default().insert(id);
                false
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
                false
            }
            ToCoord::Messages { to } => {
                self.relay(id, to);
                false
            }
        }
    }

    /// Relays a batch of connection `from`: each entry to the other agents
    /// that serve its destination rank, or to every other agent of its job
    /// while none reported that rank.
    fn relay(&mut self, from: u64, to: Vec<(i32, i32, u32, u32)>) {
        let mut out: BTreeMap<u64, Vec<(i32, i32, u32, u32)>> = BTreeMap::new();
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

    /// Job `job` ended on column `col`; the last end frees its cells.
    fn end_on(&mut self, job: i32, col: u32) -> bool {
        let Some(j) = self.jobs.get_mut(&job) else {
            return false;
        };
        j.nodes.remove(&col);
        if !j.nodes.is_empty() {
            return false;
        }
        let row = j.row;
        self.jobs.remove(&job);
        if let Some(r) = row {
            self.grid.clear(r, |&x| x == job);
            eprintln!("cosched-coord: job {job} left row {r}");
            self.place_waiting();
            return true;
        }
        false
    }

    /// A connection closed: its node's jobs end there.
    pub fn closed(&mut self, id: u64) -> bool {
        let Some((col, _)) = self.conns.remove(&id) else {
            return false;
        };
        self.forward.retain(|_, s| {
            s.remove(&id);
            !s.is_empty()
        });
        self.placed.retain(|_, s| {
            s.remove(&id);
            !s.is_empty()
        });
        let Some(col) = col else { return false };
        let jobs: Vec<i32> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.nodes.contains(&col))
            .map(|(&k, _)| k)
            .collect();
        let mut changed = false;
        for k in jobs {
            changed |= self.end_on(k, col);
        }
        changed
    }

    /// Places every fully declared job not in the matrix that has a row now.
    fn place_waiting(&mut self) -> bool {
        let mut changed = false;
        let ids: Vec<i32> = self.jobs.keys().copied().collect();
        for id in ids {
            let j = &self.jobs[&id];
            if j.row.is_some() || (j.nodes.len() as u32) < j.nnodes {
                continue;
            }
            let nodes: Vec<u32> = j.nodes.iter().copied().collect();
            match self.grid.find_row(nodes.len(), 1, |n| j.nodes.contains(&n)) {
                Some((r, _)) => {
                    self.grid.place(r, &nodes, |_| id);
                    self.jobs.get_mut(&id).unwrap().row = Some(r);
                    eprintln!("cosched-coord: job {id} on columns {nodes:?} placed in row {r}");
                    changed = true;
                }
                None => eprintln!(
                    "cosched-coord: job {id}: no row has room on its nodes; it runs outside the matrix for now"
                ),
            }
        }
        changed
    }

    /// A new schedule after a change of the matrix, from the next slot boundary
    /// at least `lead` ahead (re-anchored at now + lead when the running row
    /// emptied or nothing ran).
    pub fn reschedule(&mut self, now: u64) {
        let q = self.opts.quantum_ns.max(1);
        let earliest = now + self.opts.lead_ns;
        let boundary = if earliest <= self.origin {
            self.origin
        } else {
            self.origin + (earliest - self.origin).div_ceil(q) * q
        };
        let before = self.row_at(boundary.saturating_sub(1));
        let (from, active) = match before {
            Some(r) if !self.grid.row_empty(r as usize) => (boundary, Some(r as usize)),
            _ => (earliest, before.map(|r| r as usize)),
        };
        self.origin = from;
        let cycle: Vec<u32> = self
            .grid
            .cycle_after(active)
            .into_iter()
            .map(|r| r as u32)
            .collect();
        let next = Sent {
            from_ns: from,
            cycle,
        };
        if from > self.cur.from_ns {
            self.prev = std::mem::replace(&mut self.cur, next);
        } else {
            self.cur = next;
        }
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.send_schedule(id);
        }
    }

    fn send_schedule(&mut self, id: u64) {
        let Some((Some(col), _)) = self.conns.get(&id) else {
            return;
        };
        let col = *col;
        let jobs: Vec<(i32, u32)> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.nodes.contains(&col))
            .filter_map(|(&k, j)| j.row.map(|r| (k, r as u32)))
            .collect();
        let m = ToAgent::Schedule {
            from_ns: self.cur.from_ns,
            quantum_ns: self.opts.quantum_ns,
            cycle: self.cur.cycle.clone(),
            jobs,
            lease_ns: self.opts.lease_ns,
        };
        self.send(id, &m);
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

/// Runs the coordinator until SIGTERM, SIGINT or SIGHUP; then every agent is
/// told to release (thaw) its jobs.
pub fn serve(opts: CoordOptions) -> Result<(), String> {
    if opts.quantum_ns == 0 || opts.lease_ns == 0 {
        return Err("the quantum and the lease must be > 0".into());
    }
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
        "cosched-coord: listening on {} ({} rows, quantum {} ms)",
        opts.listen,
        opts.rows,
        opts.quantum_ns as f64 / 1e6
    );
    let beat = Duration::from_nanos(opts.lease_ns / 4).max(Duration::from_millis(1));
    let mut c = Coord::new(opts);
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
        let changed = match rx.recv_timeout(next_beat.saturating_duration_since(now)) {
            Ok(Ev::Conn(id, s)) => {
                c.conns.insert(id, (None, s));
                false
            }
            Ok(Ev::Msg(id, m)) => c.on_msg(id, m),
            Ok(Ev::Closed(id)) => c.closed(id),
            Ok(Ev::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => false,
        };
        if changed {
            c.reschedule(realtime_ns());
        }
    }
    c.broadcast(&ToAgent::Release);
    for (_, s) in c.conns.values() {
        let _ = s.shutdown(std::net::Shutdown::Both);
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

    fn opts() -> CoordOptions {
        CoordOptions {
            listen: String::new(),
            rows: 2,
            quantum_ns: 100,
            lead_ns: 20,
            lease_ns: 1000,
        }
    }

    /// A coordinator with agents `cn0`, `cn1`, `cn2` on connections 0, 1, 2
    /// (loopback pairs, so that schedules can be written somewhere).
    fn with_nodes(n: u64) -> (Coord, Vec<TcpStream>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = Coord::new(opts());
        let mut keep = vec![];
        for id in 0..n {
            let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (server, _) = l.accept().unwrap();
            c.conns.insert(id, (None, server));
            keep.push(client);
            c.on_msg(
                id,
                ToCoord::Hello {
                    node: format!("cn{id}"),
                },
            );
        }
        (c, keep)
    }

    #[test]
    fn a_job_is_placed_once_every_node_declared_it_and_rows_alternate() {
        let (mut c, _k) = with_nodes(3);
        assert!(!c.on_msg(0, ToCoord::Job { job: 10, nnodes: 2 }));
        assert!(c.on_msg(1, ToCoord::Job { job: 10, nnodes: 2 }));
        c.reschedule(1000);
        // Nothing ran before: the cycle starts at now + lead.
        assert_eq!((c.cur.from_ns, c.cur.cycle.clone()), (1020, vec![0]));
        // Job 11 on cn1, cn2 collides with job 10 on cn1: row 1.
        c.on_msg(1, ToCoord::Job { job: 11, nnodes: 2 });
        assert!(c.on_msg(2, ToCoord::Job { job: 11, nnodes: 2 }));
        c.reschedule(1150);
        // Next boundary at least 20 ahead of 1150 on the grid 1020 + k·100: 1220;
        // row 0 ran before it, so row 1 runs first, then row 0.
        assert_eq!((c.cur.from_ns, c.cur.cycle.clone()), (1220, vec![1, 0]));
        assert_eq!(c.row_at(1219), Some(0));
        assert_eq!(c.row_at(1220), Some(1));
        assert_eq!(c.row_at(1320), Some(0));
        // Job 12 on cn0, cn2 fits in no row (cn0 is taken in row 0, cn2 in row 1).
        c.on_msg(0, ToCoord::Job { job: 12, nnodes: 2 });
        assert!(!c.on_msg(2, ToCoord::Job { job: 12, nnodes: 2 }));
        assert_eq!(c.jobs[&12].row, None);
        // Job 10 ends on both nodes: row 0 frees, job 12 takes it.
        assert!(!c.on_msg(0, ToCoord::JobEnd { job: 10 }));
        assert!(c.on_msg(1, ToCoord::JobEnd { job: 10 }));
        assert_eq!(c.jobs[&12].row, Some(0));
    }

    #[test]
    fn an_emptied_running_row_ends_its_slot_at_once() {
        let (mut c, _k) = with_nodes(2);
        for id in 0..2 {
            c.on_msg(id, ToCoord::Job { job: 1, nnodes: 2 });
        }
        c.reschedule(0);
        for id in 0..2 {
            c.on_msg(id, ToCoord::Job { job: 2, nnodes: 2 });
        }
        c.reschedule(30); // boundary 120: row 1 then row 0
        assert_eq!((c.cur.from_ns, c.cur.cycle.clone()), (120, vec![1, 0]));
        // Slot 1 of the cycle from 120, [220, 320), runs row 0.
        assert_eq!(c.row_at(250), Some(0));
        // Job 1 (row 0) ends while row 0 runs: row 1 starts at 250 + lead.
        c.on_msg(0, ToCoord::JobEnd { job: 1 });
        assert!(c.on_msg(1, ToCoord::JobEnd { job: 1 }));
        c.reschedule(250);
        assert_eq!((c.cur.from_ns, c.cur.cycle.clone()), (270, vec![1]));
    }

    #[test]
    fn a_reconnected_agent_gets_the_row_of_a_job_the_matrix_kept() {
        use std::io::Read;
        let (mut c, mut k) = with_nodes(2);
        for id in 0..2 {
            c.on_msg(id, ToCoord::Job { job: 5, nnodes: 2 });
        }
        c.reschedule(0);
        // cn0 comes back on connection 2: its old connection is replaced (job 5
        // stays on cn1, so it keeps row 0), then it reports job 5 again.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        c.conns.insert(2, (None, server));
        assert!(!c.on_msg(2, ToCoord::Hello { node: "cn0".into() }));
        assert_eq!(c.jobs[&5].row, Some(0));
        assert!(!c.on_msg(2, ToCoord::Job { job: 5, nnodes: 2 }));
        // The matrix did not change, yet cn0 was sent a schedule with job 5's row.
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut got = String::new();
        let mut buf = [0u8; 4096];
        while got.matches('\n').count() < 2 {
            let n = client.read(&mut buf).unwrap();
            assert!(n > 0);
            got.push_str(std::str::from_utf8(&buf[..n]).unwrap());
        }
        let last: ToAgent = serde_json::from_str(got.lines().nth(1).unwrap()).unwrap();
        assert!(
            matches!(last, ToAgent::Schedule { ref jobs, .. } if jobs == &vec![(5, 0)]),
            "{got}"
        );
        k.clear();
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

    fn messages(got: &[ToAgent]) -> Vec<Vec<(i32, i32, u32, u32)>> {
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
            assert!(!c.on_msg(id, ToCoord::Forward { job, on: true }));
        }
        let batch = vec![(7, 1, 5, 5), (8, 0, 2, 0), (9, 1, 4, 4), (7, 3, 1, 0)];
        assert!(!c.on_msg(0, ToCoord::Messages { to: batch }));
        // One line per receiving agent; the sender and job 9 (no other node) get none.
        assert_eq!(
            messages(&lines_of(&mut k[1])),
            vec![vec![(7, 1, 5, 5), (7, 3, 1, 0)]]
        );
        assert_eq!(messages(&lines_of(&mut k[2])), vec![vec![(8, 0, 2, 0)]]);
        assert!(messages(&lines_of(&mut k[0])).is_empty());
        assert_eq!(c.relayed, 8);
        // cn1 ends job 7 and cn2's connection closes: nothing goes to them any more.
        c.on_msg(1, ToCoord::Forward { job: 7, on: false });
        c.closed(2);
        c.on_msg(
            0,
            ToCoord::Messages {
                to: vec![(7, 1, 1, 1), (8, 0, 1, 1)],
            },
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
            c.on_msg(id, ToCoord::Forward { job: 7, on: true });
            c.on_msg(
                id,
                ToCoord::Rank {
                    job: 7,
                    rank: id as i32,
                    on: true,
                },
            );
        }
        // Rank 5 was reported by no agent (not registered yet): its entry goes to every other agent of the job.
        let batch = vec![(7, 1, 3, 0), (7, 2, 2, 2), (7, 5, 1, 0)];
        c.on_msg(0, ToCoord::Messages { to: batch });
        assert_eq!(
            messages(&lines_of(&mut k[1])),
            vec![vec![(7, 1, 3, 0), (7, 5, 1, 0)]]
        );
        assert_eq!(
            messages(&lines_of(&mut k[2])),
            vec![vec![(7, 2, 2, 2), (7, 5, 1, 0)]]
        );
        assert!(messages(&lines_of(&mut k[0])).is_empty());
        assert_eq!(c.relayed, 3 + 2 + 1 + 1);
        // cn2's rank 2 is gone: its entries go to every other agent of the job again.
        c.on_msg(
            2,
            ToCoord::Rank {
                job: 7,
                rank: 2,
                on: false,
            },
        );
        c.on_msg(
            0,
            ToCoord::Messages {
                to: vec![(7, 2, 1, 0)],
            },
        );
        assert_eq!(messages(&lines_of(&mut k[1])), vec![vec![(7, 2, 1, 0)]]);
        assert_eq!(messages(&lines_of(&mut k[2])), vec![vec![(7, 2, 1, 0)]]);
        // cn1's connection closes: its rank 1 is no longer placed, and cn2 is the only other agent of the job.
        c.closed(1);
        c.on_msg(
            0,
            ToCoord::Messages {
                to: vec![(7, 1, 4, 4)],
            },
        );
        assert_eq!(messages(&lines_of(&mut k[2])), vec![vec![(7, 1, 4, 4)]]);
        assert_eq!(c.placed.keys().copied().collect::<Vec<_>>(), [(7, 0)]);
    }

    #[test]
    fn a_lost_agent_ends_its_jobs_there_and_the_last_end_frees_the_row() {
        let (mut c, _k) = with_nodes(2);
        for id in 0..2 {
            c.on_msg(id, ToCoord::Job { job: 5, nnodes: 2 });
        }
        assert_eq!(c.jobs[&5].row, Some(0));
        assert!(!c.closed(0));
        assert!(c.jobs.contains_key(&5));
        assert!(c.closed(1));
        assert!(c.jobs.is_empty() && c.grid.row_empty(0));
    }
}

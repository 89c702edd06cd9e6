//! The gang channel between the coordinator ([`crate::coord`]) and the node
//! agents, and the agent's side of it.
//!
//! Wire format: one JSON object per line over TCP ([`ToCoord`], [`ToAgent`]).
//! An agent connects, says [`ToCoord::Hello`] with its node name, and reports
//! the gang jobs declared on its node ([`ToCoord::Job`], [`ToCoord::JobEnd`];
//! after a reconnection it reports the declared ones again). The coordinator
//! answers with slot schedules: from the CLOCK_REALTIME instant `from_ns` on,
//! slot k (k = 0, 1, ...) lasts `[from_ns + k·quantum, from_ns + (k+1)·quantum)`
//! and runs row `cycle[k mod len]`; `jobs` gives the row of each job of the
//! node. A schedule is sent only when the matrix changes, ahead of its start;
//! between changes the agents switch by their own clocks at the agreed times
//! (no per-switch message). Heartbeats renew a lease.
//!
//! The agent's side ([`GangNet`]) runs in its own thread of the agent process.
//! It wakes at each slot boundary with an absolute CLOCK_REALTIME timer, and
//! switches its jobs through the agent's own socket (`SLOT` messages, answered
//! when the kernel reports the freeze or thaw done): it freezes the jobs that
//! leave, then thaws the jobs whose row starts (stop, then start). Each
//! boundary at which a job changed is recorded (JSON line: node, boundary,
//! row, jobs run and frozen, the CLOCK_REALTIME instant the last switch was
//! done), which is how switch skew is measured.
//!
//! Safety: a lost coordinator never leaves a job frozen. When the connection
//! closes, when the coordinator sends [`ToAgent::Release`], or when nothing
//! came from it for the lease (`lease_ns`, renewed by every message), the
//! agent drops every schedule and thaws every job it froze; the jobs then run
//! uncoordinated until a coordinator answers again. A job not in the schedule
//! is never frozen by this channel.
//!
//! Message forwarding: a job declared with [`JOB_FORWARD`] is reported
//! ([`ToCoord::Forward`]); the agent's forward hook ([`GangNet::forward_hook`])
//! adds each MESSAGE event to a rank on another node to a pending table
//! (job, rank) -> count, and this thread sends the table as one
//! [`ToCoord::Messages`] line at most once per `forward_batch_ns`. Each agent
//! also reports the ranks of those jobs it serves ([`ToCoord::Rank`], from the
//! agent's rank hook [`GangNet::rank_hook`]). The coordinator relays each
//! entry to the agents that reported its destination rank (to every other
//! agent of the job while no agent did), one line per agent and batch
//! ([`ToAgent::Messages`]); each passes every entry to its agent as one
//! `FORWARD` packet, whose node policy then sees one message arrival for the
//! rank (however many the entry counts). So a node sends at most one line per
//! batch interval whatever its ranks' message rate, and an event reaches the
//! destination's policy at most one batch interval plus two hops late.
//!
//! Standby coordinators: the agent's coordinator address may be a list,
//! primary first (`--coord A,B`). The agent always tries the list in order and
//! stays with the first that accepts, so every agent that can reach the
//! primary uses it, and a standby (an idle `cosched-agent coordinate` on its
//! own address) gets the agents only when the primary does not accept. When
//! the primary dies, each agent thaws its jobs at once (as above), finds the
//! primary refusing and connects to the standby in the same round, and reports
//! its declared jobs again; the standby rebuilds the matrix from these reports
//! (it keeps no copy of the primary's state) and its first schedule starts a
//! lead time after the last of a job's nodes reported it. A round in which no
//! coordinator accepted is retried after a second.

use crate::client::Client;
use crate::proto::{JobMsg, JOB_FORWARD, JOB_GANG};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Agent -> coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToCoord {
    /// First message of a connection: the node this agent serves.
    Hello { node: String },
    /// A gang job was declared on this node; it runs on `nnodes` nodes.
    Job { job: i32, nnodes: u32 },
    /// The job's last declaration on this node ended.
    JobEnd { job: i32 },
    /// A job whose MESSAGE events to other nodes are forwarded was declared
    /// (`on`) or ended (`!on`) on this node.
    Forward { job: i32, on: bool },
    /// Rank `rank` of such a job is served by this node's agent (`on`) or no
    /// longer (`!on`): events to it are relayed to this node.
    Rank { job: i32, rank: i32, on: bool },
    /// MESSAGE events of this node's ranks to ranks on other nodes since the
    /// last batch, one [`MsgEntry`] per destination rank.
    Messages { to: Vec<MsgEntry> },
}

/// Coordinator -> agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToAgent {
    /// From `from_ns` (CLOCK_REALTIME) on, slot k runs row `cycle[k % len]` for
    /// `quantum_ns`; `jobs` are (job, row) of the node's placed jobs.
    Schedule {
        from_ns: u64,
        quantum_ns: u64,
        cycle: Vec<u32>,
        jobs: Vec<(i32, u32)>,
        lease_ns: u64,
    },
    /// Renews the lease.
    Heartbeat { lease_ns: u64 },
    /// The coordinator stops: thaw everything and drop the schedules.
    Release,
    /// MESSAGE events from another node's ranks to ranks of jobs this agent
    /// reported with [`ToCoord::Forward`], one [`MsgEntry`] per destination rank.
    Messages { to: Vec<MsgEntry> },
}

/// MESSAGE events of one batch to one destination rank: (job, destination
/// rank, count, of which not in the rank's `arrivals`, send time of the latest
/// of them in CLOCK_REALTIME ns). The receiving agent applies the entry only
/// to a wait of the destination that had begun by that time: a later wait is
/// not the one those messages landed in.
pub type MsgEntry = (i32, i32, u32, u32, u64);

/// One line of JSON, newline-terminated.
pub fn line<T: Serialize>(m: &T) -> Vec<u8> {
    let mut v = serde_json::to_vec(m).expect("plain data serializes");
    v.push(b'\n');
    v
}

/// CLOCK_REALTIME now, ns.
pub fn realtime_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
        .expect("CLOCK_REALTIME is always readable");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// How long an agent waits for one coordinator address to accept.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The coordinator addresses of `--coord`: one address or a comma-separated
/// list, primary first, then standbys.
pub fn coord_addrs(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect()
}

/// Connects to the first of `addrs` that accepts, in list order; the error
/// names every address that did not.
pub fn connect_first(addrs: &[String], timeout: Duration) -> Result<(usize, TcpStream), String> {
    use std::net::ToSocketAddrs;
    let mut why = vec![];
    for (i, a) in addrs.iter().enumerate() {
        let resolved = match a.to_socket_addrs() {
            Ok(r) => r.collect::<Vec<_>>(),
            Err(e) => {
                why.push(format!("{a}: {e}"));
                continue;
            }
        };
        for sa in resolved {
            match TcpStream::connect_timeout(&sa, timeout) {
                Ok(c) => return Ok((i, c)),
                Err(e) => why.push(format!("{a}: {e}")),
            }
        }
    }
    if addrs.is_empty() {
        why.push("no coordinator address given".into());
    }
    Err(format!("no coordinator accepted ({})", why.join("; ")))
}

/// A slot schedule as an agent keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub from_ns: u64,
    pub quantum_ns: u64,
    pub cycle: Vec<u32>,
    pub jobs: BTreeMap<i32, u32>,
}

impl Schedule {
    /// The row running at `t` (>= `from_ns`), or `None` for an empty cycle.
    pub fn row_at(&self, t: u64) -> Option<u32> {
        if self.cycle.is_empty() || self.quantum_ns == 0 {
            return None;
        }
        let k = t.saturating_sub(self.from_ns) / self.quantum_ns;
        Some(self.cycle[(k % self.cycle.len() as u64) as usize])
    }

    /// The first slot boundary after `t`.
    pub fn next_boundary(&self, t: u64) -> u64 {
        if t < self.from_ns {
            return self.from_ns;
        }
        let k = (t - self.from_ns) / self.quantum_ns.max(1);
        self.from_ns + (k + 1) * self.quantum_ns.max(1)
    }
}

/// The schedules an agent holds: the one in force and those announced for later.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    scheds: Vec<Schedule>,
}

impl Plan {
    /// Adds a schedule; it replaces every one announced from its start on.
    pub fn add(&mut self, s: Schedule) {
        self.scheds.retain(|x| x.from_ns < s.from_ns);
        self.scheds.push(s);
    }

    pub fn clear(&mut self) {
        self.scheds.clear();
    }

    /// The schedule in force at `t` (dropping the ones it superseded).
    pub fn at(&mut self, t: u64) -> Option<&Schedule> {
        let k = self.scheds.iter().rposition(|s| s.from_ns <= t)?;
        self.scheds.drain(..k);
        self.scheds.first()
    }

    /// Whether `job` should run at `t`: a job outside the schedule always runs.
    pub fn runs(&mut self, job: i32, t: u64) -> bool {
        match self.at(t) {
            None => true,
            Some(s) => match (s.jobs.get(&job), s.row_at(t)) {
                (Some(r), Some(a)) => *r == a,
                _ => true,
            },
        }
    }

    /// The (row, boundary) in force at `t`, for the records.
    fn slot_at(&mut self, t: u64) -> (Option<u32>, u64) {
        match self.at(t) {
            None => (None, t),
            Some(s) => {
                let b = if t < s.from_ns {
                    t
                } else {
                    s.next_boundary(t) - s.quantum_ns.max(1)
                };
                (s.row_at(t), b)
            }
        }
    }

    /// The next instant after `t` at which the running rows may change.
    pub fn next_change(&mut self, t: u64) -> Option<u64> {
        let cur = self.at(t).map(|s| s.next_boundary(t));
        let later = self.scheds.iter().map(|s| s.from_ns).find(|&f| f > t);
        match (cur, later) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// How the agent reaches its coordinator.
#[derive(Clone, Debug)]
pub struct GangOptions {
    /// The coordinator's address (`127.0.0.1:7460`).
    pub coord: String,
    /// This node's name as the coordinator knows it.
    pub node: String,
    /// The agent's own socket (the channel switches slots through it).
    pub agent_socket: PathBuf,
    /// Append one JSON line per slot switch here.
    pub log: Option<PathBuf>,
    /// At most one batch of forwarded MESSAGE events per this many ns.
    pub forward_batch_ns: u64,
}

/// The default of [`GangOptions::forward_batch_ns`]: 1 ms.
pub const FORWARD_BATCH_NS: u64 = 1_000_000;

/// What the agent's loop and the channel's thread share: the gang jobs
/// declared on this node and the connection, to report declarations at once.
#[derive(Default)]
struct Declared {
    jobs: BTreeMap<i32, u32>,
    conn: Option<TcpStream>,
    /// Jobs declared with [`JOB_FORWARD`].
    forward: BTreeSet<i32>,
    /// MESSAGE events not sent yet: (job, rank) -> (count, not in `arrivals`,
    /// latest send time in CLOCK_REALTIME ns).
    pending: BTreeMap<(i32, i32), (u32, u32, u64)>,
    /// Ranks of forwarding jobs served here: (job, rank) -> how many (two
    /// steps of a job may each have a rank of that number here).
    ranks: BTreeMap<(i32, i32), u32>,
    /// Counters: events handed over, lines sent, events received from others.
    events_out: u64,
    batches_out: u64,
    events_in: u64,
}

/// The agent's side of the gang channel. [`GangNet::hook`] goes to
/// `Agent::set_job_hook`; [`GangNet::spawn`] starts the thread.
pub struct GangNet {
    opts: GangOptions,
    declared: Arc<Mutex<Declared>>,
    stop: Arc<EventFd>,
    /// Written when the pending table gets its first entry.
    kick: Arc<EventFd>,
}

/// A handle that stops the channel's thread (it thaws what it froze first).
pub struct GangHandle {
    stop: Arc<EventFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GangHandle {
    /// Asks the thread to stop. Called when the agent's loop has ended (the
    /// agent restores every freeze itself): the thread then switches nothing
    /// more and does not wait for the agent.
    pub fn request_stop(&self) {
        let _ = self.stop.write(1);
    }

    /// Waits for the thread (after [`Self::request_stop`]).
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn send(conn: &mut Option<TcpStream>, m: &ToCoord) {
    if let Some(c) = conn {
        if c.write_all(&line(m)).is_err() {
            *conn = None;
        }
    }
}

impl GangNet {
    pub fn new(opts: GangOptions) -> std::io::Result<GangNet> {
        Ok(GangNet {
            opts,
            declared: Arc::default(),
            stop: Arc::new(EventFd::from_flags(
                EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK,
            )?),
            kick: Arc::new(EventFd::from_flags(
                EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK,
            )?),
        })
    }

    /// The agent's forward hook: adds the event to the pending table (the
    /// thread sends it with the next batch), keeping the latest send time.
    pub fn forward_hook(&self) -> crate::agent::ForwardHook {
        let d = self.declared.clone();
        let kick = self.kick.clone();
        Box::new(move |job: i32, rank: i32, counted: bool, sent_ns: u64| {
            let mut d = d.lock().unwrap();
            let was_empty = d.pending.is_empty();
            let e = d.pending.entry((job, rank)).or_default();
            e.0 = e.0.saturating_add(1);
            e.1 = e.1.saturating_add(!counted as u32);
            e.2 = e.2.max(sent_ns);
            d.events_out += 1;
            if was_empty {
                let _ = kick.write(1);
            }
        })
    }

    /// The agent's rank hook: the first rank of a (job, rank number) served
    /// here and the last one gone are reported to the coordinator.
    pub fn rank_hook(&self) -> crate::agent::RankHook {
        let d = self.declared.clone();
        Box::new(move |job: i32, rank: i32, on: bool| {
            let mut d = d.lock().unwrap();
            let d = &mut *d;
            let n = d.ranks.entry((job, rank)).or_default();
            let report = if on {
                *n += 1;
                *n == 1
            } else {
                *n = n.saturating_sub(1);
                *n == 0
            };
            if d.ranks.get(&(job, rank)) == Some(&0) {
                d.ranks.remove(&(job, rank));
            }
            if report {
                send(&mut d.conn, &ToCoord::Rank { job, rank, on });
            }
        })
    }

    /// The agent's job hook: a gang job's first declaration (`true`) and last
    /// end (`false`) are reported to the coordinator. Answers 0.
    pub fn hook(&self) -> crate::agent::JobHook {
        let d = self.declared.clone();
        Box::new(move |j: &JobMsg, declared: bool| {
            let mut d = d.lock().unwrap();
            let d = &mut *d;
            if j.flags & JOB_FORWARD != 0 && declared {
                d.forward.insert(j.job);
                send(
                    &mut d.conn,
                    &ToCoord::Forward {
                        job: j.job,
                        on: true,
                    },
                );
            } else if !declared && d.forward.remove(&j.job) {
                send(
                    &mut d.conn,
                    &ToCoord::Forward {
                        job: j.job,
                        on: false,
                    },
                );
            }
            if declared {
                if j.flags & JOB_GANG != 0 {
                    d.jobs.insert(j.job, j.nnodes.max(1));
                    send(
                        &mut d.conn,
                        &ToCoord::Job {
                            job: j.job,
                            nnodes: j.nnodes.max(1),
                        },
                    );
                }
            } else if d.jobs.remove(&j.job).is_some() {
                send(&mut d.conn, &ToCoord::JobEnd { job: j.job });
            }
            0
        })
    }

    /// Starts the channel's thread.
    pub fn spawn(self) -> std::io::Result<GangHandle> {
        let stop = self.stop.clone();
        let thread = std::thread::Builder::new()
            .name("cosched-gang".into())
            .spawn(move || self.run())?;
        Ok(GangHandle {
            stop,
            thread: Some(thread),
        })
    }

    fn run(self) {
        // Like the agent's loop: SCHED_FIFO 1 (reset on fork) when allowed, so
        // a slot boundary is not late behind the ranks; it sleeps between them.
        let param = libc::sched_param { sched_priority: 1 };
        // SAFETY: plain syscall on the calling thread.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param);
        }
        let mut st = Switcher::new(&self.opts, self.stop.clone());
        let addrs = coord_addrs(&self.opts.coord);
        let mut last: Option<usize> = None;
        // A stop comes when the agent's loop ended and the agent restored
        // everything: nothing is released through it then.
        while !self.stopped() {
            match connect_first(&addrs, CONNECT_TIMEOUT) {
                Ok((i, c)) => {
                    if last.is_some_and(|l| l != i) {
                        st.note(&format!(
                            "now with coordinator {} (was {})",
                            addrs[i],
                            addrs[last.unwrap()]
                        ));
                    }
                    last = Some(i);
                    let _ = c.set_nodelay(true);
                    self.session(c, &mut st);
                    if self.stopped() {
                        break;
                    }
                    st.release();
                    // The next round at once: a standby may be waiting.
                    continue;
                }
                Err(e) => st.note(&e),
            }
            if self.wait_stop(Duration::from_secs(1)) {
                break;
            }
        }
        let d = self.declared.lock().unwrap();
        if d.events_out + d.events_in > 0 {
            st.note(&format!(
                "forwarded {} message events to other nodes in {} batches, received {}",
                d.events_out, d.batches_out, d.events_in
            ));
        }
    }

    fn stopped(&self) -> bool {
        self.wait_stop(Duration::ZERO)
    }

    fn wait_stop(&self, d: Duration) -> bool {
        let mut fds = [PollFd::new(self.stop.as_fd(), PollFlags::POLLIN)];
        let ms =
            PollTimeout::try_from(d.as_millis().min(60_000) as i32).unwrap_or(PollTimeout::ZERO);
        matches!(poll(&mut fds, ms), Ok(n) if n > 0)
    }

    /// Sends the pending message events as one batch if the last went at
    /// least `batch` ns before `now`; answers when the next batch is due
    /// (`u64::MAX`: nothing pending).
    fn flush(&self, now: u64, batch: u64, last_batch: &mut u64) -> u64 {
        let mut d = self.declared.lock().unwrap();
        if d.pending.is_empty() {
            return u64::MAX;
        }
        if now < last_batch.saturating_add(batch) {
            return *last_batch + batch;
        }
        let to = std::mem::take(&mut d.pending)
            .into_iter()
            .map(|((j, r), (n, u, t))| (j, r, n, u, t))
            .collect();
        send(&mut d.conn, &ToCoord::Messages { to });
        d.batches_out += 1;
        *last_batch = now;
        u64::MAX
    }

    /// Says hello on a new connection and reports what is declared here (gang
    /// jobs, forwarding jobs and their ranks); the connection becomes the
    /// channel's if that worked.
    fn greet(&self, conn: TcpStream) -> bool {
        let mut d = self.declared.lock().unwrap();
        let mut w = Some(conn);
        send(
            &mut w,
            &ToCoord::Hello {
                node: self.opts.node.clone(),
            },
        );
        let jobs: Vec<(i32, u32)> = d.jobs.iter().map(|(&j, &n)| (j, n)).collect();
        for (job, nnodes) in jobs {
            send(&mut w, &ToCoord::Job { job, nnodes });
        }
        for &job in &d.forward {
            send(&mut w, &ToCoord::Forward { job, on: true });
        }
        for &(job, rank) in d.ranks.keys() {
            send(
                &mut w,
                &ToCoord::Rank {
                    job,
                    rank,
                    on: true,
                },
            );
        }
        let ok = w.is_some();
        d.conn = w;
        ok
    }

    /// One connection to the coordinator, until it closes, releases, its
    /// lease expires or the thread is stopped.
    fn session(&self, conn: TcpStream, st: &mut Switcher) {
        let Ok(mut reader) = conn.try_clone() else {
            return;
        };
        if !self.greet(conn) {
            return;
        }
        let _ = reader.set_nonblocking(true);
        let Ok(timer) = TimerFd::new(
            ClockId::CLOCK_REALTIME,
            TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK,
        ) else {
            return;
        };
        let mut buf = Vec::new();
        let mut lease_end = realtime_ns() + 10_000_000_000;
        let batch = self.opts.forward_batch_ns;
        let mut last_batch = 0u64;
        'conn: loop {
            let now = realtime_ns();
            let flush_at = self.flush(now, batch, &mut last_batch);
            let declared: BTreeSet<i32> =
                self.declared.lock().unwrap().jobs.keys().copied().collect();
            st.apply(now, &declared);
            if now >= lease_end {
                st.note("the coordinator's lease expired: every job thawed");
                break;
            }
            let wake = st
                .plan
                .next_change(now)
                .unwrap_or(u64::MAX)
                .min(lease_end)
                .min(flush_at);
            let _ = timer.set(
                Expiration::OneShot(TimeSpec::from_duration(Duration::from_nanos(wake))),
                TimerSetTimeFlags::TFD_TIMER_ABSTIME,
            );
            let mut fds = [
                PollFd::new(reader.as_fd(), PollFlags::POLLIN),
                PollFd::new(timer.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.stop.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.kick.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::Error::EINTR) => continue,
                Err(_) => break,
            }
            let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
            if ready(&fds[2]) {
                break;
            }
            if ready(&fds[1]) {
                let _ = timer.wait();
            }
            if ready(&fds[3]) {
                let _ = self.kick.read();
            }
            if ready(&fds[0]) {
                let mut chunk = [0u8; 4096];
                loop {
                    match reader.read(&mut chunk) {
                        Ok(0) => break 'conn,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(_) => break 'conn,
                    }
                }
                while let Some(i) = buf.iter().position(|&c| c == b'\n') {
                    let l: Vec<u8> = buf.drain(..=i).collect();
                    match serde_json::from_slice::<ToAgent>(&l) {
                        Ok(ToAgent::Schedule {
                            from_ns,
                            quantum_ns,
                            cycle,
                            jobs,
                            lease_ns,
                        }) => {
                            lease_end = realtime_ns() + lease_ns;
                            st.plan.add(Schedule {
                                from_ns,
                                quantum_ns,
                                cycle,
                                jobs: jobs.into_iter().collect(),
                            });
                        }
                        Ok(ToAgent::Heartbeat { lease_ns }) => lease_end = realtime_ns() + lease_ns,
                        Ok(ToAgent::Messages { to }) => {
                            let n: u64 = to.iter().map(|e| e.2 as u64).sum();
                            self.declared.lock().unwrap().events_in += n;
                            st.forward(&to);
                        }
                        Ok(ToAgent::Release) => break 'conn,
                        Err(e) => st.note(&format!("bad message from the coordinator: {e}")),
                    }
                }
            }
        }
        self.declared.lock().unwrap().conn = None;
    }
}

/// Applies the plan to the node's jobs through the agent's socket and records
/// the switches.
struct Switcher {
    node: String,
    agent_socket: PathBuf,
    client: Option<Client>,
    plan: Plan,
    /// Jobs this channel froze.
    frozen: BTreeSet<i32>,
    log: Option<std::fs::File>,
    /// Set when the agent stopped: no more switches through it.
    stop: Arc<EventFd>,
}

impl Switcher {
    fn new(o: &GangOptions, stop: Arc<EventFd>) -> Switcher {
        let log = o.log.as_ref().and_then(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| eprintln!("cosched-agent: gang log {}: {e}", p.display()))
                .ok()
        });
        Switcher {
            node: o.node.clone(),
            agent_socket: o.agent_socket.clone(),
            client: None,
            plan: Plan::default(),
            frozen: BTreeSet::new(),
            log,
            stop,
        }
    }

    fn note(&self, what: &str) {
        eprintln!("cosched-agent: gang: {what}");
    }

    /// Hands MESSAGE events from other nodes to the agent (`FORWARD` packets),
    /// each with its send time on this machine's CLOCK_MONOTONIC (the sender's
    /// CLOCK_REALTIME less this machine's offset of the two clocks, so exact to
    /// the nodes' clock skew).
    fn forward(&mut self, to: &[MsgEntry]) {
        if self.client.is_none() {
            self.client = Client::connect(&self.agent_socket, Duration::from_secs(2))
                .map_err(|e| self.note(&e))
                .ok();
        }
        let Some(c) = &self.client else { return };
        let offset = realtime_ns().saturating_sub(crate::agent::mono_ns());
        for &(job, rank, n, uncounted, sent) in to {
            // A missing time (0) stays 0: the agent then applies the entry to the current wait.
            let sent_mono = if sent == 0 {
                0
            } else {
                sent.saturating_sub(offset).max(1)
            };
            if let Err(e) = c.forward(job, rank, n, uncounted, sent_mono) {
                self.note(&e);
                self.client = None;
                return;
            }
        }
    }

    fn slot(&mut self, job: i32, run: bool) -> bool {
        let mut fds = [PollFd::new(self.stop.as_fd(), PollFlags::POLLIN)];
        if matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0) {
            return false;
        }
        if self.client.is_none() {
            self.client = Client::connect(&self.agent_socket, Duration::from_secs(2))
                .map_err(|e| self.note(&e))
                .ok();
        }
        let Some(c) = &self.client else { return false };
        match c.slot(job, run) {
            Ok(()) => true,
            Err(e) => {
                self.note(&e);
                self.client = None;
                false
            }
        }
    }

    /// Freezes the declared jobs that must not run at `now`, then thaws the
    /// ones that must; records the boundary when something changed.
    fn apply(&mut self, now: u64, declared: &BTreeSet<i32>) {
        // A job whose declaration ended was thawed and released by the agent.
        self.frozen.retain(|j| declared.contains(j));
        let (row, boundary) = self.plan.slot_at(now);
        let (mut stop, mut start) = (vec![], vec![]);
        for &j in declared {
            let run = self.plan.runs(j, now);
            if !run && !self.frozen.contains(&j) {
                stop.push(j);
            } else if run && self.frozen.contains(&j) {
                start.push(j);
            }
        }
        if stop.is_empty() && start.is_empty() {
            return;
        }
        for &j in &stop {
            if self.slot(j, false) {
                self.frozen.insert(j);
            }
        }
        for &j in &start {
            if self.slot(j, true) {
                self.frozen.remove(&j);
            }
        }
        let done = realtime_ns();
        self.record(&serde_json::json!({
            "node": self.node, "boundary_ns": boundary, "row": row, "woke_ns": now,
            "done_ns": done, "run": start, "frozen": stop,
        }));
    }

    fn record(&mut self, v: &serde_json::Value) {
        if let Some(f) = &mut self.log {
            let _ = f.write_all(&line(v));
        }
    }

    /// Drops every schedule and thaws every job this channel froze.
    fn release(&mut self) {
        self.plan.clear();
        let frozen: Vec<i32> = self.frozen.iter().copied().collect();
        if frozen.is_empty() {
            return;
        }
        for j in &frozen {
            if self.slot(*j, true) {
                self.frozen.remove(j);
            }
        }
        let now = realtime_ns();
        self.record(&serde_json::json!({
            "node": self.node, "boundary_ns": now, "row": null, "woke_ns": now,
            "done_ns": realtime_ns(), "run": frozen, "frozen": [], "released": true,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(from: u64, cycle: Vec<u32>, jobs: &[(i32, u32)]) -> Schedule {
        Schedule {
            from_ns: from,
            quantum_ns: 100,
            cycle,
            jobs: jobs.iter().copied().collect(),
        }
    }

    #[test]
    fn slots_follow_the_cycle_at_the_agreed_times() {
        let s = sched(1000, vec![1, 0], &[(7, 0), (8, 1)]);
        assert_eq!(s.row_at(1000), Some(1));
        assert_eq!(s.row_at(1099), Some(1));
        assert_eq!(s.row_at(1100), Some(0));
        assert_eq!(s.row_at(1250), Some(1));
        assert_eq!(s.next_boundary(900), 1000);
        assert_eq!(s.next_boundary(1000), 1100);
        assert_eq!(s.next_boundary(1150), 1200);
        let mut p = Plan::default();
        p.add(s);
        // Before the first schedule starts every job runs.
        assert!(p.runs(7, 999) && p.runs(8, 999));
        assert!(!p.runs(7, 1000) && p.runs(8, 1000));
        assert!(p.runs(7, 1100) && !p.runs(8, 1100));
        // A job outside the schedule always runs.
        assert!(p.runs(9, 1100));
    }

    #[test]
    fn a_later_schedule_takes_over_at_its_start_and_replaces_later_ones() {
        let mut p = Plan::default();
        p.add(sched(1000, vec![0, 1], &[(7, 0), (8, 1)]));
        p.add(sched(2000, vec![1], &[(8, 1)]));
        p.add(sched(3000, vec![0], &[(7, 0)]));
        assert_eq!(p.next_change(1950), Some(2000));
        assert!(p.runs(8, 1950) && !p.runs(7, 1950)); // slot 9 of [0, 1]: row 1
                                                      // Announced again from 2500: replaces the one from 3000.
        p.add(sched(2500, vec![0, 1], &[(7, 0), (8, 1)]));
        assert_eq!(
            p.scheds.iter().map(|s| s.from_ns).collect::<Vec<_>>(),
            vec![1000, 2000, 2500]
        );
        assert!(p.runs(8, 2100) && p.runs(7, 2100)); // job 7 left the matrix: it runs
        assert!(p.runs(7, 2500) && !p.runs(8, 2500));
        assert_eq!(p.scheds.len(), 1);
        p.clear();
        assert!(p.runs(8, 2500));
    }

    #[test]
    fn the_first_coordinator_that_accepts_is_used_in_list_order() {
        use std::net::TcpListener;
        assert_eq!(
            coord_addrs(" 127.0.0.1:1, 127.0.0.1:2 ,,"),
            vec!["127.0.0.1:1", "127.0.0.1:2"]
        );
        // A port nobody listens on (bound, then dropped), then a listening standby.
        let dead = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let standby = TcpListener::bind("127.0.0.1:0").unwrap();
        let primary = TcpListener::bind("127.0.0.1:0").unwrap();
        let (d, s, p) = (
            dead.to_string(),
            standby.local_addr().unwrap().to_string(),
            primary.local_addr().unwrap().to_string(),
        );
        let t = Duration::from_secs(1);
        // The primary is up: it is taken, not the standby after it.
        assert_eq!(connect_first(&[p.clone(), s.clone()], t).unwrap().0, 0);
        // The primary is down: the standby.
        assert_eq!(connect_first(&[d.clone(), s.clone()], t).unwrap().0, 1);
        let e = connect_first(std::slice::from_ref(&d), t).unwrap_err();
        assert!(e.contains(&d), "{e}");
        assert!(connect_first(&[], t).is_err());
    }

    /// A channel of node cn0 connected to a test coordinator, and the lines
    /// that coordinator reads.
    fn connected() -> (GangNet, std::io::Lines<std::io::BufReader<TcpStream>>) {
        use std::io::{BufRead, BufReader};
        let g = GangNet::new(GangOptions {
            coord: String::new(),
            node: "cn0".into(),
            agent_socket: PathBuf::new(),
            log: None,
            forward_batch_ns: 1000,
        })
        .unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        g.declared.lock().unwrap().conn =
            Some(TcpStream::connect(l.local_addr().unwrap()).unwrap());
        let (coord, _) = l.accept().unwrap();
        coord
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        (g, BufReader::new(coord).lines())
    }

    #[test]
    fn message_events_are_summed_per_rank_and_sent_at_most_once_per_batch_interval() {
        let (g, mut lines) = connected();
        let mut hook = g.forward_hook();
        // Three events to rank 1 of job 7 (one already counted by its sender), one to rank 0; the entry keeps
        // the latest send time, not the last one handed over.
        hook(7, 1, false, 30);
        hook(7, 1, true, 50);
        hook(7, 0, false, 20);
        hook(7, 1, false, 40);
        assert_eq!(
            g.kick.read().unwrap(),
            1,
            "one wake-up for the first pending event only"
        );
        let mut last = 0;
        assert_eq!(g.flush(10_000, 1000, &mut last), u64::MAX);
        let m: ToCoord = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        assert_eq!(
            m,
            ToCoord::Messages {
                to: vec![(7, 0, 1, 1, 20), (7, 1, 3, 2, 50)]
            }
        );
        // The next event within the interval waits for its end.
        hook(7, 1, true, 60);
        assert_eq!(g.flush(10_400, 1000, &mut last), 11_000);
        assert_eq!(g.flush(11_000, 1000, &mut last), u64::MAX);
        let m: ToCoord = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        assert_eq!(
            m,
            ToCoord::Messages {
                to: vec![(7, 1, 1, 0, 60)]
            }
        );
        let d = g.declared.lock().unwrap();
        assert_eq!((d.events_out, d.batches_out), (5, 2));
    }

    #[test]
    fn the_first_rank_of_a_number_here_and_the_last_one_gone_are_reported() {
        let (g, mut lines) = connected();
        let mut hook = g.rank_hook();
        // Two steps of job 7 each have a rank 1 here: one report when the first comes, one when the last goes.
        hook(7, 1, true);
        hook(7, 1, true);
        hook(7, 2, true);
        hook(7, 1, false);
        hook(7, 1, false);
        let got: Vec<ToCoord> = (0..3)
            .map(|_| serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap())
            .collect();
        let rank = |rank, on| ToCoord::Rank { job: 7, rank, on };
        assert_eq!(got, [rank(1, true), rank(2, true), rank(1, false)]);
        assert_eq!(
            g.declared.lock().unwrap().ranks,
            BTreeMap::from([((7, 2), 1)])
        );
    }

    #[test]
    fn messages_are_one_json_object_per_line() {
        let m = ToAgent::Schedule {
            from_ns: 5,
            quantum_ns: 100_000_000,
            cycle: vec![0, 1],
            jobs: vec![(3, 1)],
            lease_ns: 3,
        };
        let l = line(&m);
        assert_eq!(*l.last().unwrap(), b'\n');
        assert_eq!(serde_json::from_slice::<ToAgent>(&l).unwrap(), m);
        let h: ToCoord = serde_json::from_str(r#"{"type":"hello","node":"cn0"}"#).unwrap();
        assert_eq!(h, ToCoord::Hello { node: "cn0".into() });
    }
}

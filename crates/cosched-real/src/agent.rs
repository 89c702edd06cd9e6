//! The node agent: hosts node policies (the simulator's code, unchanged) for the
//! virtual nodes of this machine and applies their decisions with the
//! mechanisms of [`crate::mech`].
//!
//! One agent process serves every virtual node of the machine: each node has its
//! own Unix socket (SOCK_SEQPACKET), its own cgroups (`cosched.<run>.n<node>`,
//! a cpuset of its CPUs) and one instance of each node policy hosting its ranks
//! (all ranks of jobs declared with the same spec share one instance, as every
//! process of a node shares the node's policy in the simulator). A rank belongs
//! to the node whose socket it registered on. Messages between ranks of
//! different virtual nodes are routed inside the agent. A MESSAGE event to a
//! rank this agent does not serve (another machine's node, under Slurm) is
//! handed to the forward hook when its job was declared with
//! [`proto::JOB_FORWARD`] ([`crate::gangnet`] batches it to the coordinator,
//! which relays it to the agent that serves the destination rank, told by
//! each agent's rank hook); a `FORWARD` packet on the socket applies such
//! events from another node to the destination's node policy.
//!
//! A node policy's spin change ([`NodeAction::SpinFor`], ICS's conditional
//! spin) is stored in the rank's segment (`spin_until`, tagged with the wait it
//! applies to), which the shim loads at each test of its spin loop. It applies
//! to the wait the rank spins in when the agent acts, and only if that wait
//! began before the event that caused it (a message sent before the wait
//! started did not land during it); otherwise it is refused as "not spinning"
//! and counted ([`AgentStats::spins_refused`]). The extension runs from when the
//! agent acts, not from the message's send.
//!
//! The loop sleeps in `epoll_wait` on the sockets, a `signalfd` (SIGTERM,
//! SIGINT, SIGHUP: restore and exit), a `timerfd` (the policies' periodic ops,
//! the OS tick op, the check that ends "boost until run") and an `eventfd` (stop
//! request from an embedding controller). It runs at SCHED_FIFO priority 1 with
//! SCHED_RESET_ON_FORK when allowed, and never polls.

use crate::mech::{MechError, NodeMech};
use crate::procfs;
use crate::proto::{self, msg, JobMsg, Msg, Packet, RankShm};
use cosched_contract::node::{NodeAction, NodePolicy, NodeView, Ops, WaitKind, WaitMode};
use cosched_des::SimTime;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{
    self as sock, sockopt, AddressFamily, Backlog, MsgFlags, SockFlag, SockType, UnixAddr,
};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Launcher-only message types (`real/include/cosched_proto.h`).
pub use proto::msg::{ADOPT as MSG_ADOPT, SLOT as MSG_SLOT};

/// Told of a job's first declaration (`true`) and of its last end (`false`);
/// a declaration it answers non-zero (an errno) is refused. The gang channel
/// ([`crate::gangnet`]) reports gang jobs to its coordinator through it.
pub type JobHook = Box<dyn FnMut(&JobMsg, bool) -> i32 + Send>;

/// Told of a MESSAGE event (job, destination rank, whether the sender added it
/// to the destination's `arrivals`, its send time in CLOCK_REALTIME ns) whose
/// destination this agent does not serve, for a job declared with
/// [`proto::JOB_FORWARD`].
pub type ForwardHook = Box<dyn FnMut(i32, i32, bool, u64) + Send>;

/// Told when a rank (job, rank number) of a job declared with
/// [`proto::JOB_FORWARD`] starts (`true`) or stops (`false`) being served by
/// this agent, so that events forwarded to it are addressed to this node.
pub type RankHook = Box<dyn FnMut(i32, i32, bool) + Send>;

/// The OS tick period for policies that declare [`Ops::TICK`].
const TICK: Duration = Duration::from_millis(4);
// A pending "boost until run" is re-checked on the schedule of
// `cosched_rules::boost` (every 250 us, then backing off, dropped after 48
// checks). A rank of a frozen job is not checked (it cannot run).
use cosched_rules::boost::{boost_check_delay, BOOST_CHECK};

/// One virtual node served by the agent.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub node: u32,
    /// A cpuset list (`0`, `0-1`); `None`: every CPU.
    pub cpus: Option<String>,
    pub socket: PathBuf,
}

/// How the agent runs.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    pub run: String,
    pub nodes: Vec<NodeSpec>,
    /// Node policy of ranks whose job was not declared.
    pub default_policy: String,
    /// A boost multiplies the rank's cgroup weight by this.
    pub boost_factor: f64,
    pub state_dir: PathBuf,
    /// Run the loop at SCHED_FIFO priority 1 (with SCHED_RESET_ON_FORK).
    pub realtime: bool,
}

/// A rank's shared-memory segment, mapped.
struct Shm {
    ptr: NonNull<RankShm>,
    name: String,
}

/// Why a rank's segment was refused.
#[derive(Debug, PartialEq, Eq)]
enum ShmError {
    Os(nix::Error),
    /// Not a regular file (for example a symlink).
    NotRegular,
    /// Smaller than the segment structure (mapping it would fault).
    TooSmall(i64),
    /// Owned by neither the registering rank's uid nor root.
    Owner(u32),
}

impl Shm {
    /// Maps segment `name` after checking that it is a regular file (not
    /// followed through a symlink) of at least the segment's size, owned by
    /// `uid` or root.
    fn open(name: &str, uid: u32) -> Result<Shm, ShmError> {
        use nix::fcntl::OFlag;
        use nix::sys::mman::{mmap, shm_open, MapFlags, ProtFlags};
        use nix::sys::stat::{fstat, Mode, SFlag};
        let fd = shm_open(name, OFlag::O_RDWR | OFlag::O_NOFOLLOW, Mode::empty())
            .map_err(ShmError::Os)?;
        let st = fstat(std::os::fd::AsRawFd::as_raw_fd(&fd)).map_err(ShmError::Os)?;
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            return Err(ShmError::NotRegular);
        }
        if st.st_size < size_of::<RankShm>() as i64 {
            return Err(ShmError::TooSmall(st.st_size));
        }
        if st.st_uid != uid && st.st_uid != 0 {
            return Err(ShmError::Owner(st.st_uid));
        }
        let len = std::num::NonZeroUsize::new(size_of::<RankShm>()).unwrap();
        // SAFETY: a fresh shared mapping of a segment at least `len` long;
        // RankShm is all atomics.
        let p = unsafe {
            mmap(
                None,
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                fd,
                0,
            )
            .map_err(ShmError::Os)?
        };
        Ok(Shm {
            ptr: p.cast(),
            name: name.to_string(),
        })
    }
    fn get(&self) -> &RankShm {
        // SAFETY: mapped for the lifetime of self.
        unsafe { self.ptr.as_ref() }
    }
    /// Bumps the futex word and wakes every waiter (the shim re-tests its wait).
    fn wake(&self) {
        let s = self.get();
        s.wake_seq.fetch_add(1, Ordering::SeqCst);
        // SAFETY: FUTEX_WAKE on a shared mapping's aligned u32 (no private flag).
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                &s.wake_seq as *const _ as *const u32,
                libc::FUTEX_WAKE,
                i32::MAX,
                0,
                0,
                0,
            );
        }
    }
}

impl Shm {
    /// Unmaps without unlinking the name or touching `agent_gen` (a segment
    /// that turned out not to be the one sought).
    fn forget(self) {
        // SAFETY: unmapping our own mapping; Drop does not run after this.
        unsafe {
            let _ = nix::sys::mman::munmap(self.ptr.cast(), size_of::<RankShm>());
        }
        std::mem::forget(self);
    }
}

// SAFETY: the mapping is process-wide shared memory of atomics; moving its
// owner to another thread is fine.
unsafe impl Send for Shm {}

impl Drop for Shm {
    fn drop(&mut self) {
        self.get().agent_gen.store(0, Ordering::SeqCst);
        // SAFETY: unmapping our own mapping.
        unsafe {
            let _ = nix::sys::mman::munmap(self.ptr.cast(), size_of::<RankShm>());
        }
        let _ = nix::sys::mman::shm_unlink(self.name.as_str());
    }
}

struct Rank {
    /// The run of its segment (`cosched.<run>.<job>.<rank>`): two steps of one
    /// Slurm job share the job id but not the run.
    run: String,
    job: i32,
    rank: i32,
    node: usize,
    spec: String,
    conn: RawFd,
    shm: Option<Shm>,
    /// A pending "boost until run": how to tell it has run since, the checks
    /// made so far and when the next is due.
    boost_until_run: Option<(RunMark, u32, Instant)>,
}

/// How a boost-until-run check tells that the rank has run since its boost.
#[derive(Clone, Copy, Debug)]
enum RunMark {
    /// It was spinning in a wait at the boost (CLOCK_MONOTONIC then, ns): it
    /// has run once its segment shows a test of a spinning wait after that, or
    /// once it is no longer spinning (leaving a spin takes a CPU). A memory read,
    /// where the cgroup's CPU time costs a file read (about 25 us here).
    Spinning(u64),
    /// Otherwise: its cgroup CPU time at the boost, ns.
    Used(u64),
}

struct Hosted {
    policy: Box<dyn NodePolicy>,
    pids: Vec<u32>,
    mask: u32,
    period: Option<Duration>,
    next_timer: Option<Instant>,
    tick: bool,
    next_tick: Option<Instant>,
}

struct Node {
    mech: NodeMech,
    listener: OwnedFd,
    hosted: BTreeMap<String, Hosted>,
}

struct Job {
    /// The uid that declared it: with root, the only one that may end it, switch
    /// its slots or adopt processes into it.
    uid: u32,
    spec: String,
    /// Declarations not ended yet (several job steps declare the same job).
    count: u32,
    /// Declared with [`proto::JOB_FORWARD`].
    forward: bool,
}

/// Counters of the agent, for the run's provenance and benchmarks.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct AgentStats {
    pub events: u64,
    /// Registrations accepted: counted once the rank's acknowledgement has
    /// been sent, so a count that includes a rank means the rank was told.
    pub registered: u64,
    pub actions: u64,
    pub boosts: u64,
    pub interrupts: u64,
    pub slot_switches: u64,
    /// Boosts until run dropped because the rank did not run within their checks.
    pub boosts_expired: u64,
    /// Reschedule checks asked for boosted ranks (`NodeMech::nudge`): one per
    /// boost, and one more at each boost-until-run check that finds the rank
    /// has not run yet.
    pub nudges: u64,
    /// MESSAGE events handed to the forward hook (destination on another node).
    pub forwarded_out: u64,
    /// MESSAGE events from other nodes applied to a local rank (`FORWARD` packets' counts).
    pub forwarded_in: u64,
    /// MESSAGE events from other nodes dropped as stale: the destination was
    /// in (or past) a wait begun after they were sent, so the wait they
    /// landed in had ended (`FORWARD` packets' counts).
    pub forwarded_stale: u64,
    /// MESSAGE events to a rank this agent does not serve (on another node, or
    /// not registered yet) that were not forwarded: the job was not declared
    /// with [`proto::JOB_FORWARD`]. Their destination's policy never sees them.
    pub remote_dropped: u64,
    /// Boosts the node policies gave when told of those events.
    pub forwarded_boosts: u64,
    /// Spin changes ([`NodeAction::SpinFor`]) stored in a spinning rank's segment.
    pub spin_changes: u64,
    /// Spin changes refused: the rank was not spinning in a wait that began
    /// before the event (blocked, computing, a later wait, or no segment).
    pub spins_refused: u64,
    /// Total time from a slot request to the kernel reporting it done, ns.
    pub slot_switch_ns: u64,
    pub realtime: bool,
    pub cgroups: String,
    /// CPU time of the agent's loop thread, ns (set when the loop ends).
    pub cpu_ns: u64,
}

/// One sampling interval of one rank: the CPU time it used in the interval
/// (from its cgroup), what it was doing on the CPU at the sample (`on`: `spin`
/// if the shim says it is spinning, else `useful`) and off it (`off`:
/// `blocked` if sleeping, frozen or stopped, else `ready`). The Python side
/// lays the intervals out as timeline rows.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sample {
    pub node: u32,
    pub job: i32,
    pub rank: i32,
    pub pid: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub cpu_ns: u64,
    pub on: &'static str,
    pub off: &'static str,
}

/// Measured use of one job's ranks (summed at each rank's release).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Usage {
    pub cpu_ns: u64,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    pub ranks: u32,
}

/// What the agent shares with an embedding controller.
#[derive(Default)]
pub struct Shared {
    pub usage: HashMap<i32, Usage>,
    pub timeline: Vec<Sample>,
    /// Live ranks: pid -> job.
    pub pids: HashMap<u32, i32>,
}

impl Shared {
    pub fn pids_of(&self, job: i32) -> Vec<u32> {
        self.pids
            .iter()
            .filter(|(_, &j)| j == job)
            .map(|(&p, _)| p)
            .collect()
    }
}

/// A handle that asks a running agent to restore everything and stop.
#[derive(Clone)]
pub struct Stopper(Arc<EventFd>);

impl Stopper {
    pub fn stop(&self) {
        let _ = self.0.write(1);
    }
}

/// The agent.
pub struct Agent {
    opts: AgentOptions,
    start: Instant,
    nodes: Vec<Node>,
    epoll: Epoll,
    sigfd: Option<SignalFd>,
    timer: TimerFd,
    stop: Arc<EventFd>,
    conns: HashMap<RawFd, (OwnedFd, usize)>,
    ranks: HashMap<u32, Rank>,
    by_job_rank: HashMap<(String, i32, i32), u32>,
    jobs: HashMap<i32, Job>,
    gen: u32,
    pub stats: AgentStats,
    shared: Arc<std::sync::Mutex<Shared>>,
    sample: Option<Duration>,
    next_sample: Option<Instant>,
    /// Per rank: (cgroup CPU time, time) at the last sample.
    sampled: HashMap<u32, (u64, u64)>,
    job_hook: Option<JobHook>,
    forward_hook: Option<ForwardHook>,
    rank_hook: Option<RankHook>,
}

const TOK_SIGNAL: u64 = u64::MAX;
const TOK_TIMER: u64 = u64::MAX - 1;
const TOK_STOP: u64 = u64::MAX - 2;
const TOK_LISTEN: u64 = 1 << 40;

/// The view a hosted policy gets of its node.
struct View<'a> {
    now: SimTime,
    procs: &'a [u32],
    ranks: &'a HashMap<u32, Rank>,
}

impl NodeView for View<'_> {
    fn now(&self) -> SimTime {
        self.now
    }
    fn processes(&self) -> &[u32] {
        self.procs
    }
    fn is_running(&self, p: u32) -> bool {
        rank_on_cpu(self.ranks, p)
    }
    fn unconsumed(&self, p: u32) -> usize {
        self.ranks
            .get(&p)
            .and_then(|r| r.shm.as_ref())
            .map(|s| s.get().unconsumed() as usize)
            .unwrap_or(0)
    }
    /// From the shim's segment: the time since the current wait's start.
    fn waited(&self, p: u32) -> Option<SimTime> {
        let w = self.ranks.get(&p)?.shm.as_ref()?.get().current_wait()?;
        Some(SimTime(mono_ns().saturating_sub(w.start_ns) as i64))
    }
}

/// Whether an event sent at `as_of_ns` is stale for a rank whose current or
/// last wait began at `last_wait_start`: a wait begun after the send is not
/// the one the message landed in (that one has ended). A rank that has not
/// waited yet, or whose wait began by then, takes the event.
fn stale(last_wait_start: Option<u64>, as_of_ns: u64) -> bool {
    last_wait_start.is_some_and(|start| start > as_of_ns)
}

/// Whether rank `p` is on a CPU now: from its segment while it waits (a
/// spinning rank that tests its wait, [`RankShm::on_cpu`]; /proc cannot tell a
/// preempted spinner from a running one, both are `R`), else from /proc.
fn rank_on_cpu(ranks: &HashMap<u32, Rank>, p: u32) -> bool {
    ranks
        .get(&p)
        .and_then(|r| r.shm.as_ref())
        .and_then(|s| s.get().on_cpu(mono_ns(), proto::ON_CPU_FRESH_NS))
        .unwrap_or_else(|| procfs::running(p))
}

/// CLOCK_MONOTONIC now, ns (the clock of the shim's time stamps).
pub(crate) fn mono_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// A probe view: one process with one unconsumed message, on a CPU or not,
/// waiting since now or not in a wait.
struct Probe {
    running: bool,
    waiting: bool,
}
impl NodeView for Probe {
    fn now(&self) -> SimTime {
        SimTime(0)
    }
    fn processes(&self) -> &[u32] {
        &[1]
    }
    fn is_running(&self, _p: u32) -> bool {
        self.running
    }
    fn unconsumed(&self, _p: u32) -> usize {
        1
    }
    fn waited(&self, _p: u32) -> Option<SimTime> {
        self.waiting.then_some(SimTime(0))
    }
}

/// The events a policy needs from the shim: asked of a fresh instance on probe
/// views (an op that answers nothing there does not need its event). MESSAGE is
/// asked about a receiver off a CPU (the boosts of DCS, CC, PB), on one in a
/// wait (ICS's spin change) and on one not waiting; the receiver states whose
/// answer is nothing get their [`proto::skip`] bit, and the sender's shim does
/// not post those events.
fn event_mask(spec: &str) -> Result<u32, String> {
    let mut p = cosched_policies::registry::build_node(spec).map_err(|e| e.to_string())?;
    let mut out = vec![];
    let mut acts = |running: bool, waiting: bool| {
        out.clear();
        p.on_message(&Probe { running, waiting }, 1, running, &mut out);
        !out.is_empty()
    };
    let wanted = [
        (acts(false, true) | acts(false, false), proto::skip::OFF_CPU),
        (acts(true, true), proto::skip::ON_CPU_WAITING),
        (acts(true, false), proto::skip::ON_CPU_BUSY),
    ];
    let mut mask = 0;
    if wanted.iter().any(|(w, _)| *w) {
        mask |= 1 << msg::MESSAGE;
        for (w, bit) in wanted {
            if !w {
                mask |= bit;
            }
        }
    }
    let waiting = Probe {
        running: false,
        waiting: true,
    };
    out.clear();
    p.on_wait_begin(&waiting, 1, WaitKind::Recv, &mut out);
    if !out.is_empty() {
        mask |= 1 << msg::WAIT_BEGIN;
    }
    out.clear();
    p.on_collective(&waiting, 1, true, &mut out);
    p.on_collective(&waiting, 1, false, &mut out);
    if !out.is_empty() {
        mask |= (1 << msg::COLL_ENTER) | (1 << msg::COLL_EXIT);
    }
    Ok(mask)
}

/// The run of segment `name` (`/cosched.<run>.<job>.<rank>`).
fn segment_run(name: &str, job: i32, rank: i32) -> String {
    let s = name.trim_start_matches('/').trim_start_matches("cosched.");
    s.strip_suffix(&format!(".{job}.{rank}"))
        .unwrap_or(s)
        .to_string()
}

/// The segment `/cosched.<any run>.<job>.<rank>` whose `pid` field is `pid`
/// (an agent serves ranks of several runs: under Slurm each job step is a run).
fn find_segment(job: i32, rank: i32, pid: u32, uid: u32) -> Option<Shm> {
    let suffix = format!(".{job}.{rank}");
    let rd = std::fs::read_dir("/dev/shm").ok()?;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.starts_with("cosched.") || !name.ends_with(&suffix) {
            continue;
        }
        if let Ok(s) = Shm::open(&format!("/{name}"), uid) {
            let g = s.get();
            if g.magic.load(Ordering::Acquire) == proto::SHM_MAGIC
                && g.pid.load(Ordering::Acquire) == pid
            {
                return Some(s);
            }
            // Not this rank's: unmap without unlinking.
            s.forget();
        }
    }
    None
}

fn kind_of(i: usize) -> WaitKind {
    [
        WaitKind::Recv,
        WaitKind::SendAck,
        WaitKind::RecvCompletion,
        WaitKind::SendCompletion,
    ][i]
}

fn set_realtime() -> bool {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: plain syscall on the calling thread.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) == 0
    }
}

fn io_err(e: nix::Error, what: &str) -> MechError {
    MechError::Missing(format!("{what}: {e}"))
}

impl Agent {
    /// Sets the nodes up (cgroups, sockets). On error nothing is left changed.
    pub fn new(opts: AgentOptions) -> Result<Agent, MechError> {
        cosched_policies::registry::build_node(&opts.default_policy)
            .map_err(|e| MechError::Missing(format!("default policy: {e}")))?;
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|e| io_err(e, "epoll"))?;
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK,
        )
        .map_err(|e| io_err(e, "timerfd"))?;
        let stop = Arc::new(
            EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
                .map_err(|e| io_err(e, "eventfd"))?,
        );
        epoll
            .add(
                timer.as_fd(),
                EpollEvent::new(EpollFlags::EPOLLIN, TOK_TIMER),
            )
            .map_err(|e| io_err(e, "epoll"))?;
        epoll
            .add(stop.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, TOK_STOP))
            .map_err(|e| io_err(e, "epoll"))?;
        let mut nodes = vec![];
        for (i, n) in opts.nodes.iter().enumerate() {
            let mech = NodeMech::new(
                &opts.run,
                n.node,
                n.cpus.as_deref(),
                &opts.state_dir,
                opts.boost_factor,
            )?;
            let _ = std::fs::remove_file(&n.socket);
            let l = sock::socket(
                AddressFamily::Unix,
                SockType::SeqPacket,
                SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
                None,
            )
            .map_err(|e| io_err(e, "socket"))?;
            let addr = UnixAddr::new(&n.socket)
                .map_err(|e| io_err(e, &format!("socket path {}", n.socket.display())))?;
            sock::bind(l.as_raw_fd(), &addr)
                .map_err(|e| io_err(e, &format!("bind {}", n.socket.display())))?;
            sock::listen(&l, Backlog::new(128).unwrap()).map_err(|e| io_err(e, "listen"))?;
            epoll
                .add(
                    l.as_fd(),
                    EpollEvent::new(EpollFlags::EPOLLIN, TOK_LISTEN + i as u64),
                )
                .map_err(|e| io_err(e, "epoll"))?;
            nodes.push(Node {
                mech,
                listener: l,
                hosted: BTreeMap::new(),
            });
        }
        let cgroups = nodes
            .first()
            .map(|n| n.mech.cg.describe())
            .unwrap_or_default();
        Ok(Agent {
            start: Instant::now(),
            nodes,
            epoll,
            sigfd: None,
            timer,
            stop,
            conns: HashMap::new(),
            ranks: HashMap::new(),
            by_job_rank: HashMap::new(),
            jobs: HashMap::new(),
            gen: std::process::id() | 1,
            stats: AgentStats {
                cgroups,
                ..AgentStats::default()
            },
            shared: Arc::default(),
            sample: None,
            next_sample: None,
            sampled: HashMap::new(),
            job_hook: None,
            forward_hook: None,
            rank_hook: None,
            opts,
        })
    }

    /// Samples every rank's state into the shared timeline every `period`.
    pub fn set_sampling(&mut self, period: Duration) {
        self.sample = Some(period.max(Duration::from_millis(1)));
        self.next_sample = Some(Instant::now() + period);
    }

    /// Sets the hook told of job declarations and ends. Without one, a job
    /// declared for gang scheduling across nodes is refused (ENOTCONN).
    pub fn set_job_hook(&mut self, hook: JobHook) {
        self.job_hook = Some(hook);
    }

    /// Sets the hook told of MESSAGE events to ranks on other nodes. Without
    /// one, a job declared with [`proto::JOB_FORWARD`] is refused (ENOTCONN).
    pub fn set_forward_hook(&mut self, hook: ForwardHook) {
        self.forward_hook = Some(hook);
    }

    /// Sets the hook told of the ranks of forwarding jobs this agent serves.
    pub fn set_rank_hook(&mut self, hook: RankHook) {
        self.rank_hook = Some(hook);
    }

    /// Tells the rank hook that `rank` of `job` is served here (`on`) or not.
    fn report_rank(&mut self, job: i32, rank: i32, on: bool) {
        if self.jobs.get(&job).is_some_and(|j| j.forward) {
            if let Some(h) = &mut self.rank_hook {
                h(job, rank, on);
            }
        }
    }

    /// The state shared with an embedding controller.
    pub fn shared(&self) -> Arc<std::sync::Mutex<Shared>> {
        self.shared.clone()
    }

    fn take_sample(&mut self) {
        let now_ns = self.start.elapsed().as_nanos() as u64;
        let mut sh = self.shared.lock().unwrap();
        for (&pid, r) in &self.ranks {
            let mech = &self.nodes[r.node].mech;
            let used = mech.usage_ns(pid).unwrap_or(0);
            let (prev_used, prev_t) = self.sampled.get(&pid).copied().unwrap_or((used, now_ns));
            self.sampled.insert(pid, (used, now_ns));
            if now_ns <= prev_t {
                continue;
            }
            let spinning = r
                .shm
                .as_ref()
                .map(|s| s.get().state.load(Ordering::Relaxed))
                == Some(proto::state::SPINNING);
            let off =
                if mech.is_job_frozen(r.job) || procfs::stat(pid).is_none_or(|s| s.state != 'R') {
                    "blocked"
                } else {
                    "ready"
                };
            sh.timeline.push(Sample {
                node: self.opts.nodes[r.node].node,
                job: r.job,
                rank: r.rank,
                pid,
                start_ns: prev_t,
                end_ns: now_ns,
                cpu_ns: used.saturating_sub(prev_used).min(now_ns - prev_t),
                on: if spinning { "spin" } else { "useful" },
                off,
            });
        }
    }

    /// A handle to stop the loop from another thread.
    pub fn stopper(&self) -> Stopper {
        Stopper(self.stop.clone())
    }

    /// Handles SIGTERM, SIGINT and SIGHUP in the loop, and SIGUSR1, which
    /// prints the counters ([`AgentStats`], one JSON line on stderr) and
    /// goes on (blocks them for the calling thread; a standalone agent calls
    /// this, an embedded one does not).
    pub fn handle_signals(&mut self) -> nix::Result<()> {
        let mut set = SigSet::empty();
        for s in [
            Signal::SIGTERM,
            Signal::SIGINT,
            Signal::SIGHUP,
            Signal::SIGUSR1,
        ] {
            set.add(s);
        }
        set.thread_block()?;
        let fd = SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)?;
        self.epoll
            .add(fd.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, TOK_SIGNAL))?;
        self.sigfd = Some(fd);
        Ok(())
    }

    /// The counters as one JSON line on stderr (`cosched-agent: stats {...}`).
    pub fn print_stats(&self) {
        if let Ok(j) = serde_json::to_string(&self.stats) {
            eprintln!("cosched-agent: stats {j}");
        }
    }

    fn now(&self) -> SimTime {
        SimTime(self.start.elapsed().as_nanos() as i64)
    }

    /// Runs until a signal or a stop request, then restores everything.
    pub fn run(&mut self) -> Result<(), MechError> {
        if self.opts.realtime {
            self.stats.realtime = set_realtime();
        }
        let mut events = vec![EpollEvent::empty(); 64];
        'outer: loop {
            self.arm_timer();
            let n = match self.epoll.wait(&mut events, EpollTimeout::NONE) {
                Ok(n) => n,
                Err(nix::Error::EINTR) => continue,
                Err(e) => return Err(io_err(e, "epoll_wait")),
            };
            for ev in &events[..n] {
                match ev.data() {
                    TOK_SIGNAL => {
                        let sig = self
                            .sigfd
                            .as_ref()
                            .and_then(|fd| fd.read_signal().ok().flatten());
                        if sig.is_some_and(|s| s.ssi_signo == Signal::SIGUSR1 as u32) {
                            self.print_stats();
                            continue;
                        }
                        break 'outer;
                    }
                    TOK_STOP => break 'outer,
                    TOK_TIMER => {
                        let _ = self.timer.wait();
                        self.on_timer();
                    }
                    t if t >= TOK_LISTEN => self.accept((t - TOK_LISTEN) as usize),
                    fd => self.on_readable(fd as RawFd),
                }
            }
        }
        self.stats.cpu_ns = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
            .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
            .unwrap_or(0);
        self.restore();
        Ok(())
    }

    fn accept(&mut self, node: usize) {
        while let Ok(fd) = sock::accept4(
            self.nodes[node].listener.as_raw_fd(),
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        ) {
            // SAFETY: accept4 returned a new descriptor that we own.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            if self
                .epoll
                .add(
                    owned.as_fd(),
                    EpollEvent::new(EpollFlags::EPOLLIN, fd as u64),
                )
                .is_ok()
            {
                self.conns.insert(fd, (owned, node));
            }
        }
    }

    fn on_readable(&mut self, fd: RawFd) {
        let mut buf = [0u8; 256];
        loop {
            match sock::recv(fd, &mut buf, MsgFlags::MSG_DONTWAIT) {
                Ok(0) => return self.close(fd),
                Ok(n) => self.on_packet(fd, &buf[..n]),
                Err(nix::Error::EAGAIN) => return,
                Err(nix::Error::EINTR) => continue,
                Err(_) => return self.close(fd),
            }
        }
    }

    fn reply(&self, fd: RawFd, job: i32, err: i32) {
        let m = Msg::new(msg::ACK, job, 0, err);
        let _ = sock::send(
            fd,
            m.as_bytes(),
            MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
        );
    }

    fn on_packet(&mut self, fd: RawFd, b: &[u8]) {
        if let Some(j) = JobMsg::from_bytes(b) {
            let err = match Self::peer(fd) {
                Some((_, uid)) => self.on_job_msg(&j, uid),
                None => libc::EPERM,
            };
            return self.reply(fd, j.job, err);
        }
        let Some(m) = Msg::from_bytes(b) else { return };
        if m.version != proto::PROTO_VERSION {
            return self.reply(fd, m.job, libc::EPROTO);
        }
        self.stats.events += 1;
        match m.kind {
            msg::REGISTER => {
                let err = self.register(fd, &m);
                self.reply(fd, m.job, err);
                if err == 0 {
                    self.stats.registered += 1;
                }
            }
            // A rank's own messages count only on the connection it registered on.
            msg::UNREGISTER if self.registered_on(m.pid as u32, fd) => self.release(m.pid as u32),
            msg::UNREGISTER => {}
            msg::WAIT_BEGIN | msg::COLL_ENTER | msg::COLL_EXIT => {
                let pid = m.pid as u32;
                if self.registered_on(pid, fd) {
                    let kind = (m.arg as usize).min(proto::WAIT_KINDS - 1);
                    self.dispatch(pid, |p, v, out| match m.kind {
                        msg::WAIT_BEGIN => p.on_wait_begin(v, pid, kind_of(kind), out),
                        k => p.on_collective(v, pid, k == msg::COLL_ENTER, out),
                    });
                }
            }
            msg::MESSAGE => {
                let from = m.pid as u32;
                if !self.registered_on(from, fd) {
                    return;
                }
                let key = (self.ranks[&from].run.clone(), m.job, m.rank);
                if let Some(&dest) = self.by_job_rank.get(&key) {
                    let running = rank_on_cpu(&self.ranks, dest);
                    self.dispatch_as_of(dest, m.t_ns, |p, v, out| {
                        p.on_message(v, dest, running, out)
                    });
                } else {
                    match (&mut self.forward_hook, self.jobs.get(&m.job)) {
                        (Some(h), Some(j)) if j.forward => {
                            // The shim's stamp is this machine's CLOCK_MONOTONIC; the
                            // other nodes compare it on the shared CLOCK_REALTIME.
                            let real = crate::gangnet::realtime_ns();
                            let sent = real.saturating_sub(mono_ns().saturating_sub(m.t_ns));
                            h(m.job, m.rank, m.b != 0, sent);
                            self.stats.forwarded_out += 1;
                        }
                        _ => self.stats.remote_dropped += 1,
                    }
                }
            }
            msg::FORWARD => {
                if matches!(Self::peer(fd), Some((_, uid)) if self.may_control(uid, m.job)) {
                    self.forwarded(m.job, m.rank, m.arg.max(0) as u64, m.b, m.t_ns);
                }
            }
            MSG_SLOT => {
                let t0 = Instant::now();
                let err = match Self::peer(fd) {
                    Some((_, uid)) if self.may_control(uid, m.job) => self.slot(m.job, m.arg != 0),
                    _ => libc::EPERM,
                };
                self.stats.slot_switches += 1;
                self.stats.slot_switch_ns += t0.elapsed().as_nanos() as u64;
                self.reply(fd, m.job, err);
            }
            MSG_ADOPT => {
                let err = self.adopt(fd, &m);
                self.reply(fd, m.job, err);
            }
            _ => {}
        }
    }

    /// `count` MESSAGE events from another node for `rank` of `job` (every
    /// local rank of that number: each step of the job that has one here);
    /// `uncounted` of them are added to its `arrivals`. The node policy is
    /// told once per packet (a batch of the sender's node), as for one arrival,
    /// as of `sent_ns` (CLOCK_MONOTONIC here; 0: unknown), the latest send of
    /// the batch: for a destination whose current or last wait began after
    /// that, the wait the messages landed in is over, and the policy is not
    /// told (counted in [`AgentStats::forwarded_stale`]).
    fn forwarded(&mut self, job: i32, rank: i32, count: u64, uncounted: u64, sent_ns: u64) {
        if count == 0 {
            return;
        }
        let dests: Vec<u32> = self
            .ranks
            .iter()
            .filter(|(_, r)| r.job == job && r.rank == rank)
            .map(|(&p, _)| p)
            .collect();
        for dest in dests {
            if let Some(s) = self.ranks.get(&dest).and_then(|r| r.shm.as_ref()) {
                if uncounted > 0 {
                    s.get()
                        .arrivals
                        .fetch_add(uncounted.min(count), Ordering::SeqCst);
                    s.wake();
                }
            }
            let as_of = if sent_ns == 0 { u64::MAX } else { sent_ns };
            let last = self
                .ranks
                .get(&dest)
                .and_then(|r| r.shm.as_ref())
                .and_then(|s| s.get().last_wait_start());
            if stale(last, as_of) {
                self.stats.forwarded_stale += count;
                continue;
            }
            self.stats.forwarded_in += count;
            let running = rank_on_cpu(&self.ranks, dest);
            let boosts = self.stats.boosts;
            self.dispatch_as_of(dest, as_of, |p, v, out| p.on_message(v, dest, running, out));
            self.stats.forwarded_boosts += self.stats.boosts - boosts;
        }
    }

    /// Whether `pid` is a rank registered (or adopted) on connection `fd`.
    fn registered_on(&self, pid: u32, fd: RawFd) -> bool {
        self.ranks.get(&pid).is_some_and(|r| r.conn == fd)
    }

    /// Whether a peer of `uid` may end, switch or adopt into `job`: root, or the
    /// uid that declared it.
    fn may_control(&self, uid: u32, job: i32) -> bool {
        uid == 0 || self.jobs.get(&job).is_some_and(|j| j.uid == uid)
    }

    fn on_job_msg(&mut self, j: &JobMsg, uid: u32) -> i32 {
        match j.kind {
            msg::JOB => {
                let Ok(spec) = j.spec_str() else {
                    return libc::EINVAL;
                };
                // The same spec again is one more declaration; another spec is refused.
                if let Some(old) = self.jobs.get_mut(&j.job) {
                    if old.spec != spec {
                        return libc::EBUSY;
                    }
                    if uid != 0 && uid != old.uid {
                        return libc::EPERM;
                    }
                    old.count += 1;
                    return 0;
                }
                // An unknown or invalid spec is refused, optional or not: the
                // launcher of an optional job then runs it uncoscheduled.
                if event_mask(spec).is_err() {
                    return libc::EINVAL;
                }
                let hooked = match &mut self.job_hook {
                    Some(h) => h(j, true),
                    None if j.flags & (proto::JOB_GANG | proto::JOB_FORWARD) != 0 => libc::ENOTCONN,
                    None => 0,
                };
                if hooked != 0 {
                    return hooked;
                }
                self.jobs.insert(
                    j.job,
                    Job {
                        uid,
                        spec: spec.to_string(),
                        count: 1,
                        forward: j.flags & proto::JOB_FORWARD != 0,
                    },
                );
                0
            }
            msg::JOB_END => {
                if !self.may_control(uid, j.job) {
                    return libc::EPERM;
                }
                if let Some(old) = self.jobs.get_mut(&j.job) {
                    old.count -= 1;
                    if old.count > 0 {
                        return 0;
                    }
                }
                let pids: Vec<u32> = self
                    .ranks
                    .iter()
                    .filter(|(_, r)| r.job == j.job)
                    .map(|(&p, _)| p)
                    .collect();
                for p in pids {
                    self.release(p);
                }
                for n in &mut self.nodes {
                    if n.mech.is_job_frozen(j.job) {
                        let _ = n.mech.set_job_frozen(j.job, false);
                    }
                }
                if self.jobs.remove(&j.job).is_some() {
                    if let Some(h) = &mut self.job_hook {
                        h(j, false);
                    }
                }
                0
            }
            _ => libc::EINVAL,
        }
    }

    /// The credentials of the peer of `fd`.
    fn peer(fd: RawFd) -> Option<(u32, u32)> {
        // SAFETY: fd is a live connection owned by self.conns for this call.
        let b = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        sock::getsockopt(&b, sockopt::PeerCredentials)
            .ok()
            .map(|c| (c.pid() as u32, c.uid()))
    }

    fn host(&mut self, node: usize, spec: &str, pid: u32) -> Result<u32, String> {
        let n = &mut self.nodes[node];
        if !n.hosted.contains_key(spec) {
            let policy = cosched_policies::registry::build_node(spec).map_err(|e| e.to_string())?;
            let mask = event_mask(spec)?;
            let period = policy
                .period()
                .map(|t| Duration::from_nanos(t.0.max(1) as u64));
            let tick = policy.ops().contains(Ops::TICK);
            n.hosted.insert(
                spec.to_string(),
                Hosted {
                    policy,
                    pids: vec![],
                    mask,
                    period,
                    next_timer: None,
                    tick,
                    next_tick: None,
                },
            );
        }
        let h = n.hosted.get_mut(spec).unwrap();
        h.pids.push(pid);
        h.pids.sort();
        let now = Instant::now();
        if let (Some(p), None) = (h.period, h.next_timer) {
            h.next_timer = Some(now + p);
        }
        if h.tick && h.next_tick.is_none() {
            h.next_tick = Some(now + TICK);
        }
        Ok(h.mask)
    }

    fn register(&mut self, fd: RawFd, m: &Msg) -> i32 {
        let Some(&(_, node)) = self.conns.get(&fd) else {
            return libc::EINVAL;
        };
        let pid = m.pid as u32;
        // A rank registers itself: the socket's peer must be that process.
        let Some((_, uid)) = Self::peer(fd).filter(|c| c.0 == pid) else {
            return libc::EPERM;
        };
        if self.ranks.contains_key(&pid) {
            return libc::EBUSY;
        }
        let Some(shm) = find_segment(m.job, m.rank, pid, uid) else {
            return libc::ENOENT;
        };
        let run = segment_run(&shm.name, m.job, m.rank);
        if self.by_job_rank.contains_key(&(run.clone(), m.job, m.rank)) {
            return libc::EBUSY;
        }
        let spec = self
            .jobs
            .get(&m.job)
            .map(|j| j.spec.clone())
            .unwrap_or_else(|| self.opts.default_policy.clone());
        let mask = match self.host(node, &spec, pid) {
            Ok(mk) => mk,
            Err(_) => return libc::EINVAL,
        };
        if let Err(e) = self.nodes[node].mech.add_rank(pid, m.job, m.rank) {
            eprintln!("cosched-agent: rank {} of job {}: {e}", m.rank, m.job);
            self.unhost(node, &spec, pid);
            return libc::EPERM;
        }
        let now = self.now();
        let h = self.nodes[node].hosted.get_mut(&spec).unwrap();
        let view = View {
            now,
            procs: &h.pids,
            ranks: &self.ranks,
        };
        let s = shm.get();
        for k in 0..proto::WAIT_KINDS {
            let (mode, spin) = match h.policy.wait_mode(&view, pid, kind_of(k)) {
                WaitMode::Spin => (proto::mode::SPIN, 0),
                WaitMode::SpinBlock(t) => (proto::mode::SPINBLOCK, t.0.max(0) as u64),
                WaitMode::Block => (proto::mode::BLOCK, 0),
                WaitMode::Yield => (proto::mode::YIELD, 0),
            };
            s.wait_mode[k].store(mode, Ordering::SeqCst);
            s.spin_ns[k].store(spin, Ordering::SeqCst);
        }
        s.event_mask.store(mask, Ordering::SeqCst);
        s.agent_gen.store(self.gen, Ordering::SeqCst);
        self.ranks.insert(
            pid,
            Rank {
                run: run.clone(),
                job: m.job,
                rank: m.rank,
                node,
                spec,
                conn: fd,
                shm: Some(shm),
                boost_until_run: None,
            },
        );
        self.by_job_rank.insert((run, m.job, m.rank), pid);
        self.shared.lock().unwrap().pids.insert(pid, m.job);
        self.report_rank(m.job, m.rank, true);
        0
    }

    fn adopt(&mut self, fd: RawFd, m: &Msg) -> i32 {
        let Some(&(_, conn_node)) = self.conns.get(&fd) else {
            return libc::EINVAL;
        };
        let node = if m.arg >= 0 && (m.arg as usize) < self.nodes.len() {
            m.arg as usize
        } else {
            conn_node
        };
        let pid = m.pid as u32;
        let Some((peer, uid)) = Self::peer(fd) else {
            return libc::EPERM;
        };
        // Only a process the launcher started (a descendant), of a job it may control.
        if !self.may_control(uid, m.job) || !procfs::descends_from(pid, peer) {
            return libc::EPERM;
        }
        let run = self.opts.run.clone();
        if self.ranks.contains_key(&pid)
            || self.by_job_rank.contains_key(&(run.clone(), m.job, m.rank))
        {
            return libc::EBUSY;
        }
        let spec = self
            .jobs
            .get(&m.job)
            .map(|j| j.spec.clone())
            .unwrap_or_else(|| self.opts.default_policy.clone());
        if let Err(e) = self.nodes[node].mech.add_rank(pid, m.job, m.rank) {
            eprintln!("cosched-agent: adopt {pid}: {e}");
            return libc::EPERM;
        }
        if self.host(node, &spec, pid).is_err() {
            let _ = self.nodes[node].mech.remove_rank(pid);
            return libc::EINVAL;
        }
        self.ranks.insert(
            pid,
            Rank {
                run: run.clone(),
                job: m.job,
                rank: m.rank,
                node,
                spec,
                conn: fd,
                shm: None,
                boost_until_run: None,
            },
        );
        self.by_job_rank.insert((run, m.job, m.rank), pid);
        self.shared.lock().unwrap().pids.insert(pid, m.job);
        self.report_rank(m.job, m.rank, true);
        0
    }

    fn unhost(&mut self, node: usize, spec: &str, pid: u32) {
        if let Some(h) = self.nodes[node].hosted.get_mut(spec) {
            h.pids.retain(|&p| p != pid);
            if h.pids.is_empty() {
                // As in the simulator, a timer chain is not re-armed on an empty node.
                h.next_timer = None;
                h.next_tick = None;
            }
        }
    }

    /// Ends everything for `pid`: its weight, freeze, cgroups, segment.
    fn release(&mut self, pid: u32) {
        let Some(r) = self.ranks.remove(&pid) else {
            return;
        };
        self.by_job_rank.remove(&(r.run.clone(), r.job, r.rank));
        self.sampled.remove(&pid);
        self.report_rank(r.job, r.rank, false);
        {
            // Measured use, read before the rank's cgroup goes.
            let cpu = self.nodes[r.node].mech.usage_ns(pid).unwrap_or(0);
            let (v, n) = procfs::context_switches(pid).unwrap_or((0, 0));
            let mut sh = self.shared.lock().unwrap();
            sh.pids.remove(&pid);
            let u = sh.usage.entry(r.job).or_default();
            u.cpu_ns += cpu;
            u.ctx_voluntary += v;
            u.ctx_involuntary += n;
            u.ranks += 1;
        }
        self.unhost(r.node, &r.spec, pid);
        if let Err(e) = self.nodes[r.node].mech.remove_rank(pid) {
            eprintln!("cosched-agent: release {pid}: {e}");
        }
        drop(r.shm);
    }

    fn close(&mut self, fd: RawFd) {
        // A closed connection without UNREGISTER: the ranks of it died.
        let pids: Vec<u32> = self
            .ranks
            .iter()
            .filter(|(_, r)| r.conn == fd)
            .map(|(&p, _)| p)
            .collect();
        for p in pids {
            self.release(p);
        }
        if let Some((owned, _)) = self.conns.remove(&fd) {
            let _ = self.epoll.delete(owned.as_fd());
        }
    }

    /// Switches `job`'s slot on every node; on an error, the nodes already
    /// switched are switched back (all or nothing), then EIO.
    fn slot(&mut self, job: i32, run: bool) -> i32 {
        let before: Vec<bool> = self
            .nodes
            .iter()
            .map(|n| n.mech.is_job_frozen(job))
            .collect();
        for i in 0..self.nodes.len() {
            if let Err(e) = self.nodes[i].mech.set_job_frozen(job, !run) {
                eprintln!("cosched-agent: slot job {job} on node {i}: {e}");
                for k in (0..=i).rev() {
                    if let Err(e) = self.nodes[k].mech.set_job_frozen(job, before[k]) {
                        eprintln!("cosched-agent: slot job {job}: undo on node {k}: {e}");
                    }
                }
                return libc::EIO;
            }
        }
        0
    }

    /// Calls one op of the policy hosting `pid` and applies its actions.
    fn dispatch(
        &mut self,
        pid: u32,
        op: impl FnOnce(&mut dyn NodePolicy, &dyn NodeView, &mut Vec<NodeAction>),
    ) {
        self.dispatch_as_of(pid, u64::MAX, op)
    }

    /// [`Agent::dispatch`] for an event that happened at `as_of_ns`
    /// (CLOCK_MONOTONIC): a spin change applies only to a wait begun by then.
    fn dispatch_as_of(
        &mut self,
        pid: u32,
        as_of_ns: u64,
        op: impl FnOnce(&mut dyn NodePolicy, &dyn NodeView, &mut Vec<NodeAction>),
    ) {
        let Some(r) = self.ranks.get(&pid) else {
            return;
        };
        let (node, spec) = (r.node, r.spec.clone());
        let now = self.now();
        let mut out = vec![];
        {
            let h = self.nodes[node].hosted.get_mut(&spec).unwrap();
            let view = View {
                now,
                procs: &h.pids,
                ranks: &self.ranks,
            };
            op(h.policy.as_mut(), &view, &mut out);
        }
        self.apply(node, &spec, out, as_of_ns);
    }

    /// Stores a spin change for `p`'s current wait if it spins in a wait begun
    /// at or before `as_of_ns`; whether it did.
    fn spin_for(&mut self, p: u32, d: SimTime, as_of_ns: u64) -> bool {
        let Some(s) = self.ranks.get(&p).and_then(|r| r.shm.as_ref()) else {
            return false;
        };
        let s = s.get();
        match s.current_wait() {
            Some(w) if w.spinning && w.start_ns <= as_of_ns => {
                s.set_spin_end(w, mono_ns().saturating_add(d.0.max(0) as u64));
                true
            }
            _ => false,
        }
    }

    fn apply(&mut self, node: usize, spec: &str, mut out: Vec<NodeAction>, as_of_ns: u64) {
        // The recommendation of a free CPU: Linux gives no dispatch hook to user
        // space, so a recommended process that is not running is boosted until it runs.
        {
            let now = self.now();
            let h = self.nodes[node].hosted.get_mut(spec).unwrap();
            let view = View {
                now,
                procs: &h.pids,
                ranks: &self.ranks,
            };
            // A rank whose boost until run is pending is not boosted again
            // (that would restart its checks at every tick and event).
            if let Some(p) = h.policy.recommend(&view) {
                let pending = self
                    .ranks
                    .get(&p)
                    .is_some_and(|r| r.boost_until_run.is_some());
                if !pending && !rank_on_cpu(&self.ranks, p) {
                    out.push(NodeAction::BoostUntilRun(p));
                }
            }
        }
        for a in out {
            self.stats.actions += 1;
            let res = match a {
                NodeAction::Boost(p) => {
                    self.stats.boosts += 1;
                    if let Some(r) = self.ranks.get_mut(&p) {
                        r.boost_until_run = None;
                    }
                    self.boost(node, p)
                }
                NodeAction::BoostUntilRun(p) => {
                    self.stats.boosts += 1;
                    let spinning = self
                        .ranks
                        .get(&p)
                        .and_then(|r| r.shm.as_ref())
                        .is_some_and(|s| s.get().is_spinning());
                    let mark = if spinning {
                        RunMark::Spinning(mono_ns())
                    } else {
                        RunMark::Used(self.nodes[node].mech.usage_ns(p).unwrap_or(0))
                    };
                    if let Some(r) = self.ranks.get_mut(&p) {
                        r.boost_until_run = Some((mark, 0, Instant::now() + BOOST_CHECK));
                    }
                    self.boost(node, p)
                }
                NodeAction::Unboost(p) => {
                    if let Some(r) = self.ranks.get_mut(&p) {
                        r.boost_until_run = None;
                    }
                    self.nodes[node].mech.set_boost(p, false)
                }
                NodeAction::Interrupt(p) => {
                    self.stats.interrupts += 1;
                    if let Some(s) = self.ranks.get(&p).and_then(|r| r.shm.as_ref()) {
                        s.wake();
                    }
                    Ok(())
                }
                NodeAction::SpinFor(p, d) => {
                    if self.spin_for(p, d, as_of_ns) {
                        self.stats.spin_changes += 1;
                    } else {
                        self.stats.spins_refused += 1;
                    }
                    Ok(())
                }
            };
            if let Err(e) = res {
                eprintln!("cosched-agent: {a:?}: {e}");
            }
        }
    }

    /// Raises `p`'s weight and asks for a reschedule check on its CPU (a
    /// weight write alone never preempts, `nudge.rs`).
    fn boost(&mut self, node: usize, p: u32) -> Result<(), MechError> {
        self.nodes[node].mech.set_boost(p, true)?;
        if self.nodes[node].mech.nudge(p) {
            self.stats.nudges += 1;
        }
        Ok(())
    }

    fn on_timer(&mut self) {
        let now = Instant::now();
        if let (Some(t), Some(p)) = (self.next_sample, self.sample) {
            if t <= now {
                self.next_sample = Some(next_after(t, p, now));
                self.take_sample();
            }
        }
        // Boosts until run: a process whose CPU time grew has run; one that did
        // not run within its checks loses the boost; a frozen one is not checked.
        let pending: Vec<(u32, usize, (RunMark, u32, Instant))> = self
            .ranks
            .iter()
            .filter(|(_, r)| !self.nodes[r.node].mech.is_job_frozen(r.job))
            .filter_map(|(&p, r)| r.boost_until_run.map(|u| (p, r.node, u)))
            .filter(|(_, _, (_, _, due))| *due <= now)
            .collect();
        let mut ran_ranks = vec![];
        for (p, node, (mark, checks, _)) in pending {
            let ran = match mark {
                RunMark::Spinning(t) => self.ranks[&p]
                    .shm
                    .as_ref()
                    .is_none_or(|s| s.get().spun_since(t)),
                RunMark::Used(used) => self.nodes[node].mech.usage_ns(p).unwrap_or(u64::MAX) > used,
            };
            let next = boost_check_delay(checks + 1);
            let r = self.ranks.get_mut(&p).unwrap();
            match next {
                Some(d) if !ran => {
                    r.boost_until_run = Some((mark, checks + 1, now + d));
                    // It may have become eligible since: ask again.
                    if self.nodes[node].mech.nudge(p) {
                        self.stats.nudges += 1;
                    }
                }
                _ => {
                    r.boost_until_run = None;
                    if ran {
                        ran_ranks.push(p);
                    } else {
                        self.stats.boosts_expired += 1;
                    }
                    let _ = self.nodes[node].mech.set_boost(p, false);
                }
            }
        }
        for p in ran_ranks {
            self.tell_running(p);
        }
        self.fire_periodic_ops(now);
    }

    /// A boosted rank has run (a boost-until-run check saw it): its policy's
    /// `running` op, if it has one (PB: a standing recommendation is taken once
    /// its rank runs, so it is not boosted again before the next scan). The
    /// agent learns of the dispatch at its next check, up to 250 us late.
    fn tell_running(&mut self, p: u32) {
        let Some(r) = self.ranks.get(&p) else { return };
        let wants = self.nodes[r.node]
            .hosted
            .get(&r.spec)
            .is_some_and(|h| h.policy.ops().contains(Ops::RUNNING));
        if wants {
            self.dispatch(p, |pol, v, out| pol.running(v, p, out));
        }
    }

    /// The policies' periodic ops that are due at `now`: `tick` every [`TICK`]
    /// and `on_timer` every `period`. Each op sees the time it was due, on its
    /// own grid, not the time the timer fired: a policy that counts ticks (PB's
    /// scan "at the first tick at or after" the last one + its period) then acts
    /// every ceil(period / tick) ticks as in the simulator, however late each
    /// wake-up is.
    fn fire_periodic_ops(&mut self, now: Instant) {
        for node in 0..self.nodes.len() {
            let specs: Vec<String> = self.nodes[node].hosted.keys().cloned().collect();
            for spec in specs {
                let h = self.nodes[node].hosted.get_mut(&spec).unwrap();
                let (mut fire_timer, mut fire_tick) = (None, None);
                if let (Some(t), Some(p)) = (h.next_timer, h.period) {
                    if t <= now {
                        fire_timer = Some(t);
                        h.next_timer = if h.pids.is_empty() {
                            None
                        } else {
                            Some(next_after(t, p, now))
                        };
                    }
                }
                if let Some(t) = h.next_tick {
                    if t <= now {
                        fire_tick = Some(t);
                        h.next_tick = if h.pids.is_empty() {
                            None
                        } else {
                            Some(next_after(t, TICK, now))
                        };
                    }
                }
                if (fire_timer.is_none() && fire_tick.is_none()) || h.pids.is_empty() {
                    continue;
                }
                let mut out = vec![];
                let at = |t: Instant| View {
                    now: SimTime(t.saturating_duration_since(self.start).as_nanos() as i64),
                    procs: &h.pids,
                    ranks: &self.ranks,
                };
                if let Some(t) = fire_tick {
                    h.policy.tick(&at(t), &mut out);
                }
                if let Some(t) = fire_timer {
                    h.policy.on_timer(&at(t), &mut out);
                }
                self.apply(node, &spec, out, u64::MAX);
            }
        }
    }

    fn arm_timer(&mut self) {
        let mut next: Option<Instant> = None;
        let mut take = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: Instant| n.min(t)));
            }
        };
        for n in &self.nodes {
            for h in n.hosted.values() {
                take(h.next_timer);
                take(h.next_tick);
            }
        }
        take(self.next_sample);
        take(self.next_boost_check());
        match next {
            None => {
                let _ = self.timer.unset();
            }
            Some(t) => {
                let d = t
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_micros(1));
                let _ = self.timer.set(
                    Expiration::OneShot(TimeSpec::from_duration(d)),
                    TimerSetTimeFlags::empty(),
                );
            }
        }
    }

    /// When the earliest pending boost-until-run check is due; ranks of frozen
    /// jobs are not checked (they cannot run), so they arm nothing.
    fn next_boost_check(&self) -> Option<Instant> {
        self.ranks
            .values()
            .filter(|r| !self.nodes[r.node].mech.is_job_frozen(r.job))
            .filter_map(|r| r.boost_until_run.map(|(_, _, due)| due))
            .min()
    }

    /// Releases every rank, thaws every job, removes the cgroups, the sockets and
    /// the state files. Idempotent.
    pub fn restore(&mut self) {
        let pids: Vec<u32> = self.ranks.keys().copied().collect();
        for p in pids {
            self.release(p);
        }
        for n in &mut self.nodes {
            n.mech.restore();
        }
        for n in &self.opts.nodes {
            let _ = std::fs::remove_file(&n.socket);
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.restore();
    }
}

/// The next firing of a periodic op that was due at `t`: one period later, or, when the agent fell behind
/// (it was not scheduled for longer than a period), one period from now, so missed firings are skipped
/// instead of run back to back.
fn next_after(t: Instant, period: Duration, now: Instant) -> Instant {
    let next = t + period;
    if next > now {
        next
    } else {
        now + period
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn message_events_are_asked_only_for_the_receiver_states_a_policy_acts_on() {
        use proto::skip::{OFF_CPU, ON_CPU_BUSY, ON_CPU_WAITING};
        let message = |spec: &str| {
            event_mask(spec).unwrap() & (1 << msg::MESSAGE | OFF_CPU | ON_CPU_WAITING | ON_CPU_BUSY)
        };
        // DCS and CC boost (and interrupt) a receiver that is not running and do nothing for one that is:
        // the events to a receiver on a CPU, waiting or not, are skipped by the sender.
        for spec in ["dcs", "cc"] {
            assert_eq!(
                message(spec),
                1 << msg::MESSAGE | ON_CPU_WAITING | ON_CPU_BUSY,
                "{spec}"
            );
        }
        // ICS changes the spin of a running receiver in a wait only: off a CPU, or not waiting, skipped.
        assert_eq!(message("ics"), 1 << msg::MESSAGE | OFF_CPU | ON_CPU_BUSY);
        // NLS and HYBRID have no message op: no MESSAGE event at all, and no skip bit.
        assert_eq!(message("nls"), 0);
        assert_eq!(message("hybrid"), 0);
    }

    #[test]
    fn periodic_ops_skip_missed_firings_after_a_stall() {
        let t = Instant::now();
        let p = Duration::from_millis(10);
        assert_eq!(super::next_after(t, p, t + Duration::from_millis(3)), t + p);
        let late = t + Duration::from_millis(35);
        assert_eq!(super::next_after(t, p, late), late + p);
    }

    use super::*;

    #[test]
    fn a_forwarded_event_is_stale_only_for_a_wait_begun_after_its_send() {
        // The destination began its current (or last) wait at 100.
        assert!(
            !stale(Some(100), 100),
            "sent as the wait began: it belongs to it"
        );
        assert!(
            !stale(Some(100), 150),
            "sent during the wait (or after it ended)"
        );
        assert!(
            stale(Some(100), 99),
            "sent before: a later wait than the one it landed in"
        );
        assert!(!stale(None, 5), "no wait yet");
        // No send time (0 in the packet): the agent passes u64::MAX, the current wait.
        assert!(!stale(Some(100), u64::MAX));
    }

    /// Creates `/dev/shm/<name>` with `len` bytes; removed on drop.
    struct Seg(String);
    impl Seg {
        fn new(name: &str, len: usize) -> Seg {
            let n = format!("cosched.test-{name}-{}.1.0", std::process::id());
            std::fs::write(format!("/dev/shm/{n}"), vec![0u8; len]).unwrap();
            Seg(n)
        }
    }
    impl Drop for Seg {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(format!("/dev/shm/{}", self.0));
        }
    }

    fn uid() -> u32 {
        // SAFETY: getuid cannot fail.
        unsafe { libc::getuid() }
    }

    #[test]
    fn shm_open_refuses_short_files_symlinks_and_other_owners() {
        let empty = Seg::new("empty", 0);
        assert_eq!(
            Shm::open(&format!("/{}", empty.0), uid()).err(),
            Some(ShmError::TooSmall(0))
        );
        let short = Seg::new("short", size_of::<RankShm>() - 1);
        assert!(matches!(
            Shm::open(&format!("/{}", short.0), uid()),
            Err(ShmError::TooSmall(_))
        ));
        let full = Seg::new("full", size_of::<RankShm>());
        let link = format!("cosched.test-link-{}.1.0", std::process::id());
        let _ = std::fs::remove_file(format!("/dev/shm/{link}"));
        std::os::unix::fs::symlink(format!("/dev/shm/{}", full.0), format!("/dev/shm/{link}"))
            .unwrap();
        let _l = Seg(link.clone());
        assert_eq!(
            Shm::open(&format!("/{link}"), uid()).err(),
            Some(ShmError::Os(nix::errno::Errno::ELOOP))
        );
        Shm::open(&format!("/{}", full.0), uid()).unwrap().forget();
        // Owned by the caller (root in the tests): refused for another uid
        // unless the caller is root, whose files are always accepted.
        let r = Shm::open(&format!("/{}", full.0), uid() + 12345);
        if uid() == 0 {
            r.unwrap().forget();
        } else {
            assert_eq!(r.err(), Some(ShmError::Owner(uid())));
        }
    }

    #[test]
    fn shm_open_refuses_a_file_of_another_user() {
        if uid() != 0 {
            return;
        }
        let s = Seg::new("owner", size_of::<RankShm>());
        std::os::unix::fs::chown(format!("/dev/shm/{}", s.0), Some(4242), None).unwrap();
        assert_eq!(
            Shm::open(&format!("/{}", s.0), 1000).err(),
            Some(ShmError::Owner(4242))
        );
        Shm::open(&format!("/{}", s.0), 4242).unwrap().forget();
    }
}

//! The controller of `cosched run`: admits jobs over the virtual nodes of this
//! machine with the same cluster policy code as the simulator, launches them with
//! `mpiexec` under the shim, switches gang slots through the agent, and
//! measures what the simulator reports.
//!
//! * Admission: `fcfs` (MPL `mpl`), `batch` / `easy` (MPL 1) run the job-level
//!   [`ClusterPolicy`] of `cosched-policies` (`fcfs`, `fcfs[strict=false]` for
//!   `batch[strict=false]`, `easy`) over a view whose
//!   processors are the process slots: `mpl` per virtual node (times the rows
//!   under gang; memory-aware: only on nodes with memory left); a started job is then
//!   placed on distinct nodes by PACKING (the simulator's rule,
//!   [`cosched_rules::place::packing`]: the least-loaded layer with room, then
//!   the emptiest contiguous run; within a gang row, first fit) or NO PACKING
//!   (seeded random choice). A job that cannot be placed yet stays first in line.
//! * Gang: the simulator's gang slot policy object
//!   (`cosched_policies::process::gang::Gang`, picked by the same
//!   `gang[...]` string) in the real-time host [`crate::slothost`]: the
//!   policy admits each submitted job into a row of its matrix (the controller
//!   launches it on nodes of that row by PACKING, first fit, or NO PACKING,
//!   frozen unless its row runs) and decides the slots; at each slot change the
//!   controller freezes every job that leaves (the agent answers when the
//!   kernel reports them frozen), then thaws the jobs that run:
//!   stop-then-start, so two rows never run at once. A global switch's idle
//!   time (`switch_us`) is carried out as that long with every job frozen.
//!   With the options that decide per node (`alternate`, `fill`: an idle
//!   node runs another row's rank) the controller freezes and thaws each
//!   job's rank node by node instead, in the job's freezer cgroup on that
//!   virtual node ([`crate::mech::JobNodeFreezer`], cgroup v1), so a node's
//!   CPU runs exactly the rank the policy picked for it.
//! * Each job runs `mpiexec` in its own process group with the parent-death
//!   signal SIGTERM; a rank's environment names its node's agent socket
//!   (`COSCHED_AGENT`), the run, the job and `COSCHED_REQUIRED=1`.

use crate::agent::{Agent, AgentOptions, AgentStats, NodeSpec, Sample};
use crate::client::Client;
use cosched_contract::cluster::{ClusterPolicy, ClusterView, Decision, Event};
use crate::mech::JobNodeFreezer;
use crate::slothost::{gang_policy_with, needs_per_node, Key, Slot, SlotHost, SlotMechanism};
use cosched_des::SimTime;
use cosched_model::{JobId, JobSpec};
use cosched_rules::place::packing;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The MPI that launches the jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mpi {
    Mpich,
    OpenMpi,
}

impl Mpi {
    pub fn parse(s: &str) -> Result<Mpi, String> {
        match s {
            "mpich" => Ok(Mpi::Mpich),
            "openmpi" => Ok(Mpi::OpenMpi),
            _ => Err(format!("unknown MPI {s:?}; valid: mpich, openmpi")),
        }
    }
    pub fn launcher(self) -> &'static str {
        match self {
            Mpi::Mpich => "mpiexec.mpich",
            Mpi::OpenMpi => "mpirun.openmpi",
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Mpi::Mpich => "mpich",
            Mpi::OpenMpi => "openmpi",
        }
    }
    /// The launcher's option that prefixes every line a rank writes with its rank
    /// (MPICH Hydra: `[R] `; Open MPI: `[JOB,R]<stdout>:` or `<stderr>:`), so that a
    /// failure can show the ranks' own lines apart from the launcher's epilogue.
    pub fn tag_option(self) -> &'static str {
        match self {
            Mpi::Mpich => "-prepend-rank",
            Mpi::OpenMpi => "--tag-output",
        }
    }
}

/// Whether `line` of a job log was written by a rank (tagged by
/// [`Mpi::tag_option`]) rather than by the launcher itself.
fn rank_line(line: &str) -> bool {
    let Some(rest) = line.strip_prefix('[') else {
        return false;
    };
    let Some((tag, _)) = rest.split_once(']') else {
        return false;
    };
    !tag.is_empty() && tag.split(',').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// What a failed job's log says, for its error: the ranks' last lines (up to
/// `RANK_LINES`, where the cause is) and the launcher's last line (its verdict);
/// or the log's last lines when no rank wrote anything.
fn failure_summary(log: &str) -> String {
    const RANK_LINES: usize = 5;
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("----"))
        .collect();
    let ranks: Vec<&str> = lines.iter().copied().filter(|l| rank_line(l)).collect();
    let launcher: Vec<&str> = lines.iter().copied().filter(|l| !rank_line(l)).collect();
    if ranks.is_empty() {
        let tail = &lines[lines.len().saturating_sub(3)..];
        return format!("no line from a rank; last lines: {}", tail.join(" | "));
    }
    let mut out = format!(
        "ranks: {}",
        ranks[ranks.len().saturating_sub(RANK_LINES)..].join(" | ")
    );
    if let Some(last) = launcher.last() {
        out.push_str(&format!("; launcher: {last}"));
    }
    out
}

/// How jobs are admitted and time-sliced.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// FCFS under the MPL.
    Fcfs,
    /// MPL 1, FCFS (strict, or every job that fits: `strict=false`) or EASY
    /// backfilling.
    Batch {
        easy: bool,
        #[serde(default = "strict_default")]
        strict: bool,
    },
    /// The gang slot policy of `cosched-policies` named by `policy`
    /// (`gang[quantum_ms=..,rows=..,...]`, the simulator's string), hosted by
    /// [`crate::slothost`].
    Gang { policy: String },
}

fn strict_default() -> bool {
    true
}

/// One job to run.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct RealJob {
    pub id: i64,
    pub procs: u32,
    pub submit_ns: u64,
    /// The program and its arguments (every rank runs the same).
    pub argv: Vec<String>,
    pub memory_mb: f64,
    /// What EASY sees as the job's runtime estimate.
    pub estimate_ns: u64,
    /// The job's application (the slot policy's per-application options).
    #[serde(default)]
    pub app: String,
}

/// A run.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct RunSpec {
    pub run: String,
    /// Where job logs, the shim's log and the sockets go.
    pub work_dir: PathBuf,
    pub mpi: Mpi,
    /// libcosched for this MPI (LD_PRELOAD).
    pub shim: PathBuf,
    /// CPUs of each virtual node (cpuset lists).
    pub nodes: Vec<String>,
    pub node_memory_mb: f64,
    pub scheme: Scheme,
    pub node_policy: String,
    pub mpl: u32,
    pub packing: bool,
    pub memory_aware: bool,
    pub seed: u64,
    pub jobs: Vec<RealJob>,
    pub time_limit_ns: u64,
    pub sample_ns: u64,
    pub boost_factor: f64,
    pub state_dir: PathBuf,
    /// Every wait is the MPI library's own (`COSCHED_LIBRARY_WAITS=1` to the
    /// shim): a baseline of the library's wait mode; the agent still serves the ranks.
    #[serde(default)]
    pub library_waits: bool,
    /// More environment for every rank (e.g. `OMPI_MCA_mpi_yield_when_idle`).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

/// What happened to one job.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct JobOut {
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
    pub nodes: Vec<u32>,
    pub ok: bool,
    pub error: Option<String>,
    pub cpu_ns: u64,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    pub ranks_registered: u32,
    pub gang_row: i64,
    /// Killed at the run's time limit (not `ok`, but not a failure of its program).
    pub timed_out: bool,
}

/// The result of a run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RunOut {
    pub jobs: Vec<JobOut>,
    pub timeline: Vec<Sample>,
    pub agent: AgentStats,
    pub gang_switch_ns: Vec<u64>,
    /// Every gang slot carried out, in order.
    pub gang_slots: Vec<GangSlot>,
    pub makespan_ns: u64,
    pub mpi_version: String,
}

/// A gang slot as the controller carried it out: from `at_ns` (since the
/// run's start) the job whose rank each virtual node runs (`-1`: none; every
/// other rank there frozen), in the policy's row `row` (`-1`: a switch's idle
/// time or a stopped cycle).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct GangSlot {
    pub at_ns: u64,
    pub row: i64,
    pub nodes: Vec<i64>,
}

/// A progress snapshot for the display: (queued, running, done, failed, elapsed s).
/// The callback answers whether to go on: `false` (an interruption, Ctrl-C)
/// ends every running job and the run, with an error.
pub type Progress = (usize, usize, usize, usize, f64);

struct Running {
    child: Child,
    nodes: Vec<u32>,
}

/// The launched jobs. Whatever way the controller's loop is left (an error, an
/// interruption), dropping this ends every job still running: SIGKILL to the
/// launcher's process group and to the job's registered ranks (MPICH's ranks
/// leave that group with `setsid`), then the launcher is reaped. A frozen rank
/// dies when the agent thaws it, which it does when it stops right after.
struct Jobs {
    running: HashMap<usize, Running>,
    shared: Arc<Mutex<crate::agent::Shared>>,
}

impl Jobs {
    /// Ends job `j` now (see the type's doc); `None` if it is not running.
    fn kill(&mut self, j: usize) -> Option<Running> {
        use nix::sys::signal::{kill, killpg, Signal};
        use nix::unistd::Pid;
        let mut r = self.running.remove(&j)?;
        let pids = self.shared.lock().unwrap().pids_of(j as i32);
        for p in pids {
            let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
        }
        let _ = killpg(Pid::from_raw(r.child.id() as i32), Signal::SIGKILL);
        let _ = r.child.wait();
        Some(r)
    }
}

impl Drop for Jobs {
    fn drop(&mut self) {
        let ids: Vec<usize> = self.running.keys().copied().collect();
        for j in ids {
            self.kill(j);
        }
    }
}

/// The job-level view: processors are the process slots that have room.
struct JobsView<'a> {
    now: SimTime,
    free: u32,
    total: u32,
    specs: &'a [JobSpec],
    starts: &'a HashMap<u32, SimTime>,
}

impl ClusterView for JobsView<'_> {
    fn now(&self) -> SimTime {
        self.now
    }
    fn total_procs(&self) -> u32 {
        self.total
    }
    fn free_procs(&self) -> u32 {
        self.free
    }
    fn job(&self, id: JobId) -> &JobSpec {
        &self.specs[id.0 as usize]
    }
    fn start_time(&self, id: JobId) -> Option<SimTime> {
        self.starts.get(&id.0).copied()
    }
}

/// Checks what a run needs on this machine; the error names what is missing.
pub fn check(spec: &RunSpec) -> Result<(), String> {
    let which = |p: &str| {
        std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
            .unwrap_or(false)
    };
    if !which(spec.mpi.launcher()) {
        return Err(format!(
            "{} not found on PATH: install {} (Debian: apt-get install {})",
            spec.mpi.launcher(),
            spec.mpi.name(),
            match spec.mpi {
                Mpi::Mpich => "mpich libmpich-dev",
                Mpi::OpenMpi => "openmpi-bin libopenmpi-dev",
            }
        ));
    }
    if !spec.shim.is_file() {
        return Err(format!(
            "the MPI shim {} is missing (build it: make real)",
            spec.shim.display()
        ));
    }
    let freeze = std::env::var(crate::mech::FREEZE_ENV).ok();
    crate::mech::check_cgroups(&crate::cgroup::Cgroups::detect(), freeze.as_deref())?;
    crate::state::require_writable(&spec.state_dir)?;
    if spec.nodes.is_empty() {
        return Err("no virtual node".into());
    }
    for (i, j) in spec.jobs.iter().enumerate() {
        if j.procs as usize > spec.nodes.len() {
            return Err(format!(
                "job {i} (id {}) needs {} processes on distinct nodes but the machine has {} virtual nodes",
                j.id,
                j.procs,
                spec.nodes.len()
            ));
        }
        if spec.memory_aware && j.memory_mb > spec.node_memory_mb {
            return Err(format!(
                "job {i} needs {} MB per node; a node has {} MB",
                j.memory_mb, spec.node_memory_mb
            ));
        }
        if j.argv.is_empty() {
            return Err(format!("job {i} has no program"));
        }
    }
    Ok(())
}

fn launch(
    spec: &RunSpec,
    idx: usize,
    job: &RealJob,
    nodes: &[u32],
    sockets: &[PathBuf],
) -> std::io::Result<Child> {
    let mut c = Command::new(spec.mpi.launcher());
    let log = spec.work_dir.join(format!("job{idx}.log"));
    let out = std::fs::File::create(&log)?;
    c.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
    let set = |k: &str, v: &str| match spec.mpi {
        Mpi::Mpich => vec!["-env".to_string(), k.to_string(), v.to_string()],
        Mpi::OpenMpi => vec!["-x".to_string(), format!("{k}={v}")],
    };
    if spec.mpi == Mpi::OpenMpi {
        // Each job's session directory under its own base: concurrent `mpirun`s sharing
        // /tmp/ompi.<host>.<uid> race (one removes that top directory when it finds it
        // empty while another creates its `pid.N` in it: "orte_session_dir failed").
        let session = spec.work_dir.join(format!("ompi-job{idx}"));
        std::fs::create_dir_all(&session)?;
        c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MCA_orte_tmpdir_base", &session);
        c.args(["--oversubscribe", "--bind-to", "none"]);
    }
    c.arg(spec.mpi.tag_option());
    for (r, &n) in nodes.iter().enumerate() {
        if r > 0 {
            c.arg(":");
        }
        c.arg(if spec.mpi == Mpi::Mpich { "-n" } else { "-np" })
            .arg("1");
        for (k, v) in [
            (
                "COSCHED_AGENT",
                sockets[n as usize].to_string_lossy().to_string(),
            ),
            ("COSCHED_RUN", spec.run.clone()),
            ("COSCHED_JOB", idx.to_string()),
            ("COSCHED_REQUIRED", "1".into()),
            (
                "COSCHED_LOG",
                spec.work_dir
                    .join("shim.jsonl")
                    .to_string_lossy()
                    .to_string(),
            ),
            ("LD_PRELOAD", spec.shim.to_string_lossy().to_string()),
            (
                "COSCHED_LIBRARY_WAITS",
                if spec.library_waits { "1" } else { "0" }.into(),
            ),
        ] {
            c.args(set(k, &v));
        }
        for (k, v) in &spec.env {
            c.args(set(k, v));
        }
        c.args(&job.argv);
    }
    // SAFETY: async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    c.spawn()
}

fn mpi_version(mpi: Mpi) -> String {
    Command::new(mpi.launcher())
        .arg("--version")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            let line = text
                .lines()
                .find(|l| l.contains("Version:") || l.contains("Open MPI"));
            line.unwrap_or("")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Runs `spec` for real; `progress` is called about twice a second.
pub fn run(spec: &RunSpec, mut progress: impl FnMut(Progress) -> bool) -> Result<RunOut, String> {
    check(spec)?;
    std::fs::create_dir_all(&spec.work_dir)
        .map_err(|e| format!("{}: {e}", spec.work_dir.display()))?;
    let sockets: Vec<PathBuf> = (0..spec.nodes.len())
        .map(|i| spec.work_dir.join(format!("agent-n{i}.sock")))
        .collect();
    let opts = AgentOptions {
        run: spec.run.clone(),
        nodes: spec
            .nodes
            .iter()
            .enumerate()
            .map(|(i, c)| NodeSpec {
                node: i as u32,
                cpus: Some(c.clone()),
                socket: sockets[i].clone(),
            })
            .collect(),
        default_policy: spec.node_policy.clone(),
        boost_factor: spec.boost_factor,
        state_dir: spec.state_dir.clone(),
        realtime: true,
    };
    cosched_policies::registry::build_node(&spec.node_policy)
        .map_err(|e| format!("scheduler.node_policy: {e}"))?;
    let mut agent = Agent::new(opts).map_err(|e| e.to_string())?;
    agent.set_sampling(Duration::from_nanos(spec.sample_ns));
    let stopper = agent.stopper();
    let shared = agent.shared();
    let handle = std::thread::Builder::new()
        .name("cosched-agent".into())
        .spawn(move || {
            let r = agent.run();
            (r, agent.stats.clone())
        })
        .map_err(|e| e.to_string())?;
    let result = control(spec, &sockets, &shared, &mut progress);
    stopper.stop();
    let (r, stats) = handle
        .join()
        .map_err(|_| "the agent thread panicked".to_string())?;
    r.map_err(|e| e.to_string())?;
    let mut out = result?;
    out.agent = stats;
    let sh = shared.lock().unwrap();
    for (j, o) in out.jobs.iter_mut().enumerate() {
        if let Some(u) = sh.usage.get(&(j as i32)) {
            o.cpu_ns = u.cpu_ns;
            o.ctx_voluntary = u.ctx_voluntary;
            o.ctx_involuntary = u.ctx_involuntary;
            o.ranks_registered = u.ranks;
        }
    }
    out.timeline = sh.timeline.clone();
    out.mpi_version = mpi_version(spec.mpi);
    Ok(out)
}

/// The job-level policy of `cosched-policies` that admits jobs under `scheme`.
fn admission(scheme: &Scheme) -> Result<Box<dyn ClusterPolicy>, String> {
    let name = match scheme {
        Scheme::Batch { easy: true, .. } => "easy",
        Scheme::Batch { strict: false, .. } => "fcfs[strict=false]",
        _ => "fcfs",
    };
    cosched_policies::registry::build(name).map_err(|e| e.to_string())
}

/// The run's launched jobs and what they hold on the virtual nodes: the
/// mechanism of both admission paths (the job-level policy's starts, the gang
/// slot policy's starts and slots through [`SlotHost`]).
struct Launcher<'a> {
    spec: &'a RunSpec,
    sockets: &'a [PathBuf],
    client: Client,
    jobs: Jobs,
    /// Memory committed per node, MB.
    mem: Vec<f64>,
    /// Jobs placed per node (at most `mpl` under FCFS, 1 under batch).
    load: Vec<u32>,
    rng: u64,
    out: RunOut,
    t0: Instant,
    done: usize,
    failed: usize,
    starts: HashMap<u32, SimTime>,
    /// Jobs a gang slot froze.
    frozen: BTreeSet<usize>,
    /// Jobs whose launch failed since the loop last looked (their end goes to
    /// the slot policy).
    lost: Vec<usize>,
    /// Time the freezes of a switch took, while its thaws wait for the end of
    /// the switch's idle time.
    freezing_ns: u64,
    /// Under a gang policy that decides per node: the per-job, per-node
    /// freezer, and the (job, node) pairs frozen in it.
    per_node: Option<JobNodeFreezer>,
    node_frozen: BTreeSet<(usize, u32)>,
}

impl Launcher<'_> {
    fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    /// Whether node `n` has the memory for job `j` (always, unless
    /// admission is memory-aware).
    fn fits_memory(&self, j: usize, n: u32) -> bool {
        !self.spec.memory_aware
            || self.mem[n as usize] + self.spec.jobs[j].memory_mb <= self.spec.node_memory_mb
    }

    /// NO PACKING: `size` of `cand` drawn with the run's seeded generator.
    fn draw(&mut self, mut cand: Vec<u32>, size: usize) -> Vec<u32> {
        for i in (1..cand.len()).rev() {
            self.rng = self
                .rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            cand.swap(i, ((self.rng >> 33) as usize) % (i + 1));
        }
        cand.truncate(size);
        cand.sort_unstable();
        cand
    }

    /// FCFS and batch: the nodes job `j` starts on now (a free process slot
    /// and memory on each), by PACKING or NO PACKING; `None` if too few.
    fn place(&mut self, j: usize, mpl: u32) -> Option<Vec<u32>> {
        let size = self.spec.jobs[j].procs as usize;
        let cand: Vec<u32> = (0..self.spec.nodes.len() as u32)
            .filter(|&n| self.load[n as usize] < mpl && self.fits_memory(j, n))
            .collect();
        if cand.len() < size {
            return None;
        }
        Some(if self.spec.packing {
            packed(&cand, size, &self.load)
        } else {
            self.draw(cand, size)
        })
    }

    /// Launches job `j` on `nodes`, frozen from the start unless `run`
    /// (`frozen`: under a gang slot policy). Returns false when the launcher
    /// could not be started (the job failed, its error recorded).
    fn launch(&mut self, j: usize, nodes: Vec<u32>, frozen: Option<bool>) -> Result<bool, String> {
        let spec = self.spec;
        let job = &spec.jobs[j];
        self.client.declare(j as i32, &spec.node_policy, false)?;
        if frozen == Some(true) {
            self.client.slot(j as i32, false)?;
            self.frozen.insert(j);
        }
        let child = match launch(spec, j, job, &nodes, self.sockets) {
            Ok(c) => c,
            Err(e) => {
                let _ = self.client.end(j as i32);
                self.frozen.remove(&j);
                self.out.jobs[j].error = Some(format!("cannot start {}: {e}", spec.mpi.launcher()));
                self.failed += 1;
                return Ok(false);
            }
        };
        let now = self.now();
        for &n in &nodes {
            self.mem[n as usize] += job.memory_mb;
            self.load[n as usize] += 1;
        }
        self.starts.insert(j as u32, SimTime(now.as_nanos() as i64));
        let o = &mut self.out.jobs[j];
        o.start_ns = Some(now.as_nanos() as u64);
        o.nodes = nodes.clone();
        self.jobs.running.insert(j, Running { child, nodes });
        Ok(true)
    }

    /// The jobs that ended since the last call, recorded and their nodes freed.
    fn reap(&mut self) -> Result<Vec<usize>, String> {
        let mut ended = Vec::new();
        let ids: Vec<usize> = self.jobs.running.keys().copied().collect();
        for j in ids {
            let r = self.jobs.running.get_mut(&j).expect("listed");
            let status = match r.child.try_wait() {
                Ok(Some(s)) => s,
                Ok(None) => continue,
                Err(e) => return Err(format!("job {j}: {e}")),
            };
            let r = self.jobs.running.remove(&j).expect("listed");
            let _ = self.client.end(j as i32);
            self.frozen.remove(&j);
            self.thaw_nodes(j);
            let end = self.now().as_nanos() as u64;
            let o = &mut self.out.jobs[j];
            o.end_ns = Some(end);
            o.ok = status.success();
            if o.ok {
                self.done += 1;
            } else {
                let log = self.spec.work_dir.join(format!("job{j}.log"));
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                o.error = Some(format!(
                    "{} exited with {status}; log job{j}.log: {}",
                    self.spec.mpi.launcher(),
                    failure_summary(&text)
                ));
                self.failed += 1;
            }
            for &n in &r.nodes {
                self.mem[n as usize] -= self.spec.jobs[j].memory_mb;
                self.load[n as usize] -= 1;
            }
            ended.push(j);
        }
        Ok(ended)
    }
}

impl Launcher<'_> {
    /// Thaws every node where ended job `j` was frozen (its ranks were
    /// released by the agent; its cgroups go with the node's at the end).
    fn thaw_nodes(&mut self, j: usize) {
        let Some(f) = &self.per_node else { return };
        let held: Vec<u32> = self
            .node_frozen
            .iter()
            .filter(|&&(k, _)| k == j)
            .map(|&(_, n)| n)
            .collect();
        for n in held {
            if let Err(e) = f.set(n, j as i32, false) {
                eprintln!("cosched run: thaw job {j} on node {n}: {e}");
            }
            self.node_frozen.remove(&(j, n));
        }
    }

    /// A per-node slot: on each node, the rank of `s.nodes` runs and the
    /// other jobs' ranks there are frozen; every freeze before any thaw.
    fn slot_per_node(&mut self, f: &JobNodeFreezer, s: &Slot) -> Result<bool, String> {
        let mut stop = Vec::new();
        let mut go = Vec::new();
        for (&j, r) in &self.jobs.running {
            for &n in &r.nodes {
                let runs = s.nodes.get(n as usize).copied().flatten() == Some(j as Key);
                let frozen = self.node_frozen.contains(&(j, n));
                if !runs && !frozen {
                    stop.push((j, n));
                } else if runs && frozen {
                    go.push((j, n));
                }
            }
        }
        stop.sort_unstable();
        go.sort_unstable();
        let err = |j: usize, n: u32, e: crate::mech::MechError| format!("job {j} on node {n}: {e}");
        for &(j, n) in &stop {
            f.set(n, j as i32, true).map_err(|e| err(j, n, e))?;
            self.node_frozen.insert((j, n));
        }
        for &(j, n) in &go {
            f.set(n, j as i32, false).map_err(|e| err(j, n, e))?;
            self.node_frozen.remove(&(j, n));
        }
        Ok(!go.is_empty() || !stop.is_empty())
    }
}

/// The gang slot policy's mechanism in `cosched run`: it launches the jobs
/// the policy admits and freezes and thaws them through the agent (every
/// leaving job frozen, answered when the kernel reports it, before the
/// arriving ones are thawed: two rows never run at once).
impl SlotMechanism for Launcher<'_> {
    fn eligible(&self, key: Key, node: u32) -> bool {
        self.fits_memory(key as usize, node)
    }

    /// PACKING within the policy's row is first fit (the row is its own
    /// layer, as in the engine); NO PACKING draws among the row's nodes.
    fn choose(&mut self, _key: Key, among: &[u32], size: usize) -> Result<Vec<u32>, String> {
        Ok(if self.spec.packing {
            packing(among, size, |_| 0)
        } else {
            self.draw(among.to_vec(), size)
        })
    }

    /// Per node: the job starts frozen on every node (its cgroups exist
    /// before its ranks), and the slot handed over right after thaws the
    /// nodes where it runs.
    fn start(&mut self, key: Key, nodes: &[u32], _row: Option<usize>, run: bool) -> Result<(), String> {
        let j = key as usize;
        let frozen = if let Some(f) = self.per_node.clone() {
            for &n in nodes {
                f.set(n, j as i32, true)
                    .map_err(|e| format!("job {j} on node {n}: {e}"))?;
                self.node_frozen.insert((j, n));
            }
            None
        } else {
            Some(!run)
        };
        if !self.launch(j, nodes.to_vec(), frozen)? {
            self.thaw_nodes(j);
            self.lost.push(j);
        }
        Ok(())
    }

    fn per_node(&self) -> bool {
        self.per_node.is_some()
    }

    fn slot(&mut self, s: &Slot) -> Result<(), String> {
        self.out.gang_slots.push(GangSlot {
            at_ns: s.at,
            row: s.row.map_or(-1, |r| r as i64),
            nodes: s.nodes.iter().map(|k| k.unwrap_or(-1)).collect(),
        });
        if let Some(f) = self.per_node.clone() {
            let t = Instant::now();
            let changed = self.slot_per_node(&f, s)?;
            self.freezing_ns += t.elapsed().as_nanos() as u64;
            if changed && s.row.is_some() {
                self.out.gang_switch_ns.push(std::mem::take(&mut self.freezing_ns));
            }
            return Ok(());
        }
        let live = |j: &usize| self.jobs.running.contains_key(j);
        let stop: Vec<usize> = s
            .frozen
            .iter()
            .map(|&k| k as usize)
            .filter(|j| live(j) && !self.frozen.contains(j))
            .collect();
        let go: Vec<usize> = s
            .run
            .iter()
            .map(|&k| k as usize)
            .filter(|j| live(j) && self.frozen.contains(j))
            .collect();
        if stop.is_empty() && go.is_empty() {
            return Ok(());
        }
        let t = Instant::now();
        let thaws = !go.is_empty();
        for j in stop {
            self.client.slot(j as i32, false)?;
            self.frozen.insert(j);
        }
        for j in go {
            self.client.slot(j as i32, true)?;
            self.frozen.remove(&j);
        }
        // One switch's time: its freezes and its thaws (apart when the
        // policy idles between them), without the idle time.
        self.freezing_ns += t.elapsed().as_nanos() as u64;
        if thaws {
            self.out.gang_switch_ns.push(std::mem::take(&mut self.freezing_ns));
        }
        Ok(())
    }
}

/// PACKING in the controller under FCFS and batch: `size` of the `cand` nodes
/// by the simulator's rule ([`packing`]), a node's load being the jobs placed
/// on it (the `mpl` process slots of its one layer).
fn packed(cand: &[u32], size: usize, load: &[u32]) -> Vec<u32> {
    packing(cand, size, |n| load[n as usize])
}

/// Who admits: the job-level policy (FCFS, batch, EASY) with the started jobs
/// that wait for room, or the gang slot policy in its host.
enum Admission<'a> {
    Jobs {
        policy: Box<dyn ClusterPolicy>,
        specs: Vec<JobSpec>,
        pending: VecDeque<usize>,
        mpl: u32,
        l: Box<Launcher<'a>>,
    },
    Slots(Box<SlotHost<Launcher<'a>>>),
}

impl<'a> Admission<'a> {
    fn launcher(&mut self) -> &mut Launcher<'a> {
        match self {
            Admission::Jobs { l, .. } => l,
            Admission::Slots(h) => &mut h.mech,
        }
    }

    /// Jobs submitted and not started.
    fn waiting(&self) -> Vec<usize> {
        match self {
            Admission::Jobs { pending, .. } => pending.iter().copied().collect(),
            Admission::Slots(h) => h.waiting_keys().into_iter().map(|k| k as usize).collect(),
        }
    }

    /// Completions `ended` and submissions `submitted` at `now`: the
    /// policy's decisions carried out.
    fn step(&mut self, ended: &[usize], submitted: &[usize], now: Duration) -> Result<(), String> {
        match self {
            Admission::Jobs {
                policy,
                specs,
                pending,
                mpl,
                l,
            } => {
                let events: Vec<Event> = ended
                    .iter()
                    .map(|&j| Event::Completed(JobId(j as u32)))
                    .chain(submitted.iter().map(|&j| Event::Submitted(JobId(j as u32))))
                    .collect();
                if !events.is_empty() {
                    // Processors of the view: the free process slots of the
                    // nodes with memory left.
                    let free = (0..l.spec.nodes.len())
                        .filter(|&n| !l.spec.memory_aware || l.mem[n] < l.spec.node_memory_mb)
                        .map(|n| *mpl - l.load[n])
                        .sum::<u32>();
                    let view = JobsView {
                        now: SimTime(now.as_nanos() as i64),
                        free,
                        total: l.spec.nodes.len() as u32 * *mpl,
                        specs,
                        starts: &l.starts,
                    };
                    let mut decisions = vec![];
                    policy.on_events(&events, &view, &mut decisions);
                    for d in decisions {
                        match d {
                            Decision::Start(id) | Decision::StartOn(id, _) => {
                                pending.push_back(id.0 as usize);
                            }
                            Decision::Reject(id) => {
                                l.out.jobs[id.0 as usize].error = Some("rejected by the policy".into());
                                l.failed += 1;
                            }
                            Decision::WakeAt(_) => {}
                        }
                    }
                }
                // Place the started jobs in order; one that does not fit yet stays first.
                while let Some(&j) = pending.front() {
                    let Some(nodes) = l.place(j, *mpl) else { break };
                    pending.pop_front();
                    l.launch(j, nodes, None)?;
                }
                Ok(())
            }
            Admission::Slots(h) => {
                let t = now.as_nanos() as u64;
                let gang = |e: String| format!("gang slot policy: {e}");
                for &j in ended {
                    h.end(j as Key, t).map_err(gang)?;
                }
                for &j in submitted {
                    let job = &h.mech.spec.jobs[j];
                    let (procs, app) = (job.procs, job.app.clone());
                    h.arrive(j as Key, procs, &app, t).map_err(gang)?;
                }
                h.advance(t).map_err(gang)?;
                // A job whose launcher did not start ends at once.
                while let Some(j) = h.mech.lost.pop() {
                    h.end(j as Key, t).map_err(gang)?;
                }
                let rows: Vec<(usize, i64)> = h
                    .mech
                    .jobs
                    .running
                    .keys()
                    .map(|&j| (j, h.row_of(j as Key).map_or(-1, |r| r as i64)))
                    .collect();
                for (j, row) in rows {
                    h.mech.out.jobs[j].gang_row = row;
                }
                Ok(())
            }
        }
    }
}

/// The gang slot policy `policy` in its host over launcher `l`; a policy
/// that decides per node (alternate, fill) gets the per-job, per-node freezer.
fn gang_admission<'a>(spec: &RunSpec, policy: &str, mut l: Launcher<'a>) -> Result<Admission<'a>, String> {
    let what = |e: String| format!("scheduler.policy: {e}");
    let params = gang_policy_with(policy, true, true).map_err(what)?;
    if needs_per_node(&params) {
        let cg = crate::cgroup::Cgroups::detect();
        let f = JobNodeFreezer::detect(&spec.run, &cg)
            .map_err(|e| what(format!("{policy:?} decides per node (alternate, fill): {e}")))?;
        l.per_node = Some(f);
    }
    let f = cosched_policies::process::gang::factory(params);
    let nodes = spec.nodes.len() as u32;
    Ok(Admission::Slots(Box::new(SlotHost::new(&f, nodes, spec.jobs.len(), l))))
}

/// The controller's loop: completions, submissions, the admitting policy's
/// decisions carried out (and the gang slot policy's timers), progress, the
/// time limit.
#[expect(clippy::too_many_lines, reason = "the controller's event loop: completions, submissions, admissions, slot timers, progress and the time limit in one loop")]
fn control(
    spec: &RunSpec,
    sockets: &[PathBuf],
    shared: &Arc<Mutex<crate::agent::Shared>>,
    progress: &mut impl FnMut(Progress) -> bool,
) -> Result<RunOut, String> {
    let n_nodes = spec.nodes.len();
    let l = Launcher {
        spec,
        sockets,
        client: Client::connect(&sockets[0], Duration::from_secs(10))?,
        jobs: Jobs {
            running: HashMap::new(),
            shared: shared.clone(),
        },
        mem: vec![0.0; n_nodes],
        load: vec![0; n_nodes],
        rng: spec
            .seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407),
        out: RunOut {
            jobs: vec![
                JobOut {
                    gang_row: -1,
                    ..JobOut::default()
                };
                spec.jobs.len()
            ],
            ..RunOut::default()
        },
        t0: Instant::now(),
        done: 0,
        failed: 0,
        starts: HashMap::new(),
        frozen: BTreeSet::new(),
        lost: Vec::new(),
        freezing_ns: 0,
        per_node: None,
        node_frozen: BTreeSet::new(),
    };
    let mut adm = match &spec.scheme {
        Scheme::Gang { policy } => gang_admission(spec, policy, l)?,
        scheme => Admission::Jobs {
            policy: admission(scheme)?,
            specs: spec
                .jobs
                .iter()
                .map(|j| JobSpec {
                    source_id: j.id,
                    submit: SimTime(j.submit_ns as i64),
                    runtime: SimTime(j.estimate_ns as i64),
                    procs: j.procs,
                    requested: None,
                    estimate: SimTime(j.estimate_ns as i64),
                    kill_after: None,
                })
                .collect(),
            pending: VecDeque::new(),
            mpl: if matches!(scheme, Scheme::Fcfs) { spec.mpl } else { 1 },
            l: Box::new(l),
        },
    };
    let mut order: Vec<usize> = (0..spec.jobs.len()).collect();
    order.sort_by_key(|&i| spec.jobs[i].submit_ns);
    let mut to_submit: VecDeque<usize> = order.into();
    let mut last_progress = Instant::now() - Duration::from_secs(1);
    loop {
        let now = adm.launcher().now();
        let ended = adm.launcher().reap()?;
        let mut submitted = Vec::new();
        while let Some(&j) = to_submit.front() {
            if Duration::from_nanos(spec.jobs[j].submit_ns) > now {
                break;
            }
            to_submit.pop_front();
            submitted.push(j);
        }
        adm.step(&ended, &submitted, now)?;
        let waiting = adm.waiting();
        let l = adm.launcher();
        if last_progress.elapsed() >= Duration::from_millis(500) {
            let p = (to_submit.len() + waiting.len(), l.jobs.running.len(), l.done, l.failed);
            if !progress((p.0, p.1, p.2, p.3, now.as_secs_f64())) {
                return Err("interrupted".into());
            }
            last_progress = Instant::now();
        }
        if to_submit.is_empty() && waiting.is_empty() && l.jobs.running.is_empty() {
            break;
        }
        if now > Duration::from_nanos(spec.time_limit_ns) {
            let ids: Vec<usize> = l.jobs.running.keys().copied().collect();
            for j in ids {
                let _ = l.client.end(j as i32);
                l.thaw_nodes(j);
                l.jobs.kill(j);
                let end = l.now().as_nanos() as u64;
                let o = &mut l.out.jobs[j];
                o.end_ns = Some(end);
                o.error = Some(format!(
                    "killed at the time limit ({} s)",
                    spec.time_limit_ns / 1_000_000_000
                ));
                o.timed_out = true;
                l.failed += 1;
            }
            for j in waiting.into_iter().chain(to_submit.drain(..)) {
                l.out.jobs[j].error = Some("not started before the time limit".into());
            }
            break;
        }
        // Sleep 5 ms, or until the slot policy's next timer.
        let mut nap = Duration::from_millis(5);
        if let Admission::Slots(h) = &adm {
            if let Some(t) = h.next_wake() {
                nap = nap.min(Duration::from_nanos(t).saturating_sub(now));
            }
        }
        std::thread::sleep(nap);
    }
    let l = adm.launcher();
    let _ = progress((0, 0, l.done, l.failed, l.now().as_secs_f64()));
    let mut out = std::mem::take(&mut l.out);
    out.makespan_ns = l.now().as_nanos() as u64;
    Ok(out)
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn a_failure_shows_the_ranks_lines_apart_from_the_launchers_epilogue() {
        // Open MPI 4.1 with --tag-output: the rank's lines, then mpirun's epilogue.
        let ompi = "[1,0]<stdout>:starting\n[1,1]<stderr>:libcosched (rank 1): cannot reach the agent\n\
            --------------------------------------------------------------------------\n\
            Primary job  terminated normally, but 1 process returned\n\
            a non-zero exit code. Per user-direction, the job has been aborted.\n\
            --------------------------------------------------------------------------\n\
            mpirun.openmpi detected that one or more processes exited with non-zero status\n";
        assert_eq!(
            failure_summary(ompi),
            "ranks: [1,0]<stdout>:starting | [1,1]<stderr>:libcosched (rank 1): cannot reach the agent; \
             launcher: mpirun.openmpi detected that one or more processes exited with non-zero status"
        );
        // MPICH Hydra with -prepend-rank: only the last 5 rank lines.
        let mpich: String = (0..8).map(|i| format!("[{}] line {i}\n", i % 2)).collect::<String>()
            + "===================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n";
        assert_eq!(
            failure_summary(&mpich),
            "ranks: [1] line 3 | [0] line 4 | [1] line 5 | [0] line 6 | [1] line 7; \
             launcher: =   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
        );
        // Nothing from a rank: the log's last lines.
        assert_eq!(
            failure_summary("a\nb\n\nc\nd\n"),
            "no line from a rank; last lines: b | c | d"
        );
        assert!(rank_line("[12] x") && rank_line("[1,3]<stderr>:x"));
        assert!(!rank_line("[mpiexec@host] x") && !rank_line("[] x") && !rank_line("x [1] y"));
    }

    #[test]
    fn packing_in_the_controller_is_the_simulators_rule() {
        // 4 virtual nodes, MPL 2; job 0 holds nodes 0 and 1. A 2-node job goes
        // to the empty nodes 2-3 (layer 0), not onto the loaded 0-1 (the old
        // rule took the lowest nodes with a free slot).
        let load = [1, 1, 0, 0];
        let cand = [0, 1, 2, 3];
        assert_eq!(packed(&cand, 2, &load), vec![2, 3]);
        // A 3-node job: layer 0 has 2 nodes, layer 1 all 4; runs 0-2 (load 2) and
        // 1-3 (load 1): 1-3.
        assert_eq!(packed(&cand, 3, &load), vec![1, 2, 3]);
        // A gang row is its own layer: first fit within the policy's row.
        assert_eq!(packing(&[0, 2, 3], 2, |_| 0), vec![2, 3]);
    }

    #[test]
    fn batch_without_strict_order_admits_by_the_shared_non_strict_fcfs() {
        let name = |scheme: Scheme| admission(&scheme).unwrap().name();
        assert_eq!(name(Scheme::Batch { easy: false, strict: false }), "fcfs[strict=false]");
        assert_eq!(name(Scheme::Batch { easy: false, strict: true }), "fcfs");
        assert_eq!(name(Scheme::Batch { easy: true, strict: true }), "easy");
        assert_eq!(name(Scheme::Fcfs), "fcfs");
        // The run specification from Python: `strict` defaults to true.
        let s: Scheme = serde_json::from_str(r#"{"batch": {"easy": false}}"#).unwrap();
        assert_eq!(s, Scheme::Batch { easy: false, strict: true });
    }
}

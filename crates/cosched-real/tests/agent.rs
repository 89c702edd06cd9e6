//! The agent process: policy hosting through the socket and the shared memory
//! (a fake rank in Python speaks the protocol), slot switches, and cleanup after
//! SIGTERM and after SIGKILL (at the next start, and by `cosched-agent cleanup`).
//! Root and cgroups are needed: without them these tests fail.

mod common;

use common::Proc;
use cosched_real::cgroup::Cgroups;
use cosched_real::client::Client;
use cosched_real::procfs;
use cosched_real::proto;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The tests of this file run one at a time: they measure the CPU time and
/// wake-ups of their processes, which another test's spinners would disturb.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn spinner() -> Proc {
    Proc(
        Command::new("sh")
            .arg("-c")
            .arg("while :; do :; done")
            .spawn()
            .unwrap(),
    )
}

/// The folder of one test: its agents' state directory and sockets. When
/// dropped (after the test's agents, so declared before them), also when the
/// test fails, it restores what its agents recorded (`cosched-agent cleanup`:
/// an agent ended by a test's end is killed, so it cannot restore) and is
/// removed. In the system's temporary folder: a socket's path must stay short.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("cosched-test-agent-")
            .tempdir()
            .unwrap();
        Self(dir)
    }

    fn sock(&self, name: &str) -> PathBuf {
        self.0.path().join(format!("{name}.sock"))
    }

    /// The state directory (cleanups only restore what its own agents
    /// recorded there).
    fn state_dir(&self) -> PathBuf {
        self.0.path().join("state")
    }

    fn cleanup(&self) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_cosched-agent"))
            .arg("cleanup")
            .arg("--state-dir")
            .arg(self.state_dir())
            .output()
            .unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let out = self.cleanup();
        if !out.status.success() {
            eprintln!(
                "cosched-agent cleanup: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

fn agent(t: &Scratch, run: &str, socket: &Path, policy: &str) -> Proc {
    let c = Command::new(env!("CARGO_BIN_EXE_cosched-agent"))
        .args(["serve", "--run", run, "--default-policy", policy])
        .arg("--state-dir")
        .arg(t.state_dir())
        .arg("--node")
        .arg(format!("0::{}", socket.display()))
        .spawn()
        .unwrap();
    Proc(c)
}

/// The run's cgroups in every hierarchy.
fn leftovers(run: &str) -> Vec<PathBuf> {
    let prefix = format!("cosched.{run}.");
    Cgroups::detect()
        .roots()
        .iter()
        .flat_map(|h| h.ours())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&prefix)
        })
        .collect()
}

fn ticks(pid: u32) -> u64 {
    procfs::stat(pid).unwrap().cpu_ticks
}

/// Whether `pid` gets CPU time over 300 ms.
fn runs(pid: u32) -> bool {
    let t0 = ticks(pid);
    std::thread::sleep(Duration::from_millis(300));
    ticks(pid) > t0
}

fn frozen_leftover(t: &Scratch, run: &str) -> (Proc, Proc, Option<String>) {
    let s = t.sock(run);
    let a = agent(t, run, &s, "nls");
    let sp = spinner();
    let pid = sp.0.id();
    let orig = procfs::cgroup_of(pid, Some("freezer"));
    let c = Client::connect(&s, Duration::from_secs(10)).expect("agent socket");
    c.declare(7, "nls", false).unwrap();
    c.declare(7, "nls", false).unwrap();
    assert!(c.declare(7, "sb", false).is_err(), "a job keeps its spec");
    c.end(7).unwrap(); // one declaration of two ended: the job goes on
    assert!(
        c.declare(8, "nosuch", false).is_err(),
        "an unknown spec is refused"
    );
    assert!(
        c.declare(8, "nosuch", true).is_err(),
        "also for an optional job"
    );
    c.adopt(pid, 7, 0, 0).unwrap();
    assert!(!leftovers(run).is_empty());
    c.slot(7, false).unwrap();
    assert!(!runs(pid), "a frozen slot does not run");
    c.slot(7, true).unwrap();
    assert!(runs(pid), "a running slot runs");
    c.slot(7, false).unwrap();
    (a, sp, orig)
}

#[test]
fn sigterm_restores_everything() {
    let _g = serial();
    let t = Scratch::new();
    let run = "t-term";
    let (a, sp, orig) = frozen_leftover(&t, run);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(a.0.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let mut a = a;
    let st = a.0.wait().unwrap();
    assert!(st.success(), "agent exit {st:?}");
    assert!(
        leftovers(run).is_empty(),
        "cgroups left: {:?}",
        leftovers(run)
    );
    assert!(runs(sp.0.id()), "nothing left frozen");
    assert_eq!(procfs::cgroup_of(sp.0.id(), Some("freezer")), orig);
}

#[test]
fn sigkill_then_next_start_restores() {
    let _g = serial();
    let t = Scratch::new();
    let run = "t-kill-start";
    let (mut a, sp, orig) = frozen_leftover(&t, run);
    // A segment of the adopted rank (magic, then its pid at offset 20): the
    // rank still lives when the next start restores, so only a restore that
    // unlinks every segment of its recorded ranks removes it at once.
    let seg = PathBuf::from(format!("/dev/shm/cosched.{run}.7.0"));
    let mut bytes = vec![0u8; 64];
    bytes[0..4].copy_from_slice(&cosched_real::proto::SHM_MAGIC.to_le_bytes());
    bytes[20..24].copy_from_slice(&(sp.0.id() as i32).to_le_bytes());
    std::fs::write(&seg, bytes).unwrap();
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    assert!(!leftovers(run).is_empty(), "a killed agent cannot clean up");
    assert!(!runs(sp.0.id()), "still frozen after the SIGKILL");
    // The next start restores what the dead agent left, then serves.
    let s2 = t.sock("t-kill-start2");
    let b = agent(&t, "t-kill-start-b", &s2, "nls");
    Client::connect(&s2, Duration::from_secs(10)).expect("second agent");
    assert!(
        leftovers(run).is_empty(),
        "cgroups left: {:?}",
        leftovers(run)
    );
    assert!(runs(sp.0.id()), "thawed by the next start");
    assert!(
        !seg.exists(),
        "the live rank's segment is unlinked by the first start"
    );
    assert_eq!(procfs::cgroup_of(sp.0.id(), Some("freezer")), orig);
    drop(b);
}

#[test]
fn sigkill_then_cleanup_command_restores() {
    let _g = serial();
    let t = Scratch::new();
    let run = "t-kill-clean";
    let (mut a, sp, orig) = frozen_leftover(&t, run);
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    assert!(!runs(sp.0.id()));
    let out = t.cleanup();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        leftovers(run).is_empty(),
        "cgroups left: {:?}",
        leftovers(run)
    );
    assert!(runs(sp.0.id()), "thawed by cleanup");
    assert_eq!(procfs::cgroup_of(sp.0.id(), Some("freezer")), orig);
}

/// A fake rank (see `common`) that prints the wait modes, spin times and event
/// mask the agent wrote, then sleeps until killed.
const FAKE_RANK: &str = r#"
modes = struct.unpack("<4I", m[24:40]); spins = struct.unpack("<4Q", m[40:72])
mask, gen = struct.unpack("<II", m[80:88])
print(ack[5], *modes, *spins, mask, gen, flush=True)
if rank == 0:
    # tell the agent this rank sent a message to rank 1 of the job
    s.send(msg(MESSAGE, job, 1, a=64))
time.sleep(60)
"#;

fn fake_rank(run: &str, job: i32, rank: i32, socket: &Path) -> (Proc, Vec<i64>) {
    let r = common::fake_rank(FAKE_RANK, run, job, rank, socket, &[]);
    (r.proc, r.said)
}

#[test]
fn hosts_the_declared_policy_wait_modes_events_and_boosts() {
    let _g = serial();
    let t = Scratch::new();
    let run = "t-host";
    let s = t.sock(run);
    let _a = agent(&t, run, &s, "nls");
    let c = Client::connect(&s, Duration::from_secs(10)).unwrap();
    c.declare(1, "sb[spin_us=300]", false).unwrap();
    c.declare(2, "dcs", false).unwrap();
    // SB: spin-then-block for 300 us on the receive side, spin on the send side
    // (the policy's own wait_mode); no events needed.
    let (_r, v) = fake_rank(run, 1, 0, &s);
    assert_eq!(v[0], 0, "ACK");
    assert_eq!(
        &v[1..5],
        &[1, 0, 1, 0],
        "SPINBLOCK for Recv and RecvCompletion, SPIN for the sends"
    );
    assert_eq!(&v[5..9], &[300_000, 0, 300_000, 0], "spin time in ns");
    assert_eq!(v[9], 0, "SB needs no events");
    assert_ne!(v[10], 0, "agent_gen set");
    // An undeclared job runs under the default policy (NLS: spin).
    let (_u, v) = fake_rank(run, 3, 0, &s);
    assert_eq!(&v[1..5], &[0, 0, 0, 0]);
    // DCS: spin; subscribes to messages; a message to a rank that is not running
    // boosts it until it runs (it sleeps here, so the boost stays).
    let (r1, v) = fake_rank(run, 2, 1, &s);
    assert_eq!(
        v[9],
        i64::from(1 << 8 | proto::skip::ON_CPU_WAITING | proto::skip::ON_CPU_BUSY),
        "DCS needs MESSAGE events, for a receiver off a CPU only"
    );
    let leaf = Cgroups::detect()
        .cpu
        .unwrap()
        .path(&format!("cosched.{run}.n0/j2r1p{}", r1.0.id()));
    assert_eq!(
        std::fs::read_to_string(leaf.join("cpu.shares"))
            .unwrap()
            .trim(),
        "1024"
    );
    let (_r0, _) = fake_rank(run, 2, 0, &s);
    let mut shares = String::new();
    for _ in 0..100 {
        shares = std::fs::read_to_string(leaf.join("cpu.shares"))
            .unwrap()
            .trim()
            .to_string();
        if shares != "1024" {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(shares, (1024 * 64).to_string(), "the receiver is boosted");
    // A rank that dies is released: its cgroup goes.
    drop(r1);
    for _ in 0..200 {
        if !leaf.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!leaf.exists(), "a dead rank's cgroup is removed");
    assert!(
        !Path::new(&format!("/dev/shm/cosched.{run}x.2.1")).exists(),
        "and its segment unlinked"
    );
}

/// Sends one protocol message on a fresh connection of another process (python).
fn send_as_other_peer(socket: &Path, fields: [i64; 6]) {
    let st = Command::new("python3")
        .arg("-c")
        .arg(
            "import socket, struct, sys, time\n\
             s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(sys.argv[1])\n\
             f = [int(x) for x in sys.argv[2:]]\n\
             s.send(struct.pack('<IIiiiiQQQ', *f, 0, 0, 0)); time.sleep(0.2)",
        )
        .arg(socket)
        .args(fields.iter().map(|x| x.to_string()))
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn peers_act_only_on_their_own_ranks_and_descendants() {
    let _g = serial();
    let t = Scratch::new();
    let run = "t-cred";
    let s = t.sock(run);
    let _a = agent(&t, run, &s, "nls");
    let c = Client::connect(&s, Duration::from_secs(10)).unwrap();
    c.declare(4, "nls", false).unwrap();
    let (r, v) = fake_rank(run, 4, 0, &s);
    assert_eq!(v[0], 0, "ACK");
    let pid = r.0.id();
    let leaf = Cgroups::detect()
        .cpu
        .unwrap()
        .path(&format!("cosched.{run}.n0/j4r0p{pid}"));
    assert!(leaf.exists());
    // UNREGISTER of that rank from another connection is ignored.
    send_as_other_peer(&s, [3, 1, 4, 0, pid as i64, 0]);
    std::thread::sleep(Duration::from_millis(200));
    assert!(leaf.exists(), "another peer released the rank");
    // ADOPT of a process that the launcher did not start (an orphan, reparented) is refused.
    let out = Command::new("sh")
        .arg("-c")
        .arg("sleep 30 >/dev/null 2>&1 & echo $!")
        .output()
        .unwrap();
    let orphan: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let res = c.adopt(orphan, 4, 1, 0);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(orphan as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(res.is_err(), "adopted a process the launcher did not start");
    // A (job, rank) already bound is refused for adoption as well.
    let (sp, sp2) = (spinner(), spinner());
    c.adopt(sp.0.id(), 4, 1, 0).unwrap();
    assert!(
        c.adopt(sp2.0.id(), 4, 1, 0).is_err(),
        "a bound (job, rank) was adopted again"
    );
    c.end(4).unwrap();
}

fn voluntary_switches(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|s| {
            s.lines()
                .filter_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .map(|v| v.trim().parse::<u64>().unwrap())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// An agent hosting DCS for job 2: rank 1 sleeps for good, and rank 0's message
/// makes DCS boost it until it runs. Returns what must live for the test, the
/// agent's pid and rank 1's cpu cgroup. The test's folder is the last field:
/// dropped last, after the agent and the ranks have ended.
struct DcsPair {
    agent: Proc,
    client: Client,
    _ranks: (Proc, Proc),
    leaf: PathBuf,
    _scratch: Scratch,
}

fn dcs_pair(run: &str) -> DcsPair {
    let t = Scratch::new();
    let s = t.sock(run);
    let agent = agent(&t, run, &s, "nls");
    let client = Client::connect(&s, Duration::from_secs(10)).unwrap();
    client.declare(2, "dcs", false).unwrap();
    let (r1, _) = fake_rank(run, 2, 1, &s);
    let leaf = Cgroups::detect()
        .cpu
        .unwrap()
        .path(&format!("cosched.{run}.n0/j2r1p{}", r1.0.id()));
    // Rank 1 asleep before rank 0's message: a receiver that has printed but
    // not yet reached its sleep (a loaded machine) runs once boosted, and the
    // boost until run then ends at once, which is not what these tests test.
    let asleep = |pid: u32| within(500, || !procfs::running(pid));
    assert!(asleep(r1.0.id()), "rank 1 never fell asleep");
    let (r0, _) = fake_rank(run, 2, 0, &s);
    DcsPair {
        agent,
        client,
        _ranks: (r0, r1),
        leaf,
        _scratch: t,
    }
}

fn shares(leaf: &Path) -> String {
    std::fs::read_to_string(leaf.join("cpu.shares"))
        .unwrap()
        .trim()
        .to_string()
}

/// Whether `pred` holds within `tries` checks 10 ms apart.
fn within(tries: u32, pred: impl Fn() -> bool) -> bool {
    (0..tries).any(|_| {
        let ok = pred();
        if !ok {
            std::thread::sleep(Duration::from_millis(10));
        }
        ok
    })
}

/// The agent's wake-ups over 1 s.
fn wakeups_over_a_second(pid: u32) -> u64 {
    let before = voluntary_switches(pid);
    std::thread::sleep(Duration::from_secs(1));
    voluntary_switches(pid) - before
}

#[test]
fn a_boost_on_a_rank_that_never_runs_is_dropped_and_stops_waking_the_agent() {
    let _g = serial();
    let p = dcs_pair("t-bur");
    assert!(
        within(100, || shares(&p.leaf) != "1024"),
        "the receiver is boosted"
    );
    assert!(
        within(300, || shares(&p.leaf) == "1024"),
        "the boost of a rank that never runs is never dropped"
    );
    // Nothing pending any more: the agent sleeps (a 1 ms check would wake it ~1000 times a second).
    let woke = wakeups_over_a_second(p.agent.0.id());
    assert!(
        woke < 100,
        "the agent woke {woke} times in 1 s with nothing to do"
    );
}

#[test]
fn a_frozen_ranks_pending_boost_is_not_checked() {
    let _g = serial();
    let p = dcs_pair("t-burf");
    // The job's slot is frozen right after rank 0's message.
    p.client.slot(2, false).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let woke = wakeups_over_a_second(p.agent.0.id());
    let boosted = shares(&p.leaf);
    p.client.slot(2, true).unwrap();
    assert!(
        woke < 100,
        "the agent woke {woke} times in 1 s for a frozen rank's boost"
    );
    assert_ne!(boosted, "1024", "the boost waits for the thaw");
}

/// A fake rank with one unconsumed message in its segment (`arrivals` = 1 at
/// the offset given after the socket), asleep 5 ms at a time with 0.3 ms of
/// CPU in between: off a CPU at almost every scan, so PB's scan selects it
/// whenever its turn comes, and a boost until run sees it run within 5.3 ms.
const PB_RANK: &str = r#"
off = int(sys.argv[5])
m[off:off + 8] = struct.pack("<Q", 1)
print(ack[5], flush=True)
end = time.time() + 60
while time.time() < end:
    time.sleep(0.005)
    t = time.thread_time()
    while time.thread_time() - t < 0.0003:
        pass
"#;

/// When each of two cgroup leaves goes from its normal weight to boosted, in ms
/// since the start, over `secs` seconds (read every 0.25 ms; the test thread
/// sleeps in between, the agent runs at real-time priority).
fn boost_starts(leaves: &[PathBuf; 2], secs: f64) -> Vec<f64> {
    let t0 = std::time::Instant::now();
    let mut up = [false; 2];
    let mut starts = vec![];
    while t0.elapsed().as_secs_f64() < secs {
        for (k, leaf) in leaves.iter().enumerate() {
            let now_up = shares(leaf) != "1024";
            if now_up && !up[k] {
                starts.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            up[k] = now_up;
        }
        std::thread::sleep(Duration::from_micros(250));
    }
    starts
}

#[test]
fn pb_scans_on_the_agents_ticks_at_its_period_rounded_up_to_ticks() {
    // PB runs its endpoint scan from the `tick` op, which the agent calls on a
    // one-shot timerfd every 4 ms (its OS tick; no polling). Two sleeping ranks
    // of one job each hold an unconsumed message, so each scan selects the other
    // one (round robin) and the agent boosts the selected rank until it runs:
    // the boosts' starts alternate between the two rank cgroups, one per scan.
    // By hand, 4 ms ticks: period 20 ms -> a scan every 20 / 4 = 5 ticks = 20 ms;
    // period 10 ms -> the first tick at or after 10 ms is the 3rd, 12 ms (the
    // simulator's rule, pb.rs: every ceil(period / tick) ticks). The median of
    // the intervals between successive boost starts must be within 1.5 ms of it.
    let _g = serial();
    let off = std::mem::offset_of!(proto::RankShm, arrivals).to_string();
    for (period_us, expected_ms) in [(20_000, 20.0), (10_000, 12.0)] {
        let t = Scratch::new();
        let run = format!("t-pb{period_us}");
        let s = t.sock(&run);
        let _a = agent(&t, &run, &s, "nls");
        let c = Client::connect(&s, Duration::from_secs(10)).unwrap();
        c.declare(4, &format!("pb[period_us={period_us}]"), false)
            .unwrap();
        let ranks: Vec<_> = (0..2)
            .map(|r| common::fake_rank(PB_RANK, &run, 4, r, &s, &[&off]))
            .collect();
        let cg = Cgroups::detect().cpu.unwrap();
        let leaves = [0, 1]
            .map(|r: usize| cg.path(&format!("cosched.{run}.n0/j4r{r}p{}", ranks[r].proc.0.id())));
        assert!(
            within(200, || leaves.iter().all(|l| l.exists())),
            "the ranks' cgroups"
        );
        let starts = boost_starts(&leaves, 1.2);
        let mut gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.len() >= 20,
            "period {period_us} us: boosts at {starts:?}"
        );
        gaps.sort_by(f64::total_cmp);
        let median = gaps[gaps.len() / 2];
        assert!(
            (median - expected_ms).abs() <= 1.5,
            "period {period_us} us: median interval {median:.2} ms, expected {expected_ms} ms; intervals {gaps:?}"
        );
    }
}

//! The node mechanisms on this machine (root and cgroups needed: without them
//! these tests fail, they do not skip). Spinners are `sh` busy loops started by
//! the test and killed by pid at the end.

use cosched_real::mech::NodeMech;
use cosched_real::procfs;
use std::process::{Child, Command};
use std::time::Duration;

struct Spinner(Child);

impl Spinner {
    fn start() -> Spinner {
        Spinner(
            Command::new("sh")
                .arg("-c")
                .arg("while :; do :; done")
                .spawn()
                .unwrap(),
        )
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Held by the tests that pin their spinners to CPU 1 (they would skew each
/// other's measurements).
static CPU1: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn state_dir() -> std::path::PathBuf {
    cosched_real::state::default_dir()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn usage_over(m: &NodeMech, pids: &[u32], d: Duration) -> Vec<u64> {
    let a: Vec<u64> = pids.iter().map(|&p| m.usage_ns(p).unwrap()).collect();
    std::thread::sleep(d);
    pids.iter()
        .zip(a)
        .map(|(&p, a)| m.usage_ns(p).unwrap() - a)
        .collect()
}

#[test]
fn freeze_thaw_round_trip() {
    let s = Spinner::start();
    let orig = procfs::cgroup_of(s.pid(), Some("cpu"));
    let mut m = NodeMech::new("test-freeze", 0, None, &state_dir(), 8.0).expect("cgroups as root");
    m.add_rank(s.pid(), 1, 0).unwrap();
    let base = m.cpu_base();
    assert!(base.exists());
    assert!(
        usage_over(&m, &[s.pid()], Duration::from_millis(300))[0] > 0,
        "a spinner runs"
    );
    m.set_job_frozen(1, true).unwrap();
    assert!(m.is_job_frozen(1));
    let frozen = usage_over(&m, &[s.pid()], Duration::from_millis(300))[0];
    assert!(
        frozen < 1_000_000,
        "a frozen job used {frozen} ns of CPU in 300 ms"
    );
    m.set_job_frozen(1, false).unwrap();
    assert!(
        usage_over(&m, &[s.pid()], Duration::from_millis(300))[0] > 0,
        "a thawed job runs again"
    );
    // Freeze again and restore: restoring thaws and gives the process back.
    m.set_job_frozen(1, true).unwrap();
    m.restore();
    assert!(!base.exists(), "restore removes the node's cgroups");
    assert_eq!(
        procfs::cgroup_of(s.pid(), Some("cpu")),
        orig,
        "the process is back in its cgroup"
    );
    let t0 = procfs::stat(s.pid()).unwrap().cpu_ticks;
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        procfs::stat(s.pid()).unwrap().cpu_ticks > t0,
        "nothing is left frozen"
    );
}

#[test]
fn a_weight_changes_two_spinners_cpu_shares() {
    let _cpu1 = CPU1.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (a, b) = (Spinner::start(), Spinner::start());
    // Both on one CPU: their shares are the ratio of their weights.
    let mut m =
        NodeMech::new("test-weight", 0, Some("1"), &state_dir(), 4.0).expect("cgroups as root");
    m.add_rank(a.pid(), 1, 0).unwrap();
    m.add_rank(b.pid(), 2, 0).unwrap();
    let ratio = |m: &NodeMech| {
        let u = usage_over(m, &[a.pid(), b.pid()], Duration::from_millis(600));
        u[0] as f64 / u[1].max(1) as f64
    };
    let equal = median((0..3).map(|_| ratio(&m)).collect());
    m.set_boost(a.pid(), true).unwrap();
    assert!(m.is_boosted(a.pid()));
    let boosted = median((0..3).map(|_| ratio(&m)).collect());
    m.set_boost(a.pid(), false).unwrap();
    let back = median((0..3).map(|_| ratio(&m)).collect());
    eprintln!("CPU share ratio a/b: equal weights {equal:.2}, a boosted x4 {boosted:.2}, unboosted {back:.2}");
    assert!((0.6..1.6).contains(&equal), "equal weights: ratio {equal}");
    assert!((2.5..6.5).contains(&boosted), "weight x4: ratio {boosted}");
    assert!((0.6..1.6).contains(&back), "unboosted: ratio {back}");
    let base = m.cpu_base();
    drop(m);
    assert!(!base.exists());
}

#[test]
fn a_failed_add_rank_is_undone() {
    // The node's cpuset has no CPU, so the cpuset attach (after the cpu and cpuacct ones) fails.
    let s = Spinner::start();
    let orig = procfs::cgroup_of(s.pid(), Some("cpu"));
    let dir = tempdir("undo");
    let mut m = NodeMech::new("test-undo", 0, None, &dir, 8.0).expect("cgroups as root");
    let cpuset = m.cg.cpuset.clone().expect("a cpuset hierarchy");
    assert!(
        cpuset != *m.cg.cpu.as_ref().unwrap(),
        "this test needs the v1 cpuset hierarchy apart from cpu"
    );
    std::fs::write(cpuset.path(&m.base).join("cpuset.cpus"), "\n").unwrap();
    assert!(m.add_rank(s.pid(), 1, 0).is_err());
    assert_eq!(procfs::cgroup_of(s.pid(), Some("cpu")), orig);
    let leaves: Vec<_> = std::fs::read_dir(m.cpu_base())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(leaves.is_empty(), "{leaves:?}");
    let rec = std::fs::read_to_string(dir.join(format!("{}.json", m.base))).unwrap();
    assert!(!rec.contains(&format!("\"pid\":{}", s.pid())), "{rec}");
    m.restore();
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("cosched-mech-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_ranks_child_goes_back_where_the_rank_came_from_not_to_the_root() {
    let dir = tempdir("child");
    let go = dir.join("go");
    let mut sh = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while [ ! -e {} ]; do sleep 0.01; done; sleep 600 & wait",
            go.display()
        ))
        .spawn()
        .unwrap();
    let pid = sh.id();
    // The rank comes from a cgroup that is not the root.
    let cpu_root = cosched_real::cgroup::Cgroups::detect().cpu.unwrap();
    let origin = cpu_root.path(&format!("cosched-test-origin.{}", std::process::id()));
    std::fs::create_dir_all(&origin).unwrap();
    cpu_root.attach(&origin, pid).unwrap();
    let want = procfs::cgroup_of(pid, Some("cpu"));
    let mut m = NodeMech::new("test-child", 0, None, &dir, 8.0).expect("cgroups as root");
    m.add_rank(pid, 1, 0).unwrap();
    std::fs::write(&go, "").unwrap();
    // The rank forks a child inside its cosched cgroup.
    let mut child = None;
    for _ in 0..500 {
        let c = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
        // The one started after the rank was placed (not a `sleep 0.01` of the wait loop).
        child = c
            .split_whitespace()
            .map(|c| c.parse::<u32>().unwrap())
            .find(|c| {
                std::fs::read(format!("/proc/{c}/cmdline")).is_ok_and(|b| b == b"sleep\x00600\x00")
            });
        if child.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let child = child.expect("the rank's child");
    assert_ne!(procfs::cgroup_of(child, Some("cpu")), want);
    m.remove_rank(pid).unwrap();
    let got = procfs::cgroup_of(child, Some("cpu"));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = sh.kill();
    let _ = sh.wait();
    m.restore();
    // The killed child leaves the cgroup shortly after.
    for _ in 0..200 {
        if std::fs::remove_dir(&origin).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(got, want, "the child left its rank's original cgroup");
}

/// A Python busy loop that records, at every return to the CPU after an absence
/// of more than 50 us, the CLOCK_MONOTONIC times of the absence's start and end
/// (ns, little endian) in a ring of 64 in its file (bytes 16 + 16 k), the count
/// of absences in bytes 0..8, and the time of its latest turn in bytes 8..16.
struct StampSpinner {
    child: Child,
    file: std::path::PathBuf,
}

const STAMP_LOOP: &str = "import mmap,struct,sys,time
f=open(sys.argv[1],'r+b'); m=mmap.mmap(f.fileno(),16+64*16)
last=time.monotonic_ns(); n=0
while True:
    t=time.monotonic_ns()
    if t-last>50000:
        k=16+16*(n%64); m[k:k+16]=struct.pack('<QQ',last,t); n+=1; m[0:8]=struct.pack('<Q',n)
    m[8:16]=struct.pack('<Q',t)
    last=t
";

impl StampSpinner {
    fn start(name: &str) -> StampSpinner {
        let file = tempdir("stamps").join(name);
        std::fs::write(&file, [0u8; 16 + 64 * 16]).unwrap();
        let child = Command::new("python3")
            .args(["-c", STAMP_LOOP])
            .arg(&file)
            .spawn()
            .unwrap();
        StampSpinner { child, file }
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
    /// The recorded absences (start, end), ns, oldest first.
    fn absences(&self) -> Vec<(u64, u64)> {
        let b = std::fs::read(&self.file).unwrap();
        let word = |k: usize| u64::from_le_bytes(b[k..k + 8].try_into().unwrap());
        let n = word(0) as usize;
        (n.saturating_sub(64)..n)
            .map(|i| (word(16 + 16 * (i % 64)), word(24 + 16 * (i % 64))))
            .collect()
    }
    /// The absence that contains `t`, if it has ended.
    fn absence_over(&self, t: u64) -> Option<(u64, u64)> {
        self.absences().into_iter().find(|&(gone, back)| gone < t && back >= t)
    }
    /// How long ago it last had a turn of its loop, ns (0 if just now).
    fn idle_ns(&self) -> u64 {
        let b = std::fs::read(&self.file).unwrap();
        monotonic_ns().saturating_sub(u64::from_le_bytes(b[8..16].try_into().unwrap()))
    }
}

impl Drop for StampSpinner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.file);
        let _ = std::fs::remove_dir(self.file.parent().unwrap());
    }
}

fn monotonic_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).unwrap();
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// The calling thread to SCHED_FIFO 1 (reset on fork) or back to SCHED_OTHER.
fn set_realtime(on: bool) {
    let param = libc::sched_param {
        sched_priority: i32::from(on),
    };
    let policy = if on {
        libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK
    } else {
        libc::SCHED_OTHER
    };
    // SAFETY: sets the calling thread's policy from a valid sched_param.
    let r = unsafe { libc::sched_setscheduler(0, policy, &param) };
    assert_eq!(r, 0, "sched_setscheduler: {}", std::io::Error::last_os_error());
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum BoostHow {
    /// Nothing: how long the waiting spinner waits anyway.
    Nothing,
    /// The cgroup weight only.
    Weight,
    /// The weight and a reschedule check, repeated until it runs at the agent's
    /// boost-until-run checks: every 250 us for 4 ms, then at doubling intervals.
    WeightAndChecks,
}

/// One sample: waits until `a` is off the CPU while `b` runs (both pinned to one
/// CPU), applies `how` to `a`, and returns (the time from the boost to `a`'s
/// return, the whole absence of `a`), ns; `None` when the moment did not come.
fn boost_latency(
    m: &mut NodeMech,
    a: &StampSpinner,
    b: &StampSpinner,
    how: BoostHow,
) -> Option<(u64, u64)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
        if a.idle_ns() < 300_000 || b.idle_ns() > 100_000 {
            continue;
        }
        // Like the agent: at real-time priority, asleep between the checks.
        set_realtime(true);
        let t0 = monotonic_ns();
        if how != BoostHow::Nothing {
            m.set_boost(a.pid(), true).unwrap();
        }
        if how == BoostHow::WeightAndChecks {
            m.nudge(a.pid());
        }
        let mut due = t0;
        for checks in 0..40u32 {
            due += 250_000 << (checks + 1).saturating_sub(16).min(6);
            std::thread::sleep(Duration::from_nanos(due.saturating_sub(monotonic_ns())));
            if a.absence_over(t0).is_some() {
                break;
            }
            if how == BoostHow::WeightAndChecks {
                m.nudge(a.pid());
            }
        }
        set_realtime(false);
        m.set_boost(a.pid(), false).unwrap();
        return a.absence_over(t0).map(|(gone, back)| (back - t0, back - gone));
    }
    None
}

#[test]
fn a_boost_with_reschedule_checks_gets_the_cpu_well_before_the_slice_ends() {
    let _cpu1 = CPU1.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (a, b) = (StampSpinner::start("a"), StampSpinner::start("b"));
    let mut m =
        NodeMech::new("test-nudge", 0, Some("1"), &state_dir(), 64.0).expect("cgroups as root");
    m.add_rank(a.pid(), 1, 0).unwrap();
    m.add_rank(b.pid(), 2, 0).unwrap();
    // The node's own weight at the root, so that other load on the CPU does not
    // decide who runs (the test measures the choice between the node's ranks).
    std::fs::write(m.cpu_base().join("cpu.shares"), "262144").unwrap();
    let nice = cosched_real::nudge::nice_of(a.pid()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let hows = [BoostHow::Nothing, BoostHow::Weight, BoostHow::WeightAndChecks];
    let mut rounds: Vec<[f64; 4]> = vec![];
    for _ in 0..3 {
        let mut got: [Vec<f64>; 3] = [vec![], vec![], vec![]];
        let mut absences = vec![];
        for k in 0..60 {
            let i = k % 3;
            std::thread::sleep(Duration::from_millis(5 + (k as u64 * 7) % 11));
            if let Some((lat, whole)) = boost_latency(&mut m, &a, &b, hows[i]) {
                got[i].push(lat as f64 / 1e3);
                if hows[i] == BoostHow::Nothing {
                    absences.push(whole as f64 / 1e3);
                }
            }
        }
        assert!(got.iter().all(|v| v.len() >= 10), "too few samples: {got:?}");
        rounds.push([
            median(absences),
            median(got[0].clone()),
            median(got[1].clone()),
            median(got[2].clone()),
        ]);
    }
    let col = |j: usize| median(rounds.iter().map(|r| r[j]).collect());
    let (absence, nothing, weight, checked) = (col(0), col(1), col(2), col(3));
    eprintln!(
        "medians of 3 rounds, us: whole absence {absence:.0}; from the boost to the CPU: \
         nothing {nothing:.0}, weight only {weight:.0}, weight and checks {checked:.0}; rounds {rounds:?}"
    );
    assert_eq!(
        cosched_real::nudge::nice_of(a.pid()).unwrap(),
        nice,
        "the checks leave the nice value as it was"
    );
    // Without the checks the waiting spinner waits out the rest of the other's
    // slice (the weight alone does not preempt): measured, about half an absence
    // or more. With them it runs at the first check after it is owed CPU: at
    // once, or once the running spinner has had its share.
    assert!(
        checked < 0.4 * absence,
        "a boosted spinner waited {checked:.0} us (median) with checks; absences {absence:.0} us"
    );
}

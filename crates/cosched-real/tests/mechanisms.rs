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

//! The agent's cgroup v2 write paths (`cgroup.freeze`, `cgroup.events`,
//! `cpu.stat` usage, `remove_tree` with its thaw), run for real against a
//! private mount of the cgroup2 hierarchy (`mount -t cgroup2 none DIR`): on this
//! machine (cgroup v1 for cpu, cpuacct, cpuset and freezer) it holds no bound
//! controller, but freezing and the CPU usage of `cpu.stat` are core cgroup2
//! files that need none. `cpu.weight` and `cpuset.cpus` need their controllers
//! in the v2 hierarchy and are not exercised here (docs/real.md). Root needed
//! (without it the test fails, it does not skip); the group, the mount and its
//! folder are removed at the end, whatever happens.

use cosched_real::cgroup::{Hierarchy, Version};
use cosched_real::procfs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A private cgroup2 mount, a cgroup in it and a spinner: all undone on drop
/// (the spinner killed first, so the group is empty and can be removed). It is
/// made before the mount, so a panic at any later step (the mount, the
/// spinner's spawn) still unmounts and removes the folder.
struct Setup {
    spinner: Option<Child>,
    mnt: PathBuf,
    group: PathBuf,
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(c) = &mut self.spinner {
            let _ = c.kill();
            let _ = c.wait();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.group.exists() && std::fs::remove_dir(&self.group).is_err() {
            if Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = Command::new("umount").arg(&self.mnt).status();
        let _ = std::fs::remove_dir(&self.mnt);
    }
}

fn mounted(dir: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(dir.to_str().unwrap()))
}

/// CPU time of `dir` over `d`, from v2 `cpu.stat` (`usage_usec`).
fn usage_over(h: &Hierarchy, dir: &Path, d: Duration) -> u64 {
    let a = h.usage_ns(dir).unwrap();
    std::thread::sleep(d);
    h.usage_ns(dir).unwrap() - a
}

#[test]
fn v2_freeze_thaw_round_trip_on_a_private_cgroup2_mount() {
    let mnt = std::env::temp_dir().join(format!("cosched-test-cg2-{}", std::process::id()));
    let h = Hierarchy {
        root: mnt.clone(),
        version: Version::V2,
    };
    let mut s = Setup {
        spinner: None,
        group: h.path(&format!("cosched.test-v2-{}", std::process::id())),
        mnt,
    };
    std::fs::create_dir_all(&s.mnt).unwrap();
    let st = Command::new("mount")
        .args(["-t", "cgroup2", "none"])
        .arg(&s.mnt)
        .status()
        .unwrap();
    assert!(st.success() && mounted(&s.mnt), "mount -t cgroup2 as root");
    let spinner = Command::new("sh")
        .arg("-c")
        .arg("while :; do :; done")
        .spawn()
        .unwrap();
    let pid = spinner.id();
    s.spinner = Some(spinner);
    let home = procfs::cgroup_of(pid, None).expect("the spinner has a cgroup2 line");
    let group = h
        .create(s.group.file_name().unwrap().to_str().unwrap())
        .unwrap();
    h.attach(&group, pid).unwrap();
    assert!(h.procs(&group).contains(&pid));
    assert!(
        usage_over(&h, &group, Duration::from_millis(300)) > 0,
        "the spinner runs, and v2 cpu.stat counts it"
    );
    h.set_frozen(&group, true, Duration::from_secs(10)).unwrap();
    assert!(h.is_frozen(&group).unwrap(), "cgroup.events says frozen 1");
    // Frozen: by hand, at most a scheduler tick's leftover (< 1 ms) in 300 ms.
    let frozen = usage_over(&h, &group, Duration::from_millis(300));
    assert!(
        frozen < 1_000_000,
        "a frozen group used {frozen} ns in 300 ms"
    );
    h.set_frozen(&group, false, Duration::from_secs(10))
        .unwrap();
    assert!(!h.is_frozen(&group).unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    while usage_over(&h, &group, Duration::from_millis(100)) == 0 {
        assert!(Instant::now() < deadline, "a thawed group runs again");
    }
    // Frozen again, then removed: remove_tree thaws, sends the spinner home and
    // removes the group.
    h.set_frozen(&group, true, Duration::from_secs(10)).unwrap();
    h.remove_tree(&group, Some(&home)).unwrap();
    assert!(!group.exists(), "the group is removed");
    assert_eq!(
        procfs::cgroup_of(pid, None),
        Some(home),
        "the spinner is home"
    );
    let t0 = procfs::stat(pid).unwrap().cpu_ticks;
    let deadline = Instant::now() + Duration::from_secs(10);
    while procfs::stat(pid).unwrap().cpu_ticks == t0 {
        assert!(Instant::now() < deadline, "nothing is left frozen");
        std::thread::sleep(Duration::from_millis(50));
    }
}

//! The SIGSTOP / SIGCONT fallback of gang slots, chosen with `COSCHED_FREEZE=signals`
//! on this machine (which has a freezer): a freeze/thaw round trip through it. Root
//! and cgroups needed (without them the test fails, it does not skip). This file
//! holds one test: it sets the variable for its whole process.

use cosched_real::cgroup::{Cgroups, Version};
use cosched_real::mech::{node_base, FreezeBy, NodeMech, FREEZE_ENV};
use cosched_real::procfs;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

struct Spinner(Child);

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls (sleeping 10 ms) until `pid`'s /proc state is `want` or not, at most 10 s.
fn wait_state(pid: u32, stopped: bool) -> char {
    let t0 = Instant::now();
    loop {
        let s = procfs::stat(pid).expect("the spinner lives").state;
        if (s == 'T') == stopped || t0.elapsed() > Duration::from_secs(10) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn ticks_over(pid: u32, d: Duration) -> u64 {
    let a = procfs::stat(pid).unwrap().cpu_ticks;
    std::thread::sleep(d);
    procfs::stat(pid).unwrap().cpu_ticks - a
}

#[test]
fn signals_freeze_and_thaw_a_job_where_a_freezer_exists() {
    std::env::set_var(FREEZE_ENV, "signals");
    let s = Spinner(
        Command::new("sh")
            .arg("-c")
            .arg("while :; do :; done")
            .spawn()
            .unwrap(),
    );
    let pid = s.0.id();
    let dir = tempfile::tempdir().unwrap();
    let mut m = NodeMech::new("test-sigfreeze", 0, None, dir.path(), 8.0).expect("cgroups as root");
    assert_eq!(
        m.freeze_by,
        FreezeBy::Signals,
        "COSCHED_FREEZE=signals selects signals"
    );
    let freezer = Cgroups::detect()
        .freezer
        .expect("this machine has a freezer");
    assert_eq!(m.cg.freezer, None, "the freezer is not used");
    m.add_rank(pid, 1, 0).unwrap();
    if freezer.version == Version::V1 {
        // Signals create nothing in a separate v1 freezer hierarchy (which
        // then need not be writable).
        let node = freezer.path(&node_base("test-sigfreeze", 0));
        assert!(!node.exists(), "{} was created", node.display());
    }
    m.set_job_frozen(1, true).unwrap();
    assert_eq!(wait_state(pid, true), 'T', "SIGSTOP stops the rank");
    let record = dir
        .path()
        .join(format!("{}.json", node_base("test-sigfreeze", 0)));
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record).unwrap()).unwrap();
    assert_eq!(
        rec["stopped"][0][0].as_u64(),
        Some(u64::from(pid)),
        "the stop is recorded before it is made (a later cleanup continues it): {rec}"
    );
    // A 200 ms window of a stopped process: 0 ticks (a tick is 10 ms; by hand,
    // a running spinner gets about 20 when it has a CPU to itself).
    assert_eq!(ticks_over(pid, Duration::from_millis(200)), 0);
    m.set_job_frozen(1, false).unwrap();
    assert_ne!(wait_state(pid, false), 'T', "SIGCONT continues it");
    // Stopped again, then restored: restore sends SIGCONT, nothing stays stopped.
    m.set_job_frozen(1, true).unwrap();
    assert_eq!(wait_state(pid, true), 'T');
    m.restore();
    assert_ne!(
        wait_state(pid, false),
        'T',
        "restore leaves nothing stopped"
    );
    assert!(
        !procfs::cgroup_of(pid, Some("cpu"))
            .unwrap_or_default()
            .contains("cosched."),
        "restore gives the process back"
    );
}

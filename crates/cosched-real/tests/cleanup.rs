//! `state::cleanup` restores only the bases recorded in its own state directory
//! whose lock is free: another directory's agents (live or not) and foreign
//! `cosched.*` cgroups are left alone, and one base that cannot be restored does
//! not stop the others. Needs root and cgroups (the tests create their own).

use cosched_real::cgroup::{Cgroups, Hierarchy};
use cosched_real::procfs;
use cosched_real::state::{self, Moved, State};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sleeper() -> Proc {
    Proc(Command::new("sleep").arg("600").spawn().unwrap())
}

/// A fresh state directory of this test.
fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cosched-cleanup-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn cpu() -> Hierarchy {
    Cgroups::detect()
        .cpu
        .expect("a cpu cgroup hierarchy (run as root)")
}

/// Creates `base` (and a leaf below it) in every hierarchy.
fn make(base: &str) {
    for h in Cgroups::detect().roots() {
        h.create(base).unwrap();
        h.create(&format!("{base}/leaf")).unwrap();
    }
}

fn exists(base: &str) -> bool {
    Cgroups::detect()
        .roots()
        .iter()
        .any(|h| h.path(base).exists())
}

/// Removes what a test made, whatever happened.
struct Remove(Vec<String>);
impl Drop for Remove {
    fn drop(&mut self) {
        for b in &self.0 {
            for h in Cgroups::detect().roots() {
                let _ = h.remove_tree(&h.path(b), None);
            }
        }
    }
}

/// A record of `base` in `dir` whose agent died: the file stays, the lock is free.
fn dead_agent(dir: &Path, base: &str) {
    let s = State::acquire(dir, base, &Cgroups::detect()).unwrap();
    drop(s);
    assert!(dir.join(format!("{base}.json")).exists());
}

fn in_cgroup(pid: u32, base: &str) -> bool {
    procfs::cgroup_of(pid, Some("cpu")).is_some_and(|c| c.contains(base))
}

#[test]
fn cleanup_touches_only_its_own_dir_and_free_locks() {
    let me = std::process::id();
    let (dir_a, dir_b) = (tmp_dir("a"), tmp_dir("b"));
    let a = format!("cosched.tca-{me}.n0");
    let b_live = format!("cosched.tcb-{me}.n0");
    let b_dead = format!("cosched.tcb-{me}.n1");
    let foreign = format!("cosched.other-{me}");
    let _rm = Remove(vec![
        a.clone(),
        b_live.clone(),
        b_dead.clone(),
        foreign.clone(),
    ]);
    for base in [&a, &b_live, &b_dead, &foreign] {
        make(base);
    }
    let h = cpu();
    // A process of the live agent of dir B, one of the dead agent of dir A (moved
    // there from its original cgroup), and one in the foreign cgroup.
    let (p_live, p_a, p_foreign) = (sleeper(), sleeper(), sleeper());
    let orig = procfs::cgroup_of(p_a.0.id(), Some("cpu")).unwrap();
    let cg = Cgroups::detect();
    let mut live = State::acquire(&dir_b, &b_live, &cg).unwrap();
    h.attach(&h.path(&format!("{b_live}/leaf")), p_live.0.id())
        .unwrap();
    live.record.moved.push(Moved {
        pid: p_live.0.id(),
        start: procfs::stat(p_live.0.id()).unwrap().start,
        original: BTreeMap::new(),
    });
    live.save().unwrap();
    let mut dead = State::acquire(&dir_a, &a, &cg).unwrap();
    dead.record.moved.push(Moved {
        pid: p_a.0.id(),
        start: procfs::stat(p_a.0.id()).unwrap().start,
        original: BTreeMap::from([(h.root.to_string_lossy().to_string(), orig.clone())]),
    });
    dead.save().unwrap();
    h.attach(&h.path(&format!("{a}/leaf")), p_a.0.id()).unwrap();
    drop(dead);
    dead_agent(&dir_b, &b_dead);
    h.attach(&h.path(&foreign), p_foreign.0.id()).unwrap();

    let c = state::cleanup(&dir_a, &cg).unwrap();
    assert!(!exists(&a), "the dead agent of dir A is removed");
    assert!(!dir_a.join(format!("{a}.json")).exists());
    assert!(!dir_a.join(format!("{a}.lock")).exists());
    assert_eq!(procfs::cgroup_of(p_a.0.id(), Some("cpu")).unwrap(), orig);
    assert!(
        c.cgroups_removed >= 2 && c.processes_moved_back >= 1,
        "{c:?}"
    );
    assert!(
        exists(&b_live) && exists(&b_dead),
        "dir B's bases are left alone"
    );
    assert!(
        in_cgroup(p_live.0.id(), &b_live),
        "the live agent's rank stays"
    );
    assert!(dir_b.join(format!("{b_dead}.json")).exists());
    assert!(exists(&foreign) && in_cgroup(p_foreign.0.id(), &foreign));

    // On dir B: the dead base goes, the live agent (lock held) stays.
    state::cleanup(&dir_b, &cg).unwrap();
    assert!(!exists(&b_dead));
    assert!(exists(&b_live) && in_cgroup(p_live.0.id(), &b_live));
    assert!(dir_b.join(format!("{b_live}.json")).exists());
    assert!(exists(&foreign) && in_cgroup(p_foreign.0.id(), &foreign));
    // The live agent could still take its lock anew after finishing.
    live.finish();
    drop(p_live);
    drop(p_foreign);
    let _ = std::fs::remove_dir_all(&dir_a);
    let _ = std::fs::remove_dir_all(&dir_b);
}

#[test]
fn a_failing_base_does_not_stop_the_others() {
    let me = std::process::id();
    let dir = tmp_dir("fail");
    let bad = format!("cosched.tcf-{me}.n0");
    let wrong = format!("cosched.tcf-{me}.n1");
    let good = format!("cosched.tcf-{me}.n2");
    let _rm = Remove(vec![bad.clone(), wrong.clone(), good.clone()]);
    for base in [&bad, &wrong, &good] {
        make(base);
        dead_agent(&dir, base);
    }
    std::fs::write(dir.join(format!("{bad}.json")), b"{not json").unwrap();
    let rec = std::fs::read_to_string(dir.join(format!("{good}.json"))).unwrap();
    std::fs::write(
        dir.join(format!("{wrong}.json")),
        rec.replace(&good, &format!("cosched.elsewhere-{me}")),
    )
    .unwrap();
    let e = state::cleanup(&dir, &Cgroups::detect()).unwrap_err();
    assert!(
        e.contains(&bad) && e.contains(&wrong) && !e.contains(&good),
        "{e}"
    );
    assert!(!exists(&good), "the good base is restored");
    assert!(!dir.join(format!("{good}.json")).exists());
    // The failing ones are untouched and keep their records.
    assert!(exists(&bad) && exists(&wrong));
    assert!(dir.join(format!("{bad}.json")).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_lock_is_held_during_the_restore_and_a_live_agent_is_skipped() {
    let me = std::process::id();
    let dir = tmp_dir("lock");
    let base = format!("cosched.tcl-{me}.n0");
    let _rm = Remove(vec![base.clone()]);
    make(&base);
    let cg = Cgroups::detect();
    let live = State::acquire(&dir, &base, &cg).unwrap();
    // A second agent cannot take a held base.
    assert!(State::acquire(&dir, &base, &cg).is_err());
    state::cleanup(&dir, &cg).unwrap();
    assert!(exists(&base), "held: left alone");
    drop(live);
    state::cleanup(&dir, &cg).unwrap();
    assert!(!exists(&base));
    // The base can be taken again after the cleanup unlinked its lock.
    let again = State::acquire(&dir, &base, &cg).unwrap();
    assert!(State::acquire(&dir, &base, &cg).is_err());
    again.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dead_runs_per_node_job_freezer_is_thawed_and_removed_with_its_node() {
    // `cosched run` with alternate/fill freezes a job on one virtual node only:
    // the job's freezer cgroup of that node, `cosched.<run>.n<node>/j<job>`.
    // Its controller was SIGKILLed with the rank frozen there: the next start's
    // sweep thaws it, moves the rank back and removes the node's tree.
    let cg = Cgroups::detect();
    let me = std::process::id();
    let run = format!("tcz-{me}");
    let dir = tmp_dir("pernode");
    let base = cosched_real::mech::node_base(&run, 1);
    let _rm = Remove(vec![base.clone()]);
    let f = cosched_real::mech::JobNodeFreezer::detect(&run, &cg)
        .expect("the v1 freezer hierarchy (run as root)");
    let fz = cg.freezer.clone().unwrap();
    fz.create(&base).unwrap();
    let sp = sleeper();
    let pid = sp.0.id();
    let orig = procfs::cgroup_of(pid, Some("freezer")).unwrap();
    let mut st = State::acquire(&dir, &base, &cg).unwrap();
    st.record.moved.push(Moved {
        pid,
        start: procfs::stat(pid).unwrap().start,
        original: BTreeMap::from([(fz.root.to_string_lossy().to_string(), orig.clone())]),
    });
    st.save().unwrap();
    f.set(1, 7, true).unwrap();
    fz.attach(&f.dir(1, 7), pid).unwrap();
    assert!(f.is_frozen(1, 7));
    assert!(procfs::cgroup_of(pid, Some("freezer")).unwrap().ends_with(&format!("{base}/j7")));
    // Its node 0 was never set up: nothing of it exists.
    assert!(!f.is_frozen(0, 7));
    drop(st);
    let c = state::cleanup(&dir, &cg).unwrap();
    assert!(!fz.path(&base).exists(), "the node's tree is removed");
    assert_eq!(procfs::cgroup_of(pid, Some("freezer")).unwrap(), orig);
    assert!(c.cgroups_removed >= 2 && c.processes_moved_back >= 1, "{c:?}");
    assert!(!f.is_frozen(1, 7));
    let _ = std::fs::remove_dir_all(&dir);
}

//! The agent's record of what it changed, so that a later start (after a
//! SIGKILL) or `cosched-agent cleanup` can restore it.
//!
//! Each agent owns the cgroups named `cosched.<run>.n<node>` (its *base*) and
//! two files in the state directory (default `/run/cosched`): `<base>.lock`,
//! locked with `flock` for the agent's whole life (the kernel drops the lock when
//! the agent dies, however it dies), and `<base>.json`, rewritten atomically at
//! each change: the processes it moved (pid, start time, original cgroups) and
//! the ones it stopped with SIGSTOP. A base that has a record in the state
//! directory and whose lock is free is a leftover: its processes are continued and
//! moved back, its cgroups thawed and removed. A cgroup without a record in that
//! directory (another agent's, with another state directory, or a foreign one) is
//! never touched.

use crate::cgroup::{Cgroups, Hierarchy};
use crate::procfs;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// The state directory: `$COSCHED_STATE_DIR`, else `/run/cosched`.
pub fn default_dir() -> PathBuf {
    std::env::var_os("COSCHED_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/cosched"))
}

/// Whether this process may keep its records in `dir`: `dir`, or the nearest
/// folder above it that exists (where it would be created), is writable
/// (`access(2)` W_OK). The error names the folder and what to do.
pub fn require_writable(dir: &Path) -> Result<(), String> {
    use nix::unistd::{access, AccessFlags};
    let Some(existing) = dir.ancestors().find(|d| d.exists()) else {
        return Ok(());
    };
    access(existing, AccessFlags::W_OK).map_err(|e| {
        format!(
            "the state directory {} cannot be written ({} is not writable: {e}): real execution \
             needs root (or COSCHED_STATE_DIR naming a folder this user can write)",
            dir.display(),
            existing.display()
        )
    })
}

/// A process the agent moved into its cgroups.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Moved {
    pub pid: u32,
    pub start: u64,
    /// Hierarchy root -> the cgroup (relative path) the process was in before.
    pub original: BTreeMap<String, String>,
}

/// The record of one agent.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Record {
    pub agent_pid: u32,
    pub base: String,
    pub cgroups: String,
    pub moved: Vec<Moved>,
    /// (pid, start time) of processes stopped with SIGSTOP (no freezer).
    pub stopped: Vec<(u32, u64)>,
    /// (pid, start time, nice) of the ranks whose main thread's nice value the
    /// boost's reschedule check passes through another value (`nudge.rs`): the
    /// value to put back if the agent died between its two calls.
    #[serde(default)]
    pub nices: Vec<(u32, u64, i32)>,
}

/// The live record of this agent: the lock and the file.
pub struct State {
    _lock: Flock<File>,
    path: PathBuf,
    pub record: Record,
}

impl State {
    /// Takes the lock of `base` in `dir`; an error if another live agent holds it.
    pub fn acquire(dir: &Path, base: &str, cgroups: &Cgroups) -> io::Result<State> {
        fs::create_dir_all(dir).map_err(|e| with_path(dir, e))?;
        let lock_path = dir.join(format!("{base}.lock"));
        let lock = lock_base(dir, base)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("another agent holds {}", lock_path.display()),
            )
        })?;
        let record = Record {
            agent_pid: std::process::id(),
            base: base.to_string(),
            cgroups: cgroups.describe(),
            ..Record::default()
        };
        let s = State {
            _lock: lock,
            path: dir.join(format!("{base}.json")),
            record,
        };
        s.save()?;
        Ok(s)
    }

    /// Writes the record atomically.
    pub fn save(&self) -> io::Result<()> {
        let tmp = self.path.with_extension("json.tmp");
        fs::write(
            &tmp,
            serde_json::to_vec_pretty(&self.record).map_err(io::Error::other)?,
        )?;
        fs::rename(&tmp, &self.path)
    }

    /// Removes the record (the agent restored everything).
    pub fn finish(self) {
        let _ = fs::remove_file(&self.path);
        let _ = fs::remove_file(self.path.with_extension("lock"));
    }
}

/// What a cleanup restored.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Cleaned {
    pub cgroups_removed: usize,
    pub processes_continued: usize,
    pub processes_moved_back: usize,
    pub segments_unlinked: usize,
}

fn with_path(p: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", p.display()))
}

/// Takes the lock `<base>.lock` in `dir` (creating the file) without blocking:
/// `None` if another process holds it. The lock file may be unlinked by its
/// holder (at the end of an agent or of a cleanup), so after locking the open
/// file must still be the one at the path; otherwise it is opened again.
fn lock_base(dir: &Path, base: &str) -> io::Result<Option<Flock<File>>> {
    use std::os::unix::fs::MetadataExt;
    let p = dir.join(format!("{base}.lock"));
    loop {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)
            .map_err(|e| with_path(&p, e))?;
        let lock = match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
            Ok(l) => l,
            Err(_) => return Ok(None),
        };
        let held = lock.metadata().map_err(|e| with_path(&p, e))?;
        match fs::metadata(&p) {
            Ok(m) if m.ino() == held.ino() && m.dev() == held.dev() => return Ok(Some(lock)),
            // Unlinked (or replaced) by its previous holder: take the current one.
            _ => continue,
        }
    }
}

/// Restores everything left by agents that are not running any more and kept
/// their record in `dir`: for each `<base>.json` in `dir` whose lock is free
/// (taken and held for the whole restore of that base), continues the processes
/// they stopped, moves the processes they moved back to their original cgroups,
/// thaws and removes the cgroups of that base, unlinks the shared-memory
/// segments of every rank it recorded (dead or not: a rank thawed here usually
/// dies just after, when its job is ended, and no agent serves it any more) and
/// deletes its state files; then unlinks `/dev/shm/cosched.*` segments of dead
/// ranks.
/// Bases whose lock is held (live agents) and cgroups with no record in `dir`
/// are left alone. A base that cannot be restored keeps its record and does not
/// stop the others; the error lists every such base.
pub fn cleanup(dir: &Path, cgroups: &Cgroups) -> Result<Cleaned, String> {
    let mut out = Cleaned::default();
    let mut failures: Vec<String> = Vec::new();
    let mut bases: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().to_string();
                    n.strip_suffix(".json")
                        .filter(|b| b.starts_with("cosched.") && !b.contains('/'))
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    bases.sort();
    for base in bases {
        if let Err(e) = cleanup_base(dir, &base, cgroups, &mut out) {
            failures.push(format!("{base}: {e}"));
        }
    }
    out.segments_unlinked = unlink_dead_segments();
    if failures.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "could not restore {} of the leftovers in {} ({}): {}",
            failures.len(),
            dir.display(),
            describe(&out),
            failures.join("; ")
        ))
    }
}

/// What a cleanup did, in words.
pub fn describe(c: &Cleaned) -> String {
    format!(
        "removed {} cgroups, continued {} processes, moved back {}, unlinked {} segments",
        c.cgroups_removed, c.processes_continued, c.processes_moved_back, c.segments_unlinked
    )
}

/// Restores one base of `dir` if its lock is free, holding the lock throughout.
fn cleanup_base(
    dir: &Path,
    base: &str,
    cgroups: &Cgroups,
    out: &mut Cleaned,
) -> Result<(), String> {
    let json = dir.join(format!("{base}.json"));
    let Some(lock) = lock_base(dir, base).map_err(|e| e.to_string())? else {
        return Ok(()); // a live agent
    };
    let bytes = match fs::read(&json) {
        Ok(b) => b,
        // Finished meanwhile by its agent (which removed the record).
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let _ = fs::remove_file(dir.join(format!("{base}.lock")));
            drop(lock);
            return Ok(());
        }
        Err(e) => return Err(format!("{}: {e}", json.display())),
    };
    let rec: Record =
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", json.display()))?;
    if rec.base != base {
        return Err(format!(
            "{}: field base is {:?}, expected {base:?}",
            json.display(),
            rec.base
        ));
    }
    for &(pid, start) in &rec.stopped {
        if procfs::alive(pid, start) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGCONT,
            );
            out.processes_continued += 1;
        }
    }
    for &(pid, start, nice) in &rec.nices {
        if procfs::alive(pid, start) && crate::nudge::nice_of(pid).is_ok_and(|n| n != nice) {
            let _ = crate::nudge::set_nice(pid, nice);
        }
    }
    let mut errors: Vec<String> = Vec::new();
    for h in cgroups.roots() {
        let top = h.path(base);
        // Thaw first so that moved processes are not frozen elsewhere.
        if top.exists() {
            thaw_tree(&h, &top);
        }
        for m in &rec.moved {
            if let Some(orig) = m.original.get(&h.root.to_string_lossy().to_string()) {
                if procfs::alive(m.pid, m.start) {
                    let dest = h.root.join(orig.trim_start_matches('/'));
                    if h.attach(&dest, m.pid).is_ok() {
                        out.processes_moved_back += 1;
                    }
                }
            }
        }
        if !top.exists() {
            continue;
        }
        let n = count_dirs(&top);
        let root = h.root.to_string_lossy().to_string();
        let home = crate::mech::common_home(rec.moved.iter().filter_map(|m| m.original.get(&root)));
        match h.remove_tree(&top, home.as_deref()) {
            Ok(()) => out.cgroups_removed += n,
            Err(e) => errors.push(e.to_string()),
        }
    }
    if !errors.is_empty() {
        // Keep the record so that a later cleanup tries again.
        return Err(errors.join("; "));
    }
    out.segments_unlinked += unlink_segments_of(&rec.moved);
    let _ = fs::remove_file(&json);
    // Unlinked while held: a process waiting on this inode sees it is stale
    // (`lock_base`) and takes a fresh file.
    let _ = fs::remove_file(dir.join(format!("{base}.lock")));
    drop(lock);
    Ok(())
}

fn thaw_tree(h: &Hierarchy, dir: &Path) {
    let f = match h.version {
        crate::cgroup::Version::V1 => "freezer.state",
        crate::cgroup::Version::V2 => "cgroup.freeze",
    };
    if dir.join(f).exists() {
        let _ = h.set_frozen(dir, false, crate::cgroup::FREEZE_SETTLE);
    }
}

fn count_dirs(p: &Path) -> usize {
    1 + fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| count_dirs(&e.path()))
                .sum()
        })
        .unwrap_or(0)
}

/// Unlinks the `/dev/shm/cosched.*` rank segments (checked by their magic)
/// whose rank pid `unlink(pid)` accepts; returns how many.
fn unlink_segments_where(unlink: impl Fn(i32) -> bool) -> usize {
    let mut n = 0;
    let Ok(rd) = fs::read_dir("/dev/shm") else {
        return 0;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.starts_with("cosched.") {
            continue;
        }
        let Ok(b) = fs::read(e.path()) else { continue };
        if b.len() < 24
            || u32::from_le_bytes(b[0..4].try_into().unwrap()) != crate::proto::SHM_MAGIC
        {
            continue;
        }
        if unlink(i32::from_le_bytes(b[20..24].try_into().unwrap())) {
            let _ = fs::remove_file(e.path());
            n += 1;
        }
    }
    n
}

/// Unlinks `/dev/shm/cosched.*` rank segments whose process is gone.
pub fn unlink_dead_segments() -> usize {
    unlink_segments_where(|pid| pid <= 0 || procfs::stat(pid as u32).is_none_or(|s| s.state == 'Z'))
}

/// Unlinks the segments of the ranks a dead agent recorded in `moved`, whether
/// they still run or not: no agent serves them any more, and their peers mapped
/// each other's segments in `MPI_Init` (an unlinked name stays mapped). A pid
/// that now belongs to another process (its start time differs) is left alone:
/// that segment may be a new rank's.
fn unlink_segments_of(moved: &[Moved]) -> usize {
    unlink_segments_where(|pid| {
        moved.iter().any(|m| {
            i64::from(m.pid) == i64::from(pid)
                && !matches!(procfs::stat(m.pid), Some(s) if s.start != m.start && s.state != 'Z')
        })
    })
}

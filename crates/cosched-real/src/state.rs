//! The agent's record of what it changed, so that a later start (after a
//! SIGKILL) or `cosched-agent cleanup` can restore it.
//!
//! Each agent owns the cgroups named `cosched.<run>.n<node>` (its *base*) and
//! two files in the state directory (default `/run/cosched`): `<base>.lock`,
//! locked with `flock` for the agent's whole life (the kernel drops the lock when
//! the agent dies, however it dies), and `<base>.json`, rewritten atomically at
//! each change: the processes it moved (pid, start time, original cgroups) and
//! the ones it stopped with SIGSTOP. A `cosched.*` cgroup whose lock is free is a
//! leftover: its processes are continued and moved back, its cgroups thawed and
//! removed.

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
        fs::create_dir_all(dir)?;
        let lock_path = dir.join(format!("{base}.lock"));
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)?;
        let lock = Flock::lock(f, FlockArg::LockExclusiveNonblock).map_err(|_| {
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

fn lock_is_free(dir: &Path, base: &str) -> bool {
    let p = dir.join(format!("{base}.lock"));
    let Ok(f) = OpenOptions::new().write(true).open(&p) else {
        return true;
    };
    Flock::lock(f, FlockArg::LockExclusiveNonblock).is_ok()
}

/// The base (`cosched.<run>.n<node>`) of a cgroup or state file name.
fn base_of(name: &str) -> &str {
    name.strip_suffix(".json")
        .or_else(|| name.strip_suffix(".lock"))
        .unwrap_or(name)
}

/// Restores everything left by agents that are not running any more: continues
/// the processes they stopped, moves the processes they moved back to their
/// original cgroups, thaws and removes their cgroups, deletes their state files,
/// and unlinks shared-memory segments `/dev/shm/cosched.*` of dead ranks.
/// Cgroups of live agents (their lock is held) are left alone.
pub fn cleanup(dir: &Path, cgroups: &Cgroups) -> Result<Cleaned, String> {
    let mut out = Cleaned::default();
    let mut bases: Vec<String> = Vec::new();
    for h in cgroups.roots() {
        for p in h.ours() {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            if !bases.contains(&n) {
                bases.push(n);
            }
        }
    }
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            let b = base_of(&n).to_string();
            if b.starts_with("cosched.") && !bases.contains(&b) {
                bases.push(b);
            }
        }
    }
    for base in bases {
        if !lock_is_free(dir, &base) {
            continue;
        }
        let rec: Option<Record> = fs::read(dir.join(format!("{base}.json")))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(rec) = &rec {
            for &(pid, start) in &rec.stopped {
                if procfs::alive(pid, start) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid as i32),
                        nix::sys::signal::Signal::SIGCONT,
                    );
                    out.processes_continued += 1;
                }
            }
        }
        for h in cgroups.roots() {
            let top = h.path(&base);
            if !top.exists() {
                continue;
            }
            // Thaw first so that moved processes are not frozen elsewhere.
            if let Some(rec) = &rec {
                thaw_tree(&h, &top);
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
            }
            out.cgroups_removed += count_dirs(&top);
            h.remove_tree(&top).map_err(|e| e.to_string())?;
        }
        let _ = fs::remove_file(dir.join(format!("{base}.json")));
        let _ = fs::remove_file(dir.join(format!("{base}.lock")));
    }
    out.segments_unlinked = unlink_dead_segments();
    Ok(out)
}

fn thaw_tree(h: &Hierarchy, dir: &Path) {
    let f = match h.version {
        crate::cgroup::Version::V1 => "freezer.state",
        crate::cgroup::Version::V2 => "cgroup.freeze",
    };
    if dir.join(f).exists() {
        let _ = h.set_frozen(dir, false, std::time::Duration::from_secs(2));
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

/// Unlinks `/dev/shm/cosched.*` rank segments whose process is gone.
pub fn unlink_dead_segments() -> usize {
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
        let pid = i32::from_le_bytes(b[20..24].try_into().unwrap());
        if pid <= 0 || procfs::stat(pid as u32).is_none_or(|s| s.state == 'Z') {
            let _ = fs::remove_file(e.path());
            n += 1;
        }
    }
    n
}

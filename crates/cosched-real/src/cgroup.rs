//! The cgroup controllers the agent uses, found on this machine (v1 or v2).
//!
//! Four roles: `cpu` (a boost is the weight of a rank's own cgroup: v1
//! `cpu.shares`, v2 `cpu.weight`), `cpuacct` (busy CPU time per rank: v1
//! `cpuacct.usage`, v2 `cpu.stat` `usage_usec`), `cpuset` (a virtual node's CPUs)
//! and `freezer` (gang slots: v1 `freezer.state`, v2 `cgroup.freeze`). Each role
//! is served by the v1 hierarchy of that controller when one is mounted, else by
//! the v2 hierarchy when the controller is enabled there (the v2 freezer is part
//! of every v2 hierarchy). Every cgroup the agent creates is named `cosched.*`
//! directly under the hierarchy's root, so leftovers are found by name.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a freeze or thaw may take to settle before it is an error. It settles
/// in 0.3-3 ms on an idle machine, but a freezer whose tasks are slow to reach the
/// refrigerator on a loaded machine (load average 14-16 on two CPUs) was seen
/// still FREEZING after 2 s; the wait sleeps between checks, so a long bound costs
/// nothing when the state is reached early.
pub const FREEZE_SETTLE: Duration = Duration::from_secs(10);

/// Which cgroup interface serves a role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Version {
    V1,
    V2,
}

/// One role's hierarchy: where it is mounted and which interface it speaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    pub root: PathBuf,
    pub version: Version,
}

/// The hierarchies serving the agent's four roles (`None`: not available).
#[derive(Clone, Debug, Default)]
pub struct Cgroups {
    pub cpu: Option<Hierarchy>,
    pub cpuacct: Option<Hierarchy>,
    pub cpuset: Option<Hierarchy>,
    pub freezer: Option<Hierarchy>,
}

/// A cgroup error naming the file and what failed.
#[derive(Debug)]
pub struct CgError {
    pub path: PathBuf,
    pub what: String,
    pub err: io::Error,
}

impl fmt::Display for CgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.what, self.path.display(), self.err)
    }
}
impl std::error::Error for CgError {}

pub type Result<T> = std::result::Result<T, CgError>;

fn cg(path: &Path, what: &str, err: io::Error) -> CgError {
    CgError {
        path: path.to_path_buf(),
        what: what.to_string(),
        err,
    }
}

/// Writes `value` to a cgroup file.
pub fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).map_err(|e| cg(path, &format!("cannot write {value:?} to"), e))
}

/// Reads a cgroup file, trimmed.
pub fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| cg(path, "cannot read", e))
}

impl Cgroups {
    /// Finds the hierarchies from `/proc/self/mounts`.
    pub fn detect() -> Cgroups {
        let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        Self::from_mounts(&mounts)
    }

    fn from_mounts(mounts: &str) -> Cgroups {
        let mut out = Cgroups::default();
        let mut v2: Option<PathBuf> = None;
        for line in mounts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 4 {
                continue;
            }
            let (dir, fstype, opts) = (PathBuf::from(f[1]), f[2], f[3]);
            if fstype == "cgroup2" {
                v2.get_or_insert(dir);
            } else if fstype == "cgroup" {
                let h = || {
                    Some(Hierarchy {
                        root: dir.clone(),
                        version: Version::V1,
                    })
                };
                for o in opts.split(',') {
                    match o {
                        "cpu" => out.cpu = out.cpu.take().or_else(h),
                        "cpuacct" => out.cpuacct = out.cpuacct.take().or_else(h),
                        "cpuset" => out.cpuset = out.cpuset.take().or_else(h),
                        "freezer" => out.freezer = out.freezer.take().or_else(h),
                        _ => {}
                    }
                }
            }
        }
        if let Some(root) = v2 {
            let ctrl = fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            let has = |c: &str| ctrl.split_whitespace().any(|x| x == c);
            let h = Some(Hierarchy {
                root: root.clone(),
                version: Version::V2,
            });
            if out.cpu.is_none() && has("cpu") {
                out.cpu = h.clone();
            }
            if out.cpuacct.is_none() && has("cpu") {
                out.cpuacct = h.clone();
            }
            if out.cpuset.is_none() && has("cpuset") {
                out.cpuset = h.clone();
            }
            if out.freezer.is_none() {
                out.freezer = h;
            }
        }
        out
    }

    /// One line for the run's provenance, e.g. `cpu=v1 cpuacct=v1 cpuset=v1 freezer=v1`.
    pub fn describe(&self) -> String {
        let v = |h: &Option<Hierarchy>| match h {
            Some(Hierarchy {
                version: Version::V1,
                ..
            }) => "v1",
            Some(Hierarchy {
                version: Version::V2,
                ..
            }) => "v2",
            None => "none",
        };
        format!(
            "cpu={} cpuacct={} cpuset={} freezer={}",
            v(&self.cpu),
            v(&self.cpuacct),
            v(&self.cpuset),
            v(&self.freezer)
        )
    }

    /// Every distinct hierarchy root, for the leftover scan.
    pub fn roots(&self) -> Vec<Hierarchy> {
        let mut out: Vec<Hierarchy> = Vec::new();
        for h in [&self.cpu, &self.cpuacct, &self.cpuset, &self.freezer]
            .into_iter()
            .flatten()
        {
            if !out.contains(h) {
                out.push(h.clone());
            }
        }
        out
    }

    /// The roles that are missing, for a clear error (`cpu` is required).
    pub fn require(&self) -> std::result::Result<(), String> {
        let mut missing = vec![];
        if self.cpu.is_none() {
            missing.push("cpu (v1 cpu hierarchy or cgroup2 with the cpu controller)");
        }
        if self.cpuacct.is_none() {
            missing.push("cpuacct");
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "cgroup controllers not available: {}",
                missing.join(", ")
            ))
        }
    }

    /// The hierarchies this process may not create cgroups in (`access(2)`
    /// W_OK on each root), for a clear error before anything is changed.
    pub fn require_writable(&self) -> std::result::Result<(), String> {
        use nix::unistd::{access, AccessFlags};
        let denied: Vec<String> = self
            .roots()
            .iter()
            .filter(|h| access(&h.root, AccessFlags::W_OK).is_err())
            .map(|h| h.root.display().to_string())
            .collect();
        if denied.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "no permission to create cgroups in {}: real execution needs root \
                 (or write access to the cpu, cpuacct, cpuset and freezer cgroup hierarchies)",
                denied.join(", ")
            ))
        }
    }
}

impl Hierarchy {
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Creates `name` (a `cosched.*` cgroup, or one below it); fine if it exists.
    pub fn create(&self, name: &str) -> Result<PathBuf> {
        let p = self.path(name);
        match fs::create_dir(&p) {
            Ok(()) => Ok(p),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(p),
            Err(e) => Err(cg(&p, "cannot create cgroup", e)),
        }
    }

    /// Moves every thread of process `pid` into `dir`.
    pub fn attach(&self, dir: &Path, pid: u32) -> Result<()> {
        write(&dir.join("cgroup.procs"), &pid.to_string())
    }

    /// The pids in `dir` (v1 `cgroup.procs`; v2 the same).
    pub fn procs(&self, dir: &Path) -> Vec<u32> {
        fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// The default weight of this interface (v1 1024 shares, v2 weight 100).
    pub fn default_weight(&self) -> u64 {
        match self.version {
            Version::V1 => 1024,
            Version::V2 => 100,
        }
    }

    /// Sets the CPU weight of `dir` to `factor` times the default (clamped to the
    /// interface's range).
    pub fn set_weight(&self, dir: &Path, factor: f64) -> Result<()> {
        let w = (self.default_weight() as f64 * factor).round() as u64;
        match self.version {
            Version::V1 => write(&dir.join("cpu.shares"), &w.clamp(2, 262_144).to_string()),
            Version::V2 => write(&dir.join("cpu.weight"), &w.clamp(1, 10_000).to_string()),
        }
    }

    pub fn weight(&self, dir: &Path) -> Result<u64> {
        let f = match self.version {
            Version::V1 => "cpu.shares",
            Version::V2 => "cpu.weight",
        };
        let p = dir.join(f);
        read(&p)?
            .parse()
            .map_err(|_| cg(&p, "not a number in", io::ErrorKind::InvalidData.into()))
    }

    /// CPU time used by the tasks of `dir`, in nanoseconds.
    pub fn usage_ns(&self, dir: &Path) -> Result<u64> {
        match self.version {
            Version::V1 => {
                let p = dir.join("cpuacct.usage");
                read(&p)?
                    .parse()
                    .map_err(|_| cg(&p, "not a number in", io::ErrorKind::InvalidData.into()))
            }
            Version::V2 => {
                let p = dir.join("cpu.stat");
                let s = read(&p)?;
                s.lines()
                    .find_map(|l| {
                        l.strip_prefix("usage_usec ")
                            .and_then(|v| v.trim().parse::<u64>().ok())
                    })
                    .map(|us| us * 1000)
                    .ok_or_else(|| cg(&p, "no usage_usec in", io::ErrorKind::InvalidData.into()))
            }
        }
    }

    /// Restricts `dir` to `cpus` (a cpuset list such as `0` or `0-1`) and the
    /// memory nodes of the root.
    pub fn set_cpus(&self, dir: &Path, cpus: &str) -> Result<()> {
        match self.version {
            Version::V1 => {
                let mems = read(&self.root.join("cpuset.mems"))?;
                write(&dir.join("cpuset.mems"), &mems)?;
                write(&dir.join("cpuset.cpus"), cpus)
            }
            Version::V2 => write(&dir.join("cpuset.cpus"), cpus),
        }
    }

    /// Freezes (`true`) or thaws the tasks of `dir` and waits until the kernel
    /// reports the state reached (sleeping between checks, never spinning), at
    /// most `timeout`.
    pub fn set_frozen(&self, dir: &Path, frozen: bool, timeout: Duration) -> Result<()> {
        let (file, val) = match self.version {
            Version::V1 => ("freezer.state", if frozen { "FROZEN" } else { "THAWED" }),
            Version::V2 => ("cgroup.freeze", if frozen { "1" } else { "0" }),
        };
        write(&dir.join(file), val)?;
        let start = Instant::now();
        let mut pause = Duration::from_micros(100);
        loop {
            if self.is_frozen(dir)? == frozen {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(cg(
                    dir,
                    &format!("freezer did not reach {val} within {timeout:?}:"),
                    io::ErrorKind::TimedOut.into(),
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }

    /// Whether `dir` is (completely) frozen.
    pub fn is_frozen(&self, dir: &Path) -> Result<bool> {
        match self.version {
            Version::V1 => Ok(read(&dir.join("freezer.state"))? == "FROZEN"),
            Version::V2 => Ok(read(&dir.join("cgroup.events"))?
                .lines()
                .any(|l| l.trim() == "frozen 1")),
        }
    }

    /// Removes cgroup `dir` (children first), thawed before so nothing stays
    /// frozen. A process still in it was not placed there by cosched (the ones it
    /// placed are moved back before): a rank's child, which inherited the cgroup.
    /// It goes to `home` (a cgroup relative to the root: the original cgroup of
    /// the ranks placed there) when that is known; otherwise it is left where it
    /// is, the cgroup is kept, and the error names it. Such a process is never
    /// moved to the hierarchy root (that would take it out of its job's limits).
    pub fn remove_tree(&self, dir: &Path, home: Option<&str>) -> Result<()> {
        if !dir.exists() {
            return Ok(());
        }
        if let Ok(rd) = fs::read_dir(dir) {
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    self.remove_tree(&e.path(), home)?;
                }
            }
        }
        let freeze_file = match self.version {
            Version::V1 => "freezer.state",
            Version::V2 => "cgroup.freeze",
        };
        if dir.join(freeze_file).exists() {
            self.set_frozen(dir, false, FREEZE_SETTLE)?;
        }
        let left = self.procs(dir);
        if !left.is_empty() {
            let Some(home) = home else {
                return Err(cg(
                    dir,
                    &format!(
                        "kept: it holds processes cosched did not place and whose original cgroup is not known ({left:?}); cgroup",
                    ),
                    io::ErrorKind::ResourceBusy.into(),
                ));
            };
            let dest = self.root.join(home.trim_start_matches('/'));
            for pid in left {
                // A process that ended in between is fine.
                let _ = self.attach(&dest, pid);
            }
        }
        // Tasks that were exiting (a killed rank that was runnable needs its
        // next turn on a CPU to exit) leave the cgroup shortly; on a loaded
        // machine that can take far more than a few milliseconds.
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        loop {
            match fs::remove_dir(dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) if std::time::Instant::now() >= deadline => {
                    return Err(cg(dir, "cannot remove cgroup", e))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }

    /// The `cosched.*` cgroups directly under the root.
    pub fn ours(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(&self.root)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("cosched."))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_v1_controllers_and_the_v2_freezer() {
        let m = "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
                 cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0\n\
                 cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n\
                 cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        let c = Cgroups::from_mounts(m);
        assert_eq!(
            c.cpu.as_ref().unwrap().root,
            PathBuf::from("/sys/fs/cgroup/cpu")
        );
        assert_eq!(c.cpuset.as_ref().unwrap().version, Version::V1);
        // No v1 freezer mounted: the v2 hierarchy freezes.
        assert_eq!(c.freezer.as_ref().unwrap().version, Version::V2);
        assert_eq!(c.describe(), "cpu=v1 cpuacct=v1 cpuset=v1 freezer=v2");
        assert!(c.require().is_ok());
        assert!(Cgroups::from_mounts("")
            .require()
            .unwrap_err()
            .contains("cpu"));
    }
}

//! What the agent and the controller read about a process in `/proc`.

use std::fs;

/// The fields of `/proc/PID/stat` the agent uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// `R` running or runnable, `S` sleeping, `T` stopped, `Z` zombie, ...
    pub state: char,
    /// Start time in clock ticks after boot: with the pid, identifies a process.
    pub start: u64,
    /// User + system CPU time in clock ticks.
    pub cpu_ticks: u64,
}

/// Reads `/proc/PID/stat`; `None` if the process does not exist.
pub fn stat(pid: u32) -> Option<Stat> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&s)
}

fn parse_stat(s: &str) -> Option<Stat> {
    // The command name is in parentheses and may contain spaces: fields start after the last ')'.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime = field 14, stime = 15, starttime = 22.
    let num = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok());
    Some(Stat {
        state: f.first()?.chars().next()?,
        start: num(22)?,
        cpu_ticks: num(14)? + num(15)?,
    })
}

/// The parent pid of `pid` (field 4 of `/proc/PID/stat`).
pub fn ppid(pid: u32) -> Option<u32> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 2..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Whether `pid` is `ancestor` or one of its descendants (walking the parent
/// pids up to init).
pub fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut p = pid;
    for _ in 0..4096 {
        if p == ancestor {
            return true;
        }
        match ppid(p) {
            Some(q) if q > 0 && q != p => p = q,
            _ => return false,
        }
    }
    false
}

/// Whether `pid` is the process that started at `start` and has not ended.
pub fn alive(pid: u32, start: u64) -> bool {
    matches!(stat(pid), Some(s) if s.start == start && s.state != 'Z' && s.state != 'X')
}

/// Whether any thread of `pid` is on a CPU or waiting for one.
pub fn running(pid: u32) -> bool {
    let Ok(rd) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    rd.flatten().any(|t| {
        fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|s| parse_stat(&s))
            .is_some_and(|s| s.state == 'R')
    })
}

/// Voluntary + involuntary context switches of every thread of `pid`.
pub fn context_switches(pid: u32) -> Option<(u64, u64)> {
    let rd = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let (mut v, mut n) = (0, 0);
    for t in rd.flatten() {
        let s = fs::read_to_string(t.path().join("status")).unwrap_or_default();
        for l in s.lines() {
            if let Some(x) = l.strip_prefix("voluntary_ctxt_switches:") {
                v += x.trim().parse::<u64>().unwrap_or(0);
            } else if let Some(x) = l.strip_prefix("nonvoluntary_ctxt_switches:") {
                n += x.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Some((v, n))
}

/// The cgroup of `pid` in the hierarchy whose `/proc/PID/cgroup` line matches:
/// v1 by controller name, v2 by the `0::` line.
pub fn cgroup_of(pid: u32, controller: Option<&str>) -> Option<String> {
    let s = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    for l in s.lines() {
        let mut f = l.splitn(3, ':');
        let (id, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        let hit = match controller {
            Some(c) => ctrls.split(',').any(|x| x == c),
            None => id == "0" && ctrls.is_empty(),
        };
        if hit {
            return Some(path.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_spaces_in_the_name() {
        let s = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 12345 1000 10";
        let st = parse_stat(s).unwrap();
        assert_eq!(
            st,
            Stat {
                state: 'S',
                start: 12345,
                cpu_ticks: 10
            }
        );
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        let st = stat(me).unwrap();
        assert!(alive(me, st.start));
        assert!(!alive(me, st.start + 1));
        assert!(context_switches(me).is_some());
    }
}

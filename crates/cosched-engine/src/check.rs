//! An independent checker of a finished job-level schedule, used by tests and
//! by debug runs. It knows nothing of the engine's internals: it only reads the
//! workload, the platform and the records.

use crate::cluster::{JobStatus, SimOutput};
use cosched_model::{Platform, Workload};

/// Checks the invariants every valid schedule satisfies:
/// every simulated job starts no earlier than its submission and runs exactly its
/// effective runtime (runtime, or its kill time when killed); every job ends exactly
/// once (one record with both start and end, or rejected with neither); no processor
/// is used by two jobs at once; the processor count in use never exceeds the machine.
pub fn check_schedule(w: &Workload, p: &Platform, out: &SimOutput) -> Result<(), String> {
    if out.records.len() != w.jobs.len() {
        return Err(format!(
            "{} records for {} jobs",
            out.records.len(),
            w.jobs.len()
        ));
    }
    let total = p.total_procs();
    // (time, +1 start / -1 end ordering: ends before starts at equal times, job index)
    let mut edges: Vec<(i64, i8, usize)> = Vec::new();
    for (i, (j, r)) in w.jobs.iter().zip(&out.records).enumerate() {
        match (r.start, r.end, r.status) {
            (None, None, JobStatus::Rejected) => continue,
            (Some(s), Some(e), st) if st != JobStatus::Rejected => {
                if s < j.submit {
                    return Err(format!(
                        "job {i} starts at {s} before its submission at {}",
                        j.submit
                    ));
                }
                if e - s != j.effective_runtime() {
                    return Err(format!(
                        "job {i} ran {} instead of {}",
                        e - s,
                        j.effective_runtime()
                    ));
                }
                let killed = j.effective_runtime() < j.runtime;
                if killed != (st == JobStatus::Killed) {
                    return Err(format!("job {i}: status {st:?} but killed={killed}"));
                }
                let n: u32 = r.alloc.iter().map(|(a, b)| b - a).sum();
                if n != j.procs {
                    return Err(format!("job {i} got {n} processors, needs {}", j.procs));
                }
                if r.alloc.iter().any(|&(_, b)| b > total) {
                    return Err(format!("job {i} placed outside the machine"));
                }
                if e > s {
                    edges.push((s.as_ns(), 1, i));
                    edges.push((e.as_ns(), -1, i));
                }
            }
            other => return Err(format!("job {i} has an inconsistent record {other:?}")),
        }
    }
    edges.sort_by_key(|&(t, d, i)| (t, d, i));
    let mut owner: Vec<Option<usize>> = vec![None; total as usize];
    let mut used: u64 = 0;
    for (t, d, i) in edges {
        for &(a, b) in &out.records[i].alloc {
            for q in a..b {
                let slot = &mut owner[q as usize];
                if d > 0 {
                    if let Some(o) = slot {
                        return Err(format!("processor {q} used by jobs {o} and {i} at t={t}ns"));
                    }
                    *slot = Some(i);
                } else {
                    *slot = None;
                }
            }
        }
        if d > 0 {
            used += w.jobs[i].procs as u64;
        } else {
            used -= w.jobs[i].procs as u64;
        }
        if used > total as u64 {
            return Err(format!(
                "{used} processors in use at t={t}ns, machine has {total}"
            ));
        }
    }
    Ok(())
}

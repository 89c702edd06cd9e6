//! An independent checker of a process-level run's timeline, used by tests: it
//! reads only the output ([`ProcOutput`]), never the engine's state.

use super::ProcOutput;
use cosched_des::SimTime;
use std::collections::BTreeMap;

/// Checks the timeline of a run recorded with `record_timeline`:
/// - every segment is non-empty;
/// - no CPU runs two processes at once, and no node's disk serves two requests at once;
/// - each process is, from its job's admission to its end, in exactly one state at a
///   time: on a CPU (useful, spin or switch), ready or blocked (so it is never on
///   two CPUs at once and never both running and blocked);
/// - the CPU segments add up to the nodes' busy time.
pub fn check_timeline(out: &ProcOutput) -> Result<(), String> {
    type Lane = Vec<(SimTime, SimTime)>;
    let mut cpus: BTreeMap<(u32, u32), Lane> = BTreeMap::new();
    let mut disks: BTreeMap<u32, Lane> = BTreeMap::new();
    let mut life: BTreeMap<u32, (usize, Lane)> = BTreeMap::new();
    let mut busy = 0i64;
    for s in &out.timeline {
        if s.end <= s.start {
            return Err(format!("empty segment {s:?}"));
        }
        match (s.cpu, s.kind.is_state()) {
            (Some(c), _) => {
                busy += (s.end - s.start).as_ns();
                cpus.entry((s.node, c)).or_default().push((s.start, s.end));
            }
            (None, false) => {
                disks.entry(s.node).or_default().push((s.start, s.end));
                continue;
            }
            (None, true) => {}
        }
        life.entry(s.pid)
            .or_insert_with(|| (s.job, Vec::new()))
            .1
            .push((s.start, s.end));
    }
    let disjoint = |what: &str, lane: &mut Lane| {
        lane.sort();
        match lane.windows(2).find(|w| w[0].1 > w[1].0) {
            Some(w) => Err(format!("{what}: overlapping {:?} and {:?}", w[0], w[1])),
            None => Ok(()),
        }
    };
    for ((node, cpu), lane) in &mut cpus {
        disjoint(&format!("node {node} cpu {cpu}"), lane)?;
    }
    for (node, lane) in &mut disks {
        disjoint(&format!("node {node} disk"), lane)?;
    }
    for (pid, (job, lane)) in &mut life {
        disjoint(&format!("pid {pid} (two states at once)"), lane)?;
        let start = out
            .jobs
            .get(*job)
            .ok_or_else(|| format!("pid {pid}: unknown job {job}"))?
            .start;
        let end = out.proc_end[*pid as usize];
        let covered: i64 = lane.iter().map(|(a, b)| (*b - *a).as_ns()).sum();
        if lane.first().map(|l| l.0) != Some(start)
            || lane.last().map(|l| l.1) != Some(end)
            || covered != (end - start).as_ns()
        {
            return Err(format!(
                "pid {pid}: its states cover {covered} ns of [{start}, {end}] (from {:?} to {:?})",
                lane.first(),
                lane.last()
            ));
        }
    }
    let node_busy: i64 = out.node_busy_ns.iter().sum();
    if busy != node_busy {
        return Err(format!(
            "CPU segments add up to {busy} ns, the nodes were busy {node_busy} ns"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{ProcJobRecord, Segment, SegmentKind};
    use super::*;

    fn seg(cpu: Option<u32>, pid: u32, start: i64, end: i64, kind: SegmentKind) -> Segment {
        Segment {
            node: 0,
            cpu,
            pid,
            job: 0,
            rank: pid,
            start: SimTime(start),
            end: SimTime(end),
            kind,
        }
    }

    fn output(timeline: Vec<Segment>, busy: i64) -> ProcOutput {
        ProcOutput {
            jobs: vec![ProcJobRecord {
                start: SimTime(0),
                end: SimTime(10),
                nodes: vec![0, 0],
            }],
            counters: Default::default(),
            node_busy_ns: vec![busy],
            proc_job: vec![],
            proc_cpu_ns: vec![],
            proc_spin_ns: vec![],
            proc_compute_ns: vec![],
            proc_end: vec![SimTime(10), SimTime(10)],
            timeline,
            end: SimTime(10),
            measures: Default::default(),
        }
    }

    #[test]
    fn rejects_a_process_in_two_states_and_gaps() {
        use SegmentKind::*;
        let good = vec![
            seg(Some(0), 0, 0, 6, Useful),
            seg(None, 0, 6, 10, Blocked),
            seg(None, 1, 0, 6, Ready),
            seg(Some(0), 1, 6, 10, Spin),
        ];
        assert_eq!(check_timeline(&output(good.clone(), 10)), Ok(()));
        // Busy time not covered.
        assert!(check_timeline(&output(good.clone(), 11)).is_err());
        // Ready while running.
        let mut two = good.clone();
        two[2] = seg(None, 1, 0, 7, Ready);
        assert!(check_timeline(&output(two, 10))
            .unwrap_err()
            .contains("two states"));
        // A gap in a process's life.
        let mut gap = good.clone();
        gap[1] = seg(None, 0, 7, 10, Blocked);
        assert!(check_timeline(&output(gap, 10))
            .unwrap_err()
            .contains("cover"));
        // Two processes on one CPU.
        let mut cpu = good;
        cpu[3] = seg(Some(0), 1, 5, 10, Spin);
        cpu[2] = seg(None, 1, 0, 5, Ready);
        assert!(check_timeline(&output(cpu, 11))
            .unwrap_err()
            .contains("cpu 0"));
    }
}

//! Availability profile: the number of free processors as a step function of
//! time, used by backfilling policies to place reservations.
//!
//! Stored as breakpoints `(t_k, free_k)` sorted by time: `free_k` processors are
//! free on `[t_k, t_{k+1})`, and the last value holds forever.

use cosched_des::SimTime;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    steps: Vec<(SimTime, u32)>,
}

impl Profile {
    /// A machine of `total` processors, all free from `origin` on.
    pub fn new(origin: SimTime, total: u32) -> Self {
        Self {
            steps: vec![(origin, total)],
        }
    }

    pub fn steps(&self) -> &[(SimTime, u32)] {
        &self.steps
    }

    /// Index of the step containing `t` (0 when `t` precedes the first breakpoint).
    pub fn step_index(&self, t: SimTime) -> usize {
        self.seg(t)
    }

    /// Index of the step containing `t` (t must not precede the first breakpoint).
    fn seg(&self, t: SimTime) -> usize {
        match self.steps.binary_search_by(|(s, _)| s.cmp(&t)) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    /// Inserts a breakpoint at `t` (if absent) and returns its index.
    fn split(&mut self, t: SimTime) -> usize {
        match self.steps.binary_search_by(|(s, _)| s.cmp(&t)) {
            Ok(i) => i,
            Err(i) => {
                let free = self.steps[i - 1].1;
                self.steps.insert(i, (t, free));
                i
            }
        }
    }

    /// Forgets the history before `now` (the step containing `now` starts at `now`).
    pub fn advance(&mut self, now: SimTime) {
        let i = self.seg(now);
        if i > 0 {
            self.steps.drain(..i);
        }
        if self.steps[0].0 < now {
            self.steps[0].0 = now;
        }
    }

    /// Free processors at instant `t`.
    pub fn free_at(&self, t: SimTime) -> u32 {
        self.steps[self.seg(t)].1
    }

    /// Earliest `t >= from` such that at least `need` processors are free on `[t, t + dur)`.
    /// `need` must not exceed the final (all-jobs-done) free count.
    pub fn earliest(&self, from: SimTime, need: u32, dur: SimTime) -> SimTime {
        let mut start = from;
        let first = self.seg(from);
        for k in first..self.steps.len() {
            let (_, free) = self.steps[k];
            let end = self.steps.get(k + 1).map_or(SimTime::MAX, |s| s.0);
            if free < need {
                start = end;
            } else if end >= start.saturating_add(dur) {
                return start;
            }
        }
        start
    }

    /// Running maximum of the free count: `out[k] = max(free_0..=free_k)`.
    pub fn prefix_max(&self, out: &mut Vec<u32>) {
        out.clear();
        let mut m = 0;
        for &(_, f) in &self.steps {
            m = m.max(f);
            out.push(m);
        }
    }

    /// Like [`Profile::first_fit_before`], with a running maximum that is computed
    /// lazily: `prefix` holds `prefix_max`'s output for the first `prefix.len()`
    /// steps only (the caller truncates it to the steps a change left untouched),
    /// and is extended here only as far as the answer needs.
    pub fn first_fit_before_lazy(
        &self,
        prefix: &mut Vec<u32>,
        need: u32,
        t: SimTime,
    ) -> Option<usize> {
        let k = prefix.partition_point(|&m| m < need);
        if k < prefix.len() {
            return (self.steps[k].0 < t).then_some(k);
        }
        let mut m = prefix.last().copied().unwrap_or(0);
        for i in prefix.len()..self.steps.len() {
            let (s, f) = self.steps[i];
            if s >= t {
                return None;
            }
            m = m.max(f);
            prefix.push(m);
            if m >= need {
                return Some(i);
            }
        }
        None
    }

    /// The first step that starts before `t` and has at least `need` free processors,
    /// given `prefix_max`'s output; `None` if there is none.
    pub fn first_fit_before(&self, prefix: &[u32], need: u32, t: SimTime) -> Option<usize> {
        let k = prefix.partition_point(|&m| m < need);
        (k < self.steps.len() && self.steps[k].0 < t).then_some(k)
    }

    /// Like [`Profile::earliest`] for a job that already holds `need` processors on
    /// `[old, old + dur)`: the earliest start before `old` that would be feasible if
    /// that reservation were given back, or `None` when the job cannot move earlier.
    /// The profile is not modified.
    pub fn earlier_than(
        &self,
        from: SimTime,
        need: u32,
        dur: SimTime,
        old: SimTime,
    ) -> Option<SimTime> {
        self.earlier_than_from(self.seg(from), from, need, dur, old)
    }

    /// [`Profile::earlier_than`] starting the search at step `first` (whose start is
    /// at or before `from`), for callers that know no earlier step can hold the job.
    pub fn earlier_than_from(
        &self,
        first: usize,
        from: SimTime,
        need: u32,
        dur: SimTime,
        old: SimTime,
    ) -> Option<SimTime> {
        let old_end = old.saturating_add(dur);
        let mut start = from.max(self.steps[first].0);
        for k in first..self.steps.len() {
            let (t, mut free) = self.steps[k];
            if start >= old || t >= start.saturating_add(dur) {
                break;
            }
            let end = self.steps.get(k + 1).map_or(SimTime::MAX, |s| s.0);
            if t >= old && t < old_end {
                free += need; // virtually give back the job's own reservation
            }
            if free < need {
                start = end;
            } else if end >= start.saturating_add(dur) {
                break;
            }
        }
        (start < old).then_some(start)
    }

    /// Adds `delta` (signed) free processors on `[t, t + dur)`. Returns the index
    /// of the first step that may have changed: steps before it keep their index
    /// and value.
    fn adjust(&mut self, t: SimTime, dur: SimTime, delta: i64) -> usize {
        if dur <= SimTime::ZERO {
            return self.steps.len();
        }
        let a = self.split(t);
        let b = self.split(t.saturating_add(dur));
        for s in &mut self.steps[a..b] {
            let v = s.1 as i64 + delta;
            debug_assert!(v >= 0, "profile went negative");
            s.1 = v as u32;
        }
        // Merge equal neighbours around the touched region to keep the profile short.
        let lo = a.saturating_sub(1);
        let hi = (b + 1).min(self.steps.len());
        let mut k = hi - 1;
        while k > lo {
            if self.steps[k].1 == self.steps[k - 1].1 {
                self.steps.remove(k);
            }
            k -= 1;
        }
        a
    }

    /// Takes `need` processors on `[t, t + dur)`; returns the first step index that
    /// may have changed (see [`Profile::adjust`]).
    pub fn reserve(&mut self, t: SimTime, dur: SimTime, need: u32) -> usize {
        self.adjust(t, dur, -(need as i64))
    }

    /// Gives back `need` processors on `[t, t + dur)`; returns the first step index
    /// that may have changed.
    pub fn release(&mut self, t: SimTime, dur: SimTime, need: u32) -> usize {
        self.adjust(t, dur, need as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn s(x: i64) -> SimTime {
        SimTime::from_secs(x)
    }

    #[test]
    fn reserve_and_find() {
        let mut p = Profile::new(s(0), 10);
        p.reserve(s(0), s(10), 6); // running job: 4 free until 10
        assert_eq!(p.earliest(s(0), 4, s(100)), s(0));
        assert_eq!(p.earliest(s(0), 5, s(1)), s(10));
        p.reserve(s(10), s(5), 8); // reservation: 2 free on [10,15)
        assert_eq!(p.earliest(s(0), 3, s(20)), s(15));
        assert_eq!(p.earliest(s(0), 2, s(20)), s(0));
        assert_eq!(p.free_at(s(12)), 2);
        p.release(s(10), s(5), 8);
        assert_eq!(p.steps(), &[(s(0), 4), (s(10), 10)]);
        p.advance(s(3));
        assert_eq!(p.steps(), &[(s(3), 4), (s(10), 10)]);
        p.advance(s(11));
        assert_eq!(p.steps(), &[(s(11), 10)]);
    }

    /// The accelerated search of conservative backfilling (start at the first step that
    /// can hold the job) gives the same answer as the plain scan, on random profiles.
    #[test]
    fn accelerated_search_matches_the_plain_scan() {
        use proptest::prelude::*;
        let ops = proptest::collection::vec((0i64..50, 1i64..20, 1u32..=8), 0..25);
        proptest!(ProptestConfig::with_cases(500), |(ops in ops, need in 1u32..=8, dur in 1i64..30, old in 0i64..80, from in 0i64..10)| {
            let mut p = Profile::new(s(0), 8);
            for (t, d, n) in ops {
                if p.earliest(s(t), n, s(d)) == s(t) {
                    p.reserve(s(t), s(d), n);
                }
            }
            let old = p.earliest(s(old), need, s(dur));
            p.reserve(old, s(dur), need);
            p.advance(s(from));
            let plain = p.earlier_than(s(from), need, s(dur), old);
            let mut prefix = Vec::new();
            p.prefix_max(&mut prefix);
            let fast = p.first_fit_before(&prefix, need, old).and_then(|first| p.earlier_than_from(first, s(from), need, s(dur), old));
            prop_assert_eq!(plain, fast);
        });
    }

    /// `reserve`/`release` leave every step before the index they return unchanged,
    /// and the lazily extended running maximum, cut back to that index after each
    /// change, answers like the fully recomputed one.
    #[test]
    fn lazy_running_maximum_matches_the_full_one() {
        use proptest::prelude::*;
        let ops = proptest::collection::vec(
            (
                0i64..50,
                1i64..20,
                1u32..=8,
                any::<bool>(),
                1u32..=8,
                0i64..80,
            ),
            0..40,
        );
        proptest!(ProptestConfig::with_cases(500), |(ops in ops)| {
            let mut p = Profile::new(s(0), 8);
            let mut held: Vec<(SimTime, SimTime, u32)> = Vec::new();
            let mut lazy = Vec::new();
            for (t, d, n, give_back, need, before) in ops {
                let prev = p.steps().to_vec();
                let changed = match held.pop() {
                    Some((a, b, c)) if give_back => p.release(a, b, c),
                    other => {
                        held.extend(other);
                        let at = p.earliest(s(t), n, s(d));
                        held.push((at, s(d), n));
                        p.reserve(at, s(d), n)
                    }
                };
                let keep = changed.min(prev.len()).min(p.steps().len());
                prop_assert_eq!(&prev[..keep], &p.steps()[..keep]);
                lazy.truncate(changed);
                let mut full = Vec::new();
                p.prefix_max(&mut full);
                prop_assert_eq!(
                    p.first_fit_before_lazy(&mut lazy, need, s(before)),
                    p.first_fit_before(&full, need, s(before))
                );
                prop_assert_eq!(&full[..lazy.len()], &lazy[..]);
            }
        });
    }

    #[test]
    fn hole_too_short_is_skipped() {
        let mut p = Profile::new(s(0), 10);
        p.reserve(s(0), s(5), 10);
        p.reserve(s(8), s(10), 10); // hole [5,8)
        assert_eq!(p.earliest(s(0), 1, s(3)), s(5));
        assert_eq!(p.earliest(s(0), 1, s(4)), s(18));
    }
}

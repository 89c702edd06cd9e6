//! Availability profile: the number of free processors as a step function of
//! time, used by backfilling policies to place reservations.
//!
//! Stored as breakpoints sorted by time, in two parallel arrays (start times and
//! free counts, so that a search reads only what it compares): `free[k]`
//! processors are free on `[times[k], times[k + 1])`, and the last value holds
//! forever. The profile is kept canonical: no two neighbouring steps have the
//! same free count, so a given step function has exactly one representation
//! whatever sequence of updates produced it.

use cosched_des::SimTime;

/// Where a search found a start: the start, the number of steps that start
/// before it (`at`), and a lower bound on the number that start before the
/// searching job's window or its old reservation ends (`past`), for the update
/// that follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    pub start: SimTime,
    at: usize,
    past: usize,
}

#[derive(Clone, Debug)]
pub struct Profile {
    times: Vec<SimTime>,
    free: Vec<u32>,
    /// The number of steps forgotten by [`Profile::advance`] so far (modulo
    /// 2^32), so that a [`Mark`] outlives them.
    dropped: u32,
}

impl PartialEq for Profile {
    fn eq(&self, other: &Self) -> bool {
        self.times == other.times && self.free == other.free
    }
}

impl Eq for Profile {}

/// A remembered step position (the steps forgotten since are accounted for),
/// used as a starting point to find a breakpoint again: updates since it was
/// taken may have moved the breakpoint by a few places, so it is a guess, never
/// trusted as an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark(u32);

impl Mark {
    /// A mark of the first step ever (also the mark of a job not placed yet).
    pub const FIRST: Mark = Mark(0);
}

/// Where an update left the reservation it made: marks of the steps at its
/// start and at its end, and the first step index that may have changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    pub changed: usize,
    pub start: Mark,
    pub end: Mark,
}

/// The running maximum of a profile's free count over its first `scanned`
/// steps, kept as its records: the steps (`idx`, in time order) whose free count
/// (`val`, increasing) exceeds every earlier one. A profile of `n` steps has at
/// most as many records as distinct free counts, far fewer than `n` in practice,
/// so the records are cheap to search and to extend.
#[derive(Clone, Debug, Default)]
pub struct Records {
    idx: Vec<u32>,
    val: Vec<u32>,
    scanned: usize,
    max: u32,
}

impl Records {
    /// Forgets everything.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Keeps the first `k` steps only (those an update left untouched).
    pub fn truncate(&mut self, k: usize) {
        if k < self.scanned {
            self.scanned = k;
            let keep = self.idx.partition_point(|&i| (i as usize) < k);
            self.idx.truncate(keep);
            self.val.truncate(keep);
            self.max = self.val.last().copied().unwrap_or(0);
        }
    }

    /// The running maximum over the steps covered, `out[k] = max(free_0..=free_k)`
    /// (for tests against [`Profile::prefix_max`]).
    pub fn expand(&self, out: &mut Vec<u32>) {
        out.clear();
        let mut r = 0;
        let mut m = 0;
        for k in 0..self.scanned {
            if r < self.idx.len() && self.idx[r] as usize == k {
                m = self.val[r];
                r += 1;
            }
            out.push(m);
        }
    }
}

/// `slice.partition_point(pred)` for a predicate that usually holds for few
/// leading elements: a look at the first few, then ranges doubling in length,
/// then a binary search in the last range, so that the cost grows with the log
/// of the answer rather than of the length.
#[inline]
fn gallop(slice: &[SimTime], pred: impl Fn(SimTime) -> bool) -> usize {
    if let Some(i) = slice.iter().take(4).position(|&x| !pred(x)) {
        return i;
    }
    // `pred` holds for every element before `below`; it fails at or before
    // `hi - 1` unless `hi` passes the end.
    if slice.len() <= 4 {
        return slice.len();
    }
    let (mut below, mut hi) = (4, 8);
    while hi < slice.len() && pred(slice[hi - 1]) {
        below = hi;
        hi *= 2;
    }
    let hi = hi.min(slice.len());
    below + slice[below..hi].partition_point(|&x| pred(x))
}

/// `slice.partition_point(pred)` searched from a guess: ranges doubling in
/// length from `guess` in the direction of the answer, then a binary search in
/// the last range, so that the cost grows with the log of the guess's error.
#[inline]
fn search_near(slice: &[SimTime], guess: usize, pred: impl Fn(SimTime) -> bool) -> usize {
    let n = slice.len();
    if guess < n && pred(slice[guess]) {
        return guess + 1 + gallop(&slice[guess + 1..], pred);
    }
    // The answer is at most `hi`: `pred` fails at `hi` (or `hi` is the end).
    let mut hi = guess.min(n);
    let mut step = 1;
    while hi > 0 {
        let probe = hi.saturating_sub(step);
        if pred(slice[probe]) {
            return probe + 1 + slice[probe + 1..hi].partition_point(|&x| pred(x));
        }
        hi = probe;
        step *= 2;
    }
    0
}

impl Profile {
    /// A machine of `total` processors, all free from `origin` on.
    pub fn new(origin: SimTime, total: u32) -> Self {
        Self {
            times: vec![origin],
            free: vec![total],
            dropped: 0,
        }
    }

    /// The breakpoints `(start, free)` in time order.
    pub fn steps(&self) -> Vec<(SimTime, u32)> {
        self.times
            .iter()
            .copied()
            .zip(self.free.iter().copied())
            .collect()
    }

    /// Index of the step containing `t` (0 when `t` precedes the first breakpoint).
    pub fn step_index(&self, t: SimTime) -> usize {
        self.seg(t)
    }

    /// The later of step `first` and the step containing `t`, searched from a
    /// mark near that step.
    pub fn step_index_near(&self, first: usize, near: Mark, t: SimTime) -> usize {
        let k = search_near(&self.times, self.guess(near), |s| s <= t).saturating_sub(1);
        k.max(first)
    }

    /// The mark of step index `k`.
    fn mark(&self, k: usize) -> Mark {
        Mark((k as u32).wrapping_add(self.dropped))
    }

    /// The index a mark points at now, not counting the steps inserted or
    /// removed before it since it was taken (hence a guess). A mark of a step
    /// forgotten since (the difference wraps) guesses the first step.
    fn guess(&self, m: Mark) -> usize {
        let k = m.0.wrapping_sub(self.dropped);
        if k > u32::MAX / 2 {
            0
        } else {
            k as usize
        }
    }

    /// Index of the step containing `t` (t must not precede the first breakpoint).
    /// The callers ask mostly about instants near the start (now, or the
    /// first steps), so the search gallops from there.
    fn seg(&self, t: SimTime) -> usize {
        gallop(&self.times, |s| s <= t).saturating_sub(1)
    }

    /// Start of step `k + 1`, i.e. the end of step `k` (`SimTime::MAX` for the last).
    fn end_of(&self, k: usize) -> SimTime {
        self.times.get(k + 1).copied().unwrap_or(SimTime::MAX)
    }

    /// Forgets the history before `now` (the step containing `now` starts at `now`).
    pub fn advance(&mut self, now: SimTime) {
        let i = self.seg(now);
        self.dropped = self.dropped.wrapping_add(i as u32);
        if i > 0 {
            self.times.drain(..i);
            self.free.drain(..i);
        }
        if self.times[0] < now {
            self.times[0] = now;
        }
    }

    /// Free processors at instant `t`.
    pub fn free_at(&self, t: SimTime) -> u32 {
        self.free[self.seg(t)]
    }

    /// Earliest `t >= from` such that at least `need` processors are free on `[t, t + dur)`.
    /// `need` must not exceed the final (all-jobs-done) free count.
    pub fn earliest(&self, from: SimTime, need: u32, dur: SimTime) -> SimTime {
        self.earliest_at(from, need, dur).start
    }

    /// [`Profile::earliest`], with where the start lies among the steps (for
    /// [`Profile::reserve_found`]).
    pub fn earliest_at(&self, from: SimTime, need: u32, dur: SimTime) -> Found {
        let first = self.seg(from);
        let mut start = from;
        let mut at = first + usize::from(self.times[first] < from);
        for k in first..self.times.len() {
            let end = self.end_of(k);
            if self.free[k] < need {
                start = end;
                at = k + 1;
            } else if end >= start.saturating_add(dur) {
                break;
            }
        }
        Found {
            start,
            at,
            past: at,
        }
    }

    /// Running maximum of the free count: `out[k] = max(free_0..=free_k)`.
    pub fn prefix_max(&self, out: &mut Vec<u32>) {
        out.clear();
        let mut m = 0;
        for &f in &self.free {
            m = m.max(f);
            out.push(m);
        }
    }

    /// Like [`Profile::first_fit_before`], with the running maximum kept as its
    /// records and computed lazily: `records` covers the first `records.scanned`
    /// steps only (the caller cuts it back with [`Records::truncate`] to the steps a
    /// change left untouched), and is extended here only as far as the answer
    /// needs. The first step with at least `need` free is the first record of at
    /// least `need`, since the running maximum first reaches `need` at such a step.
    #[inline]
    pub fn first_fit_before_lazy(
        &self,
        records: &mut Records,
        need: u32,
        t: SimTime,
    ) -> Option<usize> {
        if records.max >= need {
            let r = records.val.partition_point(|&m| m < need);
            let k = records.idx[r] as usize;
            return (self.times[k] < t).then_some(k);
        }
        let (times, free) = (&self.times, &self.free);
        for i in records.scanned..times.len() {
            if times[i] >= t {
                records.scanned = i;
                return None;
            }
            let f = free[i];
            if f > records.max {
                records.max = f;
                records.idx.push(i as u32);
                records.val.push(f);
                if f >= need {
                    records.scanned = i + 1;
                    return Some(i);
                }
            }
        }
        records.scanned = times.len();
        None
    }

    /// The first step that starts before `t` and has at least `need` free processors,
    /// given `prefix_max`'s output; `None` if there is none.
    pub fn first_fit_before(&self, prefix: &[u32], need: u32, t: SimTime) -> Option<usize> {
        let k = prefix.partition_point(|&m| m < need);
        (k < self.times.len() && self.times[k] < t).then_some(k)
    }

    /// Like [`Profile::earliest`] for a job that already holds `need` processors on
    /// `[old, old + dur)`: the earliest start before `old` that would be feasible if
    /// that reservation were given back, or `None` when the job cannot move earlier.
    /// The profile is not modified. This is the plain scan, which gives the
    /// reservation back step by step; [`Profile::earlier_before`] is the fast one.
    pub fn earlier_than(
        &self,
        from: SimTime,
        need: u32,
        dur: SimTime,
        old: SimTime,
    ) -> Option<SimTime> {
        let first = self.seg(from);
        let old_end = old.saturating_add(dur);
        let mut start = from.max(self.times[first]);
        for k in first..self.times.len() {
            let (t, mut free) = (self.times[k], self.free[k]);
            if start >= old || t >= start.saturating_add(dur) {
                break;
            }
            let end = self.end_of(k);
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

    /// [`Profile::earlier_than`] starting the search at step `first` (whose start is
    /// at or before `from`), for callers that know no earlier step can hold the job,
    /// and giving up at `horizon` (at most `old`), for callers that know no start
    /// in `[horizon, old)` is feasible unless an earlier one is.
    ///
    /// It reads only the steps that start before `old`: once a candidate start
    /// before `old` is free up to `old`, the rest of its window lies in the job's
    /// own slot, where giving the reservation back leaves at least `need` free. A
    /// step that starts before `old` and reaches past it is entirely inside the
    /// window of any candidate that reaches it, so its free count decides as in
    /// the plain scan.
    ///
    /// The answer says where the start lies among the steps, for
    /// [`Profile::move_found`].
    #[inline]
    pub fn earlier_before(
        &self,
        first: usize,
        from: SimTime,
        need: u32,
        dur: SimTime,
        old: SimTime,
        horizon: SimTime,
    ) -> Option<Found> {
        debug_assert!(horizon <= old);
        let times = &self.times[first..];
        let free = &self.free[first..times.len() + first];
        let n = times.len();
        let mut start = from.max(times[0]);
        // The steps before `start`, counted from `first`.
        let mut at = usize::from(times[0] < start);
        let mut k = 0;
        loop {
            // The window from `start` holds up to step `k`: read on while its
            // steps fit, up to the window's end (its part before `old`).
            let stop = old.min(start.saturating_add(dur));
            loop {
                if k == n || times[k] >= stop {
                    // Every step before `k` starts before `stop`, so before `old`.
                    return (start < horizon).then_some(Found {
                        start,
                        at: first + at,
                        past: first + k,
                    });
                }
                if free[k] < need {
                    break;
                }
                k += 1;
            }
            // Step `k` is too full: the next candidate start is the end of the
            // run of too-full steps, given up on at the horizon.
            loop {
                k += 1;
                if k == n || times[k] >= horizon {
                    return None;
                }
                if free[k] >= need {
                    break;
                }
            }
            start = times[k];
            at = k;
        }
    }

    /// The number of steps that start before `s`, given that the first `lo` do:
    /// a look at the next few steps (the caller's bound is usually exact or
    /// close), then a galloping search (ranges doubling from `lo`), so that the
    /// cost grows with the log of the distance from the bound.
    #[inline]
    fn count_before(&self, lo: usize, s: SimTime) -> usize {
        debug_assert!(self.times[..lo].iter().all(|&x| x < s));
        lo + gallop(&self.times[lo..], |x| x < s)
    }

    /// Adds `d` (signed, non-zero) free processors on `[s, e)` (`s` at or after
    /// the first breakpoint), and keeps the profile canonical. Only the two
    /// bounds can gain or lose a breakpoint, and whether one does is known
    /// before anything moves: at `s`, an existing breakpoint goes when its
    /// value plus `d` equals its left neighbour's, a missing one is inserted
    /// (its value differs by `d` from its left neighbour's); at `e`, an
    /// existing breakpoint goes when its value equals the value before it plus
    /// `d`, a missing one is inserted with the old value there. So the update is an addition over the old steps in `[s, e)`, then
    /// one move of those steps (by the edit at `s`) and one of the steps after
    /// `e` (by both edits; none when they cancel). `lo` is a lower bound on the
    /// number of steps that start before `s`. Returns the index of the step
    /// starting at `s` (the first step that may have changed: steps before it
    /// keep their index and value) and of the step starting at `e` (or the next
    /// one when those breakpoints merged away).
    fn apply_one(&mut self, s: SimTime, e: SimTime, d: i64, lo: usize) -> (usize, usize) {
        debug_assert!(s < e && d != 0 && s >= self.times[0]);
        let a = self.count_before(lo, s);
        self.apply_at(a, s, e, d)
    }

    /// [`Profile::apply_one`] for a part whose start is known to come after `a`
    /// steps.
    fn apply_at(&mut self, a: usize, s: SimTime, e: SimTime, d: i64) -> (usize, usize) {
        let n = self.times.len();
        debug_assert_eq!(a, self.times.partition_point(|&x| x < s));
        // A part usually spans a few steps: searched from its start.
        let b = self.count_before(a, e);
        // The edit at each bound: 1 insert, -1 remove, 0 none.
        let left: isize = if a < n && self.times[a] == s {
            if a > 0 && i64::from(self.free[a]) + d == i64::from(self.free[a - 1]) {
                -1
            } else {
                0
            }
        } else {
            1
        };
        // `b >= 1`: `e` is after `s`, which is at or after the first breakpoint.
        let before_e = self.free[b - 1];
        let right: isize = if b < n && self.times[b] == e {
            if i64::from(self.free[b]) == i64::from(before_e) + d {
                -1
            } else {
                0
            }
        } else {
            1
        };
        let inserted = if left == 1 {
            (i64::from(self.free[a - 1]) + d) as u32
        } else {
            0
        };
        debug_assert!(
            self.free[a..b].iter().all(|&f| i64::from(f) + d >= 0),
            "profile went negative"
        );
        // Two's complement: adding `d as u32` adds the signed delta.
        let du = d as u32;
        for f in &mut self.free[a..b] {
            *f = f.wrapping_add(du);
        }
        // The steps in [s, e) after a removed one move by `left`, the steps after
        // `e` (after a removed one) by `left + right`: runs moving left first,
        // from the left, then runs moving right, from the right.
        let mid = if left < 0 { a + 1 } else { a };
        let tail = if right < 0 { b + 1 } else { b };
        let shift = left + right;
        let new_len = n.checked_add_signed(shift).expect("profile length");
        if new_len > n {
            self.times.resize(new_len, SimTime::ZERO);
            self.free.resize(new_len, 0);
        }
        if left < 0 {
            self.shift_run(mid, b, left);
        }
        if shift != 0 {
            self.shift_run(tail, n, shift);
        }
        if left > 0 {
            self.shift_run(mid, b, left);
        }
        if left == 1 {
            self.times[a] = s;
            self.free[a] = inserted;
        }
        if right == 1 {
            let k = b.checked_add_signed(left).expect("index");
            self.times[k] = e;
            self.free[k] = before_e;
        }
        self.times.truncate(new_len);
        self.free.truncate(new_len);
        (a, b.checked_add_signed(left).expect("index"))
    }

    /// Moves the steps `[from, to)` by `by` places.
    fn shift_run(&mut self, from: usize, to: usize, by: isize) {
        if from < to {
            let dest = from.checked_add_signed(by).expect("index");
            self.times.copy_within(from..to, dest);
            self.free.copy_within(from..to, dest);
        }
    }

    /// Adds `delta` (signed) free processors on `[t, t + dur)`; see [`Profile::apply_one`].
    fn adjust(&mut self, t: SimTime, dur: SimTime, delta: i64) -> usize {
        if dur <= SimTime::ZERO {
            return self.times.len();
        }
        self.apply_one(t, t.saturating_add(dur), delta, 0).0
    }

    /// Takes `need` processors on `[t, t + dur)`; returns the first step index that
    /// may have changed (see [`Profile::apply_one`]).
    pub fn reserve(&mut self, t: SimTime, dur: SimTime, need: u32) -> usize {
        self.adjust(t, dur, -(need as i64))
    }

    /// Gives back `need` processors on `[t, t + dur)`; returns the first step index
    /// that may have changed.
    pub fn release(&mut self, t: SimTime, dur: SimTime, need: u32) -> usize {
        self.adjust(t, dur, need as i64)
    }

    /// [`Profile::reserve`] at the start found by [`Profile::earliest_at`] on
    /// this profile.
    pub fn reserve_found(&mut self, found: Found, dur: SimTime, need: u32) -> Placed {
        let t = found.start;
        if dur <= SimTime::ZERO {
            let k = self.times.len();
            return self.placed(k, k, k);
        }
        let (a, e) = self.apply_one(t, t.saturating_add(dur), -(need as i64), found.at);
        self.placed(a, a, e)
    }

    fn placed(&self, changed: usize, start: usize, end: usize) -> Placed {
        Placed {
            changed,
            start: self.mark(start),
            end: self.mark(end),
        }
    }

    /// [`Profile::move_earlier`] to the start found by [`Profile::earlier_before`]
    /// on this profile for the same job, whose reservation's end was marked at
    /// `old_end_mark`: the search's step counts and the mark spare the update
    /// most of its searching. The later part (given back) is applied first, so
    /// the count before the earlier part's start still holds for it.
    pub fn move_found(
        &mut self,
        old: SimTime,
        found: Found,
        dur: SimTime,
        need: u32,
        old_end_mark: Mark,
    ) -> Placed {
        let t = found.start;
        debug_assert!(t < old);
        if dur <= SimTime::ZERO {
            let k = self.times.len();
            return self.placed(k, k, k);
        }
        let n = need as i64;
        let (t_end, old_end) = (t.saturating_add(dur), old.saturating_add(dur));
        if t_end < old {
            // The slots do not overlap: the old one is given back whole, and the
            // new end is the end of the part taken.
            let a = self.count_before(found.past, old);
            self.apply_at(a, old, old_end, n);
            let (a, e) = self.apply_at(found.at, t, t_end, -n);
            return self.placed(a, a, e);
        }
        // The slots overlap: `[old, t_end)` keeps the reservation. The new end
        // is near the old end (the steps between are the part given back).
        let mut end = None;
        if t_end < old_end {
            let a = search_near(&self.times, self.guess(old_end_mark), |x| x < t_end);
            end = Some(self.apply_at(a, t_end, old_end, n).0);
        }
        let (a, e) = self.apply_at(found.at, t, old, -n);
        // Without a part given back (both ends saturated at `SimTime::MAX`), the
        // new end is the old one.
        self.placed(a, a, end.unwrap_or(e))
    }

    /// Moves a reservation of `need` processors for `dur` from `old` to the
    /// earlier start `t`: the same profile as `release(old, ..)` then
    /// `reserve(t, ..)`, in one update (only the parts of the two slots that do
    /// not overlap change). Returns the first step index that may have changed.
    /// It is [`Profile::move_found`] for a caller without a search's step counts
    /// or a mark: the steps before `t` are counted, and the old end is looked
    /// for from the first step.
    pub fn move_earlier(&mut self, old: SimTime, t: SimTime, dur: SimTime, need: u32) -> usize {
        let at = self.count_before(0, t);
        let found = Found {
            start: t,
            at,
            past: at,
        };
        self.move_found(old, found, dur, need, Mark::FIRST).changed
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
        proptest!(ProptestConfig::with_cases(500), |(ops in ops, need in 1u32..=8, dur in 1i64..30, old in 0i64..80, from in 0i64..10, horizon in 0i64..90)| {
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
            // The step containing `from`, no earlier than `first`, searched from
            // any mark.
            for first in 0..p.steps().len() {
                for m in 0..p.steps().len() + 2 {
                    prop_assert_eq!(
                        p.step_index_near(first, Mark(m as u32), s(from)),
                        first.max(p.step_index(s(from)))
                    );
                }
            }
            let fast = p.first_fit_before(&prefix, need, old).and_then(|first| {
                let first = first.max(p.step_index(s(from)));
                p.earlier_before(first, s(from), need, s(dur), old, old)
            });
            prop_assert_eq!(plain, fast.map(|f| f.start));
            // Where the start lies: `at` steps start before it, and at least
            // `past` before `old`.
            let before = |t: SimTime| p.times.partition_point(|&x| x < t);
            if let Some(f) = fast {
                prop_assert_eq!(f.at, before(f.start));
                prop_assert!(f.past <= before(old));
            }
            // Without the running maximum: every start step is allowed.
            let all = p.step_index(s(from));
            let found = p.earlier_before(all, s(from), need, s(dur), old, old);
            prop_assert_eq!(plain, found.map(|f| f.start));
            // A horizon keeps the answers before it.
            let horizon = old.min(s(horizon));
            prop_assert_eq!(
                plain.filter(|&t| t < horizon),
                p.earlier_before(all, s(from), need, s(dur), old, horizon).map(|f| f.start)
            );
        });
    }

    /// The checks after an update that returned `changed`, from the steps `prev`
    /// before it: the steps before `changed` are unchanged, and the running maximum
    /// `lazy`, cut back to `changed` and extended lazily, finds the same first fit
    /// for `need` before `before` as the fully recomputed one and agrees with it on
    /// every step it holds.
    fn kept_prefix_and_lazy_fit(
        p: &Profile,
        prev: &[(SimTime, u32)],
        changed: usize,
        lazy: &mut Records,
        need: u32,
        before: SimTime,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        use proptest::prelude::*;
        let steps = p.steps();
        let keep = changed.min(prev.len()).min(steps.len());
        prop_assert_eq!(&prev[..keep], &steps[..keep]);
        lazy.truncate(changed);
        let mut full = Vec::new();
        p.prefix_max(&mut full);
        prop_assert_eq!(
            p.first_fit_before_lazy(lazy, need, before),
            p.first_fit_before(&full, need, before)
        );
        let mut expanded = Vec::new();
        lazy.expand(&mut expanded);
        prop_assert_eq!(&full[..expanded.len()], &expanded[..]);
        Ok(())
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
            let mut lazy = Records::default();
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
                kept_prefix_and_lazy_fit(&p, &prev, changed, &mut lazy, need, s(before))?;
            }
        });
    }

    /// The running maximum kept as records, by hand. Steps (0, 4), (10, 2), (15, 10):
    /// the records are step 0 (4) and step 2 (10); step 1 (2) is below 4.
    /// - need 3 before 20: step 0 has 4 >= 3 and starts at 0 < 20, so step 0.
    /// - need 5 before 15: step 0 has 4, step 1 has 2, step 2 starts at 15, not
    ///   before 15: none, and steps 0 and 1 are now covered (one record).
    /// - need 5 before 16: step 2 (10 >= 5) starts at 15 < 16: step 2.
    /// - cut back to 1 step after a change at step 1: record (0, 4) stays.
    #[test]
    fn running_maximum_records_by_hand() {
        let mut p = Profile::new(s(0), 10);
        p.reserve(s(0), s(10), 6);
        p.reserve(s(10), s(5), 8);
        assert_eq!(p.steps(), &[(s(0), 4), (s(10), 2), (s(15), 10)]);
        let mut r = Records::default();
        let mut out = Vec::new();
        assert_eq!(p.first_fit_before_lazy(&mut r, 3, s(20)), Some(0));
        assert_eq!(p.first_fit_before_lazy(&mut r, 5, s(15)), None);
        r.expand(&mut out);
        assert_eq!(out, [4, 4]);
        assert_eq!(p.first_fit_before_lazy(&mut r, 5, s(16)), Some(2));
        r.expand(&mut out);
        assert_eq!(out, [4, 4, 10]);
        r.truncate(1);
        r.expand(&mut out);
        assert_eq!(out, [4]);
        assert_eq!(p.first_fit_before_lazy(&mut r, 11, s(100)), None);
    }

    #[test]
    fn hole_too_short_is_skipped() {
        let mut p = Profile::new(s(0), 10);
        p.reserve(s(0), s(5), 10);
        p.reserve(s(8), s(10), 10); // hole [5,8)
        assert_eq!(p.earliest(s(0), 1, s(3)), s(5));
        assert_eq!(p.earliest(s(0), 1, s(4)), s(18));
    }
    /// A reservation moved to an earlier, overlapping start: only the parts of the
    /// two slots that do not overlap change, and equal neighbours merge.
    #[test]
    fn move_earlier_by_hand() {
        let mut p = Profile::new(s(0), 10);
        p.reserve(s(10), s(10), 4);
        assert_eq!(p.steps(), &[(s(0), 10), (s(10), 6), (s(20), 10)]);
        assert_eq!(p.move_earlier(s(10), s(5), s(10), 4), 1);
        assert_eq!(p.steps(), &[(s(0), 10), (s(5), 6), (s(15), 10)]);
        // A running job (3 procs until 2) and a reservation of 3 procs on [2, 5)
        // make one step of 7; moving the reservation to 0 splits it.
        p.reserve(s(0), s(2), 3);
        p.reserve(s(2), s(3), 3);
        assert_eq!(p.steps(), &[(s(0), 7), (s(5), 6), (s(15), 10)]);
        assert_eq!(p.move_earlier(s(2), s(0), s(3), 3), 0);
        let moved = [(s(0), 4), (s(2), 7), (s(3), 10), (s(5), 6), (s(15), 10)];
        assert_eq!(p.steps(), &moved);
        let start = |first, from, need, dur, old, horizon| {
            p.earlier_before(first, from, need, dur, old, horizon)
                .map(|f| f.start)
        };
        // The search reads only the steps before the job's own slot at `old`.
        assert_eq!(start(0, s(0), 6, s(4), s(5), s(5)), Some(s(2)));
        assert_eq!(start(0, s(0), 8, s(1), s(5), s(5)), Some(s(3)));
        assert_eq!(start(0, s(0), 8, s(1), s(3), s(3)), None);
        assert_eq!(start(0, s(0), 11, s(1), s(15), s(15)), None);
        // The horizon, for a job of 6 processors for 4 s reserved at 15: step 0
        // has 4 < 6 free, so the first candidate start is 2, and [2, 6) has 7, 10
        // and 6 free, so the job can start at 2 (horizon 15, none). With horizon 2
        // the candidate 2 is not before it: the search gives up, none. With
        // horizon 3 it is: 2.
        assert_eq!(start(0, s(0), 6, s(4), s(15), s(15)), Some(s(2)));
        assert_eq!(start(0, s(0), 6, s(4), s(15), s(2)), None);
        assert_eq!(start(0, s(0), 6, s(4), s(15), s(3)), Some(s(2)));
        // A run of too-full steps, for a job of 8 processors for 1 s reserved at
        // 15: steps 0 and 1 have 4 and 7 < 8 free, so the first candidate start is
        // the end of the run, 3, and [3, 4) has 10 free. With horizon 3 the search
        // gives up at the end of the run: none. With horizon 4: 3.
        assert_eq!(start(0, s(0), 8, s(1), s(15), s(3)), None);
        assert_eq!(start(0, s(0), 8, s(1), s(15), s(4)), Some(s(3)));
        // Where the found start lies: 2 steps start before 3 (0 and 2); the
        // window [3, 4) was read up to step 3 (at 3), so at least 3 steps start
        // before `old`.
        let f = p.earlier_before(0, s(0), 8, s(1), s(15), s(4)).unwrap();
        assert_eq!((f.at, f.past), (2, 3));
    }

    /// A move that inserts two breakpoints and removes two: the steps between the
    /// edits shift by the net count before them, and the steps after the last edit
    /// end where they were.
    #[test]
    fn a_move_inserts_and_merges_its_bounds() {
        let mut p = Profile::new(s(0), 10);
        p.reserve(s(20), s(10), 4);
        p.reserve(s(24), s(2), 2);
        p.reserve(s(40), s(10), 3);
        let before = [
            (s(0), 10),
            (s(20), 6),
            (s(24), 4),
            (s(26), 6),
            (s(30), 10),
            (s(40), 7),
            (s(50), 10),
        ];
        assert_eq!(p.steps(), &before);
        // The 4-processor job moves from 20 to 5: 5 and 15 are inserted, 20 and 30
        // merge into their left neighbours, 24 and 26 shift right by one.
        assert_eq!(p.move_earlier(s(20), s(5), s(10), 4), 1);
        let after = [
            (s(0), 10),
            (s(5), 6),
            (s(15), 10),
            (s(24), 8),
            (s(26), 10),
            (s(40), 7),
            (s(50), 10),
        ];
        assert_eq!(p.steps(), &after);
    }

    /// The profile before its update code was rewritten: breakpoint by breakpoint
    /// inserts and removes. The oracle for the in-place updates ([`Profile::apply_one`]).
    struct Plain(Vec<(SimTime, u32)>);

    impl Plain {
        fn split(&mut self, t: SimTime) -> usize {
            match self.0.binary_search_by(|(x, _)| x.cmp(&t)) {
                Ok(i) => i,
                Err(i) => {
                    let free = self.0[i - 1].1;
                    self.0.insert(i, (t, free));
                    i
                }
            }
        }

        fn adjust(&mut self, t: SimTime, dur: SimTime, delta: i64) {
            let a = self.split(t);
            let b = self.split(t.saturating_add(dur));
            for x in &mut self.0[a..b] {
                x.1 = (x.1 as i64 + delta) as u32;
            }
            let lo = a.saturating_sub(1);
            let mut k = (b + 1).min(self.0.len()) - 1;
            while k > lo {
                if self.0[k].1 == self.0[k - 1].1 {
                    self.0.remove(k);
                }
                k -= 1;
            }
        }
    }

    impl Plain {
        fn advance(&mut self, now: SimTime) {
            let i = self.0.partition_point(|&(x, _)| x <= now).saturating_sub(1);
            self.0.drain(..i);
            if self.0[0].0 < now {
                self.0[0].0 = now;
            }
        }
    }

    /// Replays `ops` on a profile of `total` processors and on the plain oracle.
    /// Each op `(t, d, n, code, x)` is, by `code`: 0 release the latest reservation;
    /// 1 move it to its earliest start from `max(now, x)` (fast search checked
    /// against the plain scan); 3 let time pass (mostly `x / 15`, every tenth `x`
    /// a jump of `x`; reservations that began are dropped); otherwise reserve `n`
    /// processors for `d` at the earliest start from `max(now, t)`. After each op:
    /// the same steps as the oracle, canonical, the steps before the returned
    /// index unchanged, and the lazily extended running maximum (cut back to that
    /// index) answering like the full one.
    fn replay_against_plain(
        total: u32,
        ops: &[(i64, i64, u32, u8, i64)],
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        use proptest::prelude::*;
        let mut p = Profile::new(s(0), total);
        let mut plain = Plain(vec![(s(0), total)]);
        // Reservations: start, length, processors, mark of the end.
        let mut held: Vec<(SimTime, SimTime, u32, Mark)> = Vec::new();
        let mut now = s(0);
        let mut lazy = Records::default();
        for &(t, d, n, code, x) in ops {
            let prev = p.steps();
            let changed = match (code, held.pop()) {
                (0, Some((a, b, c, _))) => {
                    plain.adjust(a, b, c as i64);
                    p.release(a, b, c)
                }
                (1, Some((a, b, c, end_mark))) => {
                    let from = now.max(s(x));
                    let slow = p.earlier_than(from, c, b, a);
                    let fast = p.earlier_before(p.step_index(from), from, c, b, a, a);
                    prop_assert_eq!(slow, fast.map(|f| f.start));
                    match (slow, fast) {
                        (Some(to), Some(found)) => {
                            plain.adjust(a, b, c as i64);
                            plain.adjust(to, b, -(c as i64));
                            // Both updates, the second with the search's step
                            // counts and the mark (a guess, exact or not).
                            if x % 2 == 0 {
                                held.insert(0, (to, b, c, Mark::FIRST));
                                p.move_earlier(a, to, b, c)
                            } else {
                                let placed = p.move_found(a, found, b, c, end_mark);
                                marks_near(&p, placed, to, to.saturating_add(b))?;
                                held.insert(0, (to, b, c, placed.end));
                                placed.changed
                            }
                        }
                        _ => {
                            held.insert(0, (a, b, c, end_mark));
                            prev.len()
                        }
                    }
                }
                (3, other) => {
                    held.extend(other);
                    let step = if x % 10 == 0 { x } else { x / 15 };
                    now = s(now.0 / 1_000_000_000 + step);
                    held.retain(|&(a, ..)| a >= now);
                    p.advance(now);
                    plain.advance(now);
                    0
                }
                (_, other) => {
                    held.extend(other);
                    let found = p.earliest_at(now.max(s(t)), n, s(d));
                    let at = found.start;
                    prop_assert_eq!(at, p.earliest(now.max(s(t)), n, s(d)));
                    prop_assert_eq!(found.at, p.times.partition_point(|&x| x < at));
                    plain.adjust(at, s(d), -(n as i64));
                    if x % 2 == 0 {
                        held.push((at, s(d), n, Mark::FIRST));
                        p.reserve(at, s(d), n)
                    } else {
                        let placed = p.reserve_found(found, s(d), n);
                        marks_near(&p, placed, at, at.saturating_add(s(d)))?;
                        held.push((at, s(d), n, placed.end));
                        placed.changed
                    }
                }
            };
            prop_assert_eq!(&p.steps(), &plain.0);
            prop_assert!(p.free.windows(2).all(|w| w[0] != w[1]), "{:?}", p.steps());
            kept_prefix_and_lazy_fit(&p, &prev, changed, &mut lazy, n, s(t))?;
        }
        Ok(())
    }

    /// The marks an update returns: its start's is exact (the steps before
    /// `start`), its end's within two places of the steps before `end` (the
    /// earlier part of a move may shift it after it was taken).
    fn marks_near(
        p: &Profile,
        placed: Placed,
        start: SimTime,
        end: SimTime,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        use proptest::prelude::*;
        let before = |t: SimTime| p.times.partition_point(|&x| x < t);
        prop_assert_eq!(p.guess(placed.start), before(start));
        prop_assert!(p.guess(placed.end).abs_diff(before(end)) <= 2);
        Ok(())
    }

    /// Marks by hand: a reservation of 2 on [10, 15) on a machine of 4 free from
    /// 0 makes steps 0, 10, 15; its marks point at steps 1 and 2. After the
    /// history up to 12 is forgotten (step 0 goes, the step of 10 now starts at
    /// 12), the same marks point at steps 0 and 1; after 20 (steps 0 and 1 go)
    /// the start's step is forgotten: it guesses the first step.
    #[test]
    fn marks_by_hand() {
        let mut p = Profile::new(s(0), 4);
        let found = p.earliest_at(s(10), 2, s(5));
        assert_eq!((found.start, found.at), (s(10), 1));
        let placed = p.reserve_found(found, s(5), 2);
        assert_eq!(p.steps(), &[(s(0), 4), (s(10), 2), (s(15), 4)]);
        assert_eq!(
            (placed.changed, p.guess(placed.start), p.guess(placed.end)),
            (1, 1, 2)
        );
        p.advance(s(12));
        assert_eq!(p.steps(), &[(s(12), 2), (s(15), 4)]);
        assert_eq!((p.guess(placed.start), p.guess(placed.end)), (0, 1));
        p.advance(s(20));
        assert_eq!((p.guess(placed.start), p.guess(placed.end)), (0, 0));
    }

    /// The searches from a guess give `partition_point`'s answer, for every
    /// guess, in and past the slice.
    #[test]
    fn searches_from_a_guess_match_partition_point() {
        use proptest::prelude::*;
        let times = proptest::collection::vec(0i64..200, 0..60);
        proptest!(ProptestConfig::with_cases(500), |(mut times in times, t in -5i64..210)| {
            times.sort_unstable();
            let times: Vec<SimTime> = times.into_iter().map(SimTime).collect();
            let want = times.partition_point(|&x| x < SimTime(t));
            prop_assert_eq!(gallop(&times, |x| x < SimTime(t)), want);
            for guess in 0..times.len() + 3 {
                prop_assert_eq!(search_near(&times, guess, |x| x < SimTime(t)), want);
            }
        });
    }

    /// Reserving, releasing and moving reservations give the same steps as the
    /// plain breakpoint-by-breakpoint updates, keep the profile canonical, and
    /// leave every step before the returned index unchanged.
    #[test]
    fn in_place_updates_match_the_plain_ones() {
        use proptest::prelude::*;
        let ops =
            proptest::collection::vec((0i64..60, 1i64..25, 1u32..=8, 0u8..3, 0i64..60), 0..40);
        proptest!(ProptestConfig::with_cases(1000), |(ops in ops)| {
            replay_against_plain(8, &ops)?;
        });
    }

    /// The same on profiles of up to ~100 steps whose history is forgotten as
    /// time passes (`advance` between the updates).
    #[test]
    fn long_profiles_match_the_plain_ones() {
        use proptest::prelude::*;
        let ops = proptest::collection::vec(
            (0i64..20_000, 1i64..5_000, 1u32..=8, 0u8..8, 0i64..1_500),
            0..600,
        );
        proptest!(ProptestConfig::with_cases(100), |(ops in ops)| {
            replay_against_plain(64, &ops)?;
        });
    }
}

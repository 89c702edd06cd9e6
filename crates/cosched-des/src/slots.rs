//! Timer slots: a fixed set of re-settable timers (one per CPU, say) kept beside an
//! [`EventQueue`](crate::EventQueue) and ordered with its events.
//!
//! Each slot holds at most one pending key `(time, sequence)`; setting it again
//! replaces the key, clearing it drops it. The sequence comes from
//! [`EventQueue::reserve`](crate::EventQueue::reserve), so a slot's timer orders
//! against the queue's events exactly as if it had been scheduled there; a replaced
//! timer simply disappears instead of staying in the queue as a cancelled entry.
//! An indexed binary min-heap: the earliest key in O(1), a set or a clear in
//! O(log n) of the slots.

use crate::SimTime;

const NONE: usize = usize::MAX;

/// A set of `n` timer slots (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct TimerSlots {
    /// Position of each slot in `heap`, or `NONE`.
    pos: Vec<usize>,
    /// Pending timers, a min-heap on (time, sequence): (time, sequence, slot).
    heap: Vec<(SimTime, u64, usize)>,
}

impl TimerSlots {
    /// `n` slots, none set.
    pub fn new(n: usize) -> Self {
        Self {
            pos: vec![NONE; n],
            heap: Vec::with_capacity(n),
        }
    }

    /// The earliest pending timer: (time, sequence, slot).
    #[inline]
    pub fn peek(&self) -> Option<(SimTime, u64, usize)> {
        self.heap.first().copied()
    }

    /// Whether `slot` has a pending timer.
    pub fn is_set(&self, slot: usize) -> bool {
        self.pos[slot] != NONE
    }

    /// Sets (or replaces) the timer of `slot`.
    pub fn set(&mut self, slot: usize, at: SimTime, seq: u64) {
        match self.pos[slot] {
            NONE => {
                self.heap.push((at, seq, slot));
                let k = self.heap.len() - 1;
                self.pos[slot] = k;
                self.up(k);
            }
            k => {
                self.heap[k] = (at, seq, slot);
                let k = self.up(k);
                self.down(k);
            }
        }
    }

    /// Drops the timer of `slot`, if any.
    pub fn clear(&mut self, slot: usize) {
        let k = self.pos[slot];
        if k == NONE {
            return;
        }
        self.pos[slot] = NONE;
        let last = self.heap.pop().expect("slot in the heap");
        if k < self.heap.len() {
            self.heap[k] = last;
            self.pos[last.2] = k;
            let k = self.up(k);
            self.down(k);
        }
    }

    #[inline]
    fn less(&self, a: usize, b: usize) -> bool {
        let (x, y) = (&self.heap[a], &self.heap[b]);
        (x.0, x.1) < (y.0, y.1)
    }

    #[inline]
    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a].2] = a;
        self.pos[self.heap[b].2] = b;
    }

    /// Moves the entry at `k` up to its place; returns where it ends.
    #[inline]
    fn up(&mut self, mut k: usize) -> usize {
        while k > 0 {
            let parent = (k - 1) / 2;
            if !self.less(k, parent) {
                break;
            }
            self.swap(k, parent);
            k = parent;
        }
        k
    }

    #[inline]
    fn down(&mut self, mut k: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * k + 1, 2 * k + 2);
            let mut m = k;
            if l < n && self.less(l, m) {
                m = l;
            }
            if r < n && self.less(r, m) {
                m = r;
            }
            if m == k {
                return;
            }
            self.swap(k, m);
            k = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Random sets and clears: the earliest pending key is always the minimum of
        /// the slots' current keys.
        #[test]
        fn peek_is_the_earliest_current_key(ops in proptest::collection::vec((0usize..8, any::<bool>(), 0i64..100), 0..300)) {
            let mut t = TimerSlots::new(8);
            let mut model: Vec<Option<(SimTime, u64)>> = vec![None; 8];
            for (seq, (slot, set, at)) in ops.into_iter().enumerate() {
                if set {
                    t.set(slot, SimTime(at), seq as u64);
                    model[slot] = Some((SimTime(at), seq as u64));
                } else {
                    t.clear(slot);
                    model[slot] = None;
                }
                let want = model
                    .iter()
                    .enumerate()
                    .filter_map(|(s, k)| k.map(|(a, q)| (a, q, s)))
                    .min();
                prop_assert_eq!(t.peek(), want);
                for (s, k) in model.iter().enumerate() {
                    prop_assert_eq!(t.is_set(s), k.is_some());
                }
            }
        }
    }
}

use crate::SimTime;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Handle of a scheduled event, used to cancel it. Sequence numbers are unique
/// for the life of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(pub u64);

/// An event popped from the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Scheduled<E> {
    pub time: SimTime,
    pub id: EventId,
    pub event: E,
}

struct Entry<E> {
    time: SimTime,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.time == o.time && self.seq == o.seq
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    // BinaryHeap is a max-heap: reverse so the smallest (time, seq) is on top.
    fn cmp(&self, o: &Self) -> Ordering {
        o.time.cmp(&self.time).then_with(|| o.seq.cmp(&self.seq))
    }
}

/// Future-event list ordered by `(time, sequence)`.
///
/// Events at equal times pop in the order they were scheduled. Cancellation is
/// lazy: a cancelled entry stays in the heap and is skipped when it surfaces.
/// `schedule` and `pop` are O(log n) with no other bookkeeping (the hot path of
/// the simulators); `cancel`, which is rare, is O(n) (it checks that the event is
/// still pending). Scheduling an event before the current time is refused: time
/// never goes backwards.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
    now: SimTime,
    /// Sequence numbers cancelled but still in the heap.
    cancelled: std::collections::HashSet<u64>,
    /// Events scheduled and neither popped nor cancelled.
    pending: usize,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

/// Error returned when an event is scheduled in the past.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastEvent {
    pub now: SimTime,
    pub requested: SimTime,
}

impl std::fmt::Display for PastEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "event scheduled at {} but the clock is at {}",
            self.requested, self.now
        )
    }
}
impl std::error::Error for PastEvent {}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
            next_seq: 0,
            now: SimTime::ZERO,
            cancelled: Default::default(),
            pending: 0,
        }
    }

    /// Current simulated time: the time of the last popped event.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Schedules `event` at absolute time `at`.
    pub fn schedule(&mut self, at: SimTime, event: E) -> Result<EventId, PastEvent> {
        let EventId(seq) = self.reserve(at)?;
        self.heap.push(Entry {
            time: at,
            seq,
            event,
        });
        self.pending += 1;
        Ok(EventId(seq))
    }

    /// Takes the next sequence number for an event at `at` kept outside the queue
    /// (a [`TimerSlots`](crate::TimerSlots) timer): it orders against the queue's
    /// events exactly as if `schedule` had been called now.
    pub fn reserve(&mut self, at: SimTime) -> Result<EventId, PastEvent> {
        if at < self.now {
            return Err(PastEvent {
                now: self.now,
                requested: at,
            });
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        Ok(EventId(seq))
    }

    /// Time and id of the next pending event, if any.
    pub fn peek_key(&mut self) -> Option<(SimTime, EventId)> {
        self.skip_cancelled();
        self.heap.peek().map(|e| (e.time, EventId(e.seq)))
    }

    /// Cancels a pending event. Returns false if it was already popped or cancelled.
    pub fn cancel(&mut self, id: EventId) -> bool {
        if self.cancelled.contains(&id.0) || !self.heap.iter().any(|e| e.seq == id.0) {
            return false;
        }
        self.cancelled.insert(id.0);
        self.pending -= 1;
        true
    }

    fn skip_cancelled(&mut self) {
        while let Some(top) = self.heap.peek() {
            if self.cancelled.is_empty() || !self.cancelled.contains(&top.seq) {
                break;
            }
            let e = self.heap.pop().expect("peeked");
            self.cancelled.remove(&e.seq);
        }
    }

    /// Time of the next pending event, if any.
    pub fn peek_time(&mut self) -> Option<SimTime> {
        self.skip_cancelled();
        self.heap.peek().map(|e| e.time)
    }

    /// Pops the next event and advances the clock to its time.
    pub fn pop(&mut self) -> Option<Scheduled<E>> {
        self.skip_cancelled();
        let e = self.heap.pop()?;
        self.pending -= 1;
        debug_assert!(e.time >= self.now, "time went backwards");
        self.now = e.time;
        Some(Scheduled {
            time: e.time,
            id: EventId(e.seq),
            event: e.event,
        })
    }

    /// Pops the next event only if it happens exactly at `t`.
    pub fn pop_at(&mut self, t: SimTime) -> Option<Scheduled<E>> {
        match self.peek_time() {
            Some(nt) if nt == t => self.pop(),
            _ => None,
        }
    }

    /// Number of pending (not cancelled) events.
    pub fn len(&self) -> usize {
        self.pending
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Advances the clock without an event (e.g. to an externally known instant).
    pub fn advance_to(&mut self, t: SimTime) -> Result<(), PastEvent> {
        if t < self.now {
            return Err(PastEvent {
                now: self.now,
                requested: t,
            });
        }
        if let Some(nt) = self.peek_time() {
            if nt < t {
                return Err(PastEvent {
                    now: nt,
                    requested: t,
                });
            }
        }
        self.now = t;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn same_time_events_keep_insertion_order() {
        let mut q = EventQueue::new();
        q.schedule(SimTime(5), "a").unwrap();
        q.schedule(SimTime(1), "b").unwrap();
        q.schedule(SimTime(5), "c").unwrap();
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|s| s.event)).collect();
        assert_eq!(order, vec!["b", "a", "c"]);
    }

    #[test]
    fn cancel_skips_event() {
        let mut q = EventQueue::new();
        let a = q.schedule(SimTime(1), 1).unwrap();
        q.schedule(SimTime(2), 2).unwrap();
        assert!(q.cancel(a));
        assert!(!q.cancel(a));
        assert_eq!(q.len(), 1);
        let b = q.pop().unwrap();
        assert_eq!(b.event, 2);
        assert!(!q.cancel(b.id), "a popped event cannot be cancelled");
        assert!(q.pop().is_none());
        assert!(q.is_empty());
    }

    #[test]
    fn refuses_past_events() {
        let mut q = EventQueue::new();
        q.schedule(SimTime(10), ()).unwrap();
        q.pop();
        assert_eq!(
            q.schedule(SimTime(9), ()),
            Err(PastEvent {
                now: SimTime(10),
                requested: SimTime(9)
            })
        );
        assert!(q.schedule(SimTime(10), ()).is_ok());
    }

    proptest! {
        #[test]
        fn pops_in_time_then_seq_order(times in proptest::collection::vec(0i64..50, 0..200),
                                       cancel_mask in proptest::collection::vec(any::<bool>(), 200)) {
            let mut q = EventQueue::new();
            let ids: Vec<_> = times.iter().enumerate()
                .map(|(i, &t)| q.schedule(SimTime(t), i).unwrap()).collect();
            let mut expected: Vec<(i64, usize)> = Vec::new();
            for (i, id) in ids.iter().enumerate() {
                if cancel_mask[i] { prop_assert!(q.cancel(*id)); } else { expected.push((times[i], i)); }
            }
            expected.sort();
            let got: Vec<(i64, usize)> = std::iter::from_fn(|| q.pop().map(|s| (s.time.0, s.event))).collect();
            prop_assert_eq!(got, expected);
        }

        /// Pushes (at or after the clock) interleaved with pops pop in `(time, seq)`
        /// order, as an ordered set of the pending keys says.
        #[test]
        fn interleaved_pushes_and_pops_keep_the_order(ops in proptest::collection::vec((any::<bool>(), 0i64..20), 0..400)) {
            let mut q = EventQueue::new();
            let mut reference = std::collections::BTreeSet::new();
            for (i, (push, dt)) in ops.into_iter().enumerate() {
                if push {
                    let at = q.now().0 + dt;
                    let id = q.schedule(SimTime(at), i).unwrap();
                    reference.insert((at, id.0, i));
                } else {
                    let want = reference.pop_first();
                    let got = q.pop().map(|s| (s.time.0, s.id.0, s.event));
                    prop_assert_eq!(got, want);
                }
                prop_assert_eq!(q.len(), reference.len());
            }
        }
    }
}

//! The lane's order (pure): which of its passes runs next, and which timers are ripe.
//!
//! Two kinds of work wait here: passes that keep a promise on the clock ([`Work::Promise`],
//! in deadline order) and first looks of objects that appeared while the controller runs
//! ([`Work::FirstLook`], in arrival order). Promises go first, but never more than
//! [`PROMISES_IN_A_ROW`] of them while a first look waits, so neither starves the other.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::Instant;

/// After this many promises in a row, a waiting first look goes next.
pub const PROMISES_IN_A_ROW: u32 = 4;

/// What the lane does for an object when its timer is ripe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timed {
    /// A pass that keeps a promise on the clock: the lane runs it.
    Promise,
    /// Ordinary work a lane pass asked for (a poll, the idle look): handed back to
    /// kube-runtime's queue, where bulk work waits.
    Handback,
}

/// A pass the lane runs now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work<K> {
    Promise(K),
    FirstLook(K),
}

/// The lane's timers and waiting work; one timer and one first look per object at most.
#[derive(Debug)]
pub struct Order<K> {
    timers: BTreeMap<(Instant, u64), (K, Timed)>,
    timer_of: HashMap<K, (Instant, u64)>,
    seq: u64,
    promises: VecDeque<K>,
    arrivals: VecDeque<K>,
    offered: HashSet<K>,
    in_a_row: u32,
}

impl<K: Clone + Eq + Hash> Default for Order<K> {
    fn default() -> Self {
        Self {
            timers: BTreeMap::new(),
            timer_of: HashMap::new(),
            seq: 0,
            promises: VecDeque::new(),
            arrivals: VecDeque::new(),
            offered: HashSet::new(),
            in_a_row: 0,
        }
    }
}

impl<K: Clone + Eq + Hash> Order<K> {
    /// Sets `key`'s timer to `at`, replacing the one it had: the newest pass of an object
    /// knows best when it is next due.
    pub fn schedule(&mut self, key: K, at: Instant, timed: Timed) {
        if let Some(old) = self.timer_of.remove(&key) {
            self.timers.remove(&old);
        }
        self.seq += 1;
        self.timers.insert((at, self.seq), (key.clone(), timed));
        self.timer_of.insert(key, (at, self.seq));
    }

    /// Queues a first look of `key` behind those offered before it, unless one waits already.
    pub fn offer(&mut self, key: K) {
        if self.offered.insert(key.clone()) {
            self.arrivals.push_back(key);
        }
    }

    /// Moves the timers due at `now` out: promises join the lane's work (in deadline order),
    /// hand-backs are returned for kube-runtime's queue.
    pub fn ripe(&mut self, now: Instant) -> Vec<K> {
        let mut handbacks = Vec::new();
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (key, timed) = entry.remove();
            self.timer_of.remove(&key);
            match timed {
                Timed::Promise if !self.promises.contains(&key) => self.promises.push_back(key),
                Timed::Promise => {}
                Timed::Handback => handbacks.push(key),
            }
        }
        handbacks
    }

    /// The next pass to run: a due promise, unless [`PROMISES_IN_A_ROW`] went before it while
    /// a first look waits; else the first look that arrived first.
    pub fn next_pass(&mut self) -> Option<Work<K>> {
        let first_look_owed = !self.arrivals.is_empty() && self.in_a_row >= PROMISES_IN_A_ROW;
        if !first_look_owed && let Some(key) = self.promises.pop_front() {
            self.in_a_row += 1;
            return Some(Work::Promise(key));
        }
        let key = self.arrivals.pop_front()?;
        self.offered.remove(&key);
        self.in_a_row = 0;
        Some(Work::FirstLook(key))
    }

    /// When the earliest timer is due.
    pub fn next_wake(&self) -> Option<Instant> {
        self.timers.first_key_value().map(|((at, _), _)| *at)
    }

    /// Passes waiting to run (due promises and first looks).
    pub fn waiting(&self) -> usize {
        self.promises.len() + self.arrivals.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    fn drain(o: &mut Order<&'static str>) -> Vec<Work<&'static str>> {
        std::iter::from_fn(|| o.next_pass()).collect()
    }

    #[test]
    fn first_looks_run_in_arrival_order_once_per_object() {
        let mut o = Order::default();
        for k in ["a", "b", "a", "c", "b"] {
            o.offer(k);
        }
        let got = drain(&mut o);
        let want = ["a", "b", "c"].map(Work::FirstLook);
        assert_eq!(got, want, "arrival order, one first look per object");
        o.offer("a");
        assert_eq!(
            o.next_pass(),
            Some(Work::FirstLook("a")),
            "an object offered again after its first look ran is queued again (the pass then \
             finds the status written and does nothing)"
        );
    }

    #[test]
    fn promises_run_in_deadline_order_when_due_and_not_before() {
        let t0 = Instant::now();
        let mut o = Order::default();
        o.schedule("late", ms(t0, 300), Timed::Promise);
        o.schedule("early", ms(t0, 100), Timed::Promise);
        assert_eq!(o.next_wake(), Some(ms(t0, 100)));
        assert!(o.ripe(t0).is_empty());
        assert_eq!(o.next_pass(), None, "nothing is due yet");
        assert!(
            o.ripe(ms(t0, 300)).is_empty(),
            "promises are not handed back"
        );
        assert_eq!(
            drain(&mut o),
            vec![Work::Promise("early"), Work::Promise("late")]
        );
        assert_eq!(o.next_wake(), None);
    }

    #[test]
    fn a_newer_timer_of_an_object_replaces_its_older_one() {
        let t0 = Instant::now();
        let mut o = Order::default();
        o.schedule("a", ms(t0, 100), Timed::Promise);
        o.schedule("a", ms(t0, 500), Timed::Handback);
        assert_eq!(o.next_wake(), Some(ms(t0, 500)));
        assert!(o.ripe(ms(t0, 200)).is_empty());
        assert_eq!(o.next_pass(), None, "the promise was replaced");
        assert_eq!(
            o.ripe(ms(t0, 500)),
            vec!["a"],
            "handed back to kube-runtime"
        );
        assert_eq!(o.next_pass(), None, "a hand-back is not the lane's to run");
    }

    #[test]
    fn promises_go_first_but_a_waiting_first_look_is_never_starved() {
        let t0 = Instant::now();
        let mut o = Order::default();
        o.offer("new");
        let keys = ["p1", "p2", "p3", "p4", "p5", "p6"];
        for (i, k) in keys.iter().enumerate() {
            o.schedule(*k, ms(t0, i as u64), Timed::Promise);
        }
        o.ripe(ms(t0, 10));
        let got = drain(&mut o);
        let mut want: Vec<_> = keys[..4].iter().map(|k| Work::Promise(*k)).collect();
        want.push(Work::FirstLook("new"));
        want.extend(keys[4..].iter().map(|k| Work::Promise(*k)));
        assert_eq!(got, want);
        assert_eq!(o.waiting(), 0);
    }

    #[test]
    fn one_due_promise_per_object() {
        let t0 = Instant::now();
        let mut o = Order::default();
        o.schedule("a", t0, Timed::Promise);
        o.ripe(t0);
        o.schedule("a", t0, Timed::Promise);
        o.ripe(t0);
        assert_eq!(drain(&mut o), vec![Work::Promise("a")]);
    }
}

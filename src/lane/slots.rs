//! Per-object exclusion: one pass of an object at a time, whoever runs it.
//!
//! kube-runtime never runs two reconciles of one object at once, but it knows nothing of the
//! lane's passes or of the leader's sweep. Every pass of a worker deployment takes its
//! object's slot here first (`crate::worker_deployment::pass`, the first look), and re-reads the object
//! once it holds it, so a pass that waited sees what the pass before it wrote: two first looks
//! of one object, the race that got the first lane reverted, cannot happen. Waiters are served
//! in the order they came (tokio's mutex is fair). An entry lives while someone holds or waits
//! for the slot.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use tokio::sync::{Mutex as SlotLock, OwnedMutexGuard};

type Table<K> = Arc<Mutex<HashMap<K, Arc<SlotLock<()>>>>>;

/// The slot table, shared by everything that runs a pass.
#[derive(Debug)]
pub struct Slots<K>(Table<K>);

impl<K> Default for Slots<K> {
    fn default() -> Self {
        Self(Arc::default())
    }
}

/// One object's slot, held: released when dropped.
#[derive(Debug)]
pub struct Slot<K: Eq + Hash> {
    table: Table<K>,
    key: K,
    held: Option<OwnedMutexGuard<()>>,
}

impl<K: Clone + Eq + Hash> Slots<K> {
    /// Waits until no other pass of `key` runs, and holds its slot.
    pub async fn take(&self, key: K) -> Slot<K> {
        let lock = {
            let mut table = self.0.lock().unwrap_or_else(|p| p.into_inner());
            table.entry(key.clone()).or_default().clone()
        };
        let held = lock.lock_owned().await;
        Slot {
            table: self.0.clone(),
            key,
            held: Some(held),
        }
    }

    /// Objects whose slot is held or waited for.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Eq + Hash> Drop for Slot<K> {
    fn drop(&mut self) {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        // Released under the table's lock, so no one can clone the entry in between.
        self.held.take();
        if table
            .get(&self.key)
            .is_some_and(|e| Arc::strong_count(e) == 1)
        {
            table.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn two_passes_of_one_object_never_overlap_and_others_run_beside() {
        let slots = Arc::new(Slots::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let passes = (0..8).map(|_| {
            let (slots, inside, most) = (slots.clone(), inside.clone(), most.clone());
            tokio::spawn(async move {
                let _slot = slots.take("a").await;
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
            })
        });
        let other = slots.clone();
        let beside = tokio::spawn(async move { other.take("b").await });
        for p in passes.collect::<Vec<_>>() {
            p.await.expect("pass");
        }
        drop(beside.await.expect("another object's slot is free"));
        assert_eq!(most.load(Ordering::SeqCst), 1, "one pass of `a` at a time");
        assert!(slots.is_empty(), "released slots leave the table");
    }

    #[tokio::test]
    async fn waiters_are_served_in_the_order_they_came() {
        let slots = Arc::new(Slots::default());
        let first = slots.take("a").await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for i in 0..5 {
            let (slots, order) = (slots.clone(), order.clone());
            waiters.push(tokio::spawn(async move {
                let _slot = slots.take("a").await;
                order.lock().expect("order").push(i);
            }));
            // One thread: each waiter runs to its wait for the slot before the next starts.
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(slots.len(), 1);
        drop(first);
        for w in waiters {
            w.await.expect("waiter");
        }
        assert_eq!(*order.lock().expect("order"), vec![0, 1, 2, 3, 4]);
        assert!(slots.is_empty());
    }
}

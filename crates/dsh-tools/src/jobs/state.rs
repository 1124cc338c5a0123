//! The runtime's bookkeeping: the records of the jobs, their listeners, and the locked
//! state every operation enters through.

use super::error::JobError;
use super::types::{CancelFn, JobSnapshot, JobsConfig, ReaderFn, TurnOpener};
use crate::agent::AgentRef;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::time::Instant;

pub(super) type DoneListener = dyn Fn(&JobSnapshot, Option<&AgentRef>) + Send + Sync;
pub(super) type ChangedListener = dyn Fn(&JobSnapshot) + Send + Sync;

/// The registered listeners of one kind, each removable by the id it was given.
pub(super) struct Listeners<F: ?Sized> {
    pub(super) next: AtomicU64,
    pub(super) list: Mutex<Vec<(u64, Arc<F>)>>,
}

impl<F: ?Sized> Listeners<F> {
    pub(super) fn new() -> Listeners<F> {
        Listeners {
            next: AtomicU64::new(1),
            list: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn add(&self, listener: Arc<F>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.list).push((id, listener));
        id
    }

    pub(super) fn remove(&self, id: u64) {
        lock(&self.list).retain(|(listener, _)| *listener != id);
    }

    /// The listeners at this moment. They are called from this copy, without the lock held,
    /// so a listener may add or remove listeners.
    pub(super) fn current(&self) -> Vec<Arc<F>> {
        lock(&self.list)
            .iter()
            .map(|(_, listener)| Arc::clone(listener))
            .collect()
    }
}

pub(super) struct Record {
    pub(super) snapshot: JobSnapshot,
    pub(super) owner: Option<AgentRef>,
    /// The producer's cancel hook while the job is live; dropped at settlement, since nothing
    /// may cancel a settled job (the reader stays: the output remains readable).
    pub(super) cancel: Option<CancelFn>,
    pub(super) reader: Option<ReaderFn>,
    pub(super) final_output: Option<String>,
    /// Set once the settlement is complete: recorded, listeners called, notice delivered.
    pub(super) settled: watch::Sender<bool>,
    /// The tokio runtime `start` ran in, which also runs the job's kill watchdog.
    pub(super) runtime: Handle,
    /// Callers inside `wait`: each will return the terminal snapshot, so a settlement while
    /// any is waiting counts as reported.
    pub(super) waiters: usize,
    /// The settlement was marked reported only because waiters were counted, and none of them
    /// has returned it yet. If they all go away without returning it (their futures dropped),
    /// the notice is delivered after all.
    pub(super) reported_for_waiters: bool,
}

impl Record {
    /// Marks the end as seen by a caller: no notice follows.
    pub(super) fn mark_reported(&mut self) {
        self.snapshot.reported = true;
        self.reported_for_waiters = false;
    }
}

pub(super) struct State {
    /// The records by registration number, so listings keep registration order.
    pub(super) records: BTreeMap<u64, Record>,
    /// The registration number of each held id.
    pub(super) index: HashMap<String, u64>,
    /// The last registration number given.
    pub(super) registered: u64,
    /// The last number issued per kind. Ids are issued in order and never reused, so an id
    /// at or below its kind's counter that is no longer held was evicted: "expired" needs no
    /// per-job memory.
    pub(super) counters: HashMap<String, u64>,
    /// Running and stopping jobs per owner session (zero counts are removed), so the
    /// capacity check does not scan the records.
    pub(super) live: HashMap<Option<String>, usize>,
    /// Capacity held by starts whose `run` is in progress, per owner session (zero counts
    /// are removed).
    pub(super) reserved: HashMap<Option<String>, usize>,
    /// Settled records by registration number, each with the instant it may be evicted.
    /// Entries are pushed with `now + retention`, so the queue stays in deadline order and a
    /// sweep only looks at its front.
    pub(super) evictable: VecDeque<(Instant, u64)>,
    pub(super) retention: Duration,
    pub(super) torn_down: bool,
}

impl State {
    pub(super) fn new(retention: Duration) -> State {
        State {
            records: BTreeMap::new(),
            index: HashMap::new(),
            registered: 0,
            counters: HashMap::new(),
            live: HashMap::new(),
            reserved: HashMap::new(),
            evictable: VecDeque::new(),
            retention,
            torn_down: false,
        }
    }

    pub(super) fn record(&self, id: &str) -> Option<&Record> {
        self.index.get(id).and_then(|n| self.records.get(n))
    }

    pub(super) fn record_mut(&mut self, id: &str) -> Option<&mut Record> {
        let n = self.index.get(id)?;
        self.records.get_mut(n)
    }

    /// Why `id` is not found: expired if the runtime issued it (it was evicted), otherwise
    /// unknown. The id says which: `<kind>-N` with `N` at most the kind's counter.
    pub(super) fn missing(&self, id: &str) -> JobError {
        let issued = issued_parts(id)
            .is_some_and(|(kind, n)| self.counters.get(kind).is_some_and(|last| n <= *last));
        if issued {
            JobError::Expired {
                id: id.to_owned(),
                retention: self.retention,
            }
        } else {
            JobError::NotFound { id: id.to_owned() }
        }
    }

    /// Counts one job more (`up`) or one fewer for `owner` in `counts` (the live or the
    /// reserved jobs), removing a count that reaches zero so sessions that come and go leave
    /// nothing behind.
    pub(super) fn adjust(
        counts: &mut HashMap<Option<String>, usize>,
        owner: &Option<String>,
        up: bool,
    ) {
        if up {
            *counts.entry(owner.clone()).or_insert(0) += 1;
        } else if let Some(count) = counts.get_mut(owner) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(owner);
            }
        }
    }

    /// Queues a settled record for eviction once the retention has passed. A retention too
    /// long to add to the clock keeps the record for good.
    pub(super) fn queue_eviction(&mut self, n: u64, now: Instant) {
        if let Some(deadline) = now.checked_add(self.retention) {
            self.evictable.push_back((deadline, n));
        }
    }

    /// Evicts the queued records whose retention has passed and whose end was reported. One
    /// still awaited by a `wait`, or whose end went back to unreported (its waiters left
    /// without returning it), is queued again for a full retention.
    pub(super) fn evict_due(&mut self, now: Instant) {
        let mut again = Vec::new();
        while let Some(&(deadline, n)) = self.evictable.front() {
            if deadline > now {
                break;
            }
            self.evictable.pop_front();
            let Some(record) = self.records.get(&n) else {
                continue;
            };
            let unreported = record.owner.is_some() && !record.snapshot.reported;
            if record.waiters > 0 || unreported {
                again.push(n);
                continue;
            }
            if let Some(record) = self.records.remove(&n) {
                self.index.remove(record.snapshot.id.as_str());
                tracing::debug!(job = %record.snapshot.id, "settled job evicted");
            }
        }
        for n in again {
            self.queue_eviction(n, now);
        }
    }
}

pub(super) struct Inner {
    pub(super) config: JobsConfig,
    pub(super) state: Mutex<State>,
    pub(super) controllers: AtomicUsize,
    pub(super) done_listeners: Listeners<DoneListener>,
    pub(super) changed_listeners: Listeners<ChangedListener>,
    pub(super) opener: Mutex<Option<Arc<dyn TurnOpener>>>,
    pub(super) wakes: Mutex<HashMap<String, u32>>,
}

/// The kind and number of an id as the runtime issues them (`<kind>-N`, `N` from 1 in plain
/// digits); `None` for any other text.
pub(super) fn issued_parts(id: &str) -> Option<(&str, u64)> {
    let (kind, number) = id.rsplit_once('-')?;
    let n = number.parse::<u64>().ok()?;
    (n >= 1 && n.to_string() == number).then_some((kind, n))
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a handful of field updates that cannot leave the state
    // half-written, so a poisoned lock is still consistent.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub(super) fn visible(record: &Record, caller: Option<&str>) -> bool {
    match &record.snapshot.owner_session {
        None => true,
        Some(owner) => Some(owner.as_str()) == caller,
    }
}

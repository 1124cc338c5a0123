//! The count of callers inside a wait, which decides whether a settlement was seen.

use super::state::{Inner, Record, lock};
use super::types::JobId;

/// A caller inside [`JobRuntime::wait`], counted on its record. It is uncounted when the wait
/// returns, and also when the wait's future is dropped first (a timeout around it, an aborted
/// task): a dropped wait must not swallow the owner's notice.
pub(super) struct Waiter<'a> {
    pub(super) inner: &'a Inner,
    pub(super) id: JobId,
    pub(super) counted: bool,
}

impl<'a> Waiter<'a> {
    pub(super) fn enter(inner: &'a Inner, record: &mut Record) -> Waiter<'a> {
        record.waiters += 1;
        Waiter {
            inner,
            id: record.snapshot.id.clone(),
            counted: true,
        }
    }

    /// The wait returns: uncounts it under the caller's lock.
    pub(super) fn leave(&mut self, record: &mut Record) {
        if std::mem::take(&mut self.counted) {
            record.waiters -= 1;
        }
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        let owner = {
            let mut state = lock(&self.inner.state);
            let Some(record) = state.record_mut(self.id.as_str()) else {
                return;
            };
            record.waiters -= 1;
            // The settlement was claimed for waiters, and the last of them is gone without
            // returning it: nobody saw the end, so the owner is told after all.
            if record.waiters == 0 && record.reported_for_waiters {
                record.reported_for_waiters = false;
                record.snapshot.reported = false;
                record.owner.clone()
            } else {
                None
            }
        };
        if let Some(owner) = owner {
            self.inner.report(&self.id, &owner);
        }
    }
}

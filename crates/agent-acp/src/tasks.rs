//! The tasks answering prompts, counted so that the end of input can wait for every answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Notify;

/// A count of running tasks, and a way to wait until none runs.
#[derive(Clone, Default)]
pub(super) struct Tasks(Arc<Count>);

#[derive(Default)]
struct Count {
    running: AtomicUsize,
    ended: Notify,
}

/// One of [`Tasks`], counted until it is dropped.
pub(super) struct TaskEntry(Arc<Count>);

impl Drop for TaskEntry {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
        self.0.ended.notify_waiters();
    }
}

impl Tasks {
    /// Counts one more task, until the entry is dropped.
    pub(super) fn enter(&self) -> TaskEntry {
        self.0.running.fetch_add(1, Ordering::SeqCst);
        TaskEntry(Arc::clone(&self.0))
    }

    /// Waits until no task is counted.
    pub(super) async fn idle(&self) {
        loop {
            let ended = self.0.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.0.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            ended.await;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn idle_waits_for_the_last_entry_to_be_dropped() {
        let tasks = Tasks::default();
        tasks.idle().await;
        let entry = tasks.enter();
        let waiting = tokio::spawn({
            let tasks = tasks.clone();
            async move { tasks.idle().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(entry);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
    }
}

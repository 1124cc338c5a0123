//! The handle of a background process: its state, and the `ShellProcess` the job hooks use.

use super::spill::SpillDir;
use crate::output::StreamCollector;
use crate::shell::{ProcessStatus, ShellProcess, Stream, StreamRead};
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub(super) struct ProcessState {
    pub(super) status: ProcessStatus,
    pub(super) exit_code: Option<i32>,
    pub(super) signal: Option<String>,
}

/// A background process of the local executor.
pub(super) struct LocalProcess {
    pub(super) state: Mutex<ProcessState>,
    pub(super) stdout: Arc<Mutex<StreamCollector>>,
    pub(super) stderr: Arc<Mutex<StreamCollector>>,
    pub(super) kill: CancellationToken,
    pub(super) done: watch::Sender<bool>,
    /// Keeps the spill directory alive while this process's files may be read.
    pub(super) _spill: Arc<SpillDir>,
}

impl std::fmt::Debug for LocalProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProcess")
            .field("status", &lock(&self.state).status)
            .finish_non_exhaustive()
    }
}

impl LocalProcess {
    pub(super) fn settle(
        &self,
        status: ProcessStatus,
        exit_code: Option<i32>,
        signal: Option<String>,
    ) {
        {
            let mut state = lock(&self.state);
            state.status = status;
            state.exit_code = exit_code;
            state.signal = signal;
        }
        self.done.send_replace(true);
    }
}

impl ShellProcess for LocalProcess {
    fn status(&self) -> ProcessStatus {
        lock(&self.state).status
    }

    fn exit_code(&self) -> Option<i32> {
        lock(&self.state).exit_code
    }

    fn signal(&self) -> Option<String> {
        lock(&self.state).signal.clone()
    }

    fn done(&self) -> BoxFuture<'static, ()> {
        let mut done = self.done.subscribe();
        Box::pin(async move {
            let _ = done.wait_for(|d| *d).await;
        })
    }

    fn read_from(&self, stream: Stream, offset: u64, max_bytes: usize) -> StreamRead {
        let settled = *self.done.borrow();
        let collector = match stream {
            Stream::Stdout => &self.stdout,
            Stream::Stderr => &self.stderr,
        };
        lock(collector).read_from(offset, max_bytes, settled)
    }

    fn kill(&self) -> bool {
        if *self.done.borrow() {
            return false;
        }
        self.kill.cancel();
        true
    }
}

/// Locks a mutex of this executor. Every critical section is a few field updates that cannot
/// leave the state half-written, so a poisoned lock is still consistent.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

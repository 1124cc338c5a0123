//! A command's start never runs the harness's signal handlers: a SIGTERM that reaches the
//! shell before its `execve` (a call cancelled at once) ends the shell, as it would a started
//! one, instead of running the harness's handler in the shell-to-be, where it would tell the
//! harness of a signal nobody sent it and swallow the SIGTERM. This file holds one test on
//! purpose: it installs a process-wide SIGTERM handler.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use futures::FutureExt;
use pretty_assertions::assert_eq;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tool_bash::shell::{ShellExecutor, ShellRequest};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cancelled_at_start_ends_by_sigterm_and_never_signals_the_harness() {
    let mut terminate = signal(SignalKind::terminate()).unwrap();
    // A grace far longer than a SIGTERM takes: a swallowed SIGTERM shows as SIGKILL.
    let executor = support::executor(Duration::from_secs(3));
    for round in 0..60 {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let mut request = ShellRequest::new("sleep 30");
        request.signal = Some(cancel);
        let spec = executor.resolve(request, None).unwrap();
        let result = tokio::time::timeout(Duration::from_secs(20), executor.run(spec))
            .await
            .expect("the call hung")
            .unwrap();
        assert_eq!(
            (round, result.exit_code, result.signal.as_deref()),
            (round, None, Some("SIGTERM"))
        );
        assert!(
            terminate.recv().now_or_never().is_none(),
            "the harness's SIGTERM handler ran in round {round}"
        );
    }
}

//! A harness that ignores `SIGCHLD` still hears its commands' exit statuses: the supervisor
//! does not inherit the `SIG_IGN` (with it, the kernel would reap the shell before the
//! supervisor could read its status). This file holds one test on purpose: it sets a
//! process-wide signal disposition.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Setting a signal disposition is `unsafe` (no handler is installed here, only `SIG_IGN`).
#![allow(unsafe_code)]

mod support;

use nix::sys::signal::{SigHandler, Signal, signal};
use pretty_assertions::assert_eq;
use std::time::Duration;
use tool_bash::shell::{ShellExecutor, ShellRequest};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_statuses_are_reported_when_the_harness_ignores_sigchld() {
    // SAFETY: SIG_IGN runs no code; this binary's only test sets it before any child exists.
    unsafe { signal(Signal::SIGCHLD, SigHandler::SigIgn) }.unwrap();
    let executor = support::executor(Duration::from_millis(300));
    for code in [0, 3, 7] {
        let spec = executor
            .resolve(ShellRequest::new(format!("exit {code}")), None)
            .unwrap();
        let result = tokio::time::timeout(Duration::from_secs(20), executor.run(spec))
            .await
            .expect("the call hung")
            .unwrap();
        assert_eq!(
            (result.exit_code, result.signal.as_deref()),
            (Some(code), None)
        );
    }
}

//! Foreground windows through the local executor: a stream whose text fits its share of the
//! visible budget is shown whole, whatever its bytes, and every note counts the stream's real
//! bytes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::lossy;
use crate::support;

use lossy::{check_window, lossy, stream};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use std::time::Duration;
use tool_bash::local::{LocalConfig, LocalExecutor};
use tool_bash::shell::{Collected, ShellExecutor, ShellRequest, ShellRunResult};

async fn run(executor: &LocalExecutor, command: &str) -> ShellRunResult {
    let spec = executor.resolve(ShellRequest::new(command), None).unwrap();
    executor.run(spec).await.unwrap()
}

#[tokio::test]
async fn three_invalid_bytes_of_stderr_next_to_a_large_stdout_are_shown_whole() {
    let executor = support::executor(Duration::from_millis(500));
    let result = run(
        &executor,
        r"head -c 100000 /dev/zero | tr '\0' a; printf '\xff\xfe\xfd' >&2",
    )
    .await;
    assert_eq!(
        result.stderr,
        Collected {
            text: "\u{FFFD}\u{FFFD}\u{FFFD}".to_owned(),
            truncated: false,
            total_bytes: 3,
            shown_bytes: 3,
            spill_path: None,
            spill_limit_bytes: None,
            spill_error: None,
        }
    );
    // Stdout gives up the nine bytes of text stderr shows, and its note counts real bytes.
    assert!(result.stdout.truncated);
    assert_eq!(result.stdout.total_bytes, 100_000);
    let omitted = 100_000 - result.stdout.shown_bytes;
    assert!(
        result
            .stdout
            .text
            .contains(&format!("[… {omitted} bytes omitted …]")),
        "{}",
        result.stdout.text
    );
    let marker = lossy::elision_marker(omitted).len();
    assert_eq!(result.stdout.text.len() - marker, 30_000 - 9);
}

/// A small visible budget, so streams around it are cheap to generate.
const VISIBLE: usize = 120;

fn small_window_executor() -> LocalExecutor {
    let mut config = LocalConfig::default();
    config.visible_bytes = VISIBLE;
    config.grace = Duration::from_millis(500);
    LocalExecutor::new(config)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Both streams, arbitrary bytes, sizes around the budget: each stream's window holds
    /// ([`check_window`]); a stream whose text fits a third of the budget, or both streams
    /// when their texts fit the budget together, are shown whole; the shown text stays within
    /// the budget; and a cut stream's spill file holds it byte for byte.
    #[test]
    fn foreground_windows_never_cut_a_stream_that_fits(
        out in stream(12),
        err in stream(12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (out_path, err_path) = (dir.path().join("out"), dir.path().join("err"));
        std::fs::write(&out_path, &out).unwrap();
        std::fs::write(&err_path, &err).unwrap();
        let executor = small_window_executor();
        let command = format!("cat '{}'; cat '{}' >&2", out_path.display(), err_path.display());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let result = runtime.block_on(run(&executor, &command));
        let (out_text, err_text) = (lossy(&out).len(), lossy(&err).len());
        // The budgets are the executor's to choose; the window must hold for the one used.
        let out_budget = if result.stdout.truncated {
            result.stdout.text.len()
                - lossy::elision_marker(result.stdout.total_bytes - result.stdout.shown_bytes).len()
        } else {
            out_text
        };
        let err_budget = if result.stderr.truncated {
            result.stderr.text.len()
                - lossy::elision_marker(result.stderr.total_bytes - result.stderr.shown_bytes).len()
        } else {
            err_text
        };
        prop_assert!(out_budget + err_budget <= VISIBLE, "{out_budget} + {err_budget}");
        for (bytes, shown, text_len) in [(&out, &result.stdout, out_text), (&err, &result.stderr, err_text)] {
            let fits = text_len <= VISIBLE / 3 || out_text + err_text <= VISIBLE;
            if fits {
                prop_assert_eq!(&shown.text, &lossy(bytes), "a stream that fits is shown whole");
            }
            // The executor's share for a cut stream is unknown here: any budget below its text.
            check_window(bytes, shown, if shown.truncated { text_len - 1 } else { text_len })?;
            if shown.truncated {
                let spill = shown.spill_path.as_ref().expect("a cut stream is spilled");
                prop_assert_eq!(&std::fs::read(spill).unwrap(), bytes);
            }
        }
    }
}

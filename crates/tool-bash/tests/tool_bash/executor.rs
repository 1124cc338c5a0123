//! The local executor: outcomes, process-tree termination, draining, environment, spill.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::live_group_members;
use tokio_util::sync::CancellationToken;
use tool_bash::local::{LocalConfig, LocalExecutor};
use tool_bash::shell::{
    ProcessStatus, ShellError, ShellExecutor, ShellRequest, ShellRunResult, Stream,
};

fn executor() -> LocalExecutor {
    support::executor(Duration::from_millis(500))
}

async fn run_with(executor: &LocalExecutor, request: ShellRequest) -> ShellRunResult {
    let spec = executor.resolve(request, None).unwrap();
    executor.run(spec).await.unwrap()
}

async fn run(command: &str) -> ShellRunResult {
    run_with(&executor(), ShellRequest::new(command)).await
}

#[tokio::test]
async fn exit_codes_and_signals_are_reported_apart() {
    let ok = run("echo hi").await;
    assert_eq!((ok.exit_code, ok.signal.as_deref()), (Some(0), None));
    assert_eq!(ok.stdout.text, "hi\n");
    let nine = run("echo out; echo err >&2; exit 9").await;
    assert_eq!(nine.exit_code, Some(9));
    assert_eq!(nine.stdout.text, "out\n");
    assert_eq!(nine.stderr.text, "err\n");
    let killed = run("kill -KILL $$").await;
    assert_eq!(
        (killed.exit_code, killed.signal.as_deref()),
        (None, Some("SIGKILL"))
    );
    assert!(!killed.timed_out && !killed.aborted);
    let empty = run("true").await;
    assert_eq!(
        (empty.stdout.text.as_str(), empty.stderr.text.as_str()),
        ("", "")
    );
}

#[tokio::test]
async fn a_timeout_kills_the_group_and_is_the_first_cause() {
    let executor = executor();
    let mut request = ShellRequest::new("echo begun; sleep 30");
    request.timeout = Some(Duration::from_millis(200));
    let began = Instant::now();
    let result = run_with(&executor, request).await;
    assert!(result.timed_out && !result.aborted);
    assert_eq!(result.signal.as_deref(), Some("SIGTERM"));
    assert_eq!(result.stdout.text, "begun\n");
    assert_eq!(result.timeout, Duration::from_millis(200));
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
}

#[tokio::test]
async fn a_command_trapping_term_is_still_timed_out_and_then_killed() {
    let executor = executor();
    let mut request =
        ShellRequest::new("trap '' TERM; echo trapped; while true; do sleep 0.05; done");
    request.timeout = Some(Duration::from_millis(200));
    let result = run_with(&executor, request).await;
    assert!(result.timed_out);
    assert_eq!(
        result.signal.as_deref(),
        Some("SIGKILL"),
        "TERM was trapped, so KILL ended it"
    );
    let mut request = ShellRequest::new("trap 'exit 0' TERM; sleep 30 & wait");
    request.timeout = Some(Duration::from_millis(200));
    let clean = run_with(&executor, request).await;
    assert!(
        clean.timed_out,
        "a process that exits 0 after the timeout is still timed out"
    );
    assert_eq!(clean.exit_code, Some(0));
}

#[tokio::test]
async fn cancellation_aborts_and_leaves_no_process_of_the_group() {
    let executor = executor();
    let signal = CancellationToken::new();
    let mut request = ShellRequest::new("sleep 1000 & sleep 1000 & echo $$; wait");
    request.signal = Some(signal.clone());
    let spec = executor.resolve(request, None).unwrap();
    let running = tokio::spawn({
        let executor = executor.clone();
        async move { executor.run(spec).await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    signal.cancel();
    let result = running.await.unwrap();
    assert!(result.aborted && !result.timed_out);
    let pgid: i32 = result.stdout.text.trim().parse().unwrap();
    assert_eq!(live_group_members(pgid), Vec::<i32>::new());
}

#[tokio::test]
async fn a_timed_out_pipeline_with_grandchildren_leaves_nothing_running() {
    let executor = executor();
    let mut request = ShellRequest::new("echo $$; sleep 1000 | sleep 1000 & sleep 1000");
    request.timeout = Some(Duration::from_millis(300));
    let result = run_with(&executor, request).await;
    assert!(result.timed_out);
    let pgid: i32 = result.stdout.text.trim().parse().unwrap();
    assert_eq!(live_group_members(pgid), Vec::<i32>::new());
}

#[tokio::test]
async fn a_background_grandchild_holding_stdout_does_not_hold_the_result() {
    let began = Instant::now();
    let result = run("sleep 30 & echo started $$").await;
    assert!(
        result.stdout.text.starts_with("started "),
        "{:?}",
        result.stdout.text
    );
    assert_eq!(result.exit_code, Some(0));
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "took {:?}",
        began.elapsed()
    );
    let pgid: i32 = result
        .stdout
        .text
        .trim()
        .trim_start_matches("started ")
        .parse()
        .unwrap();
    assert_eq!(
        live_group_members(pgid),
        Vec::<i32>::new(),
        "the lingering sleep was not cleaned up"
    );
}

#[tokio::test]
async fn stdin_is_empty_so_prompts_do_not_hang() {
    let began = Instant::now();
    let result = run("read x; echo \"read returned $? with '$x'\"").await;
    assert_eq!(result.stdout.text, "read returned 1 with ''\n");
    assert!(began.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn trusted_stdin_is_written_and_closed() {
    let executor = executor();
    let mut request = ShellRequest::new("cat; echo '<eof>'");
    request.stdin = Some(b"from the plugin\n".to_vec());
    let result = run_with(&executor, request).await;
    assert_eq!(result.stdout.text, "from the plugin\n<eof>\n");
}

#[tokio::test]
async fn workdirs_resolve_against_the_session_and_missing_ones_are_clear_errors() {
    let executor = executor();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let mut request = ShellRequest::new("pwd");
    request.workdir = Some(PathBuf::from("sub"));
    let spec = executor.resolve(request, Some(dir.path())).unwrap();
    let result = executor.run(spec).await.unwrap();
    assert_eq!(
        PathBuf::from(result.stdout.text.trim())
            .canonicalize()
            .unwrap(),
        dir.path().join("sub").canonicalize().unwrap()
    );
    let mut request = ShellRequest::new("pwd");
    request.workdir = Some(PathBuf::from("missing"));
    let err = executor.resolve(request, Some(dir.path())).unwrap_err();
    assert!(matches!(err, ShellError::WorkdirMissing(_)));
    assert_eq!(
        err.to_string(),
        format!(
            "working directory `{}` does not exist",
            dir.path().join("missing").display()
        )
    );
}

#[tokio::test]
async fn a_missing_shell_is_a_clear_spawn_error() {
    let mut config = LocalConfig::default();
    config.bash = PathBuf::from("/nonexistent/bash");
    let executor = LocalExecutor::new(config);
    let spec = executor.resolve(ShellRequest::new("true"), None).unwrap();
    let err = executor.run(spec).await.unwrap_err();
    assert!(matches!(err, ShellError::BashMissing(_)), "{err}");
}

#[tokio::test]
async fn a_command_too_long_to_exec_is_a_clear_spawn_error_not_a_hang() {
    // One environment entry over the kernel's per-string limit (128 KiB): `exec` fails with
    // E2BIG. The supervisor must leave at once, or `spawn` would wait on it forever. (A long
    // command is no such case: it reaches bash on a descriptor.)
    let executor = executor();
    let mut request = ShellRequest::new("echo never");
    request.env.insert("HUGE".into(), "x".repeat(300 * 1024));
    let spec = executor.resolve(request, None).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), executor.run(spec)).await;
    let err = outcome.expect("spawn hung").unwrap_err();
    assert!(matches!(err, ShellError::Spawn(_)), "{err}");
    assert!(err.to_string().contains("too long"), "{err}");
    // The next command runs as usual.
    let spec = executor
        .resolve(ShellRequest::new("echo ok"), None)
        .unwrap();
    assert_eq!(executor.run(spec).await.unwrap().stdout.text, "ok\n");
}

#[tokio::test]
async fn large_output_is_cut_to_head_and_tail_and_spilled_whole() {
    let executor = executor();
    let result = run_with(&executor, ShellRequest::new("seq 1 100000")).await;
    let expected: String = (1..=100_000).map(|n| format!("{n}\n")).collect();
    assert!(result.stdout.truncated);
    assert_eq!(result.stdout.total_bytes, expected.len() as u64);
    assert!(
        result.stdout.text.starts_with("1\n2\n3\n"),
        "{}",
        &result.stdout.text[..20]
    );
    assert!(result.stdout.text.ends_with("99999\n100000\n"));
    assert!(result.stdout.text.len() <= 30_000 + 64);
    let spill = result.stdout.spill_path.clone().unwrap();
    assert_eq!(std::fs::read_to_string(&spill).unwrap(), expected);
    let dir = spill.parent().unwrap();
    assert_eq!(
        std::fs::metadata(dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::metadata(&spill).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(executor.spill_dir().as_deref(), Some(dir));
}

#[tokio::test]
async fn a_kept_spill_directory_outlives_the_executor_and_counts_what_it_holds() {
    let root = tempfile::tempdir().unwrap();
    let kept = root.path().join("session").join("spill");
    let mut config = LocalConfig::default();
    config.spill_dir = Some(kept.clone());
    config.spill_budget_bytes = 1_000_000;
    let executor = LocalExecutor::new(config.clone());
    let result = run_with(&executor, ShellRequest::new("seq 1 100000")).await;
    let spill = result.stdout.spill_path.clone().unwrap();
    assert_eq!(spill.parent(), Some(kept.as_path()));
    assert_eq!(
        std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::metadata(&spill).unwrap().permissions().mode() & 0o777,
        0o600
    );
    drop(executor);
    let expected: String = (1..=100_000).map(|n| format!("{n}\n")).collect();
    assert_eq!(std::fs::read_to_string(&spill).unwrap(), expected);

    // A second executor over the same directory (a resumed session) counts the bytes already
    // there: the same output, which alone fits the budget, now spills only what is left of it,
    // and says why.
    let executor = LocalExecutor::new(config);
    let result = run_with(&executor, ShellRequest::new("seq 1 100000")).await;
    let note = result.stdout.spill_error.clone().unwrap_or_default();
    assert!(
        note.contains("spill budget"),
        "{:?}",
        result.stdout.spill_error
    );
    let second = result.stdout.spill_path.clone().unwrap();
    assert_eq!(
        std::fs::metadata(&second).unwrap().len(),
        1_000_000 - expected.len() as u64
    );
    assert_eq!(std::fs::read_to_string(&spill).unwrap(), expected);
}

#[tokio::test]
async fn streams_cut_to_share_the_budget_are_spilled_whole() {
    // Each stream fits its own window; together they do not, so stderr is cut to its share.
    let executor = executor();
    let result = run_with(
        &executor,
        ShellRequest::new("printf 'a%.0s' $(seq 20000); printf 'b%.0s' $(seq 20000) >&2"),
    )
    .await;
    assert_eq!(result.stdout.text, "a".repeat(20_000));
    assert!(result.stderr.truncated);
    assert!(result.stderr.text.len() <= 10_000 + 64);
    let spill = result
        .stderr
        .spill_path
        .expect("cut stderr must be spilled");
    assert_eq!(std::fs::read_to_string(spill).unwrap(), "b".repeat(20_000));
}

#[tokio::test]
async fn a_caller_stdout_budget_is_honoured_and_the_rest_spilled() {
    let executor = executor();
    let mut request = ShellRequest::new("seq 1 2000");
    request.stdout_max_bytes = Some(100);
    let result = run_with(&executor, request).await;
    let expected: String = (1..=2000).map(|n| format!("{n}\n")).collect();
    assert!(result.stdout.truncated);
    assert!(result.stdout.text.starts_with("1\n2\n"));
    assert!(result.stdout.text.ends_with("1999\n2000\n"));
    assert!(
        result.stdout.text.len() <= 100 + 64,
        "{}",
        result.stdout.text
    );
    let spill = result.stdout.spill_path.unwrap();
    assert_eq!(std::fs::read_to_string(spill).unwrap(), expected);
}

#[tokio::test]
async fn dropping_a_run_before_it_ends_kills_its_group() {
    let executor = executor();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pgid");
    let spec = executor
        .resolve(
            ShellRequest::new(format!(
                "sleep 1000 & echo $$ > {}; wait",
                pid_file.display()
            )),
            None,
        )
        .unwrap();
    let running = tokio::spawn(executor.run(spec));
    let pgid = support::read_pgid(&pid_file).await;
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_group_members(pgid).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(live_group_members(pgid), Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_mib_of_binary_output_spill_byte_for_byte_in_bounded_memory() {
    let source = support::random_file(64 << 20);
    let executor = executor();
    let before = support::resident_kib();
    let result = run_with(
        &executor,
        ShellRequest::new(format!("cat {}", source.path().display())),
    )
    .await;
    let growth_kib = support::resident_kib().saturating_sub(before);
    assert_eq!(result.stdout.total_bytes, 64 << 20);
    assert!(
        result.stdout.text.len() <= 30_000 + 64,
        "{}",
        result.stdout.text.len()
    );
    // The text is a Rust `String`: valid UTF-8 by construction; check it has no raw bytes
    // smuggled through an escape.
    assert!(std::str::from_utf8(result.stdout.text.as_bytes()).is_ok());
    // Binary output, three bytes of text per invalid byte, still shows a head and a tail.
    let (head, tail) = result.stdout.text.split_once("bytes omitted").unwrap();
    assert!(
        head.len() > 10 && tail.len() > 10,
        "{:?}",
        result.stdout.text
    );
    let spill = result.stdout.spill_path.unwrap();
    assert!(
        support::same_contents(source.path(), &spill),
        "the spill file differs from the generator's output"
    );
    assert!(
        growth_kib < 32 * 1024,
        "resident memory grew by {growth_kib} KiB"
    );
}

#[tokio::test]
async fn background_processes_stream_deltas_and_die_as_a_group() {
    let executor = executor();
    let spec = executor
        .resolve(
            ShellRequest::new("echo one; sleep 0.3; echo two >&2; sleep 1000 & echo $$; wait"),
            None,
        )
        .unwrap();
    let process = executor.start(spec);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let first = process.read_from(Stream::Stdout, 0, 1 << 20);
    assert!(first.text.starts_with("one\n"), "{first:?}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let err = process.read_from(Stream::Stderr, 0, 1 << 20);
    assert_eq!(err.text, "two\n");
    let rest = process.read_from(Stream::Stdout, first.next_offset, 1 << 20);
    let all = format!("{}{}", first.text, rest.text);
    let pgid: i32 = all.lines().nth(1).unwrap().parse().unwrap();
    assert_eq!(process.status(), ProcessStatus::Running);
    assert!(process.kill());
    process.done().await;
    assert_eq!(process.status(), ProcessStatus::Killed);
    assert!(!process.kill(), "killing a finished process is a no-op");
    assert_eq!(live_group_members(pgid), Vec::<i32>::new());
}

#[tokio::test]
async fn a_background_spawn_failure_settles_killed_with_the_error_on_stderr() {
    let mut config = LocalConfig::default();
    config.bash = PathBuf::from("/nonexistent/bash");
    let executor = LocalExecutor::new(config);
    let spec = executor.resolve(ShellRequest::new("true"), None).unwrap();
    let process = executor.start(spec);
    process.done().await;
    assert_eq!(process.status(), ProcessStatus::Killed);
    assert!(
        process
            .read_from(Stream::Stderr, 0, 1024)
            .text
            .contains("bash is not installed")
    );
}

#[test]
fn the_default_concurrency_limit_is_four_commands_per_cpu() {
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(tool_bash::default_max_concurrent_commands(), 4 * cpus);
    assert_eq!(LocalConfig::default().max_concurrent_commands, 4 * cpus);
}

/// An executor that runs one command at a time, and a directory for the commands' markers.
fn one_at_a_time() -> (LocalExecutor, tempfile::TempDir) {
    let mut config = LocalConfig::default();
    config.max_concurrent_commands = 1;
    (LocalExecutor::new(config), tempfile::tempdir().unwrap())
}

#[tokio::test]
async fn a_command_over_the_limit_waits_until_a_slot_is_free() {
    let (executor, dir) = one_at_a_time();
    let dir = dir.path().display().to_string();
    let first = tokio::spawn({
        let executor = executor.clone();
        let request = ShellRequest::new(format!(
            "touch '{dir}/started'; while [ ! -e '{dir}/go' ]; do sleep 0.01; done; echo first"
        ));
        async move { run_with(&executor, request).await }
    });
    while !std::path::Path::new(&format!("{dir}/started")).exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = tokio::spawn({
        let executor = executor.clone();
        let request = ShellRequest::new(format!("test -e '{dir}/go' && echo after the first"));
        async move { run_with(&executor, request).await }
    });
    // Time for the second command to run, were it not waiting for the first one's slot.
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(format!("{dir}/go"), "").unwrap();
    assert_eq!(first.await.unwrap().stdout.text, "first\n");
    let second = second.await.unwrap();
    assert_eq!(
        (second.exit_code, second.stdout.text.as_str()),
        (Some(0), "after the first\n")
    );
}

#[tokio::test]
async fn a_command_cancelled_while_waiting_for_a_slot_never_runs() {
    let (executor, dir) = one_at_a_time();
    let path = dir.path().display().to_string();
    let holder = CancellationToken::new();
    let mut request = ShellRequest::new(format!("touch '{path}/started'; sleep 1000"));
    request.signal = Some(holder.clone());
    let first = tokio::spawn({
        let executor = executor.clone();
        async move { run_with(&executor, request).await }
    });
    while !dir.path().join("started").exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let queued = CancellationToken::new();
    let mut request = ShellRequest::new(format!("touch '{path}/ran'"));
    request.signal = Some(queued.clone());
    let second = tokio::spawn({
        let executor = executor.clone();
        async move { run_with(&executor, request).await }
    });
    queued.cancel();
    let second = second.await.unwrap();
    assert!(second.aborted && !second.timed_out, "{second:?}");
    assert_eq!(
        (
            second.exit_code,
            second.signal.as_deref(),
            second.stdout.text.as_str()
        ),
        (None, None, "")
    );
    holder.cancel();
    assert!(first.await.unwrap().aborted);
    assert!(!dir.path().join("ran").exists());
}

/// A command longer than the kernel takes as one argument (128 KiB) runs as a short one does:
/// bash reads it from a descriptor, which no process of the command inherits, and it keeps
/// `$0`, `set -e` and `exit` as `bash -c` has them.
#[tokio::test]
async fn a_command_over_the_argument_limit_runs_like_a_short_one() {
    let filler = format!(": '{}'\n", "x".repeat(300_000));
    let body = "set -e\necho \"zero=$0\"\nfalse\necho not reached";
    let long = run(&format!("{filler}{body}")).await;
    let short = run(body).await;
    assert_eq!(
        (
            long.exit_code,
            long.stdout.text.as_str(),
            long.stderr.text.as_str()
        ),
        (
            short.exit_code,
            short.stdout.text.as_str(),
            short.stderr.text.as_str()
        )
    );
    assert_eq!(
        (long.exit_code, long.stdout.text.as_str()),
        (Some(1), "zero=bash\n")
    );
    // The script's file (unlinked) is open in no process of the command: not in the shell,
    // not in what it starts.
    let descriptors = run(&format!(
        "{filler}ls -l /proc/$$/fd/ && sh -c 'ls -l /proc/$$/fd/'"
    ))
    .await;
    assert_eq!(descriptors.exit_code, Some(0), "{descriptors:?}");
    assert!(
        !descriptors.stdout.text.contains("(deleted)"),
        "{}",
        descriptors.stdout.text
    );
    let exits = run(&format!("{filler}exit 7")).await;
    assert_eq!(exits.exit_code, Some(7));
}

//! The shell output markers: how the whole text is assembled, and that parsing inverts them.

use presenters::markers::{
    SkippedOutput, parse_status_marker, render_background_read, strip_status_marker,
};
use presenters::{
    ExitOutcome, ExitStatus, Truncation, parse_exit_status, render_markers, render_shell_output,
};
use pretty_assertions::assert_eq;
use proptest::prelude::*;

fn status(body: &str, exit_code: Option<i64>, signal: Option<&str>) -> ExitStatus {
    ExitStatus {
        body: body.to_owned(),
        exit_code,
        signal: signal.map(str::to_owned),
    }
}

#[test]
fn parse_exit_status_reads_the_last_line() {
    let check = |text: &str, expected: ExitStatus| {
        assert_eq!(parse_exit_status(text), expected, "{text:?}");
    };
    check("", status("", Some(0), None));
    check("hello\n", status("hello\n", Some(0), None));
    check("[exit code: 2]", status("", Some(2), None));
    check("out\n[exit code: 1]", status("out", Some(1), None));
    check("out\n\n[exit code: -1]", status("out\n", Some(-1), None));
    check(
        "(no output)\n[killed by signal: SIGKILL]",
        status("(no output)", None, Some("SIGKILL")),
    );
    check(
        "x\n[timed out after 10ms]\n[killed by signal: SIGTERM]",
        status("x\n[timed out after 10ms]", None, Some("SIGTERM")),
    );
    // Only the very last line counts, and only the renderer's exact spelling.
    check(
        "[exit code: 3]\nmore",
        status("[exit code: 3]\nmore", Some(0), None),
    );
    check(
        "out\n[exit code: 1]\n",
        status("out\n[exit code: 1]\n", Some(0), None),
    );
    check("[exit code: 0]", status("[exit code: 0]", Some(0), None));
    check("[exit code: +4]", status("[exit code: +4]", Some(0), None));
    check("[exit code: 04]", status("[exit code: 04]", Some(0), None));
    check("[exit code: x]", status("[exit code: x]", Some(0), None));
    check(
        "[killed by signal: ]",
        status("[killed by signal: ]", Some(0), None),
    );
    check(" [exit code: 1]", status(" [exit code: 1]", Some(0), None));
    // The marker names are printed as given; a bracket inside one survives.
    check("[killed by signal: a]b]", status("", None, Some("a]b")));
}

#[test]
fn shell_output_is_assembled_in_the_documented_order() {
    let check = |stdout: &str,
                 stderr: &str,
                 truncations: &[Truncation],
                 timed_out_ms: Option<u64>,
                 outcome: ExitOutcome,
                 expected: &str| {
        assert_eq!(
            render_shell_output(stdout, stderr, truncations, timed_out_ms, &outcome),
            expected
        );
    };
    let ok = ExitOutcome::exited(0);
    check("", "", &[], None, ok.clone(), "(no output)");
    check("\n", "", &[], None, ok.clone(), "(no output)");
    check("hi\n", "", &[], None, ok.clone(), "hi");
    check("hi\n\n", "", &[], None, ok.clone(), "hi\n");
    check("", "oops\n", &[], None, ok.clone(), "[stderr]\noops");
    check(
        "out\n",
        "err\n",
        &[],
        None,
        ExitOutcome::exited(2),
        "out\n[stderr]\nerr\n[exit code: 2]",
    );
    check(
        "head…tail",
        "",
        &[
            Truncation {
                shown_bytes: 30000,
                total_bytes: 1048576,
                spill_path: Some("/tmp/dsh/out-1".to_owned()),
            },
            Truncation {
                shown_bytes: 10,
                total_bytes: 20,
                spill_path: None,
            },
        ],
        Some(120000),
        ExitOutcome::killed("SIGKILL"),
        "head…tail\n\
         [output truncated: 30000 of 1048576 bytes; full output: /tmp/dsh/out-1]\n\
         [output truncated: 10 of 20 bytes; full output: (unavailable)]\n\
         [timed out after 120000ms]\n\
         [killed by signal: SIGKILL]",
    );
    // A process that traps SIGTERM and exits 0 after the timeout still reports the timeout.
    check(
        "",
        "",
        &[],
        Some(5),
        ok,
        "(no output)\n[timed out after 5ms]",
    );
    // A signal wins over an exit code; an unknown outcome writes no marker.
    check(
        "x",
        "",
        &[],
        None,
        ExitOutcome {
            exit_code: Some(1),
            signal: Some("SIGTERM".to_owned()),
        },
        "x\n[killed by signal: SIGTERM]",
    );
    check("x", "", &[], None, ExitOutcome::default(), "x");
}

/// A background read's note on skipped bytes says where they are: in the spill file, partly
/// (the file stops at its cap or budget, and the lost bytes are named exactly), or nowhere.
#[test]
fn skipped_notes_say_where_the_skipped_bytes_are() {
    let skip = |spill_path: Option<&str>,
                spill_limit_bytes: Option<u64>,
                lost: Option<std::ops::Range<u64>>,
                lost_because: Option<&str>| SkippedOutput {
        stream: "stdout",
        skipped_bytes: 3000,
        spill_path: spill_path.map(str::to_owned),
        spill_limit_bytes,
        lost,
        lost_because: lost_because.map(str::to_owned),
    };
    let file = Some("/s/job-stdout.out");
    let budget = Some("the session's spill budget of 1000 bytes is used up");
    let cases = [
        skip(file, None, None, None),
        skip(file, Some(5000), None, None),
        skip(file, Some(1000), Some(1000..3000), None),
        skip(file, Some(1000), Some(1000..3000), budget),
        skip(file, Some(1000), Some(2000..5000), None),
        skip(None, None, Some(0..3000), Some("disk full")),
        skip(None, None, Some(0..3000), None),
    ];
    assert_eq!(
        cases.map(|skipped| render_background_read("tail\n", "", &[skipped])),
        [
            "the full stdout is in /s/job-stdout.out",
            "they are in /s/job-stdout.out, which holds the first 5000 bytes of stdout",
            "/s/job-stdout.out holds only the first 1000 bytes of stdout, so bytes 1000 to 2999 (2000 bytes) could not be kept",
            "/s/job-stdout.out holds only the first 1000 bytes of stdout, so bytes 1000 to 2999 (2000 bytes) could not be kept (the session's spill budget of 1000 bytes is used up)",
            "/s/job-stdout.out holds only the first 1000 bytes of stdout, so bytes 2000 to 4999 (3000 bytes) could not be kept",
            "they could not be kept (disk full)",
            "they could not be kept",
        ]
        .map(|source| format!("tail\n[3000 earlier bytes of stdout were skipped; {source}]"))
    );
}

#[test]
fn render_markers_separates_the_marker_by_one_newline() {
    let check = |body: &str, outcome: ExitOutcome, expected: &str| {
        assert_eq!(render_markers(body, &outcome), expected, "{body:?}");
    };
    check("", ExitOutcome::exited(1), "[exit code: 1]");
    check("a", ExitOutcome::exited(1), "a\n[exit code: 1]");
    check("a\n", ExitOutcome::exited(1), "a\n\n[exit code: 1]");
    check("a\n", ExitOutcome::exited(0), "a\n");
    check(
        "",
        ExitOutcome::killed("SIGINT"),
        "[killed by signal: SIGINT]",
    );
}

fn outcome() -> impl Strategy<Value = ExitOutcome> {
    prop_oneof![
        any::<i64>().prop_map(ExitOutcome::exited),
        Just(ExitOutcome::exited(0)),
        (-3i64..300).prop_map(ExitOutcome::exited),
        "SIG[A-Z0-9]{1,8}".prop_map(ExitOutcome::killed),
        // Any single-line, non-empty name round-trips, brackets included.
        "[^\n]{1,12}".prop_map(ExitOutcome::killed),
    ]
}

fn body() -> impl Strategy<Value = String> {
    prop_oneof![
        "(?s).{0,40}",
        "[\\[\\]a-z :0-9\n-]{0,40}",
        Just(String::new()),
        Just("\n".to_owned()),
        Just("[stderr]\nboom\n".to_owned()),
        "(?s).{0,20}".prop_map(|s| format!("{s}\n[exit code: 7]")),
        "(?s).{0,20}".prop_map(|s| format!("{s}\n[killed by signal: SIGKILL]")),
        "(?s).{0,20}".prop_map(|s| format!("{s}\n[exit code: 0]\n")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn parse_exit_status_inverts_render_markers(body in body(), outcome in outcome()) {
        let last_line = body.rsplit('\n').next().unwrap_or_default();
        // Exit code 0 writes no marker, so a body whose own last line is a status marker reads
        // back as that status: the one documented ambiguity of the marker contract. Every other
        // body, including one ending in a marker under a non-zero outcome, must round-trip.
        let ambiguous = outcome.exit_code == Some(0)
            && outcome.signal.is_none()
            && parse_status_marker(last_line).is_some();
        prop_assume!(!ambiguous);
        let text = render_markers(&body, &outcome);
        let expected_code = match &outcome.signal {
            Some(_) => None,
            None => outcome.exit_code,
        };
        prop_assert_eq!(
            parse_exit_status(&text),
            ExitStatus { body, exit_code: expected_code, signal: outcome.signal.clone() }
        );
    }

    #[test]
    fn a_known_outcome_strips_exactly_its_own_marker(
        body in body(),
        outcome in prop_oneof![outcome(), Just(ExitOutcome::default())],
    ) {
        // No ambiguity to assume away: the outcome says which marker, if any, was appended.
        let text = render_markers(&body, &outcome);
        prop_assert_eq!(strip_status_marker(&text, &outcome), body.as_str());
    }

    #[test]
    fn assembled_output_reads_back_its_outcome(
        stdout in "(?s).{0,30}",
        stderr in "(?s).{0,30}",
        timed_out in prop::option::of(any::<u64>()),
        outcome in outcome(),
    ) {
        // The same documented ambiguity: exit code 0 adds nothing to a text whose last line
        // already looks like a status marker.
        let unmarked = render_shell_output(&stdout, &stderr, &[], timed_out, &ExitOutcome::exited(0));
        let last_line = unmarked.rsplit('\n').next().unwrap_or_default();
        let success = outcome.exit_code == Some(0) && outcome.signal.is_none();
        prop_assume!(!(success && parse_status_marker(last_line).is_some()));
        let text = render_shell_output(&stdout, &stderr, &[], timed_out, &outcome);
        let parsed = parse_exit_status(&text);
        let expected_code = if outcome.signal.is_some() { None } else { outcome.exit_code };
        prop_assert_eq!(parsed.exit_code, expected_code);
        prop_assert_eq!(parsed.signal, outcome.signal);
    }
}

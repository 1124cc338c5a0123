//! The shell output markers: the one place their text is spelled, produced and parsed.
//!
//! This vocabulary is shared by the model-visible text and the cards: the `bash` tool writes
//! what the model reads with [`render_shell_output`] (a foreground run) and
//! [`render_background_read`] (a background job's output), and the `bash` card reads the exit
//! status back with [`parse_exit_status`] when the result carries no presentation meta. No
//! other code spells a marker, so the two sides cannot disagree.
//!
//! The `bash` tool shows the model one text per foreground run, assembled by
//! [`render_shell_output`]:
//!
//! 1. the stdout text;
//! 2. when stderr is not empty, a line [`stderr_header`] followed by the stderr text;
//! 3. [`no_output`] instead of both when neither stream has anything to show;
//! 4. then, each on its own line and in this order: one [`truncated_marker`] per truncated
//!    stream, the [`timed_out_marker`], and last the status marker ([`signal_marker`] or
//!    [`exit_code_marker`]; nothing for exit code 0).
//!
//! A background read that had to skip older output ends with a [`skipped_note`].
//!
//! [`parse_exit_status`] inverts the last step, so a card can show the exit status as a badge
//! and the output without it; when the outcome is known from elsewhere,
//! [`strip_status_marker`] removes exactly its marker. Everything else stays in the body: truncation and timeout lines
//! are facts the reader of the output should see.

/// Opens the exit-code marker; the code and [`MARKER_CLOSE`] follow.
const EXIT_CODE_OPEN: &str = "[exit code: ";
/// Opens the signal marker; the signal name and [`MARKER_CLOSE`] follow.
const SIGNAL_OPEN: &str = "[killed by signal: ";
/// Closes every marker.
const MARKER_CLOSE: &str = "]";
const STDERR_HEADER: &str = "[stderr]";
const NO_OUTPUT: &str = "(no output)";
const BACKGROUND_STARTED: &str = "started background job ";

/// How a process ended: killed by a signal, or exited with a code.
///
/// Exactly one of the two is meaningful. When `signal` is set it wins and `exit_code` is
/// ignored; with neither set the outcome is unknown and no status marker is written, because
/// no marker may claim what nobody observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExitOutcome {
    /// The exit code, when the process exited by itself.
    pub exit_code: Option<i64>,
    /// The terminating signal's name (`SIGKILL`), when the process was killed. A signal name is
    /// one non-empty line.
    pub signal: Option<String>,
}

impl ExitOutcome {
    /// A process that exited with `code`.
    pub fn exited(code: i64) -> ExitOutcome {
        ExitOutcome {
            exit_code: Some(code),
            signal: None,
        }
    }

    /// A process killed by the signal named `signal` (`SIGKILL`).
    pub fn killed(signal: impl Into<String>) -> ExitOutcome {
        ExitOutcome {
            exit_code: None,
            signal: Some(signal.into()),
        }
    }
}

/// What [`parse_exit_status`] reads back from a shell tool's text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExitStatus {
    /// The text without its final status marker line.
    pub body: String,
    /// The exit code: the marker's, or `0` when there is no status marker.
    pub exit_code: Option<i64>,
    /// The terminating signal, when the text ends with a signal marker.
    pub signal: Option<String>,
}

/// One stream whose in-memory window lost bytes; the complete stream is in the spill file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Truncation {
    /// The bytes shown in the text.
    pub shown_bytes: u64,
    /// The stream's total size in bytes.
    pub total_bytes: u64,
    /// Where the complete stream was saved, when it could be saved.
    pub spill_path: Option<String>,
}

/// The line that opens the stderr section: `[stderr]`.
pub fn stderr_header() -> &'static str {
    STDERR_HEADER
}

/// The text shown when neither stream has output: `(no output)`.
pub fn no_output() -> &'static str {
    NO_OUTPUT
}

/// `[output truncated: <shown> of <total> bytes; full output: <path>]`, with `(unavailable)`
/// as the path when the stream could not be saved.
pub fn truncated_marker(shown_bytes: u64, total_bytes: u64, spill_path: Option<&str>) -> String {
    let path = spill_path.unwrap_or("(unavailable)");
    format!("[output truncated: {shown_bytes} of {total_bytes} bytes; full output: {path}]")
}

/// `[timed out after <N>ms]`.
pub fn timed_out_marker(timeout_ms: u64) -> String {
    format!("[timed out after {timeout_ms}ms]")
}

/// `[exit code: <N>]`.
pub fn exit_code_marker(code: i64) -> String {
    format!("{EXIT_CODE_OPEN}{code}{MARKER_CLOSE}")
}

/// `[killed by signal: <NAME>]`.
pub fn signal_marker(signal: &str) -> String {
    format!("{SIGNAL_OPEN}{signal}{MARKER_CLOSE}")
}

/// The final status marker of an outcome, or `None` for exit code 0 (and for an outcome with
/// neither a code nor a signal).
pub fn status_marker(outcome: &ExitOutcome) -> Option<String> {
    match (&outcome.signal, outcome.exit_code) {
        (Some(signal), _) => Some(signal_marker(signal)),
        (None, Some(0) | None) => None,
        (None, Some(code)) => Some(exit_code_marker(code)),
    }
}

/// The note a background read ends with when it skipped older output to stay within its
/// bound, `[<N> earlier bytes of <stream> were skipped; …]`, saying where the skipped bytes
/// are:
///
/// - all in a spill file: `the full <stream> is in <path>`, or, when the file stops short of
///   the stream, `they are in <path>, which holds the first <K> bytes of <stream>`;
/// - partly or not at all, with a file: `<path> holds only the first <K> bytes of <stream>, so
///   bytes <A> to <B> (<B - A + 1> bytes) could not be kept`, the lost range counted from 0
///   and both ends included;
/// - with no file: `they could not be kept`.
///
/// A known reason for the loss follows it in parentheses (`… could not be kept (the session's
/// spill budget of 4096 bytes is used up)]`).
pub fn skipped_note(skipped: &SkippedOutput) -> String {
    let SkippedOutput {
        stream,
        skipped_bytes,
        spill_path,
        spill_limit_bytes,
        lost,
        lost_because,
    } = skipped;
    let because = lost_because
        .as_deref()
        .map(|why| format!(" ({why})"))
        .unwrap_or_default();
    let source = match (spill_path, spill_limit_bytes, lost) {
        (Some(path), None, None) => format!("the full {stream} is in {path}"),
        (Some(path), Some(kept), None) => {
            format!("they are in {path}, which holds the first {kept} bytes of {stream}")
        }
        (Some(path), Some(kept), Some(lost)) => {
            format!(
                "{path} holds only the first {kept} bytes of {stream}, so bytes {} to {} ({} bytes) could not be kept{because}",
                lost.start,
                lost.end.saturating_sub(1),
                lost.end.saturating_sub(lost.start)
            )
        }
        // No file, or one that holds the whole stream although bytes are said to be lost.
        (None, _, _) | (Some(_), None, Some(_)) => format!("they could not be kept{because}"),
    };
    format!("[{skipped_bytes} earlier bytes of {stream} were skipped; {source}]")
}

/// One stream of a background read that skipped older output (see [`skipped_note`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkippedOutput {
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    /// The bytes skipped.
    pub skipped_bytes: u64,
    /// The stream's spill file, when it has one.
    pub spill_path: Option<String>,
    /// When the spill file stops short of the stream (its cap, or the budget): the bytes it
    /// holds, the stream's first ones.
    pub spill_limit_bytes: Option<u64>,
    /// The skipped bytes no file holds, as offsets into the stream (`start` included, `end`
    /// excluded); `None` when the spill file holds them all.
    pub lost: Option<std::ops::Range<u64>>,
    /// Why skipped bytes are lost, when some are and the reason is known.
    pub lost_because: Option<String>,
}

/// Assembles the model-facing text of one background read (`job_output`, completion notices):
/// the new stdout, then a [`stderr_header`] line and the new stderr when there is any, then
/// one [`skipped_note`] per stream that skipped older output, each on its own line.
///
/// Unlike a foreground run, a read keeps the streams' own newlines: a delta is a slice of a
/// longer output, and the next read continues it.
pub fn render_background_read(stdout: &str, stderr: &str, skipped: &[SkippedOutput]) -> String {
    let mut text = stdout.to_owned();
    let start_line = |text: &mut String| {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
    };
    if !stderr.is_empty() {
        start_line(&mut text);
        text.push_str(STDERR_HEADER);
        text.push('\n');
        text.push_str(stderr);
    }
    for skip in skipped {
        start_line(&mut text);
        text.push_str(&skipped_note(skip));
    }
    text
}

/// A note the executor adds for the model after the output (a sandbox naming its policy):
/// `[<note>]`, on its own line.
pub fn executor_note(note: &str) -> String {
    format!("[{note}]")
}

/// The model text of a background start: `started background job <id>`.
pub fn background_started(job_id: &str) -> String {
    format!("{BACKGROUND_STARTED}{job_id}")
}

/// Appends the outcome's status marker to `body`, on its own line.
///
/// A non-empty body is always separated from the marker by exactly one `"\n"`, even when it
/// already ends with one, so [`parse_exit_status`] gives back the body byte for byte. Exit code
/// 0 appends nothing.
pub fn render_markers(body: &str, outcome: &ExitOutcome) -> String {
    match status_marker(outcome) {
        None => body.to_owned(),
        Some(marker) if body.is_empty() => marker,
        Some(marker) => format!("{body}\n{marker}"),
    }
}

/// Assembles the whole model-facing text of a foreground run (see the module docs for the
/// order).
///
/// A stream counts as output when something is left after dropping one trailing newline, and
/// that one newline is dropped before the next line is joined on, so the usual `"…\n"` of a
/// command does not leave an empty line before the markers.
pub fn render_shell_output(
    stdout: &str,
    stderr: &str,
    truncations: &[Truncation],
    timed_out_ms: Option<u64>,
    outcome: &ExitOutcome,
) -> String {
    let stdout = without_final_newline(stdout);
    let stderr = without_final_newline(stderr);
    let mut lines: Vec<String> = Vec::new();
    if !stdout.is_empty() {
        lines.push(stdout.to_owned());
    }
    if !stderr.is_empty() {
        lines.push(format!("{STDERR_HEADER}\n{stderr}"));
    }
    if lines.is_empty() {
        lines.push(NO_OUTPUT.to_owned());
    }
    lines.extend(
        truncations
            .iter()
            .map(|t| truncated_marker(t.shown_bytes, t.total_bytes, t.spill_path.as_deref())),
    );
    lines.extend(timed_out_ms.map(timed_out_marker));
    render_markers(&lines.join("\n"), outcome)
}

/// Splits a shell tool's text into its body and its exit status: the inverse of
/// [`render_markers`].
///
/// Only the last line is examined, and only a line exactly as the renderer writes it counts
/// (`[exit code: N]` with a non-zero, canonically written integer, or `[killed by signal: NAME]`
/// with a non-empty name). Without one the exit code is 0 and the body is the whole text.
///
/// Known limitation: exit code 0 writes no marker, so a successful run whose own output ends
/// with a line that is itself a status marker reads back as that status, one line shorter.
/// Nothing in the text can tell the two apart; a host that needs certainty reads the exit
/// status from the result's presentation meta instead.
pub fn parse_exit_status(text: &str) -> ExitStatus {
    let (body, last) = match text.rfind('\n') {
        Some(at) => (&text[..at], &text[at + 1..]),
        None => ("", text),
    };
    match parse_status_marker(last) {
        Some(outcome) => ExitStatus {
            body: body.to_owned(),
            exit_code: outcome.exit_code,
            signal: outcome.signal,
        },
        None => ExitStatus {
            body: text.to_owned(),
            exit_code: Some(0),
            signal: None,
        },
    }
}

/// The body of a text whose outcome is known: the text without exactly the status marker
/// [`render_markers`] appended for `outcome`, and nothing else.
///
/// Unlike [`parse_exit_status`] this never mistakes the command's own last line for a marker:
/// for exit code 0, and for an unknown outcome, the text is returned whole.
pub fn strip_status_marker<'a>(text: &'a str, outcome: &ExitOutcome) -> &'a str {
    let Some(marker) = status_marker(outcome) else {
        return text;
    };
    if text == marker {
        return "";
    }
    text.strip_suffix(marker.as_str())
        .and_then(|body| body.strip_suffix('\n'))
        .unwrap_or(text)
}

/// Reads one line as a status marker, accepting exactly what [`status_marker`] writes.
pub fn parse_status_marker(line: &str) -> Option<ExitOutcome> {
    if let Some(code) = enclosed(line, EXIT_CODE_OPEN) {
        let parsed = code.parse::<i64>().ok()?;
        // Only the spelling the renderer produces counts: not `+1`, `01` or `0`.
        return (parsed != 0 && parsed.to_string() == code).then(|| ExitOutcome::exited(parsed));
    }
    let signal = enclosed(line, SIGNAL_OPEN)?;
    (!signal.is_empty() && !signal.contains('\n')).then(|| ExitOutcome::killed(signal))
}

fn enclosed<'a>(line: &'a str, open: &str) -> Option<&'a str> {
    line.strip_prefix(open)?.strip_suffix(MARKER_CLOSE)
}

fn without_final_newline(text: &str) -> &str {
    text.strip_suffix('\n').unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_spelled_as_documented() {
        assert_eq!(exit_code_marker(-3), "[exit code: -3]");
        assert_eq!(signal_marker("SIGKILL"), "[killed by signal: SIGKILL]");
        assert_eq!(
            truncated_marker(10, 20, Some("/tmp/x")),
            "[output truncated: 10 of 20 bytes; full output: /tmp/x]"
        );
        assert_eq!(timed_out_marker(5), "[timed out after 5ms]");
        let skipped = |stream, spill_path: Option<&str>, lost_because: Option<&str>| {
            skipped_note(&SkippedOutput {
                stream,
                skipped_bytes: 7,
                spill_path: spill_path.map(str::to_owned),
                lost: spill_path.is_none().then_some(0..7),
                lost_because: lost_because.map(str::to_owned),
                ..SkippedOutput::default()
            })
        };
        assert_eq!(
            skipped("stderr", Some("/tmp/e"), None),
            "[7 earlier bytes of stderr were skipped; the full stderr is in /tmp/e]"
        );
        assert_eq!(
            skipped("stdout", None, None),
            "[7 earlier bytes of stdout were skipped; they could not be kept]"
        );
        assert_eq!(
            skipped("stdout", None, Some("disk full")),
            "[7 earlier bytes of stdout were skipped; they could not be kept (disk full)]"
        );
    }
}

//! Output retention: a bounded in-memory window per stream, a byte-exact spill file once the
//! stream outgrows it, and offset-based readers.
//!
//! While a stream fits its window it is kept whole in memory. The moment it outgrows the
//! window, everything so far and everything after goes to a spill file (up to a whole-stream
//! cap), and memory keeps only a head (≈ 1/3 of the window) and a rolling tail (≈ 2/3). Memory
//! per stream is therefore bounded by the window whatever the output size.
//!
//! A [`SpillSink`] may also budget the bytes of all its files together: every write claims its
//! room first, and a stream the budget stops keeps a byte-exact prefix in its file (or gets no
//! file), with the reason in its results.
//!
//! What a model reads is counted in text, not raw bytes: output is decoded lossily, an invalid
//! sequence becoming U+FFFD (three bytes of text for one to three raw bytes). So a window shows
//! a stream whole exactly when its text fits the budget ([`StreamCollector::text_len`] is what
//! budgets are shared out by), while every note (`shown_bytes`, the elision marker, skipped
//! bytes) counts the stream's real bytes. Windows and reads start and end only between
//! characters: no character is split or shown twice, and an incomplete character at the end
//! of a stream still being written is held back until it completes.

use crate::shell::{Collected, StreamRead};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where spill files are created; shared so files outlive the executor while readers remain.
pub trait SpillSink: Send + Sync + std::fmt::Debug {
    /// Creates a new private file (`0600`, unguessable name) for `label`.
    fn create(&self, label: &str) -> std::io::Result<(File, PathBuf)>;

    /// Claims room for `bytes` more bytes of spill files and returns how many of them may be
    /// written: fewer than asked once the sink's budget is used up. A sink without a budget
    /// grants every byte (the default).
    fn claim(&self, bytes: u64) -> u64 {
        bytes
    }

    /// The total its spill files may hold, when the sink has a budget (named in the note a
    /// result carries once it is used up).
    fn budget_bytes(&self) -> Option<u64> {
        None
    }
}

/// Why a stream's spill file is missing or stops early once its sink's budget is used up.
fn budget_used_up(sink: &dyn SpillSink) -> String {
    match sink.budget_bytes() {
        Some(budget) => format!("the session's spill budget of {budget} bytes is used up"),
        None => String::from("the session's spill budget is used up"),
    }
}

enum Spill {
    /// The stream still fits in memory.
    NotNeeded,
    /// Every byte so far is in `file` (up to `cap`), unless `stopped` says why the file ends
    /// early (the sink's budget ran out); it then holds the stream's first `written` bytes.
    Active {
        file: File,
        path: PathBuf,
        written: u64,
        stopped: Option<String>,
    },
    /// The file could not be created or written; memory is all there is.
    Failed(String),
}

/// Collects one output stream: whole in memory while it fits its window, then head + rolling
/// tail in memory and every byte in a spill file (up to the cap). Executors other than the
/// local one can use it to keep the same guarantees.
pub struct StreamCollector {
    label: String,
    window: usize,
    head_cap: usize,
    tail_cap: usize,
    /// The whole stream, while it fits the window.
    full: Option<Vec<u8>>,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    spill: Spill,
    spill_cap: u64,
    sink: Option<Arc<dyn SpillSink>>,
}

impl std::fmt::Debug for StreamCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamCollector")
            .field("label", &self.label)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

/// The marker standing in for the elided middle of a stream.
pub(crate) fn elision_marker(omitted: u64) -> String {
    format!("\n[… {omitted} bytes omitted …]\n")
}

impl StreamCollector {
    /// A collector keeping `window` bytes in memory (head ≈ 1/3, tail ≈ 2/3) and spilling up to
    /// `spill_cap` bytes through `sink` (files named after `label`).
    pub fn new(
        label: impl Into<String>,
        window: usize,
        spill_cap: u64,
        sink: Option<Arc<dyn SpillSink>>,
    ) -> StreamCollector {
        let window = window.max(3);
        let head_cap = window / 3;
        StreamCollector {
            label: label.into(),
            window,
            head_cap,
            tail_cap: window - head_cap,
            full: Some(Vec::new()),
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            spill: Spill::NotNeeded,
            spill_cap,
            sink,
        }
    }

    /// The bytes collected so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The bytes of text the stream decodes to (lossy UTF-8: an invalid sequence counts as the
    /// three bytes of U+FFFD), which is what a window's budget is counted in. Once the stream
    /// outgrew its window this is its byte count instead: decoding never shortens a stream, so
    /// that is already more than any window shows.
    pub fn text_len(&self) -> u64 {
        match &self.full {
            Some(full) => text_len(full) as u64,
            None => self.total,
        }
    }

    /// The spill file, once the stream outgrew its window.
    pub fn spill_path(&self) -> Option<&Path> {
        match &self.spill {
            Spill::Active { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Appends bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.total += bytes.len() as u64;
        if let Some(full) = &mut self.full {
            if full.len() + bytes.len() <= self.window {
                full.extend_from_slice(bytes);
                // A stream cut by a budget smaller than its window is already spilling.
                self.write_spill(bytes);
                return;
            }
            // Outgrown: the whole stream so far goes to the spill file, memory keeps a window.
            let already = full.len();
            let mut so_far = std::mem::take(full);
            self.full = None;
            so_far.extend_from_slice(bytes);
            match self.spill {
                Spill::NotNeeded => self.start_spill(&so_far),
                _ => self.write_spill(&so_far[already..]),
            }
            self.head = so_far[..self.head_cap.min(so_far.len())].to_vec();
            let tail_start = so_far.len().saturating_sub(self.tail_cap);
            self.tail = so_far[tail_start..].iter().copied().collect();
            return;
        }
        self.write_spill(bytes);
        // Only the newest `tail_cap` bytes can survive: do not copy the rest in to drain it.
        let newest = &bytes[bytes.len().saturating_sub(self.tail_cap)..];
        self.tail.extend(newest);
        let excess = self.tail.len().saturating_sub(self.tail_cap);
        self.tail.drain(..excess);
    }

    fn start_spill(&mut self, so_far: &[u8]) {
        let Some(sink) = self.sink.clone() else {
            self.spill = Spill::Failed(String::from("no spill directory is configured"));
            return;
        };
        // The room is claimed before the file exists, so a used-up budget leaves no empty file.
        let wanted = (so_far.len() as u64).min(self.spill_cap);
        let granted = sink.claim(wanted);
        if granted == 0 && wanted > 0 {
            tracing::warn!(stream = %self.label, "the spill budget is used up; not spilling");
            self.spill = Spill::Failed(budget_used_up(sink.as_ref()));
            return;
        }
        match sink.create(&self.label) {
            Ok((file, path)) => {
                self.spill = Spill::Active {
                    file,
                    path,
                    written: 0,
                    stopped: None,
                };
                self.write_granted(&so_far[..granted as usize], granted < wanted);
            }
            Err(error) => {
                tracing::warn!(stream = %self.label, "cannot create a spill file: {error}");
                self.spill = Spill::Failed(format!("the spill file could not be created: {error}"));
            }
        }
    }

    fn write_spill(&mut self, bytes: &[u8]) {
        let Spill::Active {
            written, stopped, ..
        } = &self.spill
        else {
            return;
        };
        // A file the budget stopped stays a prefix of the stream: nothing is appended after a gap.
        if stopped.is_some() {
            return;
        }
        let wanted = (bytes.len() as u64).min(self.spill_cap.saturating_sub(*written));
        if wanted == 0 {
            return;
        }
        let granted = match &self.sink {
            Some(sink) => sink.claim(wanted),
            None => wanted,
        };
        self.write_granted(&bytes[..granted as usize], granted < wanted);
    }

    /// Appends bytes whose room was claimed; `budget_ran_out` stops the file after them.
    fn write_granted(&mut self, bytes: &[u8], budget_ran_out: bool) {
        let note = budget_ran_out.then(|| {
            tracing::warn!(stream = %self.label, "the spill budget is used up; the spill file stops here");
            self.sink.as_deref().map(budget_used_up).unwrap_or_default()
        });
        if let Spill::Active {
            file,
            written,
            stopped,
            ..
        } = &mut self.spill
        {
            if !bytes.is_empty() {
                if let Err(error) = file.write_all(bytes) {
                    tracing::warn!(stream = %self.label, "writing the spill file failed: {error}");
                    self.spill = Spill::Failed(format!("writing the spill file failed: {error}"));
                    return;
                }
                *written += bytes.len() as u64;
            }
            if note.is_some() {
                *stopped = note;
            }
        }
    }

    /// The result view with at most `budget` bytes of text (head ≈ 1/3, tail ≈ 2/3).
    ///
    /// A stream that fits its window but not `budget` is cut here, so it starts spilling here:
    /// the text never leaves out bytes that no file holds.
    pub fn finish(&mut self, budget: usize) -> Collected {
        let budget = budget.min(self.window);
        if let Some(full) = &self.full {
            let text = String::from_utf8_lossy(full);
            if text.len() <= budget {
                return Collected {
                    text: text.into_owned(),
                    shown_bytes: self.total,
                    ..self.spill_facts()
                };
            }
            if matches!(self.spill, Spill::NotNeeded) {
                let full = std::mem::take(&mut self.full).unwrap_or_default();
                self.start_spill(&full);
                self.full = Some(full);
            }
        }
        let tail_from_memory: Vec<u8>;
        let (head_raw, tail_raw): (&[u8], &[u8]) = match &self.full {
            Some(full) => (full, full),
            None => {
                tail_from_memory = self.tail.iter().copied().collect();
                // The head in memory is a cut of the stream: a character it ends inside is
                // completed after the cut, so it is left to the elided middle, not shown as
                // U+FFFD.
                let head = &self.head[..complete_prefix_len(&self.head)];
                (head, &tail_from_memory)
            }
        };
        let (head, head_used) = decode_prefix(head_raw, budget / 3);
        let (tail, tail_used) = decode_suffix(tail_raw, budget - head.len(), self.full.is_some());
        let shown = (head_used + tail_used) as u64;
        Collected {
            text: format!("{head}{}{tail}", elision_marker(self.total - shown)),
            truncated: true,
            shown_bytes: shown,
            ..self.spill_facts()
        }
    }

    /// The size and spill facts of a result view, with no text.
    fn spill_facts(&self) -> Collected {
        let (spill_path, spill_limit_bytes, spill_error) = match &self.spill {
            Spill::NotNeeded => (None, None, None),
            Spill::Active {
                path,
                written,
                stopped,
                ..
            } => (
                Some(path.clone()),
                (*written < self.total).then_some(*written),
                stopped.clone(),
            ),
            Spill::Failed(error) => (None, None, Some(error.clone())),
        };
        Collected {
            total_bytes: self.total,
            spill_path,
            spill_limit_bytes,
            spill_error,
            ..Collected::default()
        }
    }

    /// Reads from `offset`, keeping the newest bytes: at most `max_bytes` of text (invalid
    /// bytes, which decode to three bytes of text each, count as such). `settled` says no more
    /// bytes will come, so an incomplete character at the end is final rather than held back
    /// for the next read.
    ///
    /// The text is always one contiguous run of the stream, starting and ending between
    /// characters, and exactly its lossy decoding: successive reads from each `next_offset`,
    /// with what their skips stand for, rebuild the stream's decoding with nothing split or
    /// repeated. Bytes before the run are `skipped_bytes`; `lossy` says the spill file does
    /// not hold them all (past its cap, no file, or a hole in what memory keeps).
    pub fn read_from(&self, offset: u64, max_bytes: usize, settled: bool) -> StreamRead {
        let total = self.total;
        let spill_path = self.spill_path().map(Path::to_path_buf);
        if offset >= total {
            return StreamRead {
                next_offset: offset.max(total),
                spill_path,
                ..StreamRead::default()
            };
        }
        let max_bytes = max_bytes.max(4) as u64;
        let window_start = offset.max(total.saturating_sub(max_bytes));
        // Bytes available nowhere (past the spill cap, after a spill failure) cannot be shown:
        // the read starts after them, and says its skip is lossy. The three bytes before the
        // window, when there are any, tell whether it starts inside a character.
        let (fetched_from, mut bytes) = self.bytes_from(window_start.saturating_sub(3).max(offset));
        let at = (window_start.max(fetched_from) - fetched_from) as usize;
        // The reader's own offset is where its previous read ended: between characters.
        let skip = at + skip_to_boundary(&bytes, at, fetched_from == offset);
        bytes.drain(..skip);
        let mut start = fetched_from + skip as u64;
        // Hold back an incomplete character at the end while more may come.
        let mut end = total;
        if !settled {
            let complete = complete_prefix_len(&bytes);
            end = start + complete as u64;
            bytes.truncate(complete);
        }
        let decoded = String::from_utf8_lossy(&bytes);
        let (text, used) = if decoded.len() as u64 <= max_bytes {
            (decoded.into_owned(), bytes.len())
        } else {
            // Invalid bytes made the text longer than the raw bytes: keep the newest that fit.
            decode_suffix(&bytes, max_bytes as usize, true)
        };
        start = end - used as u64;
        let skipped = start - offset;
        let lossy = skipped > 0 && !self.spilled_through(offset, start);
        StreamRead {
            text,
            next_offset: end,
            skipped_bytes: skipped,
            lossy,
            spill_path,
            spill_error: self.spill_facts().spill_error,
        }
    }

    /// Whether the spill file holds every byte in `[from, to)`.
    fn spilled_through(&self, from: u64, to: u64) -> bool {
        match &self.spill {
            Spill::Active { written, .. } => to <= *written && from <= to,
            _ => false,
        }
    }

    /// The longest run of bytes reaching the end of the stream that starts at or after
    /// `start` and that memory or the spill file holds without a hole, with where it starts.
    /// Bytes available nowhere (past the spill cap, or after a spill failure) end the run:
    /// bytes before them would be shown as if they were contiguous with the bytes after.
    fn bytes_from(&self, start: u64) -> (u64, Vec<u8>) {
        if let Some(full) = &self.full {
            return (start, full[start as usize..].to_vec());
        }
        let tail_start = self.total - self.tail.len() as u64;
        if start >= tail_start {
            let skip = (start - tail_start) as usize;
            return (start, self.tail.iter().skip(skip).copied().collect());
        }
        // Before the tail only the spill file can continue the run: the head kept in memory
        // ends before the tail begins (the stream outgrew head and tail together).
        let from_file = match &self.spill {
            Spill::Active { path, .. } => read_file_range(path, start, tail_start).ok(),
            _ => None,
        };
        match from_file {
            Some(mut bytes) if bytes.len() as u64 == tail_start - start => {
                bytes.extend(self.tail.iter());
                (start, bytes)
            }
            // A hole: only what follows it is contiguous with the end.
            _ => (tail_start, self.tail.iter().copied().collect()),
        }
    }
}

fn read_file_range(path: &Path, start: u64, stop: u64) -> std::io::Result<Vec<u8>> {
    if stop <= start {
        return Ok(Vec::new());
    }
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(start))?;
    let mut buffer = Vec::with_capacity((stop - start) as usize);
    file.take(stop - start).read_to_end(&mut buffer)?;
    Ok(buffer)
}

/// The length of `bytes` without a trailing incomplete character: the start of a character
/// that more bytes could still complete. Anything else, valid or not, is final: an invalid
/// sequence stays invalid whatever follows, so holding it back would only delay it.
fn complete_prefix_len(bytes: &[u8]) -> usize {
    // A character is at most four bytes, so an incomplete one starts in the last three.
    for cut in bytes.len().saturating_sub(3)..bytes.len() {
        if let Err(error) = std::str::from_utf8(&bytes[cut..])
            && error.valid_up_to() == 0
            && error.error_len().is_none()
        {
            return cut;
        }
    }
    bytes.len()
}

/// Decodes the longest prefix of `raw` whose text is at most `budget` bytes. Returns the text
/// and the raw bytes it covers. Invalid bytes become U+FFFD (three bytes of text each).
pub(crate) fn decode_prefix(raw: &[u8], budget: usize) -> (String, usize) {
    let mut text = String::new();
    let mut used = 0;
    for chunk in raw.utf8_chunks() {
        let valid = chunk.valid();
        if text.len() + valid.len() > budget {
            let room = budget - text.len();
            let mut end = room;
            while !valid.is_char_boundary(end) {
                end -= 1;
            }
            text.push_str(&valid[..end]);
            used += end;
            return (text, used);
        }
        text.push_str(valid);
        used += valid.len();
        let invalid = chunk.invalid();
        if !invalid.is_empty() {
            if text.len() + REPLACEMENT_LEN > budget {
                return (text, used);
            }
            text.push('\u{FFFD}');
            used += invalid.len();
        }
    }
    (text, used)
}

/// Decodes the longest suffix of `raw` whose text is at most `budget` bytes, starting on a
/// character boundary (`starts_on_boundary` says whether `raw` itself does). Returns the text
/// and the raw bytes it covers.
pub(crate) fn decode_suffix(
    raw: &[u8],
    budget: usize,
    starts_on_boundary: bool,
) -> (String, usize) {
    // Each raw byte is at least one byte of text, so no longer suffix can fit.
    let mut start = raw.len().saturating_sub(budget);
    // Do not begin inside a character.
    start += skip_to_boundary(raw, start, starts_on_boundary);
    // Invalid bytes make the text longer than the raw bytes: drop whole characters (and
    // whole invalid sequences) from the front until the rest fits.
    let mut over = text_len(&raw[start..]).saturating_sub(budget);
    'drop: for chunk in raw[start..].utf8_chunks() {
        for c in chunk.valid().chars() {
            if over == 0 {
                break 'drop;
            }
            over = over.saturating_sub(c.len_utf8());
            start += c.len_utf8();
        }
        if over == 0 {
            break;
        }
        if !chunk.invalid().is_empty() {
            over = over.saturating_sub(REPLACEMENT_LEN);
            start += chunk.invalid().len();
        }
    }
    (
        String::from_utf8_lossy(&raw[start..]).into_owned(),
        raw.len() - start,
    )
}

/// The bytes to skip from `at` to the next character boundary of `raw`, judged from the (at
/// most three) bytes before `at`; `starts_on_boundary` says whether `raw[0]` starts a
/// character. When nothing before `at` is known, leading continuation bytes are skipped: they
/// may belong to a character cut in half.
fn skip_to_boundary(raw: &[u8], at: usize, starts_on_boundary: bool) -> usize {
    let is_continuation = |b: &u8| (*b & 0xC0) == 0x80;
    let leading = raw[at..]
        .iter()
        .take(3)
        .take_while(|b| is_continuation(b))
        .count();
    if leading == 0 {
        return 0;
    }
    let look_from = at.saturating_sub(3);
    let Some(lead) = raw[look_from..at].iter().rposition(|b| !is_continuation(b)) else {
        // A character has at most three continuation bytes: after three, or after a boundary
        // followed only by continuation bytes (each one a lone invalid byte), `at` is a
        // boundary itself.
        return if at - look_from == 3 || starts_on_boundary {
            0
        } else {
            leading
        };
    };
    // A byte that is not a continuation byte always starts a character (or an invalid
    // sequence): decode from there to the first boundary at or after `at`.
    let mut end = look_from + lead;
    for chunk in raw[end..].utf8_chunks() {
        for c in chunk.valid().chars() {
            if end >= at {
                return end - at;
            }
            end += c.len_utf8();
        }
        if end >= at {
            return end - at;
        }
        end += chunk.invalid().len();
    }
    end - at
}

/// The bytes of text U+FFFD takes, which is what each invalid sequence decodes to.
const REPLACEMENT_LEN: usize = '\u{FFFD}'.len_utf8();

/// The bytes of text `raw` decodes to (lossily).
fn text_len(raw: &[u8]) -> usize {
    raw.utf8_chunks()
        .map(|chunk| {
            let invalid = if chunk.invalid().is_empty() {
                0
            } else {
                REPLACEMENT_LEN
            };
            chunk.valid().len() + invalid
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug)]
    struct Temp(tempfile::TempDir);

    impl SpillSink for Temp {
        fn create(&self, label: &str) -> std::io::Result<(File, PathBuf)> {
            let file = tempfile::Builder::new()
                .prefix(label)
                .tempfile_in(self.0.path())?;
            let (file, path) = file.keep().map_err(|e| e.error)?;
            Ok((file, path))
        }
    }

    fn collector(window: usize, cap: u64) -> (StreamCollector, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let sink: Arc<dyn SpillSink> = Arc::new(Temp(tempfile::tempdir_in(dir.path()).unwrap()));
        (StreamCollector::new("stdout", window, cap, Some(sink)), dir)
    }

    #[test]
    fn a_small_stream_stays_whole_in_memory() {
        let (mut c, _dir) = collector(100, 1000);
        c.push(b"hello ");
        c.push(b"world");
        let out = c.finish(100);
        assert_eq!(out.text, "hello world");
        assert!(!out.truncated);
        assert_eq!(out.spill_path, None);
        assert_eq!(out.total_bytes, 11);
    }

    #[test]
    fn a_large_stream_spills_whole_and_shows_head_and_tail() {
        let (mut c, _dir) = collector(30, 10_000);
        let data: Vec<u8> = (0..200u8).map(|i| b'a' + (i % 26)).collect();
        for chunk in data.chunks(7) {
            c.push(chunk);
        }
        let out = c.finish(30);
        assert!(out.truncated);
        assert_eq!(out.total_bytes, 200);
        assert_eq!(std::fs::read(out.spill_path.unwrap()).unwrap(), data);
        assert!(out.text.starts_with("abcdefghij"), "{}", out.text);
        assert!(
            out.text
                .ends_with(std::str::from_utf8(&data[180..]).unwrap()),
            "{}",
            out.text
        );
        assert!(out.text.contains("[… 170 bytes omitted …]"), "{}", out.text);
    }

    #[test]
    fn the_spill_cap_is_reported() {
        let (mut c, _dir) = collector(10, 50);
        c.push(&[b'x'; 120]);
        let out = c.finish(10);
        assert_eq!(out.spill_limit_bytes, Some(50));
        assert_eq!(std::fs::read(out.spill_path.unwrap()).unwrap().len(), 50);
    }

    #[test]
    fn readers_with_offsets_get_everything_from_memory_or_the_file() {
        let (mut c, _dir) = collector(20, 1_000_000);
        let data: Vec<u8> = (0..500u32).map(|i| b'0' + (i % 10) as u8).collect();
        let mut cursor_a = 0;
        let mut seen_a = Vec::new();
        for chunk in data.chunks(37) {
            c.push(chunk);
            let read = c.read_from(cursor_a, 1_000, false);
            cursor_a = read.next_offset;
            seen_a.extend_from_slice(read.text.as_bytes());
        }
        assert_eq!(seen_a, data);
        // A late reader gets the newest bytes within its limit and is told what it skipped.
        let late = c.read_from(0, 100, true);
        assert_eq!(late.skipped_bytes, 400);
        assert!(!late.lossy, "the spill file holds the skipped bytes");
        assert_eq!(late.text.as_bytes(), &data[400..]);
    }

    #[test]
    fn incomplete_characters_are_held_back_until_complete() {
        let (mut c, _dir) = collector(100, 1000);
        let word = "héllo".as_bytes();
        c.push(&word[..2]);
        let first = c.read_from(0, 100, false);
        assert_eq!(first.text, "h");
        c.push(&word[2..]);
        let second = c.read_from(first.next_offset, 100, false);
        assert_eq!(second.text, "éllo");
    }

    #[test]
    fn a_stream_cut_by_a_budget_below_its_window_is_spilled_whole() {
        let (mut c, _dir) = collector(100, 1000);
        let data: Vec<u8> = (0..80u8).collect();
        c.push(&data);
        let out = c.finish(30);
        assert!(out.truncated);
        assert_eq!(out.spill_error, None);
        let path = out.spill_path.expect("a cut stream must have a spill file");
        assert_eq!(std::fs::read(&path).unwrap(), data);
        // Bytes that arrive afterwards still reach the file, in order.
        c.push(b"more");
        c.push(&[b'z'; 40]);
        let mut expected = data.clone();
        expected.extend_from_slice(b"more");
        expected.extend_from_slice(&[b'z'; 40]);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn binary_output_keeps_a_tail() {
        let (mut c, _dir) = collector(300, 10_000);
        c.push(&[0xFF; 1_000]);
        let out = c.finish(300);
        let marker = elision_marker(out.total_bytes - out.shown_bytes);
        let (head, tail) = out.text.split_once(&marker).expect("an elision marker");
        assert!(!head.is_empty() && !tail.is_empty(), "{:?}", out.text);
        assert!(out.text.len() <= 300 + marker.len());
    }

    #[test]
    fn reads_bound_the_text_not_the_raw_bytes() {
        let (mut c, _dir) = collector(1_000, 10_000);
        c.push(&[0xFF; 300]);
        let read = c.read_from(0, 90, true);
        // Each invalid byte is three bytes of text: 30 fit, the 270 before them are skipped.
        assert_eq!(read.text, "\u{FFFD}".repeat(30));
        assert_eq!(read.skipped_bytes, 270);
        assert_eq!(read.next_offset, 300);
    }

    /// A sink whose files may hold `budget` bytes together.
    #[derive(Debug)]
    struct Budgeted {
        dir: Temp,
        budget: u64,
        claimed: std::sync::Mutex<u64>,
    }

    impl SpillSink for Budgeted {
        fn create(&self, label: &str) -> std::io::Result<(File, PathBuf)> {
            self.dir.create(label)
        }

        fn claim(&self, bytes: u64) -> u64 {
            let mut claimed = self.claimed.lock().unwrap();
            let granted = bytes.min(self.budget - *claimed);
            *claimed += granted;
            granted
        }

        fn budget_bytes(&self) -> Option<u64> {
            Some(self.budget)
        }
    }

    #[test]
    fn streams_sharing_a_spill_budget_stop_at_it_say_so_and_keep_their_windows() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Arc::new(Budgeted {
            dir: Temp(tempfile::tempdir_in(dir.path()).unwrap()),
            budget: 250,
            claimed: std::sync::Mutex::new(0),
        });
        let used_up = Some(String::from(
            "the session's spill budget of 250 bytes is used up",
        ));
        let stream = |seed: u8| -> Vec<u8> { (0..300u32).map(|i| seed + (i % 26) as u8).collect() };
        let collector = |label: &str| {
            let sink: Arc<dyn SpillSink> = sink.clone();
            StreamCollector::new(label, 30, 10_000, Some(sink))
        };
        let (data_a, data_b) = (stream(b'a'), stream(b'A'));
        let (mut a, mut b) = (collector("a"), collector("b"));
        for (x, y) in data_a.chunks(20).zip(data_b.chunks(20)) {
            a.push(x);
            b.push(y);
        }
        let mut kept = 0;
        for (collector, data) in [(&mut a, &data_a), (&mut b, &data_b)] {
            let out = collector.finish(30);
            let file = std::fs::read(out.spill_path.as_ref().unwrap()).unwrap();
            // Each file is a prefix of its stream, and says where and why it stops.
            assert_eq!(file, data[..file.len()]);
            assert_eq!(
                (out.spill_limit_bytes, out.spill_error),
                (Some(file.len() as u64), used_up.clone())
            );
            // The window is untouched: head and tail of the whole stream.
            assert!(
                out.text
                    .starts_with(std::str::from_utf8(&data[..10]).unwrap())
            );
            assert!(
                out.text
                    .ends_with(std::str::from_utf8(&data[280..]).unwrap())
            );
            kept += file.len();
        }
        assert_eq!(kept, 250);
        // Nothing is left for a third stream: no file at all, and the reason in its results.
        let mut c = collector("c");
        c.push(&data_a);
        let out = c.finish(30);
        assert_eq!((out.spill_path, out.spill_error), (None, used_up.clone()));
        assert!(
            out.text
                .ends_with(std::str::from_utf8(&data_a[280..]).unwrap())
        );
        // A reader gets the tail the window kept, told the bytes before it are lost and why.
        let read = c.read_from(0, 50, true);
        assert_eq!(
            (
                read.text.as_bytes(),
                read.skipped_bytes,
                read.lossy,
                read.spill_error
            ),
            (&data_a[280..], 280, true, used_up)
        );
    }

    #[test]
    fn a_read_never_glues_the_head_to_the_tail_across_lost_bytes() {
        // No spill file: memory keeps the first 10 and the last 20 bytes of 100.
        let mut c = StreamCollector::new("stdout", 30, 1 << 20, None);
        let data: Vec<u8> = (0..100u8).map(|i| b'a' + i % 26).collect();
        c.push(&data);
        let read = c.read_from(0, 1_000, true);
        assert_eq!(
            read,
            StreamRead {
                text: String::from_utf8(data[80..].to_vec()).unwrap(),
                next_offset: 100,
                skipped_bytes: 80,
                lossy: true,
                spill_path: None,
                // Why the skipped bytes are not kept anywhere.
                spill_error: Some(String::from("no spill directory is configured")),
            }
        );
    }

    #[test]
    fn an_invalid_sequence_at_the_end_is_not_held_back() {
        let (mut c, _dir) = collector(100, 1000);
        // `F4 00` can never become a character: it is output now, not a character to wait for.
        c.push(b"a\xF4\x00");
        let read = c.read_from(0, 100, false);
        assert_eq!((read.text.as_str(), read.next_offset), ("a\u{FFFD}\0", 3));
        // `F0 9F 98` may still become one.
        c.push(&[0xF0, 0x9F, 0x98]);
        let read = c.read_from(3, 100, false);
        assert_eq!((read.text.as_str(), read.next_offset), ("", 3));
    }

    #[test]
    fn a_head_cut_inside_a_character_leaves_it_to_the_elided_middle() {
        let (mut c, _dir) = collector(30, 10_000);
        // Memory keeps 10 bytes of head: `abcdefg` and three of the emoji's four bytes.
        let mut data = "abcdefg😀".as_bytes().to_vec();
        data.extend_from_slice(&[b'z'; 100]);
        c.push(&data);
        let out = c.finish(30);
        let (head, _) = out.text.split_once("\n[…").unwrap();
        assert_eq!(head, "abcdefg");
        assert_eq!(out.shown_bytes, 7 + 20);
    }

    #[test]
    fn a_read_keeps_every_character_that_fits() {
        let (mut c, _dir) = collector(100, 1000);
        // Three lone continuation bytes (three bytes of text each) before two NULs.
        c.push(b"aaaaaaaa\x80\x80\x80\0\0");
        let read = c.read_from(0, 5, true);
        assert_eq!(read.text, "\u{FFFD}\0\0");
        assert_eq!(read.skipped_bytes, 10);
    }

    proptest! {
        #[test]
        fn text_is_valid_and_within_budget_for_any_bytes(data in prop::collection::vec(any::<u8>(), 0..2_000), window in 3usize..300) {
            let (mut c, _dir) = collector(window, 1 << 20);
            for chunk in data.chunks(13) {
                c.push(chunk);
            }
            let out = c.finish(window);
            let marker = elision_marker(out.total_bytes).len();
            prop_assert!(out.text.len() <= window + marker, "{} > {}", out.text.len(), window);
            prop_assert_eq!(out.total_bytes, data.len() as u64);
            if let Some(path) = &out.spill_path {
                prop_assert_eq!(std::fs::read(path).unwrap(), data.clone());
            }
            prop_assert!(out.shown_bytes <= out.total_bytes);
        }
    }

    /// The characters of each UTF-8 length, to cut at every byte.
    const ONE_OF_EACH_LENGTH: [&str; 4] = ["a", "é", "€", "😀"];

    #[test]
    fn complete_prefix_len_holds_back_only_a_character_that_can_still_complete() {
        // Each length of character, cut after each of its bytes, behind an ASCII byte: a cut
        // inside it is held back (the prefix ends before it), a whole one is not.
        for c in ONE_OF_EACH_LENGTH {
            for cut in 0..=c.len() {
                let mut bytes = b"x".to_vec();
                bytes.extend_from_slice(&c.as_bytes()[..cut]);
                let expected = if cut == 0 || cut == c.len() {
                    1 + cut
                } else {
                    1
                };
                assert_eq!(complete_prefix_len(&bytes), expected, "{c:?} cut at {cut}");
            }
        }
        let cases: &[(&[u8], usize)] = &[
            (b"", 0),
            // Nothing before the incomplete character.
            (b"\xC3", 0),
            (b"\xF0\x9F\x98", 0),
            // Sequences no later byte can make valid are final.
            (b"a\x80", 2),
            (b"ab\xF4\x00", 4),
            (b"a\xE0\x80", 3),
            (b"a\xED\xA0", 3),
            (b"a\xF4\x90", 3),
            (b"a\xC0", 2),
            (b"a\xFF", 2),
            // A whole character, then the start of another.
            ("😀".as_bytes(), 4),
            (b"\xF0\x9F\x98\x80\xF0", 4),
            (b"ab\xC3\xA9\xE2", 4),
            (b"ab\xC3\xA9\xE2\x82", 4),
        ];
        for (bytes, expected) in cases {
            assert_eq!(complete_prefix_len(bytes), *expected, "{bytes:?}");
        }
    }

    #[test]
    fn decode_prefix_keeps_the_longest_run_of_whole_characters_that_fits() {
        let cases: &[(&[u8], usize, &str, usize)] = &[
            (b"", 5, "", 0),
            ("héllo".as_bytes(), 0, "", 0),
            ("héllo".as_bytes(), 1, "h", 1),
            ("héllo".as_bytes(), 2, "h", 1),
            ("héllo".as_bytes(), 3, "hé", 3),
            ("héllo".as_bytes(), 6, "héllo", 6),
            ("héllo".as_bytes(), 60, "héllo", 6),
            ("€".as_bytes(), 2, "", 0),
            ("€".as_bytes(), 3, "€", 3),
            ("a€".as_bytes(), 3, "a", 1),
            ("😀".as_bytes(), 3, "", 0),
            ("😀".as_bytes(), 4, "😀", 4),
            // An invalid byte is three bytes of text.
            (b"a\xFFb", 1, "a", 1),
            (b"a\xFFb", 3, "a", 1),
            (b"a\xFFb", 4, "a\u{FFFD}", 2),
            (b"a\xFFb", 5, "a\u{FFFD}b", 3),
            (b"ab\xFFcd", 2, "ab", 2),
            (b"ab\xFFcd", 6, "ab\u{FFFD}c", 4),
            (b"\xFF\xFF", 5, "\u{FFFD}", 1),
            (b"\xFF\xFF", 6, "\u{FFFD}\u{FFFD}", 2),
            // A character cut short is one invalid sequence of its bytes.
            (b"\xF0\x9F\x98", 2, "", 0),
            (b"\xF0\x9F\x98", 3, "\u{FFFD}", 3),
            (b"\xF0\x9F\x98z", 4, "\u{FFFD}z", 4),
        ];
        for (raw, budget, text, used) in cases {
            assert_eq!(
                decode_prefix(raw, *budget),
                ((*text).to_owned(), *used),
                "{raw:?} in {budget}"
            );
        }
    }

    #[test]
    fn decode_suffix_keeps_the_longest_run_of_whole_characters_that_fits() {
        let cases: &[(&[u8], usize, bool, &str, usize)] = &[
            (b"", 5, true, "", 0),
            (b"ab", 10, true, "ab", 2),
            ("héllo".as_bytes(), 0, true, "", 0),
            ("héllo".as_bytes(), 3, true, "llo", 3),
            // The cut falls inside `é`: it starts after it.
            ("héllo".as_bytes(), 4, true, "llo", 3),
            ("héllo".as_bytes(), 5, true, "éllo", 5),
            ("a€".as_bytes(), 2, true, "", 0),
            ("a€".as_bytes(), 3, true, "€", 3),
            ("😀😀".as_bytes(), 3, true, "", 0),
            ("😀😀".as_bytes(), 5, true, "😀", 4),
            ("😀😀".as_bytes(), 7, true, "😀", 4),
            ("😀😀".as_bytes(), 8, true, "😀😀", 8),
            // Leading continuation bytes: a character cut in half unless the run starts on a
            // boundary, where they are invalid bytes of their own.
            (b"\xA9llo", 6, true, "\u{FFFD}llo", 4),
            (b"\xA9llo", 6, false, "llo", 3),
            (b"\xA9llo", 4, true, "llo", 3),
            // Invalid bytes are three bytes of text: whole ones are dropped from the front.
            (b"\xFF\xFF\xFF", 9, true, "\u{FFFD}\u{FFFD}\u{FFFD}", 3),
            (b"\xFF\xFF\xFF", 6, true, "\u{FFFD}\u{FFFD}", 2),
            (b"\xFF\xFF\xFF", 5, true, "\u{FFFD}", 1),
            (b"\xFF\xFF\xFF", 2, true, "", 0),
            (b"a\xFFbc", 4, true, "bc", 2),
            (b"a\xFFbc", 5, true, "\u{FFFD}bc", 3),
            (b"\xFF\xE2\x82\xACb", 4, true, "€b", 4),
            (b"\xFF\xE2\x82\xACb", 7, true, "\u{FFFD}€b", 5),
            // A character cut short is one invalid sequence: kept or dropped whole.
            (b"\xF0\x9F\x98zz", 5, true, "\u{FFFD}zz", 5),
            (b"\xF0\x9F\x98zz", 4, true, "zz", 2),
        ];
        for (raw, budget, on_boundary, text, used) in cases {
            assert_eq!(
                decode_suffix(raw, *budget, *on_boundary),
                ((*text).to_owned(), *used),
                "{raw:?} in {budget} (on a boundary: {on_boundary})"
            );
        }
    }

    #[test]
    fn skip_to_boundary_finds_the_next_character_start() {
        // (bytes, at, starts_on_boundary, bytes to skip)
        let cases: &[(&[u8], usize, bool, usize)] = &[
            (b"abc", 1, false, 0),
            // Inside `é`, `€` and `😀`, after each of their bytes.
            ("xé".as_bytes(), 2, true, 1),
            ("x€".as_bytes(), 2, true, 2),
            ("x€".as_bytes(), 3, true, 1),
            ("x😀".as_bytes(), 2, true, 3),
            ("x😀".as_bytes(), 3, true, 2),
            ("x😀".as_bytes(), 4, true, 1),
            ("x😀y".as_bytes(), 5, true, 0),
            // Nothing known before `at`: leading continuation bytes may be a cut character.
            (b"\x80\x80a", 0, false, 2),
            (b"\x80\x80a", 0, true, 0),
            (b"\x80\x80\x80\x80a", 0, false, 3),
            // Three continuation bytes before `at`: no character reaches past them.
            (b"\x80\x80\x80\x80a", 3, false, 0),
            (b"\x80\x80\x80\x80a", 2, false, 2),
            (b"\x80\x80\x80\x80a", 2, true, 0),
            // A lead byte before `at` that its continuation bytes do not complete.
            (b"\xC3\x80\x80a", 2, true, 0),
            (b"\xFF\x80\x80a", 1, true, 0),
            (b"a\x80\x80b", 2, true, 0),
            // Far into the run: the three bytes before `at`, not the run's start, decide.
            (b"a\x80\x80\x80\x80b", 4, false, 0),
            ("aaaaaa€z".as_bytes(), 7, true, 2),
            ("aaaaaa€z".as_bytes(), 8, true, 1),
            // Invalid sequences between the lead byte and `at`, and one that runs past `at` to
            // the end.
            (b"aa\xE0\x80\x80z", 4, true, 0),
            (b"ab\xF0\x9F\x98", 3, true, 2),
        ];
        for (raw, at, on_boundary, expected) in cases {
            assert_eq!(
                skip_to_boundary(raw, *at, *on_boundary),
                *expected,
                "{raw:?} at {at} (on a boundary: {on_boundary})"
            );
        }
    }

    #[test]
    fn text_len_counts_each_invalid_sequence_as_one_replacement_character() {
        let cases: &[(&[u8], usize)] = &[
            (b"", 0),
            (b"abc", 3),
            ("é€😀".as_bytes(), 9),
            (b"\xFF", 3),
            (b"\xFF\xFF", 6),
            (b"a\xF0\x9F\x98", 4),
            (b"a\xF0\x9F\x98b", 5),
            (b"\xE0\x80", 6),
        ];
        for (raw, expected) in cases {
            assert_eq!(text_len(raw), *expected, "{raw:?}");
            assert_eq!(text_len(raw), String::from_utf8_lossy(raw).len(), "{raw:?}");
        }
    }

    #[test]
    fn text_len_counts_text_while_whole_and_bytes_once_outgrown() {
        let (mut c, _dir) = collector(10, 1000);
        assert_eq!(c.text_len(), 0);
        // Two invalid bytes are six bytes of text, `é` two.
        c.push(b"a\xFF\xFF");
        c.push("é".as_bytes());
        assert_eq!((c.total(), c.text_len()), (5, 9));
        // Outgrown: the byte count stands in for the text.
        c.push(&[0xFF; 8]);
        assert_eq!((c.total(), c.text_len()), (13, 13));
    }

    #[test]
    fn a_stream_shown_whole_counts_all_its_bytes_as_shown() {
        let (mut c, _dir) = collector(100, 1000);
        c.push(b"ab\xFFc");
        assert_eq!(
            c.finish(100),
            Collected {
                text: String::from("ab\u{FFFD}c"),
                total_bytes: 4,
                shown_bytes: 4,
                ..Collected::default()
            }
        );
    }

    #[test]
    fn a_read_at_the_end_of_the_stream_stays_there_and_names_the_spill_file() {
        let (mut c, _dir) = collector(10, 1000);
        c.push(&[b'x'; 30]);
        let path = c.spill_path().map(Path::to_path_buf);
        assert!(path.is_some());
        for offset in [30, 45] {
            assert_eq!(
                c.read_from(offset, 100, false),
                StreamRead {
                    next_offset: offset,
                    spill_path: path.clone(),
                    ..StreamRead::default()
                },
                "a read from {offset}"
            );
        }
    }

    #[test]
    fn a_spill_cap_of_zero_still_gives_a_cut_stream_an_empty_file() {
        let (mut c, _dir) = collector(10, 0);
        c.push(&[b'x'; 30]);
        let out = c.finish(10);
        assert_eq!((out.spill_limit_bytes, out.spill_error), (Some(0), None));
        let path = out.spill_path.expect("a spill file, however empty");
        assert_eq!(std::fs::read(path).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn a_budget_that_runs_out_on_the_first_spill_stops_the_file_there_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let sink: Arc<dyn SpillSink> = Arc::new(Budgeted {
            dir: Temp(tempfile::tempdir_in(dir.path()).unwrap()),
            budget: 10,
            claimed: std::sync::Mutex::new(0),
        });
        let mut c = StreamCollector::new("stdout", 6, 10_000, Some(sink));
        let data: Vec<u8> = (0..20u8).map(|i| b'a' + i).collect();
        c.push(&data);
        let out = c.finish(6);
        assert_eq!(
            (out.spill_limit_bytes, out.spill_error),
            (
                Some(10),
                Some(String::from(
                    "the session's spill budget of 10 bytes is used up"
                ))
            )
        );
        assert_eq!(std::fs::read(out.spill_path.unwrap()).unwrap(), data[..10]);
    }
}

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
    /// repeated. Bytes before the run are `skipped_bytes`; `lost` names those of them the spill
    /// file does not hold (past its cap or budget, or all of them without a file), which
    /// memory does not keep for a later read either. While more bytes may come, a read whose
    /// newest bytes follow such a hole and may still be the rest of a character shows and
    /// skips nothing: `next_offset` stays `offset`.
    pub fn read_from(&self, offset: u64, max_bytes: usize, settled: bool) -> StreamRead {
        let total = self.total;
        let facts = self.spill_facts();
        let spill = StreamRead {
            spill_path: facts.spill_path,
            spill_limit_bytes: facts.spill_limit_bytes,
            spill_error: facts.spill_error,
            ..StreamRead::default()
        };
        if offset >= total {
            return StreamRead {
                next_offset: offset.max(total),
                ..spill
            };
        }
        let max_bytes = max_bytes.max(4) as u64;
        let window_start = offset.max(total.saturating_sub(max_bytes));
        // Bytes available nowhere (past the spill cap, after a spill failure) cannot be shown:
        // the read starts after them, and says its skip is lossy. The three bytes before the
        // window, when there are any, tell whether it starts inside a character.
        let (fetched_from, mut bytes) = self.bytes_from(window_start.saturating_sub(3).max(offset));
        // After a hole, fewer than three continuation bytes ending the stream may be the rest of
        // a character whose lead was lost and whose last bytes are still to come: no edge
        // between characters is known in them yet, so nothing can be shown or skipped.
        if !settled && fetched_from > offset && bytes.len() < 3 && bytes.iter().all(is_continuation)
        {
            return StreamRead {
                next_offset: offset,
                ..spill
            };
        }
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
        // The file holds the stream's first bytes; whatever was skipped beyond them is lost.
        let lost_from = offset.max(self.spilled_bytes());
        StreamRead {
            text,
            next_offset: end,
            skipped_bytes: skipped,
            lost: (lost_from < start).then_some(lost_from..start),
            ..spill
        }
    }

    /// The bytes the spill file holds, the stream's first ones (none without a file).
    fn spilled_bytes(&self) -> u64 {
        match &self.spill {
            Spill::Active { written, .. } => *written,
            _ => 0,
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
        // boundary itself. Otherwise `raw` begins with fewer than three continuation bytes
        // before `at`: they and the next ones may finish a character cut off before `raw`,
        // but only up to the third, after which every position is a boundary.
        return if at - look_from == 3 || starts_on_boundary {
            0
        } else {
            leading.min(3 - at)
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

/// Whether `byte` continues a character rather than starting one.
fn is_continuation(byte: &u8) -> bool {
    (*byte & 0xC0) == 0x80
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
mod tests;

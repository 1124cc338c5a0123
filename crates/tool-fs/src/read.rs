//! `read`: a page of a file's lines, streamed, so the last page of a huge file costs a scan
//! and a page of memory, never the file.

use crate::error::FsError;
use crate::guard::{ContentHash, Stamp};
use crate::options::FsLimits;
use crate::value::{ReadLine, ReadValue};
use crate::visible::InvisibleCounts;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// How far into a file the binary check looks.
const SNIFF_BYTES: usize = 8 * 1024;

/// Reads lines `offset..offset+limit` (1-based) of `path`; returns the value and the stamp of
/// the content scanned.
pub(crate) fn read_page(
    path: &Path,
    offset: Option<u64>,
    limit: Option<u64>,
    limits: &FsLimits,
) -> Result<(ReadValue, Stamp), FsError> {
    let file = match crate::open::regular(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(FsError::NotFound(crate::missing::not_found(path)));
        }
        Err(e) => return Err(FsError::io("cannot open", path, e)),
    };
    let metadata = file
        .metadata()
        .map_err(|e| FsError::io("cannot inspect", path, e))?;
    if metadata.is_dir() {
        return Err(FsError::IsDirectory(path.to_path_buf()));
    }
    if metadata.len() > limits.max_unpaged_file_bytes && offset.is_none() && limit.is_none() {
        return Err(FsError::TooLarge(format!(
            "{} is {} bytes, over the {} bytes a read without `offset` or `limit` takes; read it in pages (`offset`: 1, `limit`: {}), or search it with `grep`",
            path.display(),
            metadata.len(),
            limits.max_unpaged_file_bytes,
            limits.default_read_lines
        )));
    }
    let start = offset.unwrap_or(1);
    let wanted = limit.unwrap_or(limits.default_read_lines);
    let mut scan = Scan::new(start, wanted, limits);
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut sniffed = 0usize;
    loop {
        let chunk = reader
            .fill_buf()
            .map_err(|e| FsError::io("cannot read", path, e))?;
        if chunk.is_empty() {
            break;
        }
        if sniffed < SNIFF_BYTES {
            let head = &chunk[..chunk.len().min(SNIFF_BYTES - sniffed)];
            if head.contains(&0) {
                return Err(FsError::Binary {
                    path: path.to_path_buf(),
                    why: String::from("it holds NUL bytes"),
                });
            }
            sniffed += head.len();
        }
        let used = chunk.len();
        scan.feed(chunk);
        reader.consume(used);
    }
    scan.finish();
    if scan.invalid_utf8_early {
        return Err(FsError::Binary {
            path: path.to_path_buf(),
            why: String::from("its first bytes are not UTF-8"),
        });
    }
    let total_lines = scan.line;
    if start > 1 && start > total_lines {
        return Err(FsError::NotFound(format!(
            "`offset` {start} is past the end of {}, which has {total_lines} lines; read from `offset` 1 to {total_lines}",
            path.display()
        )));
    }
    let last_shown = scan
        .lines
        .last()
        .map_or(start.saturating_sub(1), |l| l.number);
    let next_offset = (last_shown < total_lines).then_some(last_shown + 1);
    let stamp = Stamp::new(&metadata, scan.hash.finish());
    let value = ReadValue {
        path: path.display().to_string(),
        offset: start,
        lines: scan.lines,
        total_lines,
        next_offset,
        byte_cap_reached: scan.byte_cap_reached,
        invisible: scan.invisible,
        crlf_lines: scan.crlf_lines,
    };
    Ok((value, stamp))
}

/// The state of one pass over the file.
struct Scan<'a> {
    limits: &'a FsLimits,
    start: u64,
    wanted: u64,
    /// Lines completed so far.
    line: u64,
    /// The bytes kept of the line being read (at most a cut line's worth).
    current: Vec<u8>,
    /// The characters of the line being read, all of them.
    current_chars: usize,
    lines: Vec<ReadLine>,
    shown_bytes: usize,
    byte_cap_reached: bool,
    invisible: InvisibleCounts,
    crlf_lines: u64,
    hash: ContentHash,
    bytes_seen: usize,
    invalid_utf8_early: bool,
    last_byte: Option<u8>,
}

impl<'a> Scan<'a> {
    fn new(start: u64, wanted: u64, limits: &'a FsLimits) -> Scan<'a> {
        Scan {
            limits,
            start,
            wanted,
            line: 0,
            current: Vec::new(),
            current_chars: 0,
            lines: Vec::new(),
            shown_bytes: 0,
            byte_cap_reached: false,
            invisible: InvisibleCounts::default(),
            crlf_lines: 0,
            hash: ContentHash::default(),
            bytes_seen: 0,
            invalid_utf8_early: false,
            last_byte: None,
        }
    }

    /// Whether the line being read is one to show.
    fn keeping(&self) -> bool {
        let number = self.line + 1;
        !self.byte_cap_reached && number >= self.start && number < self.start + self.wanted
    }

    fn feed(&mut self, mut chunk: &[u8]) {
        self.hash.update(chunk);
        if self.bytes_seen < SNIFF_BYTES {
            let head = &chunk[..chunk.len().min(SNIFF_BYTES - self.bytes_seen)];
            // A character cut by the sniff window's end is not an error.
            if let Err(e) = std::str::from_utf8(head)
                && e.error_len().is_some()
            {
                self.invalid_utf8_early = true;
            }
        }
        self.bytes_seen = self.bytes_seen.saturating_add(chunk.len());
        self.last_byte = chunk.last().copied().or(self.last_byte);
        while !chunk.is_empty() {
            let end = chunk.iter().position(|&b| b == b'\n');
            let (part, rest, complete) = match end {
                Some(i) => (&chunk[..i], &chunk[i + 1..], true),
                None => (chunk, &[][..], false),
            };
            if self.keeping() {
                // Four bytes a character at most, and one more for a CR before the LF.
                let room = (self.limits.max_line_chars * 4 + 1).saturating_sub(self.current.len());
                self.current
                    .extend_from_slice(&part[..part.len().min(room)]);
                self.current_chars += part.iter().filter(|&&b| (b & 0xC0) != 0x80).count();
            }
            if complete {
                self.end_line();
            }
            chunk = rest;
        }
    }

    fn finish(&mut self) {
        // A last line without a final newline is a line too.
        if self.last_byte.is_some_and(|b| b != b'\n') {
            self.end_line();
        }
    }

    fn end_line(&mut self) {
        if self.keeping() {
            let mut bytes = std::mem::take(&mut self.current);
            let mut chars = self.current_chars;
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
                chars -= 1;
                self.crlf_lines += 1;
            }
            let text = String::from_utf8_lossy(&bytes);
            let max = self.limits.max_line_chars;
            let (text, cut_from) = if chars > max {
                let cut: String = text.chars().take(max).collect();
                (cut, Some(chars as u64))
            } else {
                (text.into_owned(), None)
            };
            if self.shown_bytes + text.len() > self.limits.max_read_bytes && !self.lines.is_empty()
            {
                self.byte_cap_reached = true;
            } else {
                self.shown_bytes += text.len() + 1;
                self.invisible.add(&text);
                self.lines.push(ReadLine {
                    number: self.line + 1,
                    text,
                    cut_from_chars: cut_from,
                });
            }
        }
        self.current.clear();
        self.current_chars = 0;
        self.line += 1;
    }
}

/// Reads a whole file as UTF-8 text for `edit`, bounded by `max_bytes`.
pub(crate) fn text_of(path: &Path, bytes: Vec<u8>) -> Result<String, FsError> {
    if bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0) {
        return Err(FsError::Binary {
            path: path.to_path_buf(),
            why: String::from("it holds NUL bytes"),
        });
    }
    String::from_utf8(bytes).map_err(|_| FsError::Binary {
        path: path.to_path_buf(),
        why: String::from("it is not valid UTF-8"),
    })
}

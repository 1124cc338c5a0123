//! A reference model of lossy UTF-8 decoding for the window and collector property tests.
//!
//! A stream decodes to a sequence of units: a valid character (its own bytes) or a maximal
//! invalid sequence (one U+FFFD). Cutting a stream between two units and decoding the pieces
//! apart gives the same text as decoding it whole; cutting it anywhere else does not. So a
//! read or a window splits no character exactly when it starts and ends on unit edges.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use tool_bash::shell::Collected;

/// One unit of a decoded stream: raw bytes `start..end` and the text they decode to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    pub start: usize,
    pub end: usize,
    pub text: String,
}

/// The units of `bytes`, in order, covering it exactly.
pub fn units(bytes: &[u8]) -> Vec<Unit> {
    let mut out = Vec::new();
    let mut at = 0;
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            let len = c.len_utf8();
            out.push(Unit {
                start: at,
                end: at + len,
                text: c.to_string(),
            });
            at += len;
        }
        let invalid = chunk.invalid().len();
        if invalid > 0 {
            out.push(Unit {
                start: at,
                end: at + invalid,
                text: String::from('\u{FFFD}'),
            });
            at += invalid;
        }
    }
    out
}

/// The lossy decoding of `bytes`.
pub fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The decoded stream: its units and, for each raw position, whether a unit starts or ends
/// there.
pub struct Decoded {
    pub units: Vec<Unit>,
    edge: Vec<bool>,
}

impl Decoded {
    pub fn new(bytes: &[u8]) -> Decoded {
        let units = units(bytes);
        let mut edge = vec![false; bytes.len() + 1];
        edge[0] = true;
        for unit in &units {
            edge[unit.end] = true;
        }
        Decoded { units, edge }
    }

    /// Whether `at` falls between two units (or at either end).
    pub fn is_edge(&self, at: usize) -> bool {
        self.edge.get(at).copied().unwrap_or(false)
    }

    /// The text of the units in `start..end`, which must both be edges.
    pub fn text_between(&self, start: usize, end: usize) -> String {
        self.units
            .iter()
            .filter(|u| u.start >= start && u.end <= end)
            .map(|u| u.text.as_str())
            .collect()
    }

    /// The raw end of the leading units whose text is exactly `text`, if any.
    pub fn prefix_end(&self, text: &str) -> Option<usize> {
        let mut acc = String::new();
        let mut end = 0;
        for unit in &self.units {
            if acc.len() >= text.len() {
                break;
            }
            acc.push_str(&unit.text);
            end = unit.end;
        }
        (acc == text).then_some(end)
    }

    /// The raw start of the trailing units whose text is exactly `text`, if any.
    pub fn suffix_start(&self, text: &str, len: usize) -> Option<usize> {
        let mut parts = Vec::new();
        let mut size = 0;
        let mut start = len;
        for unit in self.units.iter().rev() {
            if size >= text.len() {
                break;
            }
            size += unit.text.len();
            parts.push(unit.text.as_str());
            start = unit.start;
        }
        parts.reverse();
        (parts.concat() == text).then_some(start)
    }

    /// The unit ending at `end`, if `end` is an edge other than 0.
    pub fn unit_ending_at(&self, end: usize) -> Option<&Unit> {
        self.units.iter().find(|u| u.end == end)
    }

    /// The unit starting at `start`, if `start` is an edge before the end.
    pub fn unit_starting_at(&self, start: usize) -> Option<&Unit> {
        self.units.iter().find(|u| u.start == start)
    }
}

/// The marker a window puts between its head and tail.
pub fn elision_marker(omitted: u64) -> String {
    format!("\n[… {omitted} bytes omitted …]\n")
}

/// Whether `bytes` (at most three) is the start of a character that more bytes could
/// complete, which is all a read may hold back while a stream is still being written.
pub fn is_incomplete_character(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && matches!(std::str::from_utf8(bytes), Err(e) if e.valid_up_to() == 0 && e.error_len().is_none())
}

/// Whether `byte` continues a character (`10xxxxxx`) rather than starting one.
pub fn is_continuation(byte: &u8) -> bool {
    (*byte & 0xC0) == 0x80
}

/// Where a foreground window showed a stream: the head's end and the tail's start.
#[derive(Debug, PartialEq, Eq)]
pub struct WindowCut {
    pub head_end: usize,
    pub tail_start: usize,
}

/// Checks a foreground window of `stream` cut to at most `budget` bytes of text: the whole
/// text when it fits; otherwise a head and a tail, each made of whole units of the stream,
/// around a marker counting the real bytes left out, and within the budget. Returns where it
/// cut (`None` when shown whole).
pub fn check_window(
    stream: &[u8],
    shown: &Collected,
    budget: usize,
) -> Result<Option<WindowCut>, TestCaseError> {
    let whole = lossy(stream);
    let total = stream.len() as u64;
    prop_assert_eq!(shown.total_bytes, total);
    if whole.len() <= budget {
        prop_assert_eq!(&shown.text, &whole, "a stream that fits is shown whole");
        prop_assert!(!shown.truncated);
        prop_assert_eq!(shown.shown_bytes, total);
        return Ok(None);
    }
    prop_assert!(shown.truncated, "a stream that does not fit is cut");
    prop_assert!(shown.shown_bytes < total);
    let marker = elision_marker(total - shown.shown_bytes);
    let Some((head, tail)) = shown.text.split_once(&marker) else {
        return Err(TestCaseError::fail(format!(
            "no marker {marker:?} counting the real bytes in {:?}",
            shown.text
        )));
    };
    prop_assert!(
        head.len() + tail.len() <= budget,
        "{} + {} > {budget}",
        head.len(),
        tail.len()
    );
    let decoded = Decoded::new(stream);
    let head_end = decoded.prefix_end(head).ok_or_else(|| {
        TestCaseError::fail(format!("the head {head:?} is not whole leading characters"))
    })?;
    let tail_start = decoded.suffix_start(tail, stream.len()).ok_or_else(|| {
        TestCaseError::fail(format!(
            "the tail {tail:?} is not whole trailing characters"
        ))
    })?;
    prop_assert!(head_end <= tail_start, "head and tail overlap");
    prop_assert_eq!(
        (head_end + (stream.len() - tail_start)) as u64,
        shown.shown_bytes,
        "shown bytes are the head's and the tail's raw bytes"
    );
    Ok(Some(WindowCut {
        head_end,
        tail_start,
    }))
}

/// Streams mixing what output really holds: ASCII, multi-byte characters, characters cut
/// short, stray continuation bytes, invalid bytes and arbitrary bytes.
pub fn stream(max_pieces: usize) -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        4 => prop::collection::vec(b'a'..=b'z', 1..40),
        2 => prop::sample::select(vec!["é", "€", "😀", "ж", "中"]).prop_map(|s| s.as_bytes().to_vec()),
        1 => (prop::sample::select(vec!["é", "€", "😀", "中"]), 1usize..4)
            .prop_map(|(s, cut)| s.as_bytes()[..cut.min(s.len() - 1)].to_vec()),
        1 => prop::collection::vec(0x80u8..=0xBF, 1..4),
        1 => prop::collection::vec(0xC0u8..=0xFF, 1..4),
        1 => prop::collection::vec(any::<u8>(), 1..20),
    ];
    prop::collection::vec(piece, 0..max_pieces).prop_map(|pieces| pieces.concat())
}

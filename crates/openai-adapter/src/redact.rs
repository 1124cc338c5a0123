//! Keeping the API key out of what the server sends back. Any run of [`MIN_RUN`] or more
//! consecutive characters of the key (the whole key, when it is shorter) is replaced by
//! [`REDACTED`]: a quoted key, a key cut short by a server or by clipping, and a key's tail
//! all disappear. Text is redacted before it is clipped, so a cut can never leave a piece of
//! the key behind, and streamed text is redacted across its deltas. Letters match whatever
//! their case (an upper-cased key is the key). Text that may hold JSON — a tool call's
//! arguments, a malformed data line, an error body — is also redacted in its decoded form
//! ([`Redactor::redact_escaped`]): a key written with `\uXXXX` escapes is the key too.

use std::fmt;
use std::sync::Arc;

/// What a run of the key becomes.
pub(crate) const REDACTED: &str = "<redacted>";

/// The shortest run of the key's characters that is redacted: shorter runs are ordinary text
/// too often to remove, and too short to be worth anything.
pub(crate) const MIN_RUN: usize = 8;

/// The redaction of one key; cheap to clone. [`Redactor::none`] leaves text as it is.
#[derive(Clone, Default)]
pub(crate) struct Redactor(Option<Arc<KeyIndex>>);

/// The key's bytes and where each byte value starts a character of it.
struct KeyIndex {
    key: String,
    /// For each byte value (ASCII letters lower-cased), the offsets in `key` of the
    /// characters that begin with it.
    starts: Vec<Vec<usize>>,
    /// [`MIN_RUN`] characters, or the key's length when that is shorter.
    min_run: usize,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Redactor(<redacted>)")
    }
}

/// A run of the key found at one position of a text.
struct Run {
    /// Its length in bytes.
    bytes: usize,
    /// Its length in characters.
    chars: usize,
    /// It reaches the end of the text and the key goes on: more text may lengthen it.
    open: bool,
}

impl Redactor {
    /// A redactor that changes nothing.
    pub(crate) fn none() -> Redactor {
        Redactor(None)
    }

    /// The redactor of `key`; an empty key redacts nothing.
    pub(crate) fn new(key: &str) -> Redactor {
        if key.is_empty() {
            return Redactor::none();
        }
        let mut starts = vec![Vec::new(); 256];
        for (offset, _) in key.char_indices() {
            starts[usize::from(key.as_bytes()[offset].to_ascii_lowercase())].push(offset);
        }
        Redactor(Some(Arc::new(KeyIndex {
            key: key.to_owned(),
            starts,
            min_run: key.chars().count().min(MIN_RUN),
        })))
    }

    /// `text` with every run of the key replaced.
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut stream = self.stream();
        let mut out = stream.push(text);
        out.push_str(&stream.finish());
        out
    }

    /// `text` redacted (escapes included, see [`Redactor::redact_escaped`]), then clipped to
    /// `limit` characters (see [`clip`]).
    pub(crate) fn clip(&self, text: &str, limit: usize) -> String {
        clip(&self.redact_escaped(text), limit)
    }

    /// `text`, which may hold JSON, with every run of the key redacted in its raw form and
    /// in its decoded form. A quoted string whose decoded value holds a run becomes the JSON
    /// string of that value redacted (so valid JSON stays valid, keys and values alike); then
    /// the raw text is redacted; and if decoding the escapes of what is left still shows a run
    /// (an escape outside a string, a string the scan could not delimit), the whole text
    /// becomes [`REDACTED`]: nothing that decodes to the key goes out.
    pub(crate) fn redact_escaped(&self, text: &str) -> String {
        if self.0.is_none() || !text.contains('\\') {
            return self.redact(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut at = 0;
        while let Some(quote) = text[at..].find('"') {
            let start = at + quote;
            let end = string_end(text.as_bytes(), start + 1);
            let inner_end = if end > start + 1 && text.as_bytes()[end - 1] == b'"' {
                end - 1
            } else {
                end
            };
            let inner = &text[start + 1..inner_end];
            if inner.contains('\\') {
                let value = unescape(inner);
                let redacted = self.redact(&value);
                if redacted != value {
                    out.push_str(&text[copied..start]);
                    out.push_str(&quoted(&redacted));
                    copied = end;
                }
            }
            at = end;
        }
        out.push_str(&text[copied..]);
        let out = self.redact(&out);
        let value = unescape(&out);
        if self.redact(&value) != value {
            return REDACTED.to_owned();
        }
        out
    }

    /// A redaction of text that arrives in pieces.
    pub(crate) fn stream(&self) -> RedactingStream {
        RedactingStream {
            redactor: self.clone(),
            held: String::new(),
        }
    }
}

impl KeyIndex {
    /// The longest run of the key that starts at byte `at` of `text` (a character boundary).
    fn run_at(&self, text: &str, at: usize) -> Run {
        let rest = &text.as_bytes()[at..];
        let key = self.key.as_bytes();
        let mut best = 0;
        let mut open = false;
        for &offset in &self.starts[usize::from(rest[0].to_ascii_lowercase())] {
            let length = rest
                .iter()
                .zip(&key[offset..])
                .take_while(|(a, b)| a.eq_ignore_ascii_case(b))
                .count();
            open |= length == rest.len() && offset + length < key.len();
            best = best.max(length);
        }
        // Equal bytes of two valid texts end on a character boundary unless the run stops
        // inside a character; such a character is not part of the run.
        while !text.is_char_boundary(at + best) {
            best -= 1;
        }
        Run {
            bytes: best,
            chars: text[at..at + best].chars().count(),
            open,
        }
    }
}

/// Redacts text that arrives in pieces (a stream's deltas): what might be the start of a run
/// of the key is held back until the next piece shows whether it is one, so a key split
/// across deltas is caught. At most the key's length is ever held.
#[derive(Default)]
pub(crate) struct RedactingStream {
    redactor: Redactor,
    held: String,
}

impl fmt::Debug for RedactingStream {
    // What is held may be the start of the key: only its length shows.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedactingStream")
            .field("held_bytes", &self.held.len())
            .finish()
    }
}

impl RedactingStream {
    /// The redacted text of `piece` that can go out now.
    pub(crate) fn push(&mut self, piece: &str) -> String {
        let mut text = std::mem::take(&mut self.held);
        text.push_str(piece);
        self.scan(text, false)
    }

    /// The rest, at the end of the text.
    pub(crate) fn finish(&mut self) -> String {
        let text = std::mem::take(&mut self.held);
        self.scan(text, true)
    }

    fn scan(&mut self, text: String, last: bool) -> String {
        let Some(index) = self.redactor.0.as_deref() else {
            return text;
        };
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut at = 0;
        while let Some(c) = text[at..].chars().next() {
            let run = index.run_at(&text, at);
            if run.open && !last {
                out.push_str(&text[copied..at]);
                self.held = text[at..].to_owned();
                return out;
            }
            if run.chars >= index.min_run {
                out.push_str(&text[copied..at]);
                out.push_str(REDACTED);
                at += run.bytes;
                copied = at;
            } else {
                at += c.len_utf8();
            }
        }
        out.push_str(&text[copied..]);
        out
    }
}

/// Where the JSON string whose content starts at `from` ends: after its closing quote, or at
/// the end of `line` when it is not closed. Always a character boundary: a quote is never part
/// of a multi-byte character.
fn string_end(line: &[u8], from: usize) -> usize {
    let mut at = from;
    while at < line.len() {
        match line[at] {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    line.len()
}

/// `text` as the JSON string of its value, quotes included.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("\"{REDACTED}\""))
}

/// `text` with its JSON escapes decoded, leniently: an escape that is not one stays as it is,
/// and a lone surrogate becomes U+FFFD.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let simple = match chars.peek().map(|&(_, next)| next) {
            Some('"') => Some('"'),
            Some('\\') => Some('\\'),
            Some('/') => Some('/'),
            Some('b') => Some('\u{8}'),
            Some('f') => Some('\u{c}'),
            Some('n') => Some('\n'),
            Some('r') => Some('\r'),
            Some('t') => Some('\t'),
            _ => None,
        };
        if let Some(decoded) = simple {
            chars.next();
            out.push(decoded);
            continue;
        }
        let Some(unit) = hex4(text, at + 2) else {
            out.push(c);
            continue;
        };
        // Skips the `u` and its four digits.
        for _ in 0..5 {
            chars.next();
        }
        let low = (0xD800..0xDC00)
            .contains(&unit)
            .then(|| text.get(at + 6..at + 8).filter(|s| *s == "\\u"))
            .flatten()
            .and_then(|_| hex4(text, at + 8))
            .filter(|low| (0xDC00..0xE000).contains(low));
        let code = match low {
            Some(low) => {
                for _ in 0..6 {
                    chars.next();
                }
                0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
            }
            None => unit,
        };
        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
    }
    out
}

/// The four hex digits of a `\u` escape starting at byte `at` (after its `\u`).
fn hex4(text: &str, at: usize) -> Option<u32> {
    if text.as_bytes().get(at - 1) != Some(&b'u') {
        return None;
    }
    let digits = text.get(at..at + 4)?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// At most `limit` characters of `text`, with an ellipsis when cut.
pub(crate) fn clip(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const KEY: &str = "sk-7Qx2vLp9Wm4Zt8Rb3Nc6Yd1Hf5Jg0Ka";

    /// `text` redacted whole and in every split into two pieces gives `expected`.
    fn check(key: &str, text: &str, expected: &str) {
        let redactor = Redactor::new(key);
        assert_eq!(redactor.redact(text), expected, "whole: {text:?}");
        for (at, _) in text.char_indices().skip(1) {
            let mut stream = redactor.stream();
            let mut out = stream.push(&text[..at]);
            out.push_str(&stream.push(&text[at..]));
            out.push_str(&stream.finish());
            assert_eq!(out, expected, "split at {at}: {text:?}");
        }
    }

    #[test]
    fn every_run_of_eight_or_more_characters_of_the_key_is_redacted_and_nothing_else() {
        for (text, expected) in [
            (format!("key {KEY} here"), "key <redacted> here".to_owned()),
            (format!("cut: {}", &KEY[..8]), "cut: <redacted>".to_owned()),
            (
                format!("cut: {}…", &KEY[..33]),
                "cut: <redacted>…".to_owned(),
            ),
            (format!("{}!", &KEY[..7]), format!("{}!", &KEY[..7])),
            (format!("tail {}", &KEY[20..]), "tail <redacted>".to_owned()),
            (
                format!("mid {} end", &KEY[5..17]),
                "mid <redacted> end".to_owned(),
            ),
            (format!("{KEY}{KEY}"), "<redacted><redacted>".to_owned()),
            (
                "Hello, world: nothing of the key's here.".to_owned(),
                "Hello, world: nothing of the key's here.".to_owned(),
            ),
            (
                "sk-sk-sk-7Qx2vLp9".to_owned(),
                "sk-sk-<redacted>".to_owned(),
            ),
            ("日本語 ok".to_owned(), "日本語 ok".to_owned()),
        ] {
            check(KEY, &text, &expected);
        }
    }

    #[test]
    fn a_short_key_is_redacted_whole_and_a_key_of_other_scripts_by_characters() {
        check("abc", "xabcx abx", "x<redacted>x abx");
        check("ключ-секрет-ДА", "это ключ-секрет-Д.", "это <redacted>.");
        check("", "anything", "anything");
    }

    #[test]
    fn a_key_spread_over_many_pieces_is_redacted_and_the_rest_goes_out_at_once() {
        let redactor = Redactor::new(KEY);
        let mut stream = redactor.stream();
        let mut out = stream.push("Hello. ");
        assert_eq!(out, "Hello. ");
        for piece in KEY.as_bytes().chunks(3) {
            out.push_str(&stream.push(std::str::from_utf8(piece).unwrap_or_default()));
        }
        out.push_str(&stream.push(" bye"));
        out.push_str(&stream.finish());
        assert_eq!(out, "Hello. <redacted> bye");
    }

    #[test]
    fn a_key_in_another_case_or_written_with_json_escapes_is_redacted() {
        check(KEY, &KEY.to_uppercase(), "<redacted>");
        check(
            KEY,
            &format!("x {} y", KEY.to_lowercase()),
            "x <redacted> y",
        );
        let redactor = Redactor::new(KEY);
        let escaped: String = KEY
            .chars()
            .enumerate()
            .map(|(n, c)| match n % 5 {
                4 => format!("\\u{:04X}", u32::from(c)),
                _ => c.to_string(),
            })
            .collect();
        for (text, expected) in [
            (
                format!(r#"{{"command":"echo {escaped}","{escaped}":"\n"}}"#),
                r#"{"command":"echo <redacted>","<redacted>":"\n"}"#.to_owned(),
            ),
            // Not JSON: an escape outside a string, an unterminated string.
            (format!("key={escaped}"), REDACTED.to_owned()),
            (
                format!(r#"{{"a":"{escaped}"#),
                r#"{"a":"<redacted>""#.to_owned(),
            ),
            // Escapes that hide nothing stay as they are.
            (
                r#"{"a":"\u0041\ud83d\ude00\q"}"#.to_owned(),
                r#"{"a":"\u0041\ud83d\ude00\q"}"#.to_owned(),
            ),
        ] {
            assert_eq!(redactor.redact_escaped(&text), expected, "{text}");
        }
        assert_eq!(
            unescape(r"\ud83d\ude00 \ud83d \u00e9\t\x"),
            "😀 \u{fffd} é\t\\x"
        );
    }

    #[test]
    fn redaction_comes_before_the_clip() {
        let text = format!("{}{KEY}", "x".repeat(190));
        assert_eq!(
            Redactor::new(KEY).clip(&text, 200),
            format!("{}<redacted>", "x".repeat(190))
        );
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(clip("abc", 3), "abc");
    }
}

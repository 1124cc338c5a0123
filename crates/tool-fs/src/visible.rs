//! Characters that look like others: made visible in the model's text, counted in values.
//!
//! A no-break space looks like a space, a zero-width character like nothing, a lone carriage
//! return like nothing until a terminal obeys it. An edit whose `old_string` was typed from a
//! view that hid them fails; so `read` shows each as a token (`⟨U+00A0⟩`, `⟨CR⟩`) and counts
//! them, and its text says the real characters must be typed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How many look-alike characters the shown lines hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::schema::without_descriptions)]
pub struct InvisibleCounts {
    /// No-break spaces (U+00A0, U+202F, U+2007).
    pub no_break_spaces: u64,
    /// Zero-width characters (U+200B, U+200C, U+200D, U+2060, U+FEFF).
    pub zero_width: u64,
    /// Carriage returns not followed by a line feed.
    pub lone_carriage_returns: u64,
}

impl InvisibleCounts {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.no_break_spaces == 0 && self.zero_width == 0 && self.lone_carriage_returns == 0
    }

    /// Counts the look-alikes of `line` (a line without its ending).
    pub(crate) fn add(&mut self, line: &str) {
        for c in line.chars() {
            match kind(c) {
                Some(Kind::NoBreak) => self.no_break_spaces += 1,
                Some(Kind::ZeroWidth) => self.zero_width += 1,
                Some(Kind::Cr) => self.lone_carriage_returns += 1,
                None => {}
            }
        }
    }
}

enum Kind {
    NoBreak,
    ZeroWidth,
    Cr,
}

fn kind(c: char) -> Option<Kind> {
    match c {
        '\u{a0}' | '\u{202f}' | '\u{2007}' => Some(Kind::NoBreak),
        '\u{200b}' | '\u{200c}' | '\u{200d}' | '\u{2060}' | '\u{feff}' => Some(Kind::ZeroWidth),
        '\r' => Some(Kind::Cr),
        _ => None,
    }
}

/// `line` with each look-alike shown as its token; tabs stay tabs.
pub(crate) fn make_visible(line: &str) -> String {
    let mut shown = String::with_capacity(line.len());
    for c in line.chars() {
        match kind(c) {
            Some(Kind::Cr) => shown.push_str("⟨CR⟩"),
            Some(_) => shown.push_str(&format!("⟨U+{:04X}⟩", u32::from(c))),
            None => shown.push(c),
        }
    }
    shown
}

/// How a character is named in an error about where two texts differ.
pub(crate) fn describe(c: Option<char>) -> String {
    match c {
        None => String::from("the end of the text"),
        Some('\t') => String::from("a tab"),
        Some(' ') => String::from("a space"),
        Some('\n') => String::from("a line break"),
        Some('\r') => String::from("a carriage return (CR, as in a CRLF line ending)"),
        Some(c) if matches!(kind(c), Some(Kind::NoBreak)) => {
            format!("a no-break space (U+{:04X})", u32::from(c))
        }
        Some(c) if matches!(kind(c), Some(Kind::ZeroWidth)) => {
            format!("a zero-width character (U+{:04X})", u32::from(c))
        }
        Some(c) => format!("`{c}`"),
    }
}

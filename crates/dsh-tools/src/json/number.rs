//! JSON numbers kept as their text, and their comparison by value.
//!
//! A [`JsonNumber`] is the text a number was written with; [`Decimal`] decodes that text into
//! sign, digits and exponent, so numbers compare by mathematical value ([`numbers_equal`],
//! [`is_integer`]) whatever their spelling.

use serde_json::Number;
use std::cmp::Ordering;
use std::fmt;

/// A JSON number kept as the text it was written with (`0.10` stays `0.10`).
///
/// Equality of two `JsonNumber`s is textual; [`numbers_equal`] compares by value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct JsonNumber(pub(super) NumberText);

/// The longest number text kept in place rather than on the heap: every `i64` and `u64`, and
/// the decimals arguments usually carry, fit.
pub(super) const INLINE_NUMBER: usize = 22;

/// A number's text. Short text is kept in place: a call's arguments are parsed once per call,
/// and a heap allocation per number was a good part of that. Text of up to
/// [`INLINE_NUMBER`] bytes is always inline (and zero-padded), so the derived equality and
/// hash are those of the text.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) enum NumberText {
    Inline { len: u8, bytes: [u8; INLINE_NUMBER] },
    Heap(Box<str>),
}

impl NumberText {
    pub(super) fn new(text: &str) -> NumberText {
        match u8::try_from(text.len()) {
            Ok(len) if text.len() <= INLINE_NUMBER => {
                let mut bytes = [0; INLINE_NUMBER];
                bytes[..text.len()].copy_from_slice(text.as_bytes());
                NumberText::Inline { len, bytes }
            }
            _ => NumberText::Heap(text.into()),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // The bytes were copied from a `str` whole, so they are UTF-8; the fallback is
            // unreachable.
            NumberText::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            NumberText::Heap(text) => text,
        }
    }
}

impl fmt::Debug for NumberText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}
impl JsonNumber {
    /// The number's text, exactly as written.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Parses a number's text; `None` for text that is not a JSON number.
    pub fn parse(text: &str) -> Option<JsonNumber> {
        Decimal::parse(text).map(|_| JsonNumber(NumberText::new(text)))
    }

    /// The number as a `u64`, when it is written as plain digits within range.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_str().parse().ok()
    }

    /// The number as an `i64`, when it is written as plain digits within range.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_str().parse().ok()
    }

    /// The nearest `f64` (infinite beyond `f64`'s range).
    pub fn as_f64(&self) -> f64 {
        // Every JSON number is valid `f64` syntax; the fallback is unreachable.
        self.as_str().parse().unwrap_or(f64::NAN)
    }

    /// The nearest `serde_json::Number`: integers exactly when they fit `u64`/`i64`, other
    /// numbers as the nearest finite `f64`; `None` beyond `f64`'s range.
    pub fn to_number(&self) -> Option<Number> {
        if let Some(u) = self.as_u64() {
            return Some(Number::from(u));
        }
        if let Some(i) = self.as_i64() {
            return Some(Number::from(i));
        }
        Number::from_f64(self.as_f64())
    }
}

impl fmt::Display for JsonNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&Number> for JsonNumber {
    fn from(number: &Number) -> JsonNumber {
        JsonNumber(NumberText::new(&number.to_string()))
    }
}

impl From<u64> for JsonNumber {
    fn from(n: u64) -> JsonNumber {
        JsonNumber(NumberText::new(&n.to_string()))
    }
}

impl From<i64> for JsonNumber {
    fn from(n: i64) -> JsonNumber {
        JsonNumber(NumberText::new(&n.to_string()))
    }
}

/// A JSON number decoded into sign, significant digits and a decimal exponent.
///
/// The value is `(-1)^negative × digits × 10^exponent`; `digits` has no leading or trailing
/// zeros, and zero is represented by empty `digits` (its sign is ignored, so `-0 == 0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    exponent: i64,
}

impl Decimal {
    /// Decodes a JSON number's text. Returns `None` for text that is not a JSON number.
    pub(crate) fn parse(text: &str) -> Option<Decimal> {
        let bytes = text.as_bytes();
        let mut i = 0;
        let negative = bytes.first() == Some(&b'-');
        if negative {
            i += 1;
        }
        let mut digits = Vec::new();
        let mut exponent: i64 = 0;
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            digits.push(bytes[i] - b'0');
            i += 1;
        }
        if i == start {
            return None;
        }
        if i < bytes.len() && bytes[i] == b'.' {
            i += 1;
            let frac_start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                digits.push(bytes[i] - b'0');
                exponent -= 1;
                i += 1;
            }
            if i == frac_start {
                return None;
            }
        }
        if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
            i += 1;
            let mut exp_negative = false;
            if i < bytes.len() && (bytes[i] == b'+' || bytes[i] == b'-') {
                exp_negative = bytes[i] == b'-';
                i += 1;
            }
            let exp_start = i;
            let mut exp: i64 = 0;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                // Saturate: an exponent beyond i64 is astronomically out of any range we compare.
                exp = exp
                    .saturating_mul(10)
                    .saturating_add(i64::from(bytes[i] - b'0'));
                i += 1;
            }
            if i == exp_start {
                return None;
            }
            exponent = exponent.saturating_add(if exp_negative { -exp } else { exp });
        }
        if i != bytes.len() {
            return None;
        }
        let first_nonzero = digits.iter().position(|d| *d != 0);
        let Some(first) = first_nonzero else {
            return Some(Decimal {
                negative: false,
                digits: Vec::new(),
                exponent: 0,
            });
        };
        digits.drain(..first);
        while digits.last() == Some(&0) {
            digits.pop();
            exponent = exponent.saturating_add(1);
        }
        Some(Decimal {
            negative,
            digits,
            exponent,
        })
    }

    /// Whether the number has no fractional part (`1.0`, `1e2` and `2^64+1` are integers).
    pub(crate) fn is_integer(&self) -> bool {
        self.digits.is_empty() || self.exponent >= 0
    }

    /// A whole number as plain digits (`-0` and `0.0` are `0`); `None` for a fraction or for
    /// more than 39 digits (beyond every integer type serde reads).
    pub(super) fn plain_integer(&self) -> Option<String> {
        if !self.is_integer() {
            return None;
        }
        if self.digits.is_empty() {
            return Some(String::from("0"));
        }
        let zeros = usize::try_from(self.exponent).ok()?;
        if self.digits.len().saturating_add(zeros) > 39 {
            return None;
        }
        let mut text = String::with_capacity(self.digits.len() + zeros + 1);
        if self.negative {
            text.push('-');
        }
        text.extend(self.digits.iter().map(|d| char::from(b'0' + d)));
        text.extend(std::iter::repeat_n('0', zeros));
        Some(text)
    }

    fn magnitude_cmp(&self, other: &Decimal) -> Ordering {
        // Compare by the position of the most significant digit, then digit by digit.
        let self_top = self.exponent.saturating_add(self.digits.len() as i64);
        let other_top = other.exponent.saturating_add(other.digits.len() as i64);
        self_top
            .cmp(&other_top)
            .then_with(|| self.digits.cmp(&other.digits))
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        match (self.digits.is_empty(), other.digits.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => {
                return if other.negative {
                    Ordering::Greater
                } else {
                    Ordering::Less
                };
            }
            (false, true) => {
                return if self.negative {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
            }
            (false, false) => {}
        }
        match (self.negative, other.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.magnitude_cmp(other),
            (true, true) => other.magnitude_cmp(self),
        }
    }
}

fn decimal(number: &JsonNumber) -> Option<Decimal> {
    Decimal::parse(number.as_str())
}

/// Whether a JSON number is mathematically an integer (`1.0` and `2^64+1` are; `0.5` is not).
pub fn is_integer(number: &JsonNumber) -> bool {
    let text = number.as_str();
    // The common spelling needs no parsing: plain digits are an integer.
    if !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        return true;
    }
    decimal(number).is_some_and(|d| d.is_integer())
}

/// Whether two JSON numbers denote the same value, whatever their spelling.
pub fn numbers_equal(a: &JsonNumber, b: &JsonNumber) -> bool {
    if a.as_str() == b.as_str() {
        return true;
    }
    match (decimal(a), decimal(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

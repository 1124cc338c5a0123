//! The bound on a written log line: an event whose JSON line would be longer than
//! [`MAX_LINE_BYTES`] is never written as it is, since no reader could read it back. Its
//! longest strings are cut to fit, each ending in a note saying how many bytes went; an event
//! that cannot be made to fit that way (its bulk is numbers, keys or structure) is written as
//! an `error` event ([`LOG_LINE_TOO_LONG`]) naming its type and size.

use super::MAX_LINE_BYTES;
use crate::event::{EventRecord, SessionEvent};
use dsh_tools::json::JsonValue;

/// The `error` code of an event left out of the log because no cut could make it fit a line.
pub const LOG_LINE_TOO_LONG: &str = "LOG_LINE_TOO_LONG";

/// The line `record` is written as (without its newline): at most [`MAX_LINE_BYTES`] bytes.
pub(crate) fn log_line(record: &EventRecord) -> String {
    fit(record, MAX_LINE_BYTES)
}

/// The note that ends a text cut to fit a line of `limit` bytes.
fn cut_note(dropped: usize, limit: usize) -> String {
    format!("… [{dropped} bytes cut here: a session log line holds at most {limit} bytes]")
}

/// `record` as a line of at most `limit` bytes.
fn fit(record: &EventRecord, limit: usize) -> String {
    let line = record.to_json_line();
    if line.len() <= limit {
        return line;
    }
    let kind = record.event.kind();
    if let Some(cut) = cut_strings(&line, limit)
        && cut.len() <= limit
        && EventRecord::from_json_line(&cut).is_ok()
    {
        tracing::warn!(
            event = kind,
            bytes = line.len(),
            limit,
            "an event too long for a log line: its longest texts were cut to fit"
        );
        return cut;
    }
    tracing::warn!(
        event = kind,
        bytes = line.len(),
        limit,
        "an event too long for a log line, and no cut of its texts fits: recorded as an error"
    );
    EventRecord {
        seq: record.seq,
        ts: record.ts.clone(),
        event: SessionEvent::Error {
            message: format!(
                "a {kind} event of {} bytes was left out of the log: a session log line holds \
                 at most {limit} bytes, and cutting its texts could not make it fit",
                line.len()
            ),
            code: Some(LOG_LINE_TOO_LONG.to_owned()),
        },
    }
    .to_json_line()
}

/// `line` with its longest strings cut, each ending in a [`cut_note`], so that it loses at
/// least its excess over `limit`; `None` when its strings cannot give that much. The plan is
/// made on the strings' escaped lengths (what they take in the line), and the note needs no
/// escaping, so one plan is enough.
fn cut_strings(line: &str, limit: usize) -> Option<String> {
    let mut value = JsonValue::parse(line).ok()?;
    let mut lengths = Vec::new();
    string_lengths(&value, &mut lengths);
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
    // How many escaped bytes each string keeps at most, by its position in document order.
    let mut keep: Vec<Option<usize>> = vec![None; lengths.len()];
    let mut excess = line.len() - limit;
    for i in order {
        if excess == 0 {
            break;
        }
        let len = lengths[i];
        // The longest the note can be: it never tells of more bytes than the string has.
        let note = cut_note(len, limit).len();
        if len <= note {
            break;
        }
        let dropped = (excess + note).min(len);
        keep[i] = Some(len - dropped);
        excess -= (dropped - note).min(excess);
    }
    if excess > 0 {
        return None;
    }
    let mut next = 0;
    cut(&mut value, &keep, &mut next, limit);
    Some(value.to_string())
}

/// The bytes `c` takes in a JSON string as `serde_json` writes it.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
        '\0'..='\u{1f}' => 6,
        _ => c.len_utf8(),
    }
}

/// The escaped lengths of the strings in `value`, in document order.
fn string_lengths(value: &JsonValue, out: &mut Vec<usize>) {
    match value {
        JsonValue::String(text) => out.push(text.chars().map(escaped_len).sum()),
        JsonValue::Array(items) => items.iter().for_each(|item| string_lengths(item, out)),
        JsonValue::Object(object) => object.iter().for_each(|(_, v)| string_lengths(v, out)),
        _ => {}
    }
}

/// Cuts the strings of `value` as `keep` says (the `next`-th string in document order keeps
/// the characters that take at most `keep[next]` escaped bytes, or all of them).
fn cut(value: &mut JsonValue, keep: &[Option<usize>], next: &mut usize, limit: usize) {
    match value {
        JsonValue::String(text) => {
            if let Some(Some(budget)) = keep.get(*next).copied() {
                let mut spent = 0;
                let mut kept = 0;
                for c in text.chars() {
                    spent += escaped_len(c);
                    if spent > budget {
                        break;
                    }
                    kept += c.len_utf8();
                }
                let dropped = text.len() - kept;
                text.truncate(kept);
                text.push_str(&cut_note(dropped, limit));
            }
            *next += 1;
        }
        JsonValue::Array(items) => items
            .iter_mut()
            .for_each(|item| cut(item, keep, next, limit)),
        JsonValue::Object(object) => {
            let keys: Vec<String> = object.keys().cloned().collect();
            for key in keys {
                if let Some(v) = object.get_mut(&key) {
                    cut(v, keep, next, limit);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AssistantToolCall;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    const LIMIT: usize = 400;

    fn record(event: SessionEvent) -> EventRecord {
        EventRecord {
            seq: 7,
            ts: String::from("2026-01-01T00:00:00.000Z"),
            event,
        }
    }

    /// Fits `event` in a line of [`LIMIT`] bytes and reads it back.
    fn fitted(event: SessionEvent) -> (String, SessionEvent) {
        let line = fit(&record(event), LIMIT);
        assert!(line.len() <= LIMIT, "{} bytes: {line}", line.len());
        let back = EventRecord::from_json_line(&line).unwrap();
        assert_eq!(
            (back.seq, back.ts.as_str()),
            (7, "2026-01-01T00:00:00.000Z")
        );
        (line, back.event)
    }

    /// The text `text` becomes when it keeps its first `kept` bytes.
    fn kept(text: &str, kept: usize) -> String {
        format!("{}{}", &text[..kept], cut_note(text.len() - kept, LIMIT))
    }

    #[test]
    fn a_line_that_fits_is_written_as_it_is() {
        let event = SessionEvent::UserMessage {
            content: "hi".into(),
        };
        assert_eq!(
            fit(&record(event.clone()), LIMIT),
            record(event).to_json_line()
        );
    }

    #[test]
    fn the_longest_text_is_cut_just_enough_and_says_how_much_went() {
        let text = "x".repeat(1000);
        let (line, event) = fitted(SessionEvent::AssistantMessage {
            text: text.clone(),
            reasoning: Some("short".into()),
            tool_calls: vec![],
        });
        let SessionEvent::AssistantMessage {
            text: cut,
            reasoning,
            ..
        } = event
        else {
            panic!("{line}");
        };
        assert_eq!(reasoning.as_deref(), Some("short"));
        let kept_bytes = cut.find('…').unwrap();
        assert_eq!(cut, kept(&text, kept_bytes));
        // Just enough: short of the limit by no more than the note's digits can differ.
        assert!(line.len() > LIMIT - 4, "{}", line.len());
    }

    #[test]
    fn escaped_and_multibyte_texts_are_cut_on_character_boundaries() {
        // Quotes escape to two bytes, `é` is two bytes, a control character six.
        for unit in ["\"", "é", "\u{1}", "日本"] {
            let text = unit.repeat(500);
            let (_, event) = fitted(SessionEvent::UserMessage {
                content: text.clone(),
            });
            let SessionEvent::UserMessage { content } = event else {
                panic!("{event:?}");
            };
            let kept_bytes = content.find('…').unwrap();
            assert!(kept_bytes > 0, "{unit:?}");
            assert_eq!(content, kept(&text, kept_bytes), "{unit:?}");
        }
    }

    #[test]
    fn several_long_texts_are_each_cut_when_one_is_not_enough() {
        let calls: Vec<AssistantToolCall> = (0..2)
            .map(|n| AssistantToolCall {
                call_id: format!("c{n}"),
                name: "bash".into(),
                arguments: "a".repeat(300),
            })
            .collect();
        let (_, event) = fitted(SessionEvent::AssistantMessage {
            text: String::new(),
            reasoning: None,
            tool_calls: calls,
        });
        let SessionEvent::AssistantMessage { tool_calls, .. } = event else {
            panic!("{event:?}");
        };
        let ids: Vec<&str> = tool_calls.iter().map(|c| c.call_id.as_str()).collect();
        assert_eq!(ids, vec!["c0", "c1"], "the structure stays");
        for call in &tool_calls {
            let kept_bytes = call.arguments.find('…').unwrap();
            assert_eq!(call.arguments, kept(&"a".repeat(300), kept_bytes));
        }
    }

    #[test]
    fn an_event_whose_bulk_is_not_text_becomes_an_error_naming_it() {
        let numbers: Vec<u32> = (0..200).collect();
        let (line, event) = fitted(SessionEvent::ToolCall {
            call_id: "c1".into(),
            name: "sum".into(),
            arguments: json!({ "numbers": numbers }),
        });
        let full = record(SessionEvent::ToolCall {
            call_id: "c1".into(),
            name: "sum".into(),
            arguments: json!({ "numbers": (0..200).collect::<Vec<u32>>() }),
        })
        .to_json_line();
        assert_eq!(
            event,
            SessionEvent::Error {
                message: format!(
                    "a tool/call event of {} bytes was left out of the log: a session log line \
                     holds at most {LIMIT} bytes, and cutting its texts could not make it fit",
                    full.len()
                ),
                code: Some(LOG_LINE_TOO_LONG.into()),
            },
            "{line}"
        );
    }
}

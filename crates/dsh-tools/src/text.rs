//! UTF-8-safe byte bounds for model-facing text.

/// The longest prefix of `text` that is at most `max` bytes and ends on a character boundary.
pub(crate) fn head_bytes(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

/// The longest suffix of `text` that is at most `max` bytes and starts on a character
/// boundary.
pub(crate) fn tail_bytes(text: &str, max: usize) -> &str {
    &text[text.ceil_char_boundary(text.len().saturating_sub(max))..]
}

/// Bounds `text` to `max` bytes keeping its end (the latest output), with a leading marker
/// that states how many bytes were left out. The marker counts against the bound.
pub(crate) fn bound_keeping_tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    // The marker's length depends on the omitted count; two passes settle it.
    let mut omitted = text.len().saturating_sub(max);
    for _ in 0..2 {
        let marker = format!("[{omitted} bytes omitted]\n");
        let room = max.saturating_sub(marker.len());
        let kept = tail_bytes(text, room);
        omitted = text.len() - kept.len();
    }
    let marker = format!("[{omitted} bytes omitted]\n");
    if marker.len() > max {
        return head_bytes(&marker, max).to_owned();
    }
    let kept = tail_bytes(text, max - marker.len());
    let marker = format!("[{} bytes omitted]\n", text.len() - kept.len());
    format!("{marker}{kept}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cuts_land_on_character_boundaries() {
        assert_eq!(head_bytes("héllo", 2), "h");
        assert_eq!(tail_bytes("héllo", 4), "llo");
        assert_eq!(head_bytes("abc", 10), "abc");
    }

    #[test]
    fn the_tail_is_kept_with_a_marker() {
        let text = "0123456789".repeat(10);
        let bounded = bound_keeping_tail(&text, 40);
        assert!(bounded.len() <= 40, "{bounded}");
        assert!(bounded.starts_with("["), "{bounded}");
        assert!(bounded.ends_with("6789"), "{bounded}");
        let omitted: usize = bounded[1..bounded.find(' ').unwrap()].parse().unwrap();
        let kept = bounded.split_once('\n').unwrap().1;
        assert_eq!(omitted + kept.len(), text.len());
    }

    proptest! {
        #[test]
        fn bounds_hold_for_any_text(text in "\\PC{0,200}", max in 0usize..120) {
            let bounded = bound_keeping_tail(&text, max);
            prop_assert!(bounded.len() <= max, "{bounded:?}");
            if text.len() <= max {
                prop_assert_eq!(&bounded, &text);
            } else if let Some((_, kept)) = bounded.split_once('\n') {
                // The marker fitted: what follows it is the end of the text.
                prop_assert!(text.ends_with(kept), "{bounded:?}");
            }
            // Each cut is the longest that fits: one more character would not.
            let head = head_bytes(&text, max);
            let next = text[head.len()..].chars().next().map_or(0, char::len_utf8);
            prop_assert!(head.len() <= max && text.starts_with(head));
            prop_assert!(head.len() == text.len() || head.len() + next > max);
            let tail = tail_bytes(&text, max);
            let previous = text[..text.len() - tail.len()].chars().next_back().map_or(0, char::len_utf8);
            prop_assert!(tail.len() <= max && text.ends_with(tail));
            prop_assert!(tail.len() == text.len() || tail.len() + previous > max);
        }
    }
}

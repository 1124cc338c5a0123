//! Unit tests of the `output` module.

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

/// Reads past the spill cap name the file, what it holds, and exactly the skipped bytes it
/// does not: those between the cap (or the reader's offset, when later) and the text.
#[test]
fn reads_past_the_spill_cap_name_the_bytes_no_file_holds() {
    let (mut c, _dir) = collector(10, 50);
    let data: Vec<u8> = (0..120u8).map(|i| b'a' + i % 26).collect();
    c.push(&data);
    let path = c.spill_path().map(Path::to_path_buf);
    let read = |offset: u64| c.read_from(offset, 6, true);
    let expected = |skipped_bytes: u64, lost: Option<std::ops::Range<u64>>| StreamRead {
        text: String::from_utf8(data[114..].to_vec()).unwrap(),
        next_offset: 120,
        skipped_bytes,
        lost,
        spill_path: path.clone(),
        spill_limit_bytes: Some(50),
        spill_error: None,
    };
    assert_eq!(
        [0, 30, 50, 80, 113].map(read),
        [
            // The file holds the first 50 of the skipped bytes, and none after them.
            expected(114, Some(50..114)),
            expected(84, Some(50..114)),
            expected(64, Some(50..114)),
            // A reader already past the cap loses every byte it skips.
            expected(34, Some(80..114)),
            expected(1, Some(113..114)),
        ]
    );
    // Within the cap, the file holds every skipped byte.
    let (mut c, _dir) = collector(10, 50);
    c.push(&data[..40]);
    let read = c.read_from(0, 6, true);
    assert_eq!(
        (read.skipped_bytes, read.lost, read.spill_limit_bytes),
        (34, None, None)
    );
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
    assert_eq!(late.lost, None, "the spill file holds the skipped bytes");
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
            read.lost,
            read.spill_error
        ),
        (&data_a[280..], 280, Some(0..280), used_up)
    );
}

/// A sink that grants no room and, like a sink without a budget, names no figure.
#[derive(Debug)]
struct Refusing(Temp);

impl SpillSink for Refusing {
    fn create(&self, label: &str) -> std::io::Result<(File, PathBuf)> {
        self.0.create(label)
    }

    fn claim(&self, _bytes: u64) -> u64 {
        0
    }
}

#[test]
fn a_used_up_budget_of_a_sink_that_names_none_is_reported_without_a_figure() {
    let dir = tempfile::tempdir().unwrap();
    let sink: Arc<dyn SpillSink> =
        Arc::new(Refusing(Temp(tempfile::tempdir_in(dir.path()).unwrap())));
    let mut c = StreamCollector::new("stdout", 10, 1000, Some(sink));
    c.push(&[b'x'; 20]);
    let out = c.finish(10);
    assert_eq!(
        (out.spill_path, out.spill_error),
        (
            None,
            Some(String::from("the session's spill budget is used up"))
        )
    );
}

#[test]
fn a_collector_debugs_as_its_label_and_byte_count() {
    let (mut c, _dir) = collector(10, 1000);
    c.push(b"abc");
    assert_eq!(
        format!("{c:?}"),
        r#"StreamCollector { label: "stdout", total: 3, .. }"#
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
            lost: Some(0..80),
            spill_path: None,
            spill_limit_bytes: None,
            // Why the skipped bytes are not kept anywhere.
            spill_error: Some(String::from("no spill directory is configured")),
        }
    );
}

#[test]
fn a_read_waits_while_the_newest_bytes_follow_a_lost_lead() {
    // No spill file and a window of 3: memory keeps `a` and the last two bytes, `9F 98`, of
    // an emoji whose first byte is kept nowhere and whose last byte has not come.
    let mut c = StreamCollector::new("stdout", 3, 1 << 20, None);
    c.push(&[b'a', 0xF0, 0x9F, 0x98]);
    // No edge between characters is known in `9F 98`: the read shows and skips nothing, and
    // still says why bytes are kept nowhere.
    assert_eq!(
        c.read_from(0, 0, false),
        StreamRead {
            text: String::new(),
            next_offset: 0,
            skipped_bytes: 0,
            lost: None,
            spill_path: None,
            spill_limit_bytes: None,
            spill_error: Some(String::from("no spill directory is configured")),
        }
    );
    // What a read shows, where it ends, what it skips and whether the skip is lost.
    let seen = |read: StreamRead| (read.text, read.next_offset, read.skipped_bytes, read.lost);
    // Once the stream has settled, they are skipped as lost.
    assert_eq!(
        seen(c.read_from(0, 0, true)),
        (String::new(), 4, 4, Some(0..4))
    );
    // The last byte comes, then `b`: the emoji's rest is skipped as lost, and the read starts
    // on the edge after it.
    c.push(&[0x80, b'b']);
    assert_eq!(
        seen(c.read_from(0, 0, false)),
        ("b".to_owned(), 6, 5, Some(0..5))
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

#[test]
fn a_tail_that_begins_in_a_run_of_continuation_bytes_keeps_all_after_the_third() {
    // Memory keeps the last 7 bytes: four lone continuation bytes, then `\0aa`. The first
    // three may finish a character cut off before them; the fourth cannot, so it is a
    // character of its own (U+FFFD) and fits the tail's 6 bytes with `\0aa`.
    let (mut c, _dir) = collector(10, u64::MAX);
    c.push(b"aa");
    c.push(b"\0\0\0\x80\x80\x80\x80\x80\0aa");
    let out = c.finish(8);
    assert_eq!(out.text, format!("aa{}\u{FFFD}\0aa", elision_marker(7)));
    assert_eq!(out.shown_bytes, 6);
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
        // Fewer than three before `at`, nothing before them: skip only to the third.
        (b"\x80\x80\x80\x80a", 2, false, 1),
        (b"\x80\x80\x80\x80a", 1, false, 2),
        (b"\x80\x80a", 1, false, 1),
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

//! `read`: numbering, paging, cuts, look-alike characters, and the errors that say what to do.

use crate::support::{Policy, fixture, fixture_with, value};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::io::Write;
use tool_fs::{FsLimits, InvisibleCounts, ReadValue};

#[tokio::test]
async fn a_small_file_reads_whole_with_line_numbers_and_tabs_kept() {
    let f = fixture(Policy::Anywhere);
    f.put("a.rs", "fn main() {\n\tprintln!(\"hi\");\n}\n");
    let text = f.ok("read", json!({"file_path": "a.rs"})).await;
    assert_eq!(
        text,
        "     1\tfn main() {\n     2\t\tprintln!(\"hi\");\n     3\t}"
    );
    let result = f.call("read", json!({"file_path": "a.rs"})).await;
    let v: ReadValue = value(&result);
    assert_eq!(v.total_lines, 3);
    assert_eq!(v.next_offset, None);
    assert_eq!(v.lines[1].text, "\tprintln!(\"hi\");");
    assert_eq!(v.path, f.path("a.rs").display().to_string());
}

#[tokio::test]
async fn offset_and_limit_page_and_the_text_names_the_continuing_offset() {
    let f = fixture(Policy::Anywhere);
    let body: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    f.put("p.txt", &body);
    let text = f
        .ok(
            "read",
            json!({"file_path": "p.txt", "offset": 4, "limit": 3}),
        )
        .await;
    assert_eq!(
        text,
        "     4\tline 4\n     5\tline 5\n     6\tline 6\n[showing lines 4-6 of 10; continue with `offset`: 7]"
    );
    let last = f
        .ok("read", json!({"file_path": "p.txt", "offset": 10}))
        .await;
    assert_eq!(last, "    10\tline 10");
    let past = f
        .err("read", json!({"file_path": "p.txt", "offset": 11}))
        .await;
    assert!(
        past.contains("past the end") && past.contains("10 lines"),
        "{past}"
    );
}

#[tokio::test]
async fn the_default_is_2000_lines_and_a_long_line_is_cut_with_a_marker() {
    let f = fixture(Policy::Anywhere);
    let mut body: String = (1..=2100).map(|n| format!("{n}\n")).collect();
    body.insert_str(0, &format!("{}\n", "é".repeat(2500)));
    f.put("long.txt", &body);
    let result = f
        .call("read", json!({"file_path": "long.txt", "limit": 5000}))
        .await;
    let v: ReadValue = value(&result);
    assert_eq!(v.lines[0].cut_from_chars, Some(2500));
    assert_eq!(v.lines[0].text.chars().count(), 2000);
    let text = crate::support::text(&result);
    assert!(
        text.lines()
            .next()
            .unwrap()
            .ends_with("… [line cut at 2000 of 2500 characters]")
    );
    let result = f.call("read", json!({"file_path": "long.txt"})).await;
    let v: ReadValue = value(&result);
    assert_eq!(
        (v.lines.len(), v.next_offset, v.total_lines),
        (2000, Some(2001), 2101)
    );
}

#[tokio::test]
async fn a_page_stops_at_50_kib_and_says_where_to_continue() {
    let f = fixture(Policy::Anywhere);
    let line = "x".repeat(999);
    let body: String = (0..200).map(|_| format!("{line}\n")).collect();
    f.put("big.txt", &body);
    let result = f
        .call("read", json!({"file_path": "big.txt", "limit": 200}))
        .await;
    let v: ReadValue = value(&result);
    assert!(v.byte_cap_reached);
    let shown = v.lines.len() as u64;
    assert_eq!(shown, 51, "51 lines of 1000 bytes fit in 50 KiB");
    assert_eq!(v.next_offset, Some(shown + 1));
    assert!(crate::support::text(&result).ends_with(&format!(
        "(the page reached its size cap); continue with `offset`: {}]",
        shown + 1
    )));
}

#[tokio::test]
async fn look_alike_characters_are_visible_in_the_text_and_counted_in_the_value() {
    let f = fixture(Policy::Anywhere);
    f.put("u.txt", "a\u{a0}b\nzero\u{200b}width\nlone\rcr\ncrlf\r\n");
    let result = f.call("read", json!({"file_path": "u.txt"})).await;
    let v: ReadValue = value(&result);
    assert_eq!(
        v.invisible,
        serde_json::from_value::<InvisibleCounts>(
            json!({"noBreakSpaces": 1, "zeroWidth": 1, "loneCarriageReturns": 1})
        )
        .unwrap()
    );
    assert_eq!(v.crlf_lines, 1);
    assert_eq!(
        v.lines[0].text, "a\u{a0}b",
        "the value keeps the real characters"
    );
    insta::assert_snapshot!(crate::support::text(&result));
}

#[tokio::test]
async fn directories_binaries_large_and_missing_files_are_errors_that_say_what_to_do() {
    let f = fixture_with(Policy::Anywhere, {
        let mut l = FsLimits::default();
        l.max_unpaged_file_bytes = 100;
        l
    });
    std::fs::create_dir_all(f.path("src")).unwrap();
    f.put("src/main.rs", "fn main() {}\n");
    f.put("src/mains.rs", "\n");
    std::fs::write(f.path("bin.dat"), b"ab\0cd").unwrap();
    f.put("large.txt", &"y\n".repeat(100));

    let dir = f.err("read", json!({"file_path": "src"})).await;
    assert!(
        dir.contains("is a directory") && dir.contains("`glob`"),
        "{dir}"
    );
    let bin = f.err("read", json!({"file_path": "bin.dat"})).await;
    assert!(bin.contains("binary") && bin.contains("NUL"), "{bin}");
    let large = f.err("read", json!({"file_path": "large.txt"})).await;
    assert!(
        large.contains("200 bytes") && large.contains("`offset`"),
        "{large}"
    );
    f.ok(
        "read",
        json!({"file_path": "large.txt", "offset": 1, "limit": 3}),
    )
    .await;
    let missing = f.err("read", json!({"file_path": "src/mian.rs"})).await;
    assert!(
        missing.contains(&format!(
            "nearest existing directory is {}",
            f.path("src").display()
        )) && missing.contains("main.rs"),
        "{missing}"
    );
    let deep = f.err("read", json!({"file_path": "srd/x/y.rs"})).await;
    assert!(
        deep.contains(&format!("directory is {};", f.work.display())) && deep.contains("src"),
        "{deep}"
    );
}

#[tokio::test]
async fn the_last_page_of_a_large_file_is_read_without_loading_the_file() {
    // 64 MiB of lines: the page is found by streaming; the value holds one page.
    let f = fixture(Policy::Anywhere);
    let path = f.path("huge.log");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let line = "0123456789abcdef".repeat(4);
    let lines = 64 * 1024 * 1024 / 65;
    for _ in 0..lines {
        writeln!(out, "{line}").unwrap();
    }
    out.flush().unwrap();
    drop(out);
    let result = f
        .call(
            "read",
            json!({"file_path": "huge.log", "offset": lines - 9, "limit": 2000}),
        )
        .await;
    let v: ReadValue = value(&result);
    assert_eq!(v.lines.len(), 10);
    assert_eq!(v.lines[9].number, lines as u64);
    assert_eq!(v.total_lines, lines as u64);
    assert_eq!(v.next_offset, None);
}

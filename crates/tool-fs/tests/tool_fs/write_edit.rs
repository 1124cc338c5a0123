//! `write` and `edit`: their values and texts, atomicity's visible effects (permissions,
//! parents), the replacement rules and the errors of a missed or ambiguous `old_string`.

use crate::support::{Policy, fixture, read_string, text, value};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use tool_fs::{EditValue, WriteValue};

#[tokio::test]
async fn write_creates_parents_and_reports_a_new_file() {
    let f = fixture(Policy::Roots);
    let result = f
        .call(
            "write",
            json!({"file_path": "a/b/c.txt", "content": "one\ntwo"}),
        )
        .await;
    let v: WriteValue = value(&result);
    let path = f.path("a/b/c.txt");
    assert_eq!(read_string(&path), "one\ntwo");
    assert!(v.created);
    assert_eq!((v.bytes, v.lines), (7, 2));
    assert_eq!(v.change.old_text, None);
    assert_eq!(
        text(&result),
        format!("Created {} (2 lines, 7 bytes)", path.display())
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    let leftovers: Vec<_> = std::fs::read_dir(f.path("a/b")).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
}

#[tokio::test]
async fn write_replaces_a_read_file_keeping_its_permissions() {
    for policy in [Policy::Roots, Policy::Anywhere] {
        let f = fixture(policy);
        let path = f.put("run.sh", "echo old\n");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
        f.ok("read", json!({"file_path": "run.sh"})).await;
        let result = f
            .call(
                "write",
                json!({"file_path": "run.sh", "content": "echo new\n"}),
            )
            .await;
        let v: WriteValue = value(&result);
        assert!(!v.created);
        assert_eq!(v.change.old_text.as_deref(), Some("echo old\n"));
        assert_eq!(read_string(&path), "echo new\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o751, "{policy:?}");
    }
}

#[tokio::test]
async fn edit_replaces_exactly_once_and_reports_the_line() {
    let f = fixture(Policy::Roots);
    let path = f.put("m.rs", "fn a() {}\nfn b() {}\nfn c() {}\n");
    f.ok("read", json!({"file_path": "m.rs"})).await;
    let result = f
        .call("edit", json!({"file_path": "m.rs", "old_string": "fn b() {}", "new_string": "fn b() {\n    1\n}"}))
        .await;
    let v: EditValue = value(&result);
    assert_eq!(
        read_string(&path),
        "fn a() {}\nfn b() {\n    1\n}\nfn c() {}\n"
    );
    assert_eq!((v.replacements, v.lines.clone()), (1, vec![2]));
    assert_eq!(
        text(&result),
        format!(
            "Edited {}: replaced 1 occurrence (at line 2)",
            path.display()
        )
    );
    assert_eq!(
        v.change.old_text.as_deref(),
        Some("fn a() {}\nfn b() {}\nfn c() {}\n")
    );
}

#[tokio::test]
async fn several_matches_are_refused_with_their_count_and_lines_unless_replace_all() {
    let f = fixture(Policy::Roots);
    let path = f.put("d.txt", "x = 1\ny = 2\nx = 1\n\nx = 1\n");
    f.ok("read", json!({"file_path": "d.txt"})).await;
    let error = f
        .err(
            "edit",
            json!({"file_path": "d.txt", "old_string": "x = 1", "new_string": "x = 9"}),
        )
        .await;
    assert_eq!(
        error,
        "old_string occurs 3 times (at lines 1, 3, 5); include more of the surrounding lines to make it unique, or set `replace_all: true` to replace every occurrence"
    );
    assert_eq!(read_string(&path), "x = 1\ny = 2\nx = 1\n\nx = 1\n");
    let result = f
        .call("edit", json!({"file_path": "d.txt", "old_string": "x = 1", "new_string": "x = 9", "replace_all": true}))
        .await;
    let v: EditValue = value(&result);
    assert_eq!(v.lines, vec![1, 3, 5]);
    assert_eq!(read_string(&path), "x = 9\ny = 2\nx = 9\n\nx = 9\n");
    // Overlapping occurrences are several too: which of them was meant is not known.
    let path = f.put("o.txt", "aaa\n");
    f.ok("read", json!({"file_path": "o.txt"})).await;
    let error = f
        .err(
            "edit",
            json!({"file_path": "o.txt", "old_string": "aa", "new_string": "b"}),
        )
        .await;
    assert!(
        error.starts_with("old_string occurs 2 times (at lines 1, 1)"),
        "{error}"
    );
    assert_eq!(read_string(&path), "aaa\n");
}

#[tokio::test]
async fn a_missed_old_string_points_at_the_first_differing_character() {
    let f = fixture(Policy::Roots);
    f.put("t.rs", "fn main() {\n\tlet x = 1;\n\tlet y\u{a0}= 2;\n}\n");
    f.ok("read", json!({"file_path": "t.rs"})).await;
    let tab = f
        .err(
            "edit",
            json!({"file_path": "t.rs", "old_string": "    let x = 1;", "new_string": "z"}),
        )
        .await;
    assert!(
        tab.contains("line 2, column 1: the file has a tab where old_string has a space"),
        "{tab}"
    );
    let nbsp = f
        .err(
            "edit",
            json!({"file_path": "t.rs", "old_string": "let y = 2;", "new_string": "z"}),
        )
        .await;
    assert!(
        nbsp.contains(
            "line 3, column 7: the file has a no-break space (U+00A0) where old_string has a space"
        ),
        "{nbsp}"
    );
    assert!(
        nbsp.contains("let y⟨U+00A0⟩= 2;"),
        "the region is quoted visibly: {nbsp}"
    );
    let typo = f
        .err(
            "edit",
            json!({"file_path": "t.rs", "old_string": "fn mian()", "new_string": "z"}),
        )
        .await;
    assert!(
        typo.contains("line 1, column 5: the file has `a` where old_string has `i`"),
        "{typo}"
    );
    let none = f
        .err(
            "edit",
            json!({"file_path": "t.rs", "old_string": "qqq", "new_string": "z"}),
        )
        .await;
    assert!(none.contains("no part of it occurs"), "{none}");
    insta::assert_snapshot!(nbsp);
}

#[tokio::test]
async fn crlf_files_are_matched_and_written_in_crlf() {
    let f = fixture(Policy::Roots);
    let path = f.put("w.txt", "a\r\nb\r\nc\r\n");
    f.ok("read", json!({"file_path": "w.txt"})).await;
    let result = f
        .call(
            "edit",
            json!({"file_path": "w.txt", "old_string": "a\nb", "new_string": "a\nB\nb2"}),
        )
        .await;
    let v: EditValue = value(&result);
    assert!(v.crlf_adapted);
    assert_eq!(read_string(&path), "a\r\nB\r\nb2\r\nc\r\n");
}

#[tokio::test]
async fn no_final_newline_and_unicode_survive_an_edit() {
    let f = fixture(Policy::Roots);
    let path = f.put("u.txt", "héllo wörld\n日本語\tend");
    f.ok("read", json!({"file_path": "u.txt"})).await;
    f.ok(
        "edit",
        json!({"file_path": "u.txt", "old_string": "wörld", "new_string": "мир"}),
    )
    .await;
    assert_eq!(read_string(&path), "héllo мир\n日本語\tend");
    f.ok(
        "edit",
        json!({"file_path": "u.txt", "old_string": "語\tend", "new_string": "語\tfin"}),
    )
    .await;
    assert_eq!(read_string(&path), "héllo мир\n日本語\tfin");
}

#[tokio::test]
async fn edit_of_a_missing_file_says_so_and_points_at_write() {
    let f = fixture(Policy::Roots);
    let error = f
        .err(
            "edit",
            json!({"file_path": "nope.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert!(
        error.contains("does not exist") && error.contains("use `write`"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_edits_of_one_file_are_ordered_and_none_is_lost() {
    let f = std::sync::Arc::new(fixture(Policy::Roots));
    let body: String = (0..20).map(|n| format!("k{n}=0\n")).collect();
    let path = f.put("many.txt", &body);
    f.ok("read", json!({"file_path": "many.txt"})).await;
    let handles: Vec<_> = (0..20)
        .map(|n| {
            let f = std::sync::Arc::clone(&f);
            tokio::spawn(async move {
                let args = json!({"file_path": "many.txt", "old_string": format!("k{n}=0\n"), "new_string": format!("k{n}=1\n")});
                f.ok("edit", args).await
            })
        })
        .collect();
    for handle in handles {
        handle.await.unwrap();
    }
    let want: String = (0..20).map(|n| format!("k{n}=1\n")).collect();
    assert_eq!(read_string(&path), want);
}

#[tokio::test]
async fn a_large_file_travels_in_the_card_as_the_changed_lines_with_context() {
    let mut limits = tool_fs::FsLimits::default();
    limits.max_whole_diff_bytes = 64;
    let f = crate::support::fixture_with(Policy::Roots, limits);
    let body: String = (1..=40).map(|n| format!("line {n}\n")).collect();
    f.put("big.txt", &body);
    f.ok("read", json!({"file_path": "big.txt"})).await;
    let result = f
        .call(
            "edit",
            json!({"file_path": "big.txt", "old_string": "line 20\n", "new_string": "LINE 20\n"}),
        )
        .await;
    let v: EditValue = value(&result);
    assert!(!v.change.whole);
    assert_eq!(v.change.first_line, 17);
    assert_eq!(
        v.change.old_text.as_deref(),
        Some("line 17\nline 18\nline 19\nline 20\nline 21\nline 22\nline 23\n")
    );
    assert_eq!(
        v.change.new_text,
        "line 17\nline 18\nline 19\nLINE 20\nline 21\nline 22\nline 23\n"
    );
}

#[tokio::test]
async fn output_schemas_are_generated_from_the_value_types() {
    let f = fixture(Policy::Anywhere);
    for name in tool_fs::FS_TOOL_NAMES {
        let definition = f.registry.get(name, None).unwrap();
        let schema = definition.output().schema().json().to_string();
        let schema: serde_json::Value = serde_json::from_str(&schema).unwrap();
        assert_eq!(schema["type"], "object", "{name}: {schema}");
        assert_eq!(schema["additionalProperties"], false, "{name}: {schema}");
        assert!(schema["properties"]["path"].is_object(), "{name}: {schema}");
    }
}

#[tokio::test]
async fn replace_all_reports_each_replacement_line_in_the_new_text() {
    let f = fixture(Policy::Roots);
    let path = f.put("r.txt", "a\nb a\n\na\n");
    f.ok("read", json!({"file_path": "r.txt"})).await;
    let result = f
        .call("edit", json!({"file_path": "r.txt", "old_string": "a", "new_string": "x\ny", "replace_all": true}))
        .await;
    let v: EditValue = value(&result);
    assert_eq!(read_string(&path), "x\ny\nb x\ny\n\nx\ny\n");
    assert_eq!(v.lines, vec![1, 3, 6]);
}

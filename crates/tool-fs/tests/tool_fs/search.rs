//! `glob` and `grep`: what they match, the order, the caps with their totals, the spill file,
//! ignore files and VCS directories.

use crate::support::{Policy, fixture, read_string, text, value};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::{Duration, SystemTime};
use tool_fs::{GlobValue, GrepValue};

fn age(path: &std::path::Path, secs_ago: u64) {
    let t = SystemTime::now() - Duration::from_secs(secs_ago);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[tokio::test]
async fn glob_lists_files_newest_first_matching_basenames_at_any_depth() {
    let f = fixture(Policy::Anywhere);
    let old = f.put("a.rs", "");
    let mid = f.put("src/b.rs", "");
    let new = f.put("src/deep/c.rs", "");
    f.put("src/deep/c.txt", "");
    f.put(".git/objects/x.rs", "");
    age(&old, 300);
    age(&mid, 200);
    age(&new, 100);
    let result = f.call("glob", json!({"pattern": "*.rs"})).await;
    let v: GlobValue = value(&result);
    let show = |p: &std::path::Path| p.display().to_string();
    assert_eq!(v.paths, vec![show(&new), show(&mid), show(&old)]);
    assert_eq!((v.total, v.truncated), (3, false));
    assert_eq!(text(&result), v.paths.join("\n"));
    let nested: GlobValue = value(&f.call("glob", json!({"pattern": "src/*.rs"})).await);
    assert_eq!(nested.paths, vec![show(&mid)]);
    let any: GlobValue = value(
        &f.call("glob", json!({"pattern": "**/*.rs", "path": "src"}))
            .await,
    );
    assert_eq!(any.paths, vec![show(&new), show(&mid)]);
    let none = f.ok("glob", json!({"pattern": "*.zig"})).await;
    assert_eq!(none, format!("[no files match in {}]", f.work.display()));
}

#[tokio::test]
async fn glob_caps_at_100_with_the_total_and_spills_the_complete_list() {
    let f = fixture(Policy::Anywhere);
    for n in 0..130 {
        f.put(&format!("f{n:03}.txt"), "");
    }
    let result = f.call("glob", json!({"pattern": "*.txt"})).await;
    let v: GlobValue = value(&result);
    assert_eq!((v.paths.len(), v.total, v.truncated), (100, 130, true));
    let spill = v.spill_path.clone().unwrap();
    assert!(spill.starts_with(&f.spill.display().to_string()));
    assert_eq!(read_string(spill.as_ref()).lines().count(), 130);
    assert!(text(&result).ends_with(&format!(
        "[showing 100 of 130 files, newest first; the complete list is in {spill}. Narrow the pattern or the path]"
    )));
}

#[tokio::test]
async fn grep_groups_numbered_matches_by_file_and_honours_gitignore() {
    let f = fixture(Policy::Anywhere);
    std::fs::create_dir_all(f.path(".git")).unwrap();
    f.put(".gitignore", "target/\n");
    f.put("src/a.rs", "fn main() {}\nlet x = 1;\nfn helper() {}\n");
    f.put("src/b.ts", "function main() {}\n");
    f.put("target/gen.rs", "fn main() {}\n");
    let result = f.call("grep", json!({"pattern": "fn\\s+\\w+"})).await;
    let v: GrepValue = value(&result);
    assert_eq!(v.total, 2);
    assert_eq!(v.files.len(), 1, "target/ is ignored: {v:?}");
    let a = f.path("src/a.rs").display().to_string();
    assert_eq!(
        text(&result),
        format!("{a}\n  1: fn main() {{}}\n  3: fn helper() {{}}")
    );
    let ts: GrepValue = value(
        &f.call("grep", json!({"pattern": "main", "include": "*.ts"}))
            .await,
    );
    assert_eq!(
        ts.files.iter().map(|f| f.path.clone()).collect::<Vec<_>>(),
        vec![f.path("src/b.ts").display().to_string()]
    );
    let one: GrepValue = value(
        &f.call("grep", json!({"pattern": "let", "path": "src/a.rs"}))
            .await,
    );
    assert_eq!((one.total, one.files[0].matches[0].line_number), (1, 2));
    let none = f.ok("grep", json!({"pattern": "zzz"})).await;
    assert_eq!(none, format!("[no matches in {}]", f.work.display()));
}

#[tokio::test]
async fn grep_caps_at_250_matches_with_the_total_and_spills_every_match_in_order() {
    let f = fixture(Policy::Anywhere);
    let body: String = (1..=200).map(|n| format!("hit {n}\n")).collect();
    f.put("a.txt", &body);
    f.put("b.txt", &body);
    let result = f.call("grep", json!({"pattern": "^hit"})).await;
    let v: GrepValue = value(&result);
    let shown: usize = v.files.iter().map(|f| f.matches.len()).sum();
    assert_eq!((shown, v.total, v.truncated), (250, 400, true));
    let spill = read_string(v.spill_path.as_ref().unwrap().as_ref());
    let lines: Vec<&str> = spill.lines().collect();
    assert_eq!(lines.len(), 400);
    let a = f.path("a.txt").display().to_string();
    let b = f.path("b.txt").display().to_string();
    assert_eq!(lines[0], format!("{a}:1:hit 1"));
    assert_eq!(lines[250], format!("{b}:51:hit 51"));
    assert_eq!(lines[399], format!("{b}:200:hit 200"));
    assert!(text(&result).ends_with("Narrow the pattern, the path or `include`]"));
}

#[tokio::test]
async fn a_search_of_a_missing_path_names_the_nearest_directory() {
    let f = fixture(Policy::Anywhere);
    std::fs::create_dir_all(f.path("src")).unwrap();
    let error = f.err("grep", json!({"pattern": "x", "path": "sr"})).await;
    assert!(
        error.contains("does not exist") && error.contains("src"),
        "{error}"
    );
}

#[tokio::test]
async fn grep_lists_files_in_path_order_however_the_search_threads_ran() {
    let f = fixture(Policy::Anywhere);
    for n in (0..300).rev() {
        f.put(
            &format!("d{}/f{n:03}.txt", n % 7),
            &format!("x\nneedle {n}\n"),
        );
    }
    let v: GrepValue = value(&f.call("grep", json!({"pattern": "needle"})).await);
    let listed: Vec<String> = v.files.iter().map(|f| f.path.clone()).collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed.len(), 250);
    assert_eq!(listed, sorted);
    assert_eq!(v.total, 300);
    assert!(v.files.iter().all(|f| f.matches[0].line_number == 2));
}

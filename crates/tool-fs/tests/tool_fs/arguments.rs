//! Each tool's argument rejections: schema violations and the rules the schema cannot say.

use crate::support::{Policy, fixture};
use dsh_tools::FailureCode;
use serde_json::json;

#[tokio::test]
async fn every_tool_rejects_bad_arguments_as_invalid_args() {
    let f = fixture(Policy::Anywhere);
    f.put("a.txt", "x\n");
    let cases = [
        ("read", json!({}), "file_path"),
        (
            "read",
            json!({"file_path": ""}),
            "/file_path: must not be empty",
        ),
        (
            "read",
            json!({"file_path": "a.txt", "offset": 0}),
            "/offset: line numbers start at 1",
        ),
        (
            "read",
            json!({"file_path": "a.txt", "limit": 0}),
            "/limit: must be at least 1",
        ),
        (
            "read",
            json!({"file_path": "a.txt", "offset": -1}),
            "offset",
        ),
        ("read", json!({"file_path": "a.txt", "bogus": 1}), "bogus"),
        ("write", json!({"file_path": "a.txt"}), "content"),
        (
            "write",
            json!({"file_path": " ", "content": ""}),
            "/file_path: must not be empty",
        ),
        (
            "edit",
            json!({"file_path": "a.txt", "old_string": "", "new_string": "y"}),
            "/old_string: must not be empty",
        ),
        (
            "edit",
            json!({"file_path": "a.txt", "old_string": "x", "new_string": "x"}),
            "/new_string: is the same as old_string",
        ),
        (
            "edit",
            json!({"file_path": "a.txt", "old_string": "x", "new_string": "y", "replace_all": "yes"}),
            "replace_all",
        ),
        (
            "glob",
            json!({"pattern": ""}),
            "/pattern: must not be empty",
        ),
        ("glob", json!({"pattern": "a[", "path": "."}), "/pattern:"),
        ("grep", json!({"pattern": "("}), "/pattern:"),
        (
            "grep",
            json!({"pattern": "x", "include": "a["}),
            "/include:",
        ),
        ("grep", json!({"path": "."}), "pattern"),
    ];
    for (tool, args, needle) in cases {
        let result = f.call(tool, args.clone()).await;
        assert!(result.is_error, "{tool} {args} was accepted");
        let error = result.error.unwrap();
        assert_eq!(
            error.code,
            FailureCode::InvalidArgs,
            "{tool} {args}: {}",
            error.message
        );
        assert!(
            error.message.contains(needle),
            "{tool} {args}: {}",
            error.message
        );
    }
}

#[tokio::test]
async fn the_tools_have_the_typescript_harness_names_and_arguments() {
    let f = fixture(Policy::Anywhere);
    let schemas = f.registry.schemas(None);
    let shape: Vec<(String, Vec<String>, Vec<String>)> = schemas
        .iter()
        .map(|s| {
            let p: serde_json::Value = serde_json::from_str(&s.parameters.to_string()).unwrap();
            let props = p["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            let mut required: Vec<String> = p["required"]
                .as_array()
                .map(|r| r.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
                .unwrap_or_default();
            required.sort();
            (s.name.clone(), props, required)
        })
        .collect();
    let want = |n: &str, p: &[&str], r: &[&str]| {
        let mut p: Vec<String> = p.iter().map(|s| s.to_string()).collect();
        p.sort();
        (
            n.to_owned(),
            p,
            r.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    };
    let mut shape = shape;
    for s in &mut shape {
        s.1.sort();
    }
    shape.sort();
    let mut expected = vec![
        want(
            "edit",
            &["file_path", "old_string", "new_string", "replace_all"],
            &["file_path", "new_string", "old_string"],
        ),
        want("glob", &["pattern", "path"], &["pattern"]),
        want("grep", &["pattern", "path", "include"], &["pattern"]),
        want("read", &["file_path", "offset", "limit"], &["file_path"]),
        want(
            "write",
            &["file_path", "content"],
            &["content", "file_path"],
        ),
    ];
    expected.sort();
    pretty_assertions::assert_eq!(shape, expected);
}

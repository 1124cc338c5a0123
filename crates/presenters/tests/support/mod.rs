//! Shared helpers for the presenters integration tests: the card fixtures and the proptest
//! strategies for cards and arbitrary JSON.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use dsh_tools::card::{
    DiffCallView, DiffResultView, FileDiff, GenericCallView, GenericResultView, Location,
    NumberedLine, ReadResultView, SearchFile, SearchMatch, SearchMatches, SearchPaths,
    SearchResultView, TerminalCallView, TerminalResultView, ToolKind, WebFetch, WebResultView,
    WebSearch, WebSource,
};
use dsh_tools::{ContentBlock, ToolCallView, ToolResultRecord, ToolResultView};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::path::PathBuf;

/// The directory of the hand-written card fixtures (`<name>.json`).
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cards")
}

/// The JSON of one fixture, as written.
pub fn fixture_json(name: &str) -> Value {
    let path = fixtures_dir().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn s(text: &str) -> String {
    text.to_owned()
}

/// Every pending-card fixture: its name and the value its JSON must decode to.
pub fn call_fixtures() -> Vec<(&'static str, ToolCallView)> {
    vec![
        (
            "call_generic",
            ToolCallView::Generic(GenericCallView {
                title: s("Read output of bash-1"),
                kind: Some(ToolKind::Read),
                raw_input: Some(json!({"job_id": "bash-1", "wait": true, "timeout_ms": 5000})),
                content: Some(s("Waits for new output.")),
                locations: Some(vec![
                    Location {
                        path: s("src/lib.rs"),
                        line: Some(12),
                    },
                    Location {
                        path: s("README.md"),
                        line: None,
                    },
                ]),
            }),
        ),
        (
            "call_generic_minimal",
            ToolCallView::Generic(GenericCallView {
                title: s("echo"),
                ..GenericCallView::default()
            }),
        ),
        (
            "call_terminal",
            ToolCallView::Terminal(TerminalCallView {
                title: s("cargo test --workspace"),
                description: Some(s("Run the whole test suite")),
                cwd: Some(s("/repo")),
            }),
        ),
        (
            "call_diff",
            ToolCallView::Diff(DiffCallView {
                title: s("Edit src/lib.rs"),
                diffs: vec![
                    FileDiff {
                        path: s("src/lib.rs"),
                        old_text: Some(s("fn a() {}\nfn b() {}\nfn d() {}\n")),
                        new_text: s("fn a() {}\nfn c() {}\nfn d() {}\n"),
                    },
                    FileDiff {
                        path: s("NOTES.md"),
                        old_text: None,
                        new_text: s("# Notes\n\nFirst line.\n"),
                    },
                ],
                locations: Some(vec![Location {
                    path: s("src/lib.rs"),
                    line: Some(2),
                }]),
            }),
        ),
    ]
}

/// Every completed-card fixture: its name and the value its JSON must decode to.
pub fn result_fixtures() -> Vec<(&'static str, ToolResultView)> {
    vec![
        (
            "result_generic",
            ToolResultView::Generic(GenericResultView {
                title: Some(s("List background jobs")),
                content: Some(s(
                    "bash-1 [bash] running — npm test\nbash-2 [bash] completed — cargo build",
                )),
            }),
        ),
        (
            "result_terminal_exit",
            ToolResultView::Terminal(TerminalResultView {
                title: Some(s("cargo test")),
                output: Some(s("running 2 tests\ntest a ... ok\ntest b ... FAILED")),
                exit_code: Some(101),
                signal: None,
            }),
        ),
        (
            "result_terminal_signal",
            ToolResultView::Terminal(TerminalResultView {
                title: Some(s("sleep 1000")),
                output: Some(s("[timed out after 120000ms]")),
                exit_code: None,
                signal: Some(s("SIGKILL")),
            }),
        ),
        (
            "result_diff",
            ToolResultView::Diff(DiffResultView {
                title: Some(s("Applied 1 edit")),
                diffs: vec![FileDiff {
                    path: s("src/main.rs"),
                    old_text: Some(s("fn main() {\n    println!(\"hi\");\n}\n")),
                    new_text: s("fn main() {\n    println!(\"hello\");\n}\n"),
                }],
            }),
        ),
        (
            "result_search_matches",
            ToolResultView::Search(SearchResultView::Matches(SearchMatches {
                files: vec![
                    SearchFile {
                        path: s("src/a.rs"),
                        matches: vec![
                            SearchMatch {
                                line_number: 3,
                                line: s("fn main() {"),
                            },
                            SearchMatch {
                                line_number: 40,
                                line: s("    main_loop();"),
                            },
                        ],
                    },
                    SearchFile {
                        path: s("src/b.rs"),
                        matches: vec![SearchMatch {
                            line_number: 7,
                            line: s("// main entry"),
                        }],
                    },
                ],
                truncated: true,
                total: 9,
                title: Some(s("grep main")),
            })),
        ),
        (
            "result_search_paths",
            ToolResultView::Search(SearchResultView::Paths(SearchPaths {
                paths: vec![s("src/a.rs"), s("src/b.rs")],
                truncated: false,
                total: 2,
                title: None,
            })),
        ),
        (
            "result_read",
            ToolResultView::Read(ReadResultView {
                title: Some(s("Read")),
                path: s("src/lib.rs"),
                offset: 8,
                lines: vec![
                    NumberedLine {
                        number: 9,
                        text: s("pub fn add(a: i32, b: i32) -> i32 {"),
                    },
                    NumberedLine {
                        number: 10,
                        text: s("    a + b"),
                    },
                    NumberedLine {
                        number: 11,
                        text: s("}"),
                    },
                ],
                total_lines: 120,
                lang: Some(s("rust")),
                content: None,
            }),
        ),
        (
            "result_web_search",
            ToolResultView::Web(WebResultView::Search(WebSearch {
                sources: vec![
                    WebSource {
                        url: s("https://docs.rs/similar"),
                        title: Some(s("similar - Rust")),
                        snippet: Some(s("A diff library for Rust.")),
                        published_at: Some(s("2025-01-02")),
                    },
                    WebSource {
                        url: s("https://example.com/diffs"),
                        ..WebSource::default()
                    },
                ],
                answer: Some(s("Use the similar crate.")),
                truncated: true,
            })),
        ),
        (
            "result_web_fetch",
            ToolResultView::Web(WebResultView::Fetch(WebFetch {
                url: s("https://example.com/"),
                status_code: 200,
                truncated: true,
            })),
        ),
    ]
}

/// A record with one text block.
pub fn record(text: &str, is_error: bool, meta: Option<Value>) -> ToolResultRecord {
    ToolResultRecord {
        content: vec![ContentBlock::text(text)],
        is_error,
        error: None,
        meta,
    }
}

/// Sequences a hostile tool output or argument could carry, each with the way the terminal
/// text must show it: OSC 52 clipboard writes, title changes (ended by BEL or by ST), screen
/// clears, colours, the C1 forms of CSI and OSC, the other C0 controls, DEL, and every bidi
/// embedding, override and isolate.
pub const HOSTILE: [(&str, &str); 12] = [
    ("\x1b]52;c;cm0gLXJmIH4=\x07", "\\x1b]52;c;cm0gLXJmIH4=\\x07"),
    ("\x1b]0;owned\x1b\\", "\\x1b]0;owned\\x1b\\"),
    ("\x1b[2J\x1b[3J\x1b[H", "\\x1b[2J\\x1b[3J\\x1b[H"),
    ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
    ("\x1bPq#0;2;0;0;0\x1b\\", "\\x1bPq#0;2;0;0;0\\x1b\\"),
    ("\u{9b}2J", "\\u{9b}2J"),
    ("\u{9d}0;owned\u{9c}", "\\u{9d}0;owned\\u{9c}"),
    (
        "\x00\x07\x08\x0b\x0c\r\x7f",
        "\\x00\\x07\\x08\\x0b\\x0c\\x0d\\x7f",
    ),
    ("\u{85}\u{8d}\u{90}\u{9f}", "\\u{85}\\u{8d}\\u{90}\\u{9f}"),
    ("abc\u{202e}fed\u{202c}", "abc\\u{202e}fed\\u{202c}"),
    ("\u{202a}\u{202b}\u{202d}", "\\u{202a}\\u{202b}\\u{202d}"),
    (
        "\u{2066}\u{2067}\u{2068}x\u{2069}",
        "\\u{2066}\\u{2067}\\u{2068}x\\u{2069}",
    ),
];

/// Whether a terminal could act on `c`: a C0 control other than newline and tab, DEL, a C1
/// control, or a bidi embedding, override or isolate. Spelled out here, apart from the
/// renderer's own check, so the two cannot share a mistake.
pub fn is_terminal_control(c: char) -> bool {
    let code = u32::from(c);
    (code < 0x20 && c != '\n' && c != '\t')
        || (0x7f..=0x9f).contains(&code)
        || (0x202a..=0x202e).contains(&code)
        || (0x2066..=0x2069).contains(&code)
}

/// Short text of any kind: unicode, newlines, brackets, marker look-alikes, hostile
/// terminal sequences.
pub fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "(?s).{0,24}",
        prop::sample::select(HOSTILE.iter().map(|(raw, _)| *raw).collect::<Vec<_>>()).prop_map(s),
        "[a-z\u{0}-\u{1f}\u{7f}-\u{9f}\u{202a}-\u{202e}\u{2066}-\u{2069}]{0,12}",
        "[a-z \\[\\]:\\n]{0,24}",
        Just(String::new()),
        Just(s("[exit code: 1]")),
        Just(s("started background job bash-1")),
        Just(s("(no output)")),
    ]
}

/// Arbitrary JSON, biased towards the argument names the presenters read.
pub fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        Just(serde_json::from_str::<Value>("18446744073709551617").unwrap()),
        Just(serde_json::from_str::<Value>("3.0e4").unwrap()),
        any_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just(s("command")),
                    Just(s("description")),
                    Just(s("timeout_ms")),
                    Just(s("workdir")),
                    Just(s("run_in_background")),
                    Just(s("job_id")),
                    Just(s("wait")),
                    Just(s("exitCode")),
                    Just(s("signal")),
                    "[a-z]{0,6}",
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn kind() -> impl Strategy<Value = ToolKind> {
    prop_oneof![
        Just(ToolKind::Read),
        Just(ToolKind::Edit),
        Just(ToolKind::Delete),
        Just(ToolKind::Move),
        Just(ToolKind::Search),
        Just(ToolKind::Execute),
        Just(ToolKind::Fetch),
        Just(ToolKind::Other),
    ]
}

fn line_number() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..500, any::<u64>()]
}

fn location() -> impl Strategy<Value = Location> {
    (any_text(), prop::option::of(line_number())).prop_map(|(path, line)| Location { path, line })
}

fn locations() -> impl Strategy<Value = Option<Vec<Location>>> {
    prop::option::of(prop::collection::vec(location(), 0..3))
}

fn file_diff() -> impl Strategy<Value = FileDiff> {
    (any_text(), prop::option::of(any_text()), any_text()).prop_map(|(path, old_text, new_text)| {
        FileDiff {
            path,
            old_text,
            new_text,
        }
    })
}

/// Any pending card.
pub fn any_call_view() -> impl Strategy<Value = ToolCallView> {
    let opt = || prop::option::of(any_text());
    prop_oneof![
        (
            any_text(),
            prop::option::of(kind()),
            prop::option::of(arbitrary_json()),
            opt(),
            locations()
        )
            .prop_map(|(title, kind, raw_input, content, locations)| {
                ToolCallView::Generic(GenericCallView {
                    title,
                    kind,
                    raw_input,
                    content,
                    locations,
                })
            }),
        (any_text(), opt(), opt()).prop_map(|(title, description, cwd)| {
            ToolCallView::Terminal(TerminalCallView {
                title,
                description,
                cwd,
            })
        }),
        (
            any_text(),
            prop::collection::vec(file_diff(), 0..3),
            locations()
        )
            .prop_map(
                |(title, diffs, locations)| ToolCallView::Diff(DiffCallView {
                    title,
                    diffs,
                    locations
                })
            ),
    ]
}

/// Any completed card.
pub fn any_result_view() -> impl Strategy<Value = ToolResultView> {
    let opt = || prop::option::of(any_text());
    let search_file = (
        any_text(),
        prop::collection::vec(
            (line_number(), any_text())
                .prop_map(|(line_number, line)| SearchMatch { line_number, line }),
            0..3,
        ),
    )
        .prop_map(|(path, matches)| SearchFile { path, matches });
    let numbered =
        (line_number(), any_text()).prop_map(|(number, text)| NumberedLine { number, text });
    let source =
        (any_text(), opt(), opt(), opt()).prop_map(|(url, title, snippet, published_at)| {
            WebSource {
                url,
                title,
                snippet,
                published_at,
            }
        });
    prop_oneof![
        (opt(), opt()).prop_map(
            |(title, content)| ToolResultView::Generic(GenericResultView { title, content })
        ),
        (
            opt(),
            opt(),
            prop::option::of(any::<i64>()),
            prop::option::of(any_text())
        )
            .prop_map(|(title, output, exit_code, signal)| {
                ToolResultView::Terminal(TerminalResultView {
                    title,
                    output,
                    exit_code,
                    signal,
                })
            }),
        (opt(), prop::collection::vec(file_diff(), 0..3))
            .prop_map(|(title, diffs)| ToolResultView::Diff(DiffResultView { title, diffs })),
        (
            prop::collection::vec(search_file, 0..3),
            any::<bool>(),
            any::<u64>(),
            opt()
        )
            .prop_map(|(files, truncated, total, title)| {
                ToolResultView::Search(SearchResultView::Matches(SearchMatches {
                    files,
                    truncated,
                    total,
                    title,
                }))
            }),
        (
            prop::collection::vec(any_text(), 0..4),
            any::<bool>(),
            any::<u64>(),
            opt()
        )
            .prop_map(|(paths, truncated, total, title)| {
                ToolResultView::Search(SearchResultView::Paths(SearchPaths {
                    paths,
                    truncated,
                    total,
                    title,
                }))
            }),
        (
            opt(),
            any_text(),
            any::<u64>(),
            prop::collection::vec(numbered, 0..4),
            any::<u64>(),
            opt(),
            opt()
        )
            .prop_map(|(title, path, offset, lines, total_lines, lang, content)| {
                ToolResultView::Read(ReadResultView {
                    title,
                    path,
                    offset,
                    lines,
                    total_lines,
                    lang,
                    content,
                })
            }),
        (prop::collection::vec(source, 0..3), opt(), any::<bool>()).prop_map(
            |(sources, answer, truncated)| {
                ToolResultView::Web(WebResultView::Search(WebSearch {
                    sources,
                    answer,
                    truncated,
                }))
            }
        ),
        (any_text(), any::<u16>(), any::<bool>()).prop_map(|(url, status_code, truncated)| {
            ToolResultView::Web(WebResultView::Fetch(WebFetch {
                url,
                status_code,
                truncated,
            }))
        }),
    ]
}

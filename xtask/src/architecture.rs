//! Architecture invariants checked against `cargo metadata` (read once per test run): the
//! direction of the dependencies between workspace crates, the UI and transport crates no
//! library may use, the complete list of `presenters`' normal dependencies, and the
//! dependency features no crate may turn on in a user's graph.

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::Value;
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::OnceLock;

    /// Each workspace library and the workspace crates it may depend on (normal and build
    /// dependencies; dev-dependencies are free). A new library must be added here.
    const ALLOWED: &[(&str, &[&str])] = &[
        // Its own proc-macro crate (`#[tool]`), which depends on nothing in the workspace.
        ("dsh-tools", &["dsh-tools-macros"]),
        ("dsh-tools-macros", &[]),
        ("presenters", &["dsh-tools"]),
        ("agent-loop", &["dsh-tools"]),
        ("mock-adapter", &["agent-loop", "dsh-tools"]),
        ("tool-bash", &["dsh-tools", "presenters"]),
        // The file tools: cards from the card vocabulary, no shell (so not `tool-bash`).
        ("tool-fs", &["dsh-tools", "presenters"]),
        ("openai-adapter", &["agent-loop", "dsh-tools"]),
        // The MCP client registers servers' tools, and its server (the `server` feature)
        // serves any registry's; it spawns no shell, so not `tool-bash`.
        ("tool-mcp", &["dsh-tools"]),
        // A background producer that is not bash: the job tools from `tool-bash` without its
        // local executor, over the jobs runtime of `dsh-tools`.
        ("job-producer-check", &["dsh-tools", "tool-bash"]),
        // The shared test fixtures, which only tests use (see [`TEST_SUPPORT`]).
        ("dsh-test-support", &["dsh-tools"]),
        // Code Mode's runtime dispatches nested calls through the registry alone; the tools
        // it calls (bash among them) are whatever the host registered.
        ("tool-code", &["dsh-tools"]),
        // The ACP agent: sessions of the agent loop, cards projected by the presenters, the
        // registry's approval flow. The tools, the model and the sandbox are the host's, so
        // no tool crate and no adapter.
        ("agent-acp", &["agent-loop", "presenters", "dsh-tools"]),
        // The command: it combines the libraries (see [`COMMANDS`]), but only the published
        // ones, never an example, a check crate or the tooling.
        (
            "dsh-agent",
            &[
                "agent-acp",
                "agent-loop",
                "dsh-tools",
                "mock-adapter",
                "openai-adapter",
                "presenters",
                "tool-bash",
                "tool-code",
                "tool-fs",
                "tool-mcp",
            ],
        ),
    ];

    /// The commands among [`ALLOWED`]: programs that render on a terminal, so the rule that no
    /// library imports UI or transport types does not apply to them.
    const COMMANDS: &[&str] = &["dsh-agent"];

    /// The crate of shared test fixtures: unpublished, and a dev-dependency only, of every
    /// crate (the unrestricted ones included), so no library ships test code.
    const TEST_SUPPORT: &str = "dsh-test-support";

    /// The libraries that talk HTTP (a model adapter to its provider, the MCP client to an
    /// MCP server), and the transport crates each may use. Every other rule still holds for
    /// them.
    const HTTP_CLIENTS: &[(&str, &[&str])] = &[
        ("openai-adapter", &["reqwest", "hyper"]),
        // Only for the header types of a configured server; rmcp owns the client.
        ("tool-mcp", &["reqwest"]),
    ];

    /// Crates exempt from the layering: tools and examples may use anything.
    const UNRESTRICTED: &[&str] = &[
        "xtask",
        "cookbook",
        "bench",
        "echo-agent",
        "embed-agent",
        "tool-host",
        "downstream-check",
    ];

    /// Features of dependencies that change how a user's own code behaves. Cargo unifies
    /// features across the user's whole graph, so none of our crates (tests and benches
    /// included, so the tests run as a user's build does) may turn these on
    /// (docs/design/lossless-json.md).
    const FORBIDDEN_FEATURES: &[(&str, &[&str])] = &[
        ("serde_json", &["arbitrary_precision", "preserve_order"]),
        ("jsonschema", &["arbitrary-precision"]),
    ];

    /// Libraries whose normal dependencies are a complete allow-list. A new entry must be pure:
    /// no I/O, no async runtime, no clock or randomness.
    const PURE: &[(&str, &[&str])] = &[(
        "presenters",
        &["dsh-tools", "serde", "serde_json", "similar"],
    )];

    /// Crates that render or transport: a tool describes its cards as plain data and the host
    /// renders them, so no library may depend on these. The libraries of [`PURE`] are held to
    /// their allow-list instead, which is stricter.
    const UI_AND_TRANSPORT: &[&str] = &[
        "agent-client-protocol",
        "agent-client-protocol-schema",
        "crossterm",
        "ratatui",
        "hyper",
        "reqwest",
    ];

    /// Each workspace package and its normal and build dependencies, by package name.
    type Dependencies = BTreeMap<String, BTreeSet<String>>;

    /// The workspace's dependencies, from one `cargo metadata` shared by every test here.
    fn workspace() -> &'static Dependencies {
        static METADATA: OnceLock<Dependencies> = OnceLock::new();
        METADATA.get_or_init(|| {
            let metadata = crate::metadata(&crate::workspace_root(), &["--no-deps"]);
            let name = |v: &Value| v["name"].as_str().unwrap().to_owned();
            metadata["packages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|package| {
                    let dependencies = package["dependencies"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|d| d["kind"].as_str() != Some("dev"))
                        .map(name)
                        .collect();
                    (name(package), dependencies)
                })
                .collect()
        })
    }

    /// Workspace dependencies against the direction of [`ALLOWED`], and libraries without a rule.
    fn against_the_direction(packages: &Dependencies) -> Vec<String> {
        let mut problems = Vec::new();
        for (name, dependencies) in packages {
            if UNRESTRICTED.contains(&name.as_str()) {
                continue;
            }
            let Some((_, allowed)) = ALLOWED.iter().find(|(library, _)| library == name) else {
                problems.push(format!(
                    "workspace crate `{name}` has no dependency rule in xtask/src/architecture.rs"
                ));
                continue;
            };
            problems.extend(
                dependencies
                    .iter()
                    .filter(|d| packages.contains_key(*d) && !allowed.contains(&d.as_str()))
                    .map(|d| format!("`{name}` may not depend on `{d}` (allowed: {allowed:?})")),
            );
        }
        problems
    }

    /// Normal dependencies of the [`PURE`] libraries outside their allow-lists.
    fn impure(packages: &Dependencies) -> Vec<String> {
        let mut problems = Vec::new();
        for (library, allowed) in PURE {
            let Some(dependencies) = packages.get(*library) else {
                problems.push(format!("`{library}` is not a workspace member"));
                continue;
            };
            problems.extend(
                dependencies
                    .iter()
                    .filter(|d| !allowed.contains(&d.as_str()))
                    .map(|d| format!("`{library}` may not depend on `{d}`: it must stay pure (allowed: {allowed:?})")),
            );
        }
        problems
    }

    /// Libraries depending on a crate of [`UI_AND_TRANSPORT`].
    fn ui_or_transport(packages: &Dependencies) -> Vec<String> {
        let mut problems = Vec::new();
        for (library, _) in ALLOWED {
            if PURE.iter().any(|(pure, _)| pure == library) || COMMANDS.contains(library) {
                continue;
            }
            let Some(dependencies) = packages.get(*library) else {
                continue;
            };
            problems.extend(
                dependencies
                    .iter()
                    .filter(|d| UI_AND_TRANSPORT.contains(&d.as_str()))
                    .filter(|d| {
                        !HTTP_CLIENTS.iter().any(|(client, transports)| {
                            client == library && transports.contains(&d.as_str())
                        })
                    })
                    .map(|d| format!("`{library}` may not depend on `{d}`: libraries never import UI or transport types")),
            );
        }
        problems
    }

    /// Crates that take [`TEST_SUPPORT`] as a normal or build dependency.
    fn test_support_outside_tests(packages: &Dependencies) -> Vec<String> {
        packages
            .iter()
            .filter(|(_, dependencies)| dependencies.contains(TEST_SUPPORT))
            .map(|(name, _)| format!("`{name}` may take `{TEST_SUPPORT}` only as a dev-dependency"))
            .collect()
    }

    /// Architecture invariant: test fixtures stay out of the libraries: the test-support crate
    /// is a dev-dependency only and is never published.
    #[test]
    fn test_support_is_an_unpublished_dev_dependency() {
        assert_eq!(
            test_support_outside_tests(workspace()),
            Vec::<String>::new()
        );
        let metadata = crate::metadata(&crate::workspace_root(), &["--no-deps"]);
        let package = metadata["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == TEST_SUPPORT)
            .unwrap();
        // `[]` is `publish = false`; `null` would mean any registry.
        assert_eq!(package["publish"], serde_json::json!([]));
    }

    /// Architecture invariant: the crates depend on each other only in the documented
    /// direction (dsh-tools on nothing in the workspace but its macro crate).
    #[test]
    fn workspace_dependencies_follow_the_documented_direction() {
        assert_eq!(against_the_direction(workspace()), Vec::<String>::new());
    }

    /// Architecture invariant: tools never import UI or transport types.
    #[test]
    fn no_library_depends_on_ui_or_transport_crates() {
        assert_eq!(ui_or_transport(workspace()), Vec::<String>::new());
    }

    /// Architecture invariant: `presenters` is pure (its source is checked by
    /// crates/presenters/tests/presenters/boundaries.rs).
    #[test]
    fn presenters_normal_dependencies_are_pure() {
        assert_eq!(impure(workspace()), Vec::<String>::new());
    }

    /// The [`FORBIDDEN_FEATURES`] on in a full `cargo metadata` (its `resolve.nodes`, which
    /// hold the features Cargo resolved for the workspace, dev-dependencies included).
    fn forbidden_features(metadata: &Value) -> Vec<String> {
        let mut problems = Vec::new();
        for (crate_name, forbidden) in FORBIDDEN_FEATURES {
            let ids: Vec<&str> = metadata["packages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["name"].as_str() == Some(*crate_name))
                .map(|p| p["id"].as_str().unwrap())
                .collect();
            for node in metadata["resolve"]["nodes"].as_array().unwrap() {
                if !ids.contains(&node["id"].as_str().unwrap()) {
                    continue;
                }
                problems.extend(
                    node["features"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter_map(Value::as_str)
                        .filter(|feature| forbidden.contains(feature))
                        .map(|feature| format!("`{crate_name}` is built with `{feature}`")),
                );
            }
        }
        problems
    }

    /// Architecture invariant: no crate turns on a feature that changes the user's code
    /// (issue: `serde_json/arbitrary_precision` broke untagged enums with floats).
    #[test]
    fn no_crate_turns_on_features_that_change_the_users_code() {
        // The host's graph: other platforms' dependencies need not be downloaded to be read.
        let rustc = std::process::Command::new(std::env::var("RUSTC").unwrap_or("rustc".into()))
            .arg("-vV")
            .output()
            .unwrap();
        let rustc = String::from_utf8(rustc.stdout).unwrap();
        let host = rustc
            .lines()
            .find_map(|line| line.strip_prefix("host: "))
            .unwrap();
        let metadata = crate::metadata(&crate::workspace_root(), &["--filter-platform", host]);
        let serde_json_nodes = metadata["packages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["name"] == "serde_json")
            .count();
        assert!(serde_json_nodes > 0, "serde_json is in the graph");
        assert_eq!(forbidden_features(&metadata), Vec::<String>::new());
    }

    /// The feature rule, on made-up metadata that breaks it.
    #[test]
    fn the_feature_rule_reports_each_forbidden_feature() {
        let metadata = serde_json::json!({
            "packages": [
                {"name": "serde_json", "id": "serde_json@1"},
                {"name": "jsonschema", "id": "jsonschema@0.60"},
                {"name": "serde", "id": "serde@1"},
            ],
            "resolve": {"nodes": [
                {"id": "serde_json@1", "features": ["default", "preserve_order", "raw_value", "std"]},
                {"id": "jsonschema@0.60", "features": ["arbitrary-precision"]},
                {"id": "serde@1", "features": ["preserve_order"]},
            ]},
        });
        assert_eq!(
            forbidden_features(&metadata),
            vec![
                "`serde_json` is built with `preserve_order`",
                "`jsonschema` is built with `arbitrary-precision`",
            ]
        );
    }

    /// Each rule, on a made-up workspace that breaks it once.
    #[test]
    fn each_rule_reports_what_breaks_it() {
        let packages: Dependencies = [
            ("dsh-tools", &["serde"][..]),
            ("presenters", &["dsh-tools", "serde", "tokio"]),
            ("agent-loop", &["dsh-tools", "tool-bash"]),
            ("tool-bash", &["dsh-tools", "presenters", "ratatui"]),
            ("new-library", &["dsh-tools"]),
            ("openai-adapter", &["agent-loop", "reqwest", "ratatui"]),
            (
                "dsh-agent",
                &["tool-bash", "agent-client-protocol", "dsh-test-support"],
            ),
        ]
        .into_iter()
        .map(|(name, deps)| {
            (
                name.to_owned(),
                deps.iter().map(|d| (*d).to_owned()).collect(),
            )
        })
        .collect();
        assert_eq!(
            against_the_direction(&packages),
            vec![
                "`agent-loop` may not depend on `tool-bash` (allowed: [\"dsh-tools\"])",
                "workspace crate `new-library` has no dependency rule in xtask/src/architecture.rs",
            ]
        );
        assert_eq!(
            impure(&packages),
            vec![
                "`presenters` may not depend on `tokio`: it must stay pure (allowed: [\"dsh-tools\", \"serde\", \"serde_json\", \"similar\"])"
            ]
        );
        assert_eq!(
            ui_or_transport(&packages),
            vec![
                "`tool-bash` may not depend on `ratatui`: libraries never import UI or transport types",
                "`openai-adapter` may not depend on `ratatui`: libraries never import UI or transport types",
            ]
        );
        assert_eq!(
            test_support_outside_tests(&packages),
            vec!["`dsh-agent` may take `dsh-test-support` only as a dev-dependency"]
        );
        assert_eq!(
            impure(&Dependencies::new()),
            vec!["`presenters` is not a workspace member"]
        );
    }
}

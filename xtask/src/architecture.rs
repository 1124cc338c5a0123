//! Architecture invariants checked against `cargo metadata`.

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use std::collections::BTreeMap;
    use std::process::Command;

    /// Each workspace library and the workspace crates it may depend on (normal and build
    /// dependencies; dev-dependencies are free). A new library must be added here.
    const ALLOWED: &[(&str, &[&str])] = &[
        ("dsh-tools", &[]),
        ("presenters", &["dsh-tools"]),
        ("agent-loop", &["dsh-tools"]),
        ("mock-adapter", &["agent-loop", "dsh-tools"]),
        ("tool-bash", &["dsh-tools", "presenters"]),
    ];

    /// Crates exempt from the layering: tools and examples may use anything.
    const UNRESTRICTED: &[&str] = &["xtask", "cookbook", "bench", "echo-agent", "dsh-agent"];

    fn workspace_dependencies() -> BTreeMap<String, Vec<String>> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let output = Command::new(cargo)
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .current_dir(crate::workspace_root())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
        let packages = metadata["packages"].as_array().unwrap();
        let members: Vec<String> = packages
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect();
        packages
            .iter()
            .map(|package| {
                let deps = package["dependencies"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|d| d["kind"].as_str() != Some("dev"))
                    .map(|d| d["name"].as_str().unwrap().to_owned())
                    .filter(|name| members.contains(name))
                    .collect();
                (package["name"].as_str().unwrap().to_owned(), deps)
            })
            .collect()
    }

    /// Architecture invariant: the crates depend on each other only in the documented
    /// direction (dsh-tools on nothing in the workspace).
    #[test]
    fn workspace_dependencies_follow_the_documented_direction() {
        for (name, deps) in workspace_dependencies() {
            if UNRESTRICTED.contains(&name.as_str()) {
                continue;
            }
            let Some((_, allowed)) = ALLOWED.iter().find(|(crate_name, _)| *crate_name == name)
            else {
                panic!(
                    "workspace crate `{name}` has no dependency rule in xtask/src/architecture.rs"
                );
            };
            for dep in deps {
                assert!(
                    allowed.contains(&dep.as_str()),
                    "`{name}` may not depend on `{dep}` (allowed: {allowed:?})"
                );
            }
        }
    }
}

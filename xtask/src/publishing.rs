//! What a published crate must carry, checked against `cargo metadata`: the crates.io metadata,
//! a README of its own whose example `cargo test --doc` compiles, and the license files of the
//! repository root. `cargo publish --dry-run --workspace` (in `.ci/run`) proves the packages
//! build; this proves they are complete, and that only the crates under `crates/` (the libraries
//! and the `dsh-agent` command) publish.

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::Value;
    use std::path::{Path, PathBuf};

    /// The license files at the repository root, which every published crate packages.
    const LICENSE_FILES: &[&str] = &["LICENSE-APACHE", "LICENSE-MIT"];

    /// The line of `src/lib.rs` that makes the README's example a doctest.
    const README_DOCTEST: &str = "include_str!(\"../README.md\")";

    /// A workspace package, as far as publishing is concerned.
    #[derive(Debug)]
    struct Package {
        name: String,
        /// The package directory.
        dir: PathBuf,
        /// `false` for `publish = false`.
        publish: bool,
        /// The string fields crates.io shows, by manifest key; `None` when not set.
        fields: Vec<(&'static str, Option<String>)>,
        keywords: usize,
        categories: usize,
    }

    fn packages(root: &Path) -> Vec<Package> {
        let metadata = crate::metadata(root, &["--no-deps"]);
        let text = |v: &Value| v.as_str().map(str::to_owned);
        metadata["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| Package {
                name: text(&p["name"]).unwrap(),
                dir: Path::new(p["manifest_path"].as_str().unwrap())
                    .parent()
                    .unwrap()
                    .to_owned(),
                // `null` means any registry; `[]` is `publish = false`.
                publish: p["publish"].as_array().is_none_or(|r| !r.is_empty()),
                fields: [
                    "description",
                    "documentation",
                    "repository",
                    "license",
                    "readme",
                ]
                .into_iter()
                .map(|key| (key, text(&p[key])))
                .collect(),
                keywords: p["keywords"].as_array().map_or(0, Vec::len),
                categories: p["categories"].as_array().map_or(0, Vec::len),
            })
            .collect()
    }

    /// What keeps each published package from being complete.
    fn incomplete(root: &Path, packages: &[Package]) -> Vec<String> {
        let mut problems = Vec::new();
        for package in packages.iter().filter(|p| p.publish) {
            let name = &package.name;
            if !package.dir.starts_with(root.join("crates")) {
                problems.push(format!(
                    "`{name}` would be published: only the libraries under crates/ are; set `publish = false`"
                ));
                continue;
            }
            for (key, value) in &package.fields {
                if value.is_none() {
                    problems.push(format!("`{name}` has no `{key}`"));
                }
            }
            if package.keywords == 0 {
                problems.push(format!("`{name}` has no `keywords`"));
            }
            if package.categories == 0 {
                problems.push(format!("`{name}` has no `categories`"));
            }
            for file in LICENSE_FILES {
                let packaged = std::fs::read(package.dir.join(file)).ok();
                if packaged.is_none() || packaged != std::fs::read(root.join(file)).ok() {
                    problems.push(format!(
                        "`{name}` does not package the root's {file}: link it from the crate directory"
                    ));
                }
            }
            // A command (a `src/main.rs` and no library) has a README of its own too; its
            // examples are command lines, so there is no doctest to include.
            let command = package.dir.join("src/main.rs").is_file()
                && !package.dir.join("src/lib.rs").is_file();
            if command {
                if !package.dir.join("README.md").is_file() {
                    problems.push(format!("`{name}` needs a README.md"));
                }
                continue;
            }
            let lib = std::fs::read_to_string(package.dir.join("src/lib.rs")).unwrap_or_default();
            if !package.dir.join("README.md").is_file() || !lib.contains(README_DOCTEST) {
                problems.push(format!(
                    "`{name}` needs a README.md whose example src/lib.rs compiles as a doctest (`#[cfg(doctest)] #[doc = {README_DOCTEST}]`)"
                ));
            }
        }
        problems
    }

    /// Publishing invariant: every published crate is under crates/ with its crates.io metadata,
    /// its own README (a library's example compiled) and the root's license files.
    #[test]
    fn published_crates_are_complete() {
        let root = crate::workspace_root().canonicalize().unwrap();
        let packages = packages(&root);
        assert!(packages.iter().any(|p| p.publish && p.name == "dsh-tools"));
        assert_eq!(incomplete(&root, &packages), Vec::<String>::new());
    }

    /// Each rule, on a made-up workspace that breaks it once.
    #[test]
    fn each_rule_reports_what_breaks_it() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        for file in LICENSE_FILES {
            std::fs::write(root.join(file), format!("the {file} text\n")).unwrap();
        }
        let complete = root.join("crates/complete");
        let bare = root.join("crates/bare");
        let command = root.join("crates/command");
        for dir in [&complete, &bare, &command] {
            std::fs::create_dir_all(dir.join("src")).unwrap();
        }
        for file in LICENSE_FILES {
            std::fs::copy(root.join(file), complete.join(file)).unwrap();
        }
        for file in LICENSE_FILES {
            std::fs::copy(root.join(file), command.join(file)).unwrap();
        }
        // A command without a README: the only rule it breaks.
        std::fs::write(command.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(bare.join("LICENSE-MIT"), "another license\n").unwrap();
        std::fs::write(complete.join("README.md"), "# complete\n").unwrap();
        std::fs::write(
            complete.join("src/lib.rs"),
            format!("#[cfg(doctest)]\n#[doc = {README_DOCTEST}]\npub struct ReadmeDoctests;\n"),
        )
        .unwrap();
        let package = |name: &str, dir: PathBuf, publish: bool, set: bool| Package {
            name: name.to_owned(),
            dir,
            publish,
            fields: [
                "description",
                "documentation",
                "repository",
                "license",
                "readme",
            ]
            .into_iter()
            .map(|key| (key, set.then(|| "set".to_owned())))
            .collect(),
            keywords: usize::from(set),
            categories: usize::from(set),
        };
        let packages = [
            package("complete", complete.clone(), true, true),
            package("bare", bare, true, false),
            package("command", command, true, true),
            package("example", root.join("examples/example"), true, true),
            package("tool", root.join("xtask"), false, false),
        ];
        assert_eq!(
            incomplete(root, &packages),
            vec![
                "`bare` has no `description`",
                "`bare` has no `documentation`",
                "`bare` has no `repository`",
                "`bare` has no `license`",
                "`bare` has no `readme`",
                "`bare` has no `keywords`",
                "`bare` has no `categories`",
                "`bare` does not package the root's LICENSE-APACHE: link it from the crate directory",
                "`bare` does not package the root's LICENSE-MIT: link it from the crate directory",
                "`bare` needs a README.md whose example src/lib.rs compiles as a doctest (`#[cfg(doctest)] #[doc = include_str!(\"../README.md\")]`)",
                "`command` needs a README.md",
                "`example` would be published: only the libraries under crates/ are; set `publish = false`",
            ]
        );
    }
}

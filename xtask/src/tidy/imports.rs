//! No file of a crate imports a file that imports it back, however long the circle.
//!
//! Each crate is a directory with `src/lib.rs` or `src/main.rs`; its modules are its files
//! (`src/jobs/runtime.rs` is `jobs::runtime`, `src/jobs/mod.rs` is `jobs`). A file uses
//! another when its code names a `crate::` path into that file's module (the longest module
//! the path names), or when one of its top-level `use super::…` lines names a sibling. A use
//! between a module and one of its ancestors or descendants (`super::Item` from a child,
//! `self::child::Item` from the parent) is not counted: a module directory and its
//! `mod.rs` are one unit, the same reading as `farm-studio look`. Each circle is one finding,
//! naming every use in it with the file and line that makes it.

use super::{Tree, parent};
use std::collections::{BTreeMap, BTreeSet};

/// A module path inside a crate (`["jobs", "runtime"]`); the crate root is empty.
type Module = Vec<String>;

/// One use between two files and where it is made: (from, to) → (file, line).
type Ties = BTreeMap<(Module, Module), (String, usize)>;

pub(super) fn check(tree: &Tree) -> Vec<String> {
    let mut findings = Vec::new();
    for root in crate_roots(tree) {
        let modules = modules(tree, &root);
        let ties = ties(tree, &modules);
        for circle in circles(&ties) {
            let links: Vec<String> = ties
                .iter()
                .filter(|((from, to), _)| circle.contains(from) && circle.contains(to))
                .map(|((from, to), (file, line))| {
                    format!("{} → {} ({file}:{line})", from.join("::"), to.join("::"))
                })
                .collect();
            findings.push(format!(
                "{root}: files import each other in a circle: {}; fix: move what both need into a module beneath them, so imports run one way",
                links.join(", ")
            ));
        }
    }
    findings
}

/// The `src` directory of every crate.
fn crate_roots(tree: &Tree) -> Vec<String> {
    let roots: BTreeSet<String> = tree
        .rust()
        .filter(|(file, _)| file.ends_with("src/lib.rs") || file.ends_with("src/main.rs"))
        .map(|(file, _)| parent(file).to_owned())
        .collect();
    roots.into_iter().collect()
}

/// Each file of the crate at `root` and its module (binaries under `src/bin` excluded).
fn modules(tree: &Tree, root: &str) -> BTreeMap<String, Module> {
    let prefix = format!("{root}/");
    tree.rust()
        .filter_map(|(file, _)| {
            let relative = file.strip_prefix(&prefix)?.strip_suffix(".rs")?;
            if relative.starts_with("bin/") {
                return None;
            }
            let mut module: Module = relative.split('/').map(str::to_owned).collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            Some((file.to_owned(), module))
        })
        .collect()
}

/// The uses between a crate's files that are not between a module and its ancestor.
fn ties(tree: &Tree, modules: &BTreeMap<String, Module>) -> Ties {
    let known: BTreeSet<&Module> = modules.values().collect();
    let mut ties = Ties::new();
    for (file, module) in modules {
        let Some(text) = tree.texts.get(file) else {
            continue;
        };
        for (index, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            let mut named: Vec<Vec<&str>> = Vec::new();
            for (at, _) in code.match_indices("crate::") {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
                    continue;
                }
                paths(&code[at + "crate::".len()..], Vec::new(), &mut named);
            }
            if let Some(at) = code.find("super::").filter(|_| is_top_level_use(line)) {
                let mut base: Vec<&str> = module.iter().map(String::as_str).collect();
                let mut rest = &code[at..];
                while let Some(after) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = after;
                }
                paths(rest, base, &mut named);
            }
            for path in named {
                let Some(target) = (0..=path.len())
                    .rev()
                    .map(|n| {
                        path[..n]
                            .iter()
                            .map(|s| (*s).to_owned())
                            .collect::<Module>()
                    })
                    .find(|m| known.contains(m))
                else {
                    continue;
                };
                if target.starts_with(module) || module.starts_with(&target) {
                    continue;
                }
                ties.entry((module.clone(), target))
                    .or_insert_with(|| (file.clone(), index + 1));
            }
        }
    }
    ties
}

/// Whether a line is a `use` at the top level of its file (not indented into an inline
/// module, whose `super` is the file itself).
fn is_top_level_use(line: &str) -> bool {
    let rest = line
        .strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub(super) "))
        .or_else(|| line.strip_prefix("pub "))
        .unwrap_or(line);
    rest.starts_with("use ")
}

/// The paths a `use` tree or a path names, each as its segments after `prefix`:
/// `a::{b, c::d}` gives `a::b` and `a::c::d`. Returns how many bytes it read.
fn paths<'a>(text: &'a str, prefix: Vec<&'a str>, out: &mut Vec<Vec<&'a str>>) -> usize {
    let mut path = prefix;
    let mut at = 0;
    loop {
        let rest = &text[at..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut read = at + 1;
            let mut inner = group;
            loop {
                let trimmed = inner.trim_start();
                read += inner.len() - trimmed.len();
                if trimmed.is_empty() {
                    return read;
                }
                if trimmed.starts_with('}') {
                    return read + 1;
                }
                if let Some(after) = trimmed.strip_prefix(',') {
                    read += 1;
                    inner = after;
                    continue;
                }
                let used = paths(trimmed, path.clone(), out);
                if used == 0 {
                    return read;
                }
                read += used;
                inner = &text[read..];
            }
        }
        let length = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if length == 0 {
            out.push(path);
            return at + usize::from(rest.starts_with('*'));
        }
        path.push(&rest[..length]);
        at += length;
        if text[at..].starts_with("::") {
            at += 2;
        } else {
            out.push(path);
            return at;
        }
    }
}

/// The circles of a set of ties: each group of two or more modules that reach each other.
fn circles(ties: &Ties) -> Vec<BTreeSet<Module>> {
    let mut next: BTreeMap<&Module, Vec<&Module>> = BTreeMap::new();
    for (from, to) in ties.keys() {
        next.entry(from).or_default().push(to);
    }
    let reach = |start: &Module| -> BTreeSet<Module> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(module) = stack.pop() {
            for to in next.get(module).into_iter().flatten() {
                if seen.insert((*to).clone()) {
                    stack.push(to);
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&Module, BTreeSet<Module>> =
        next.keys().map(|m| (*m, reach(m))).collect();
    let mut circles: Vec<BTreeSet<Module>> = Vec::new();
    for (module, reached) in &reachable {
        if !reached.contains(*module) || circles.iter().any(|c| c.contains(*module)) {
            continue;
        }
        let circle: BTreeSet<Module> = reached
            .iter()
            .filter(|other| reachable.get(other).is_some_and(|r| r.contains(*module)))
            .cloned()
            .collect();
        circles.push(circle);
    }
    circles
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn use_trees_give_every_path() {
        let mut out = Vec::new();
        let read = paths(
            "{alpha::{Beta, gamma::Delta}, epsilon, zeta::*};",
            vec![],
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                vec!["alpha", "Beta"],
                vec!["alpha", "gamma", "Delta"],
                vec!["epsilon"],
                vec!["zeta"],
            ]
        );
        assert_eq!(
            read,
            "{alpha::{Beta, gamma::Delta}, epsilon, zeta::*}".len()
        );
    }

    #[test]
    fn a_circle_between_files_is_reported_and_parent_child_use_is_not() {
        let tree = Tree::of(&[
            (
                "crates/k/src/lib.rs",
                "mod alpha;\nmod beta;\nmod gamma;\nuse crate::alpha::A;\n",
            ),
            // alpha → beta → gamma → alpha: a circle of three files.
            (
                "crates/k/src/alpha/mod.rs",
                "mod inner;\npub use self::inner::A;\nuse super::beta::B;\n",
            ),
            (
                "crates/k/src/alpha/inner.rs",
                "use super::A;\nuse crate::alpha::Other;\n",
            ),
            (
                "crates/k/src/beta.rs",
                "pub fn f() { crate::gamma::g(); }\n",
            ),
            (
                "crates/k/src/gamma.rs",
                "// crate::beta in a comment is no use\nuse crate::{alpha::Top, alpha::inner::A};\n",
            ),
            // Siblings inside a module directory: one and two use each other.
            ("crates/m/src/main.rs", "mod jobs;\n"),
            ("crates/m/src/jobs/mod.rs", "mod one;\nmod two;\n"),
            (
                "crates/m/src/jobs/one.rs",
                "use super::two::T;\nmod tests {\n    use super::*;\n}\n",
            ),
            (
                "crates/m/src/jobs/two.rs",
                "fn f() -> crate::jobs::one::O { todo() }\n",
            ),
            // A tie in one direction only is fine.
            ("crates/n/src/lib.rs", "mod a;\nmod b;\n"),
            ("crates/n/src/a.rs", "use crate::b::B;\n"),
            ("crates/n/src/b.rs", "use super::Root;\n"),
        ]);
        let fix = "fix: move what both need into a module beneath them, so imports run one way";
        assert_eq!(
            check(&tree),
            vec![
                format!(
                    "crates/k/src: files import each other in a circle: alpha → beta (crates/k/src/alpha/mod.rs:3), beta → gamma (crates/k/src/beta.rs:1), gamma → alpha (crates/k/src/gamma.rs:2); {fix}"
                ),
                format!(
                    "crates/m/src: files import each other in a circle: jobs::one → jobs::two (crates/m/src/jobs/one.rs:1), jobs::two → jobs::one (crates/m/src/jobs/two.rs:1); {fix}"
                ),
            ]
        );
    }
}

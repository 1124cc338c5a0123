//! `cargo xtask mutants`: mutation testing of the files where nothing may be lost.
//!
//! A test suite can be green and still not pin the code that decides what a model sees. This
//! command runs `cargo-mutants` (a pinned version, installed into `target/tools` when missing)
//! over a short list of critical files and fails on any missed mutant that is not listed, with a
//! one-line reason, in [`ACCEPTED`]. It is not part of `.ci/run`: it is slow on two cores.
//! `docs/reliability.md` records the last runs.
//!
//! By default each file's mutants run against its fast set ([`Critical::fast_set`]): the tests
//! of its crate that exercise it, one job at a time, with debug info off (every mutant is built
//! and linked again, and debug info is most of that work). The fast set is sound for the
//! verdict "caught": the whole suite contains it, so a mutant it catches, the whole suite
//! catches. A mutant it misses is then worth a run against the whole suite (`--whole-suite`)
//! before a test is written for it.

use anyhow::{Context, Result, bail};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned `cargo-mutants` version: mutant names (and so the accepted list) depend on it.
pub(crate) const VERSION: &str = "27.1.0";

/// The file of accepted (equivalent) mutants, relative to the workspace root.
pub(crate) const ACCEPTED: &str = "xtask/mutants-accepted.txt";

/// A file whose every mutant must be caught by its crate's tests.
#[derive(Debug)]
pub(crate) struct Critical {
    /// The file, relative to the workspace root.
    pub(crate) file: &'static str,
    /// The package whose tests run against each mutant.
    pub(crate) package: &'static str,
    /// What the file decides, in a few words (printed in the report).
    pub(crate) holds: &'static str,
    /// The `cargo test` arguments that select the file's fast set: the package's tests that
    /// exercise it (`--lib`, `--test=NAME`, or `--tests` for every test target), without the
    /// slow rest (doctests, other test binaries).
    pub(crate) fast_set: &'static [&'static str],
}

/// The fast set of the agent loop's files: every test target of `agent-loop` (its unit tests
/// and all its integration tests, which drive turns, notices, sessions and the store), only not
/// the doctests, which are slow to build and do not run a turn.
const AGENT_LOOP_FAST_SET: &[&str] = &["--tests"];

/// The critical files.
pub(crate) const CRITICAL: &[Critical] = &[
    Critical {
        file: "crates/tool-bash/src/output.rs",
        package: "tool-bash",
        holds: "output windows, incremental reads, skip notes, spill",
        // The collector's model test is a module of the crate's one test binary.
        fast_set: &["--lib", "--test=tool_bash"],
    },
    Critical {
        file: "crates/dsh-tools/src/schema/validate.rs",
        package: "dsh-tools",
        holds: "argument validation and its messages",
        fast_set: &["--lib"],
    },
    Critical {
        file: "crates/dsh-tools/src/jobs/runtime.rs",
        package: "dsh-tools",
        holds: "job settlement",
        fast_set: &["--test=dsh_tools"],
    },
    Critical {
        file: "crates/dsh-tools/src/jobs/notice.rs",
        package: "dsh-tools",
        holds: "exactly-once completion notices",
        fast_set: &["--test=dsh_tools"],
    },
    Critical {
        file: "crates/dsh-tools/src/pipeline.rs",
        package: "dsh-tools",
        holds: "the order of the execution stages",
        // The targets of the recorded run (docs/reliability.md): the stage order shows in
        // cancellation, policy, argument limits, spans and presentation as well.
        fast_set: &["--lib", "--test=dsh_tools", "--test=spans"],
    },
    Critical {
        file: "crates/agent-loop/src/agent/mod.rs",
        package: "agent-loop",
        holds: "the agent loop's notice drain",
        fast_set: AGENT_LOOP_FAST_SET,
    },
    Critical {
        file: "crates/agent-loop/src/agent/state.rs",
        package: "agent-loop",
        holds: "the inbox and the release of a turn",
        fast_set: AGENT_LOOP_FAST_SET,
    },
];

/// What the command was asked to do.
#[derive(Debug, Default)]
pub(crate) struct Options {
    /// Only this critical file (as listed, or a suffix of it).
    pub(crate) file: Option<String>,
    /// Only mutants on lines changed against this git revision.
    pub(crate) in_diff: Option<String>,
    /// Test each mutant against its crate's whole test suite instead of the file's fast set.
    pub(crate) whole_suite: bool,
}

impl Options {
    pub(crate) fn parse(args: &[String]) -> Result<Options> {
        let mut options = Options::default();
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            match arg.as_str() {
                "--file" => {
                    options.file = Some(rest.next().context("--file needs a path")?.clone());
                }
                "--in-diff" => {
                    options.in_diff = Some(
                        rest.next()
                            .context("--in-diff needs a git revision")?
                            .clone(),
                    );
                }
                "--whole-suite" => options.whole_suite = true,
                unknown => bail!("unknown mutants option `{unknown}`"),
            }
        }
        Ok(options)
    }
}

/// The longest a mutant's build or tests may take against the fast set, in seconds: a mutant
/// that makes a loop endless is then counted as caught (timed out) instead of hanging the run.
const FAST_SET_TIMEOUT: &str = "120";
/// The same against a crate's whole suite, which takes several times longer.
const WHOLE_SUITE_TIMEOUT: &str = "600";

/// The environment of cargo-mutants' builds: debug info off (every mutant is linked again, and
/// debug info is most of the work) and no incremental state (each mutant is built once).
pub(crate) const BUILD_ENV: &[(&str, &str)] = &[
    ("CARGO_PROFILE_DEV_DEBUG", "0"),
    ("CARGO_PROFILE_TEST_DEBUG", "0"),
    ("CARGO_INCREMENTAL", "0"),
];

/// The arguments of one `cargo-mutants` run over `critical`, writing to `output`: one job, a
/// timeout, the file's fast set or (`whole_suite`) its package's whole suite, and only the
/// mutants on lines of `diff` when one is given.
pub(crate) fn mutants_args(
    critical: &Critical,
    whole_suite: bool,
    output: &Path,
    diff: Option<&Path>,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "mutants",
        "--no-shuffle",
        "--jobs",
        "1",
        "--file",
        critical.file,
        "--package",
        critical.package,
        "--timeout",
        if whole_suite {
            WHOLE_SUITE_TIMEOUT
        } else {
            FAST_SET_TIMEOUT
        },
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    if !whole_suite {
        args.extend(
            critical
                .fast_set
                .iter()
                .map(|arg| OsString::from(format!("--cargo-arg={arg}"))),
        );
    }
    args.push("--output".into());
    args.push(output.into());
    if let Some(diff) = diff {
        args.push("--in-diff".into());
        args.push(diff.into());
    }
    args
}

/// A mutant's name without its `:line:column` position, so accepted entries survive edits
/// elsewhere in the file.
pub(crate) fn without_position(mutant: &str) -> String {
    let mut parts = mutant.splitn(4, ':');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(file), Some(line), Some(column), Some(rest))
            if line.chars().all(|c| c.is_ascii_digit())
                && column.chars().all(|c| c.is_ascii_digit()) =>
        {
            format!("{file}:{}", rest.trim_start())
        }
        _ => mutant.trim().to_owned(),
    }
}

/// The accepted mutants: one per line, `NAME # reason`; the reason is required.
pub(crate) fn parse_accepted(text: &str) -> Result<BTreeSet<String>> {
    let mut accepted = BTreeSet::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((mutant, reason)) = line.rsplit_once(" # ") else {
            bail!(
                "{ACCEPTED}:{}: an accepted mutant needs a reason after ` # `",
                number + 1
            );
        };
        if reason.trim().is_empty() {
            bail!("{ACCEPTED}:{}: the reason is empty", number + 1);
        }
        accepted.insert(without_position(mutant));
    }
    Ok(accepted)
}

/// The missed mutants that are not accepted.
pub(crate) fn unaccepted(missed: &str, accepted: &BTreeSet<String>) -> Vec<String> {
    missed
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .filter(|line| !accepted.contains(&without_position(line)))
        .map(str::to_owned)
        .collect()
}

/// `target/tools/bin/cargo-mutants` at [`VERSION`], installed when missing or different.
fn install(root: &Path) -> Result<PathBuf> {
    let tools = root.join("target/tools");
    let binary = tools.join("bin/cargo-mutants");
    // Run as cargo runs a subcommand: `cargo-mutants --version` alone is a usage error.
    let installed = Command::new(&binary)
        .args(["mutants", "--version"])
        .output()
        .ok()
        .is_some_and(|out| String::from_utf8_lossy(&out.stdout).contains(VERSION));
    if !installed {
        println!(
            "mutants: installing cargo-mutants {VERSION} into {}",
            tools.display()
        );
        let status = crate::cargo()
            .args(["install", "cargo-mutants", "--locked", "--version", VERSION])
            .arg("--root")
            .arg(&tools)
            .status()
            .context("running cargo install")?;
        if !status.success() {
            bail!("installing cargo-mutants {VERSION} failed ({status})");
        }
    }
    Ok(binary)
}

/// Whether cargo-mutants ran to the end: with every mutant caught (0), some missed (2: its
/// lists decide against the accepted ones) or some timed out (3: a mutant that hangs the tests
/// is caught). Anything else (bad arguments, failing tests on the unmutated tree, a diff that
/// does not apply, an internal error, a signal) means the mutants were not judged, which must
/// never pass for "all caught".
pub(crate) fn judge_exit(code: Option<i32>) -> Result<()> {
    match code {
        Some(0 | 2 | 3) => Ok(()),
        Some(1) => bail!("cargo-mutants rejected its arguments (exit 1)"),
        Some(4) => bail!("the tests fail on the unmutated tree (cargo-mutants exit 4)"),
        Some(5 | 6) => bail!("cargo-mutants could not use the --in-diff patch (exit {code:?})"),
        Some(other) => bail!("cargo-mutants failed (exit {other})"),
        None => bail!("cargo-mutants was killed by a signal"),
    }
}

fn count_lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|text| text.lines().filter(|l| !l.trim().is_empty()).count())
        .unwrap_or(0)
}

/// The names of the workspace's packages.
fn workspace_members(root: &Path) -> Result<Vec<String>> {
    let output = crate::cargo()
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let names = metadata["packages"]
        .as_array()
        .context("cargo metadata lists no packages")?
        .iter()
        .filter_map(|package| package["name"].as_str().map(str::to_owned))
        .collect();
    Ok(names)
}

/// Removes the workspace's own crates from the shared target directory `build`, keeping the
/// built dependencies.
fn clean_members(root: &Path, build: &Path, members: &[String]) -> Result<()> {
    if !build.is_dir() {
        return Ok(());
    }
    let mut command = crate::cargo();
    command
        .arg("clean")
        .arg("--target-dir")
        .arg(build)
        .current_dir(root);
    for member in members {
        command.args(["--package", member]);
    }
    let status = command.status().context("running cargo clean")?;
    if !status.success() {
        bail!(
            "cargo clean of the workspace's crates in {} failed",
            build.display()
        );
    }
    Ok(())
}

/// Runs the mutants of the selected critical files and fails on unaccepted survivors.
pub(crate) fn run(root: &Path, options: &Options) -> Result<()> {
    let selected: Vec<&Critical> = CRITICAL
        .iter()
        .filter(|c| options.file.as_deref().is_none_or(|f| c.file.ends_with(f)))
        .collect();
    if selected.is_empty() {
        let known: Vec<&str> = CRITICAL.iter().map(|c| c.file).collect();
        bail!(
            "no critical file matches; the list is: {}",
            known.join(", ")
        );
    }
    let accepted =
        parse_accepted(&std::fs::read_to_string(root.join(ACCEPTED)).unwrap_or_default())?;
    let binary = install(root)?;
    // cargo-mutants does not create the directory its output directory goes in.
    std::fs::create_dir_all(root.join("target/mutants"))?;
    let diff = match &options.in_diff {
        Some(revision) => {
            let out = Command::new("git")
                .args(["diff", revision])
                .current_dir(root)
                .output()
                .context("running git diff")?;
            let path = root.join("target/mutants/in-diff.patch");
            std::fs::write(&path, out.stdout)?;
            Some(path)
        }
        None => None,
    };
    // One target directory for every file's run, so the dependencies are built once, not once
    // per file in each copy of the tree. The workspace's own crates are cleaned out of it before
    // each file: a copy's sources must never pass for the last mutant's build.
    let build = root.join("target/mutants/build");
    let members = workspace_members(root)?;
    let mut failures = Vec::new();
    for critical in selected {
        clean_members(root, &build, &members)?;
        let slug = critical.file.replace(['/', '.'], "_");
        let output = root.join("target/mutants").join(&slug);
        if options.whole_suite {
            println!(
                "mutants: {} ({}) against {}'s whole test suite",
                critical.file, critical.holds, critical.package
            );
        } else {
            println!(
                "mutants: {} ({}) against {}'s tests {}",
                critical.file,
                critical.holds,
                critical.package,
                critical.fast_set.join(" ")
            );
        }
        let mut command = Command::new(&binary);
        command
            .args(mutants_args(
                critical,
                options.whole_suite,
                &output,
                diff.as_deref(),
            ))
            .envs(BUILD_ENV.iter().copied())
            .env("CARGO_TARGET_DIR", &build)
            .current_dir(root);
        let status = command.status().context("running cargo-mutants")?;
        judge_exit(status.code())?;
        let out = output.join("mutants.out");
        if !out.join("outcomes.json").is_file() {
            bail!(
                "cargo-mutants left no report in {}: nothing was tested",
                out.display()
            );
        }
        let missed = std::fs::read_to_string(out.join("missed.txt")).unwrap_or_default();
        let left = unaccepted(&missed, &accepted);
        println!(
            "mutants: {}: {} caught, {} missed ({} accepted as equivalent), {} unviable, {} timed out",
            critical.file,
            count_lines(&out.join("caught.txt")),
            count_lines(&out.join("missed.txt")),
            count_lines(&out.join("missed.txt")) - left.len(),
            count_lines(&out.join("unviable.txt")),
            count_lines(&out.join("timeout.txt")),
        );
        failures.extend(left);
    }
    if failures.is_empty() {
        println!("mutants: every mutant of the critical files is caught or accepted");
        return Ok(());
    }
    for mutant in &failures {
        println!("missed: {mutant}");
    }
    bail!(
        "{} missed mutant(s): add a test that catches each, or list it with a reason in {ACCEPTED}",
        failures.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_finished_run_of_cargo_mutants_is_judged() {
        for finished in [0, 2, 3] {
            assert!(judge_exit(Some(finished)).is_ok(), "exit {finished}");
        }
        for failed in [Some(1), Some(4), Some(5), Some(6), Some(70), None] {
            assert!(judge_exit(failed).is_err(), "exit {failed:?}");
        }
    }

    #[test]
    fn positions_are_dropped_from_mutant_names() {
        assert_eq!(
            without_position("crates/a/src/b.rs:12:5: replace f -> bool with true"),
            "crates/a/src/b.rs:replace f -> bool with true"
        );
        assert_eq!(without_position("no position here"), "no position here");
    }

    #[test]
    fn accepted_mutants_need_a_reason_and_match_whatever_the_line() {
        let accepted = parse_accepted(
            "# comment\n\ncrates/a/src/b.rs:1:1: replace < with <= in f # an early exit only\n",
        )
        .unwrap();
        let missed = "crates/a/src/b.rs:40:9: replace < with <= in f\ncrates/a/src/b.rs:50:1: delete match arm in g\n";
        assert_eq!(
            unaccepted(missed, &accepted),
            vec!["crates/a/src/b.rs:50:1: delete match arm in g".to_owned()]
        );
        assert!(parse_accepted("crates/a/src/b.rs:1:1: x\n").is_err());
        assert!(parse_accepted("crates/a/src/b.rs:1:1: x #  \n").is_err());
    }

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect()
    }

    const OUTPUT_COLLECTOR: Critical = Critical {
        file: "crates/tool-bash/src/output.rs",
        package: "tool-bash",
        holds: "output windows",
        fast_set: &["--lib", "--test=tool_bash"],
    };

    #[test]
    fn by_default_a_file_runs_against_its_fast_set_one_job_at_a_time_with_a_timeout() {
        let args = mutants_args(
            &OUTPUT_COLLECTOR,
            false,
            Path::new("target/mutants/out"),
            None,
        );
        pretty_assertions::assert_eq!(
            strings(&args),
            [
                "mutants",
                "--no-shuffle",
                "--jobs",
                "1",
                "--file",
                "crates/tool-bash/src/output.rs",
                "--package",
                "tool-bash",
                "--timeout",
                "120",
                "--cargo-arg=--lib",
                "--cargo-arg=--test=tool_bash",
                "--output",
                "target/mutants/out",
            ]
        );
    }

    #[test]
    fn the_whole_suite_drops_the_test_selection_and_waits_longer() {
        let args = mutants_args(
            &OUTPUT_COLLECTOR,
            true,
            Path::new("target/mutants/out"),
            Some(Path::new("target/mutants/in-diff.patch")),
        );
        pretty_assertions::assert_eq!(
            strings(&args),
            [
                "mutants",
                "--no-shuffle",
                "--jobs",
                "1",
                "--file",
                "crates/tool-bash/src/output.rs",
                "--package",
                "tool-bash",
                "--timeout",
                "600",
                "--output",
                "target/mutants/out",
                "--in-diff",
                "target/mutants/in-diff.patch",
            ]
        );
    }

    #[test]
    fn the_options_select_a_file_a_diff_and_the_whole_suite() {
        let args = |list: &[&str]| list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        let options = Options::parse(&args(&["--file", "output.rs", "--in-diff", "main"])).unwrap();
        assert_eq!(options.file.as_deref(), Some("output.rs"));
        assert_eq!(options.in_diff.as_deref(), Some("main"));
        assert!(!options.whole_suite);
        assert!(
            Options::parse(&args(&["--whole-suite"]))
                .unwrap()
                .whole_suite
        );
        assert!(Options::parse(&args(&["--file"])).is_err());
        assert!(Options::parse(&args(&["--in-diff"])).is_err());
        assert!(Options::parse(&args(&["--fast"])).is_err());
    }

    #[test]
    fn builds_for_mutants_have_no_debug_info_and_no_incremental_state() {
        let env: BTreeSet<(&str, &str)> = BUILD_ENV.iter().copied().collect();
        for setting in [
            ("CARGO_PROFILE_DEV_DEBUG", "0"),
            ("CARGO_PROFILE_TEST_DEBUG", "0"),
            ("CARGO_INCREMENTAL", "0"),
        ] {
            assert!(env.contains(&setting), "{setting:?}");
        }
    }

    /// A fast set that named a missing test target would fail every mutant's build, so every
    /// mutant would count as caught; each `--test=NAME` must be a test of the file's package.
    #[test]
    fn every_fast_set_names_the_unit_tests_or_test_targets_of_the_files_package() {
        let root = crate::workspace_root();
        for critical in CRITICAL {
            assert!(!critical.fast_set.is_empty(), "{}", critical.file);
            let (package_dir, _) = critical.file.split_once("/src/").unwrap();
            for arg in critical.fast_set {
                if *arg == "--lib" || *arg == "--tests" {
                    continue;
                }
                let name = arg.strip_prefix("--test=").unwrap_or_else(|| {
                    panic!(
                        "{}: `{arg}` is not --lib, --tests or --test=NAME",
                        critical.file
                    )
                });
                let tests = root.join(package_dir).join("tests");
                assert!(
                    tests.join(format!("{name}.rs")).is_file()
                        || tests.join(name).join("main.rs").is_file(),
                    "{}: no test target `{name}` in {}",
                    critical.file,
                    tests.display()
                );
            }
        }
    }

    #[test]
    fn every_critical_file_exists() {
        let root = crate::workspace_root();
        for critical in CRITICAL {
            assert!(root.join(critical.file).is_file(), "{}", critical.file);
        }
    }
}

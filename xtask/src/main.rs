//! Workspace automation: `cargo xtask <command>`. The commands and their options are listed
//! once, in [`USAGE`] (`cargo xtask help` prints it).
//!
//! The modules: `drift` (`drift-check`) with `generate` (the generated doc regions), `tidy`
//! (`tidy`), `vendor` (`vendor-docs`), `snapshots` (`snapshots`), `mutants` (`mutants`),
//! `setup` (`setup`), and
//! two test-only modules that check the workspace against `cargo metadata`: `architecture`
//! (dependency direction, purity, features, test support) and `publishing` (what a published
//! crate carries).

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod architecture;
mod drift;
mod generate;
mod mutants;
mod publishing;
mod setup;
mod snapshots;
mod tidy;
mod vendor;

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every command and its options: the help text, and the one list the docs follow.
const USAGE: &str = "usage: cargo xtask <command>

commands:
  setup [--ci]                   install what the tests need when it is missing (bubblewrap,
                                 node and npm, through apt-get, with sudo when not root);
                                 --ci adds the cross targets and the AArch64 C compiler
  drift-check [--bless]          check (or rewrite) the generated regions of the docs, the
                                 bilingual pairs and the cookbook wiring
  drift-check --vendor DIR       check a downstream project's vendored docs against the
                                 dsh-tools version its Cargo.lock resolves
  tidy [--root DIR]              check (this checkout, or the one at DIR) that the docs' test names and section links resolve,
                                 nothing cites a document outside the repository, no Rust
                                 file is over 800 lines without a reason, no module
                                 imports one that imports it back, and every crate under
                                 crates/ holds the unsafe budget its crate docs state
  vendor-docs DEST               write the docs with a VERSION stamp and content hashes
  snapshots --references FILE    fail on committed snapshots no test used (run the tests with
                                 INSTA_SNAPSHOT_REFERENCES_FILE=FILE first)
  stress [-- TEST-ARGS]          run the heavy reliability suite in release mode
  bench [--quick] [--json]       run the benchmarks against their baselines in release mode
  mutants [--file F] [--in-diff REV] [--whole-suite]
                                 mutation-test the critical files (cargo-mutants, pinned,
                                 installed into target/tools), each against its fast set of
                                 tests (or its crate's whole suite); fails on missed mutants
                                 not accepted in xtask/mutants-accepted.txt";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    match args.first().map(String::as_str) {
        Some("drift-check") => {
            let mut bless = false;
            let mut vendor: Option<PathBuf> = None;
            let mut rest = args.iter().skip(1);
            while let Some(arg) = rest.next() {
                match arg.as_str() {
                    "--bless" => bless = true,
                    "--vendor" => match rest.next() {
                        Some(dir) => vendor = Some(PathBuf::from(dir)),
                        None => bail!("--vendor needs a directory\n\n{USAGE}"),
                    },
                    unknown => bail!("unknown drift-check option `{unknown}`\n\n{USAGE}"),
                }
            }
            match vendor {
                Some(_) if bless => bail!(
                    "--bless cannot rewrite vendored docs; re-vendor them with `cargo xtask vendor-docs DIR`\n\n{USAGE}"
                ),
                Some(dir) => check_vendored(&root, &dir),
                None => check_drift(&root, bless),
            }
        }
        Some("setup") => match args.get(1).map(String::as_str) {
            None => setup::run(false),
            Some("--ci") => setup::run(true),
            Some(other) => bail!("unknown setup option `{other}`\n\n{USAGE}"),
        },
        Some("tidy") => {
            let checkout = match (args.get(1).map(String::as_str), args.get(2)) {
                (None, _) => root,
                (Some("--root"), Some(dir)) => PathBuf::from(dir),
                _ => bail!("usage: cargo xtask tidy [--root DIR]\n\n{USAGE}"),
            };
            let findings = tidy::check(&tidy::Tree::read(&checkout)?);
            for finding in &findings {
                println!("{finding}");
            }
            if !findings.is_empty() {
                bail!("tidy: {} finding(s)", findings.len());
            }
            println!(
                "tidy: the docs' tests and sections resolve, nothing cites an outside document, the files keep their budget, no import circles, every crate holds its unsafe budget"
            );
            Ok(())
        }
        Some("vendor-docs") => {
            let Some(dest) = args.get(1) else {
                bail!("usage: cargo xtask vendor-docs DEST\n\n{USAGE}");
            };
            let count = vendor::vendor_docs(&root, Path::new(dest))?;
            println!(
                "vendored {count} docs of dsh-tools {} into {dest} (with {} and {})",
                dsh_tools::VERSION,
                vendor::VERSION_FILE,
                vendor::HASHES_FILE
            );
            Ok(())
        }
        Some("snapshots") => {
            let file = match (args.get(1).map(String::as_str), args.get(2)) {
                (Some("--references"), Some(file)) => file,
                _ => bail!("usage: cargo xtask snapshots --references FILE\n\n{USAGE}"),
            };
            let references = read(Path::new(file))?;
            let orphans = snapshots::unreferenced(&root, &references)?;
            if orphans.is_empty() {
                println!("snapshots: every committed snapshot is referenced by a test");
                return Ok(());
            }
            for orphan in &orphans {
                println!("unreferenced snapshot: {}", orphan.display());
            }
            bail!(
                "{} snapshot file(s) are not used by any test: delete them, or restore the assertion that used them",
                orphans.len()
            );
        }
        Some("stress") => {
            // The heavy reliability suite, in release mode (see docs/reliability.md).
            let status = cargo()
                .args([
                    "test",
                    "--release",
                    "-p",
                    "tool-bash",
                    "--features",
                    "stress",
                ])
                .args(["--test", "stress"])
                .args(&args[1..])
                .current_dir(&root)
                .status()
                .context("running cargo")?;
            if !status.success() {
                bail!("the stress suite failed ({status})");
            }
            Ok(())
        }
        Some("bench") => {
            // The release-mode benchmarks listed in docs/performance.md.
            let status = cargo()
                .args(["run", "--release", "--quiet", "-p", "bench", "--"])
                .args(&args[1..])
                .current_dir(&root)
                .status()
                .context("running cargo")?;
            if !status.success() {
                bail!("the benchmarks failed ({status})");
            }
            Ok(())
        }
        Some("mutants") => {
            let options = mutants::Options::parse(&args[1..])
                .map_err(|e| anyhow::anyhow!("{e}\n\n{USAGE}"))?;
            mutants::run(&root, &options)
        }
        Some("help" | "--help" | "-h") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown command `{other}`\n\n{USAGE}"),
    }
}

/// `drift-check [--bless]`: prints the report and fails when it has problems.
fn check_drift(root: &Path, bless: bool) -> Result<()> {
    let mode = if bless {
        drift::Mode::Bless
    } else {
        drift::Mode::Check
    };
    let report = drift::run(root, mode)?;
    print!("{report}");
    if !report.is_clean() {
        bail!("the docs have drifted from the code");
    }
    Ok(())
}

/// `drift-check --vendor DIR`: prints each problem of the vendored copy and fails if any.
fn check_vendored(root: &Path, dir: &Path) -> Result<()> {
    let problems = vendor::check_vendored(root, dir)?;
    if problems.is_empty() {
        println!(
            "drift-check --vendor: {} matches dsh-tools {}",
            dir.display(),
            dsh_tools::VERSION
        );
        return Ok(());
    }
    for problem in &problems {
        println!("{problem}");
    }
    bail!(
        "{} vendored file(s) or stamps do not match; re-vendor with `cargo xtask vendor-docs {}`",
        problems.len(),
        dir.display()
    );
}

/// The workspace root: xtask's manifest directory is `<root>/xtask`.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The cargo that runs xtask (`$CARGO`), or the one on `PATH`.
fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// `cargo metadata --format-version 1 --offline` with `args`, run in `dir`, for the tests that
/// read the workspace's graph; panics with cargo's message when it fails.
#[cfg(test)]
fn metadata(dir: &Path, args: &[&str]) -> serde_json::Value {
    let output = cargo()
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Reads a file, naming it in the error.
fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

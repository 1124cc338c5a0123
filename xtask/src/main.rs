//! Workspace automation: `cargo xtask <command>`.
//!
//! - `drift-check [--bless]`: the generated regions of the docs agree with the code.
//! - `snapshots --references FILE`: every committed insta snapshot is used by a test.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod architecture;
mod drift;
mod generate;
mod snapshots;

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    match args.first().map(String::as_str) {
        Some("drift-check") => {
            let bless = args.iter().skip(1).any(|a| a == "--bless");
            if let Some(unknown) = args.iter().skip(1).find(|a| *a != "--bless") {
                bail!("unknown drift-check option `{unknown}`\n\n{USAGE}");
            }
            let report = drift::run(
                &root,
                if bless {
                    drift::Mode::Bless
                } else {
                    drift::Mode::Check
                },
            )?;
            print!("{report}");
            if !report.is_clean() {
                std::process::exit(1);
            }
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
        Some("help" | "--help" | "-h") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown command `{other}`\n\n{USAGE}"),
    }
}

const USAGE: &str = "usage: cargo xtask <command>

commands:
  drift-check [--bless]          check (or rewrite) the generated regions of the docs
  snapshots --references FILE    fail on committed snapshots no test used (run the tests with
                                 INSTA_SNAPSHOT_REFERENCES_FILE=FILE first)";

/// The workspace root: the parent of this crate's directory.
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Reads a file, naming it in the error.
pub(crate) fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

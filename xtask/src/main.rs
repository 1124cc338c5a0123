//! Workspace automation: `cargo xtask <command>`.
//!
//! - `drift-check [--bless]`: the generated regions of the docs agree with the code.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod architecture;
mod drift;
mod generate;

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
        Some("help" | "--help" | "-h") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown command `{other}`\n\n{USAGE}"),
    }
}

const USAGE: &str = "usage: cargo xtask <command>

commands:
  drift-check [--bless]   check (or rewrite) the generated regions of the docs";

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

//! `dsh-bench`: runs the benchmarks of `docs/performance.md` (`cargo xtask bench [--quick] [--json]`).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use anyhow::{Result, bail};
use bench::{Progress, Sizes, json_line, run_all};

const USAGE: &str = "usage: dsh-bench [--quick | --tiny] [--json] [--only NAME]...

Runs every benchmark of `docs/performance.md` against its baseline, measured side by side in one run,
and prints one line per benchmark (progress goes to stderr).

  --quick   smaller sizes for a smoke run (well under a minute in release mode)
  --tiny    the sizes of the crate's test: checks that every benchmark runs, measures nothing
  --json    also print the results as a JSON array on the last line of stdout
  --only    run only the named benchmark (repeatable), e.g. to profile it";

fn main() -> Result<()> {
    let mut sizes = Sizes::FULL;
    let mut json = false;
    let mut only = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--only" => match args.next() {
                Some(name) => only.push(name),
                None => bail!("--only needs a benchmark name\n\n{USAGE}"),
            },
            "--quick" => sizes = Sizes::QUICK,
            "--tiny" => sizes = Sizes::TINY,
            "--json" => json = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown option `{other}`\n\n{USAGE}"),
        }
    }
    if cfg!(debug_assertions) && sizes != Sizes::TINY {
        eprintln!("warning: a debug build measures nothing useful; run `cargo xtask bench`");
    }
    let measurements = run_all(&sizes, &only, |progress| match progress {
        Progress::Starting(name) => eprintln!("running {name}…"),
        Progress::Done(measurement) => println!("{measurement}"),
    })?;
    if json {
        println!("{}", json_line(&measurements));
    }
    Ok(())
}

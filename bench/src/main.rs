//! `dsh-bench`: runs the benchmarks of `docs/performance.md` (`cargo xtask bench [--quick] [--json]`).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use anyhow::{Context, Result, bail};
use bench::{Progress, Sizes, json_line, run_all, select};
use serde_json::Value;
use std::process::{Command, Stdio};

const USAGE: &str = "usage: dsh-bench [--quick | --tiny] [--json] [--only NAME]...

Runs every benchmark of `docs/performance.md` against its baseline, measured side by side in one run,
and prints one line per benchmark (progress goes to stderr).

  --quick   smaller sizes for a smoke run (well under a minute in release mode)
  --tiny    the sizes of the crate's test: checks that every benchmark runs, measures nothing
  --json    also print the results as a JSON array on the last line of stdout
  --only    run only the named benchmark (repeatable), e.g. to profile it

With more than one benchmark selected, each runs in a process of its own (this program again,
with `--only`), so none measures memory another one freed or threads another one left behind.";

fn main() -> Result<()> {
    let mut sizes = Sizes::FULL;
    let mut size_flag = None;
    let mut json = false;
    let mut only = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--only" => match args.next() {
                Some(name) => only.push(name),
                None => bail!("--only needs a benchmark name\n\n{USAGE}"),
            },
            "--quick" => (sizes, size_flag) = (Sizes::QUICK, Some("--quick")),
            "--tiny" => (sizes, size_flag) = (Sizes::TINY, Some("--tiny")),
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
    let selected = select(&only)?;
    if selected.len() > 1 {
        let mut results = Vec::with_capacity(selected.len());
        for benchmark in selected {
            results.extend(run_in_child(benchmark.name, size_flag)?);
        }
        if json {
            println!("{}", Value::Array(results));
        }
        return Ok(());
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

/// Runs the benchmark `name` in a new process of this program at the size `size_flag` names,
/// passes its line through to stdout (its progress goes to stderr directly), and returns its
/// JSON results.
fn run_in_child(name: &str, size_flag: Option<&str>) -> Result<Vec<Value>> {
    let program = std::env::current_exe().context("finding this program to run a benchmark")?;
    let mut command = Command::new(program);
    command.args(["--only", name, "--json"]).args(size_flag);
    let output = command
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("starting the process of `{name}`"))?;
    if !output.status.success() {
        bail!("benchmark `{name}` failed ({})", output.status);
    }
    let stdout = String::from_utf8(output.stdout)
        .with_context(|| format!("the output of `{name}` is not UTF-8"))?;
    let Some((lines, results)) = stdout.trim_end().rsplit_once('\n') else {
        bail!("benchmark `{name}` printed no JSON line: {stdout:?}");
    };
    println!("{lines}");
    match serde_json::from_str(results) {
        Ok(Value::Array(results)) => Ok(results),
        _ => bail!("the last line of benchmark `{name}` is not a JSON array: {results:?}"),
    }
}

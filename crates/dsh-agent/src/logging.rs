//! Diagnostics on stderr: the `tracing` events of the crates, filtered by `RUST_LOG` or by
//! `-v`/`-q`.

use crate::output::say;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

/// The level `-v`/`-q` ask for, or `None` without either flag. Each `-v` is one level more
/// than warnings and each `-q` one level less, so `-v -q` means warnings.
fn flag_level(verbose: u8, quiet: u8) -> Option<LevelFilter> {
    if verbose == 0 && quiet == 0 {
        return None;
    }
    Some(match i16::from(verbose) - i16::from(quiet) {
        ..=-2 => LevelFilter::OFF,
        -1 => LevelFilter::ERROR,
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        2 => LevelFilter::DEBUG,
        3.. => LevelFilter::TRACE,
    })
}

/// The filter: `-v`/`-q` when given (an explicit flag is the more specific wish), else
/// `RUST_LOG` (`debug`, `dsh_tools=debug,agent_loop=trace`), else warnings.
pub(crate) fn filter(verbose: u8, quiet: u8, rust_log: Option<&str>) -> Result<Targets, String> {
    if let Some(level) = flag_level(verbose, quiet) {
        return Ok(Targets::new().with_default(level));
    }
    match rust_log.map(str::trim) {
        Some(spec) if !spec.is_empty() => spec
            .parse::<Targets>()
            .map_err(|error| format!("RUST_LOG={spec:?} is not a filter ({error})")),
        _ => Ok(Targets::new().with_default(LevelFilter::WARN)),
    }
}

/// Installs the subscriber: plain lines on stderr, no colour. A `RUST_LOG` that does not parse
/// is reported and the default (warnings) used.
pub(crate) fn install(verbose: u8, quiet: u8) {
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = filter(verbose, quiet, rust_log.as_deref()).unwrap_or_else(|message| {
        say(&format!("dsh-agent: {message}; logging warnings only"));
        Targets::new().with_default(LevelFilter::WARN)
    });
    let _ = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(filter)
        .try_init();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use pretty_assertions::assert_eq;
    use tracing::Level;

    /// Whether the filter lets through an event of `level` from `target`.
    fn passes(filter: &Targets, target: &str, level: Level) -> bool {
        filter.would_enable(target, &level)
    }

    #[test]
    fn flags_override_rust_log_which_overrides_the_default() {
        let check = |verbose, quiet, rust_log, expected: [bool; 4]| {
            let filter = filter(verbose, quiet, rust_log).unwrap();
            let seen = [
                passes(&filter, "dsh_tools::pipeline", Level::ERROR),
                passes(&filter, "dsh_tools::pipeline", Level::WARN),
                passes(&filter, "dsh_tools::pipeline", Level::INFO),
                passes(&filter, "dsh_tools::pipeline", Level::DEBUG),
            ];
            assert_eq!(
                seen, expected,
                "-v {verbose} -q {quiet} RUST_LOG={rust_log:?}"
            );
        };
        check(0, 0, None, [true, true, false, false]);
        check(0, 0, Some(""), [true, true, false, false]);
        check(1, 0, None, [true, true, true, false]);
        check(2, 0, None, [true, true, true, true]);
        check(0, 1, None, [true, false, false, false]);
        check(0, 2, None, [false, false, false, false]);
        check(0, 0, Some("debug"), [true, true, true, true]);
        check(0, 0, Some("dsh_tools=debug"), [true, true, true, true]);
        check(0, 0, Some("agent_loop=debug"), [false, false, false, false]);
        check(0, 1, Some("debug"), [true, false, false, false]);
        check(1, 1, Some("debug"), [true, true, false, false]);
        check(3, 1, None, [true, true, true, true]);
        assert!(filter(0, 0, Some("=nonsense=")).is_err());
    }
}

//! A Tokio runtime without the drivers a tool needs gives a `TOOL_ERROR` naming the missing
//! driver and the builder call that adds it, not a contained panic.

// The `#[tool]` macro is the default `macros` feature.
#![cfg(feature = "macros")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_tools::ToolFailure;
use dsh_tools::prelude::*;
use dsh_tools::runtime::{RuntimeDriver, missing, require};
use pretty_assertions::assert_eq;
use tokio::runtime::{Builder, Runtime};

/// Current-thread runtimes: without IO, without time, without both, and with both.
fn runtimes() -> [(Runtime, Vec<RuntimeDriver>); 4] {
    let build = |io: bool, time: bool| {
        let mut builder = Builder::new_current_thread();
        if io {
            builder.enable_io();
        }
        if time {
            builder.enable_time();
        }
        builder.build().unwrap()
    };
    [
        (build(false, true), vec![RuntimeDriver::Io]),
        (build(true, false), vec![RuntimeDriver::Time]),
        (
            build(false, false),
            vec![RuntimeDriver::Io, RuntimeDriver::Time],
        ),
        (build(true, true), vec![]),
    ]
}

const NO_IO: &str = "this tool needs the Tokio IO driver, and the runtime running the call has none: build the runtime with `enable_io()` (or `enable_all()`)";
const NO_TIME: &str = "this tool needs the Tokio time driver, and the runtime running the call has none: build the runtime with `enable_time()` (or `enable_all()`)";
const NO_IO_NOR_TIME: &str = "this tool needs the Tokio IO and time drivers, and the runtime running the call has none of them: build the runtime with `enable_io()` and `enable_time()` (or `enable_all()`)";

#[test]
fn require_names_every_missing_driver_of_the_current_runtime() {
    for (runtime, lacking) in runtimes() {
        // Twice: the second answer comes from the cache and must be the same.
        for _ in 0..2 {
            let (found, message) = runtime.block_on(async {
                (
                    missing(&[RuntimeDriver::Time, RuntimeDriver::Io, RuntimeDriver::Time]),
                    require(&RuntimeDriver::ALL).err().map(|e| e.to_string()),
                )
            });
            assert_eq!(found, lacking);
            let expected = match lacking.as_slice() {
                [RuntimeDriver::Io] => Some(NO_IO),
                [RuntimeDriver::Time] => Some(NO_TIME),
                [_, _] => Some(NO_IO_NOR_TIME),
                _ => None,
            };
            assert_eq!(message.as_deref(), expected);
        }
    }
    // Outside any runtime, every driver asked for is missing.
    assert_eq!(missing(&[RuntimeDriver::Time]), vec![RuntimeDriver::Time]);
    assert!(require(&[]).is_ok());
}

/// Waits a little, under the definition's timeout.
#[tool(timeout_ms = 60_000)]
async fn patient(exec: ExecContext) -> Result<bool, ToolError> {
    require(&[RuntimeDriver::Io])?;
    Ok(exec.signal().is_cancelled())
}

/// Needs nothing from the runtime.
#[tool]
async fn simple() -> bool {
    true
}

#[test]
fn a_call_on_a_runtime_without_a_driver_it_needs_fails_with_the_named_driver() {
    for (runtime, lacking) in runtimes() {
        let (patient, simple) = runtime.block_on(async {
            let registry = ToolRegistry::new();
            registry.register_tool(Patient).unwrap();
            registry.register_tool(Simple).unwrap();
            (
                registry.execute(ToolCall::new("c1", "patient", "{}")).await,
                registry.execute(ToolCall::new("c2", "simple", "{}")).await,
            )
        });
        // The timeout needs the time driver (checked by the registry); the body asks for IO.
        let expected = match lacking.as_slice() {
            [RuntimeDriver::Io] => Some(NO_IO),
            [RuntimeDriver::Time] | [_, _] => Some(NO_TIME),
            _ => None,
        };
        assert_eq!(
            patient.error,
            expected.map(|message| ToolFailure {
                message: message.to_owned(),
                code: FailureCode::ToolError,
            }),
            "{lacking:?}"
        );
        assert_eq!(simple.error, None, "{lacking:?}");
    }
}

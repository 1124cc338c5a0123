//! The drivers of a Tokio runtime a tool may need, and how their absence is worded. Beneath
//! both the runtime checks and [`ToolError`](crate::ToolError), which names missing drivers.

/// A driver of the Tokio runtime that a tool may need.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum RuntimeDriver {
    /// The IO driver (`enable_io()`): processes, sockets, pipes and signals.
    Io,
    /// The time driver (`enable_time()`): sleeps, timeouts and intervals.
    Time,
}

impl RuntimeDriver {
    /// Every driver, in documentation order.
    pub const ALL: [RuntimeDriver; 2] = [RuntimeDriver::Io, RuntimeDriver::Time];

    /// A stable lower-case name: `io`, `time`.
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeDriver::Io => "io",
            RuntimeDriver::Time => "time",
        }
    }

    /// The runtime builder call that adds the driver.
    pub fn builder_call(self) -> &'static str {
        match self {
            RuntimeDriver::Io => "enable_io()",
            RuntimeDriver::Time => "enable_time()",
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            RuntimeDriver::Io => "IO",
            RuntimeDriver::Time => "time",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            RuntimeDriver::Io => 0,
            RuntimeDriver::Time => 1,
        }
    }
}

/// The message of [`ToolError::MissingRuntimeDrivers`](crate::ToolError::MissingRuntimeDrivers).
pub(crate) fn missing_drivers_message(missing: &[RuntimeDriver]) -> String {
    let labels: Vec<&str> = missing.iter().map(|d| d.label()).collect();
    let calls: Vec<String> = missing
        .iter()
        .map(|d| format!("`{}`", d.builder_call()))
        .collect();
    match missing {
        [_] => format!(
            "this tool needs the Tokio {} driver, and the runtime running the call has none: build the runtime with {} (or `enable_all()`)",
            labels.join(""),
            calls.join(""),
        ),
        _ => format!(
            "this tool needs the Tokio {} drivers, and the runtime running the call has none of them: build the runtime with {} (or `enable_all()`)",
            labels.join(" and "),
            calls.join(" and "),
        ),
    }
}

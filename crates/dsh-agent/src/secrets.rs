//! The harness's secrets (the model's key, and every other credential of its environment),
//! taken out of its environment at start and looked up here: no command, MCP server or
//! supervisor can read them back through `/proc` (see `tool_bash::sandbox::withdraw_secrets`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::OnceLock;

static WITHDRAWN: OnceLock<BTreeMap<OsString, OsString>> = OnceLock::new();

/// Takes the secrets out of the environment and makes the process non-dumpable. First thing
/// in `main`, before any thread starts.
pub(crate) fn withdraw() {
    #[cfg(target_os = "linux")]
    let withdrawn = tool_bash::sandbox::withdraw_secrets();
    #[cfg(not(target_os = "linux"))]
    let withdrawn = BTreeMap::new();
    let _ = WITHDRAWN.set(withdrawn);
}

/// The variable `name` of the harness's environment as it was at start: a withdrawn secret,
/// or the variable itself.
pub(crate) fn var(name: &str) -> Option<String> {
    WITHDRAWN
        .get()
        .and_then(|withdrawn| withdrawn.get(std::ffi::OsStr::new(name)))
        .and_then(|value| value.to_str().map(str::to_owned))
        .or_else(|| std::env::var(name).ok())
}

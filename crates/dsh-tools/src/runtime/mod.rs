//! The Tokio drivers a tool needs, checked before the tool uses them.
//!
//! A Tokio runtime built without `enable_io()` or `enable_time()` panics the first time a tool
//! spawns a process, opens a socket or starts a timer ("A Tokio 1.x context was found, but IO
//! is disabled"). The registry would contain that panic as `TOOL_PANIC`, which tells the model
//! nothing and the developer little. [`require`] turns it into a [`ToolError`] that names the
//! missing driver and the builder call that adds it, before anything panics. The registry
//! checks the time driver itself for a definition with a timeout; a tool that spawns processes
//! or uses sockets calls [`require`] at the start of its body (`tool-bash` does).
//!
//! Tokio offers no query for its drivers, so the check builds the cheapest object that needs
//! each driver (a zero-length sleep; on Unix an unbound datagram socket) inside
//! `catch_unwind`, once per runtime, and caches the answer. Where a driver is missing, the
//! panic hook still reports that one probe's panic once per runtime (tokio's own message, which
//! names the same fix); with `panic = "abort"` the probe aborts, as the tool's first use of the
//! driver would have. On platforms other than Unix the IO driver is not probed and counts as
//! present.

pub(crate) mod driver;

pub use driver::RuntimeDriver;

use crate::error::ToolError;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, PoisonError};
use tokio::runtime::{Handle, Id};

/// Checks that the Tokio runtime running the caller has every driver in `drivers`.
///
/// Outside any Tokio runtime every driver is missing. The error is
/// [`ToolError::MissingRuntimeDrivers`] (a `TOOL_ERROR` result), listing the missing drivers in
/// [`RuntimeDriver::ALL`] order and saying how to build the runtime.
///
/// ```
/// use dsh_tools::runtime::{RuntimeDriver, require};
///
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
/// runtime.block_on(async {
///     assert!(require(&[RuntimeDriver::Time]).is_ok());
/// });
/// assert_eq!(
///     require(&[RuntimeDriver::Time]).unwrap_err().to_string(),
///     "this tool needs the Tokio time driver, and the runtime running the call has none: \
///      build the runtime with `enable_time()` (or `enable_all()`)",
/// );
/// ```
pub fn require(drivers: &[RuntimeDriver]) -> Result<(), ToolError> {
    let missing = missing(drivers);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ToolError::MissingRuntimeDrivers { missing })
    }
}

/// The drivers of `drivers` that the current Tokio runtime lacks (all of them outside a
/// runtime), in [`RuntimeDriver::ALL`] order, without duplicates.
pub fn missing(drivers: &[RuntimeDriver]) -> Vec<RuntimeDriver> {
    let mut wanted: Vec<RuntimeDriver> = drivers.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    let Ok(handle) = Handle::try_current() else {
        return wanted;
    };
    wanted.retain(|driver| !has_driver(&handle, *driver));
    wanted
}

/// Probe results per runtime: index [`RuntimeDriver::index`], `None` until probed.
type Probed = HashMap<Id, [Option<bool>; 2]>;

/// Runtimes are rarely created in great numbers, but a program that makes one per request must
/// not grow this cache without bound: past this many entries it starts over.
const CACHE_LIMIT: usize = 256;

fn has_driver(handle: &Handle, driver: RuntimeDriver) -> bool {
    static CACHE: Mutex<Option<Probed>> = Mutex::new(None);
    let id = handle.id();
    let cached = CACHE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(|probed| probed.get(&id))
        .and_then(|drivers| drivers[driver.index()]);
    if let Some(present) = cached {
        return present;
    }
    // The probe runs outside the lock: a panic inside it must not poison the cache.
    let present = probe(handle, driver);
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    let probed = cache.get_or_insert_with(HashMap::new);
    if probed.len() >= CACHE_LIMIT && !probed.contains_key(&id) {
        probed.clear();
    }
    probed.entry(id).or_default()[driver.index()] = Some(present);
    present
}

/// Builds the cheapest object that needs `driver` inside `catch_unwind`: tokio panics at
/// construction when the driver is missing.
fn probe(handle: &Handle, driver: RuntimeDriver) -> bool {
    let _entered = handle.enter();
    match driver {
        RuntimeDriver::Time => catch_unwind(AssertUnwindSafe(|| {
            drop(tokio::time::sleep(std::time::Duration::ZERO));
        }))
        .is_ok(),
        RuntimeDriver::Io => probe_io(),
    }
}

#[cfg(unix)]
fn probe_io() -> bool {
    // An unbound datagram socket is one system call; registering it needs the IO driver. A
    // socket that cannot be created (descriptors exhausted) says nothing about the driver,
    // and the tool's own use will report that error.
    catch_unwind(AssertUnwindSafe(|| {
        drop(tokio::net::UnixDatagram::unbound());
    }))
    .is_ok()
}

#[cfg(not(unix))]
fn probe_io() -> bool {
    true
}

//! Running one test of an integration-test binary in a process of its own, for a test that
//! counts or changes something of its whole process, or that another test's children would
//! disturb (a child between its fork and its exec holds copies of every descriptor). Shared
//! by the crates' test binaries through `#[path]`; the including crate declares
//! `mod own_process`.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

/// The name libtest gives the test `name` of the module `module` (its `module_path!()`), for
/// `--exact`: the path below the test binary's crate, so a test can re-run itself in a child
/// process whichever binary it was folded into.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, below)) => format!("{below}::{name}"),
        None => name.to_owned(),
    }
}

/// Runs `body` in a child process of this test binary that runs only the test `name` of
/// `module` (its `module_path!()`), for a test that counts or changes something of its whole
/// process; panics with the child's output unless that one test passed there.
pub fn in_own_process(module: &str, name: &str, body: impl FnOnce()) {
    const ALONE: &str = "DSH_TEST_ALONE";
    let name = test_name(module, name);
    if std::env::var_os(ALONE).is_some_and(|alone| alone == name.as_str()) {
        body();
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--nocapture", "--test-threads", "1"])
        .env(ALONE, &name)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && text.contains("1 passed"),
        "{name} failed in its own process:\n{text}"
    );
}

//! `cargo run -p echo-agent` prints a readable session and exits 0.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[test]
fn the_example_prints_a_readable_session_and_succeeds() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_echo-agent"))
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for expected in [
        "session echo-demo started; tools: echo",
        "  echo returned: hello hello",
        "  echo failed: Error: invalid arguments: /times: must be from 1 to 100",
        "turn ended: completed after 2 step(s)",
    ] {
        assert!(
            stdout.lines().any(|l| l == expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
}

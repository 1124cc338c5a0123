//! Peak memory of one test, measured in a process of its own: a test binary runs the test alone
//! in a child ([`peak_rss_of_test`]), and the test reports the child's `VmHWM` at its end
//! ([`report_peak_rss`]), so no other test's allocations count.

/// Set in the child process [`peak_rss_of_test`] starts: the file the test it runs writes its
/// peak to.
const PEAK_RSS_ENV: &str = "DSH_TEST_REPORT_PEAK_RSS";

/// Runs the test `name` (its full path) of the current test binary alone in a child process and
/// returns that process's peak resident memory in bytes, as the test reported it with
/// [`report_peak_rss`]. The test must pass in the child.
pub fn peak_rss_of_test(name: &str) -> u64 {
    let report = std::env::temp_dir().join(format!(
        "peak-rss-{}-{}",
        std::process::id(),
        name.replace("::", "-")
    ));
    let _ = std::fs::remove_file(&report);
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1"])
        .env(PEAK_RSS_ENV, &report)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{name} failed in the child: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let peak = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("{name} reported no peak (did it run?): {e}"));
    let _ = std::fs::remove_file(&report);
    peak.trim().parse().unwrap()
}

/// In the child process of [`peak_rss_of_test`], writes this process's peak resident memory in
/// bytes (`VmHWM` of `/proc/self/status`) to the file it names; elsewhere nothing, so the test
/// also runs as an ordinary one.
pub fn report_peak_rss() {
    let Some(report) = std::env::var_os(PEAK_RSS_ENV) else {
        return;
    };
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .unwrap_or_else(|| panic!("no VmHWM in {status}"))
        .trim()
        .parse()
        .unwrap();
    std::fs::write(report, (kib * 1024).to_string()).unwrap();
}

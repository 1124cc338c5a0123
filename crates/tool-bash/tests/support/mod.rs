//! Shared helpers for the tool-bash integration tests.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

#[path = "../../../dsh-tools/tests/support/own_process.rs"]
mod own_process;
#[allow(unused_imports)]
pub use own_process::{in_own_process, test_name};

/// The live (non-zombie) processes whose process group is `pgid`.
pub fn live_group_members(pgid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(") ").map(|i| &stat[i + 2..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|p| p.parse::<i32>().ok()) == Some(pgid) && fields[0] != "Z" {
            out.push(pid);
        }
    }
    out
}

/// The live (non-zombie) processes whose command line holds `marker` as a whole argument.
pub fn processes_with_argument(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if !cmdline
            .split(|&b| b == 0)
            .any(|arg| arg == marker.as_bytes())
        {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let state = stat.rfind(") ").and_then(|i| stat[i + 2..].chars().next());
        if state.is_some_and(|s| s != 'Z') {
            found.push(pid);
        }
    }
    found
}

/// This process's resident set size in KiB.
pub fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Waits (at most 10 s) until a command has written its process group id to `path`.
pub async fn read_pgid(path: &std::path::Path) -> i32 {
    let wait = async {
        loop {
            if let Some(pgid) = std::fs::read_to_string(path)
                .ok()
                .and_then(|text| text.trim().parse().ok())
            {
                return pgid;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), wait)
        .await
        .expect("the command never wrote its process group id")
}

/// A local executor with a short grace period, so termination tests stay quick.
pub fn executor(grace: std::time::Duration) -> tool_bash::LocalExecutor {
    let mut config = tool_bash::LocalConfig::default();
    config.grace = grace;
    tool_bash::LocalExecutor::new(config)
}

/// A registry with the `bash` tool over `executor` and, given a jobs runtime, background jobs
/// and the job tools.
pub fn bash_registry(
    executor: tool_bash::LocalExecutor,
    jobs: Option<&dsh_tools::jobs::JobRuntime>,
) -> dsh_tools::ToolRegistry {
    let registry = dsh_tools::ToolRegistry::new();
    let mut bash = tool_bash::BashPlugin::new(std::sync::Arc::new(executor));
    if let Some(jobs) = jobs {
        bash = bash.with_jobs(jobs.clone());
        registry
            .global_scope()
            .load(tool_bash::JobToolsPlugin::new(jobs.clone()))
            .unwrap();
    }
    registry.global_scope().load(bash).unwrap();
    registry
}

/// A temporary file of `bytes` random bytes.
pub fn random_file(bytes: u64) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    let status = std::process::Command::new("head")
        .args(["-c", &bytes.to_string(), "/dev/urandom"])
        .stdout(file.reopen().unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    file
}

/// Whether two files hold the same bytes (compared a megabyte at a time).
pub fn same_contents(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::io::Read;
    let (mut a, mut b) = (
        std::fs::File::open(a).unwrap(),
        std::fs::File::open(b).unwrap(),
    );
    let (mut x, mut y) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = a.read(&mut x).unwrap();
        let mut filled = 0;
        while filled < n {
            let m = b.read(&mut y[filled..n]).unwrap();
            if m == 0 {
                return false;
            }
            filled += m;
        }
        if x[..n] != y[..n] {
            return false;
        }
        if n == 0 {
            return b.read(&mut y).unwrap() == 0;
        }
    }
}

//! The harness's own secrets, out of its commands' reach: [`withdraw_secrets`].

use crate::env::is_credential;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;

/// Keeps the harness's secrets from the programs it starts, however they look: call it once,
/// first thing in `main`, before any thread starts.
///
/// - The process becomes non-dumpable: no process of another user, nor one of the same user
///   without `CAP_SYS_PTRACE`, may read its memory, its `/proc/PID/environ` or
///   `/proc/PID/mem`, or attach to it; nor may one of its supervisors', each a copy of its
///   memory (secrets included) for as long as it lives, which inherits the flag: that flag is
///   what guards the copy, so a host that skips this call leaves the copies readable to its
///   own user when the sandbox is off. It leaves no core dump either.
/// - Every variable of its environment that the environment policy withholds from commands
///   as a credential ([`is_credential`](crate::env::is_credential)), but the host's own
///   `DSH_*` configuration and the proxies (`*_PROXY`), is returned, and its value
///   blanked in place in the environment block the kernel shows as `/proc/PID/environ`, which
///   `unsetenv` would leave as it is: even a process that may read the harness's memory (root
///   with the sandbox off) finds only the names there. The variables stay set, to the empty
///   string; read them from the returned map, which lives on the heap.
///
/// The blanking writes the process's own environment block through `/proc/self/mem`, which
/// only the C library's `environ` strings point into: no Rust value refers to that memory,
/// and with no other thread running nothing reads it meanwhile. A step that fails is logged
/// and the rest still happens.
pub fn withdraw_secrets() -> BTreeMap<OsString, OsString> {
    if let Err(error) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!(%error, "the harness could not make itself non-dumpable");
    }
    let secrets: BTreeMap<OsString, OsString> = std::env::vars_os()
        .filter(|(name, value)| {
            is_credential(name, value) && !value.is_empty() && !is_configuration(name)
        })
        .collect();
    if !secrets.is_empty()
        && let Err(error) = blank_environment_block(&secrets)
    {
        tracing::warn!(%error, "the harness could not blank its secrets' environment block");
    }
    secrets
}

/// Whether `name` is configuration the host itself reads from its environment, later than
/// its start, whatever it holds: a `DSH_*` variable (`DSH_SESSION_DIR` matches the credential
/// rule `*SESSION*`), or a proxy (`HTTPS_PROXY=http://user:password@proxy`), which an HTTP
/// client reads when it is built. Commands get neither (the environment policy withholds
/// them); only the non-dumpable flag keeps them from other processes.
fn is_configuration(name: &OsStr) -> bool {
    let name = name.as_bytes();
    name.get(..4)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case(b"DSH_"))
        || name.len() >= 6 && name[name.len() - 6..].eq_ignore_ascii_case(b"_PROXY")
}

/// Overwrites with NUL bytes the values of `secrets` in the block between the kernel's
/// `env_start` and `env_end` of this process.
fn blank_environment_block(secrets: &BTreeMap<OsString, OsString>) -> io::Result<()> {
    let (start, end) = environment_block()?;
    let memory = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/proc/self/mem")?;
    let length = usize::try_from(end.saturating_sub(start)).unwrap_or(0);
    let mut block = vec![0u8; length];
    memory.read_exact_at(&mut block, start)?;
    let mut offset = 0u64;
    for entry in block.split(|byte| *byte == 0) {
        if let Some(equals) = entry.iter().position(|byte| *byte == b'=') {
            let name = OsStr::from_bytes(&entry[..equals]);
            let value = &entry[equals + 1..];
            if !value.is_empty() && secrets.contains_key(name) {
                let at = start + offset + equals as u64 + 1;
                memory.write_all_at(&vec![0u8; value.len()], at)?;
            }
        }
        offset += entry.len() as u64 + 1;
    }
    Ok(())
}

/// `env_start` and `env_end` of this process (`/proc/self/stat`, fields 50 and 51).
fn environment_block() -> io::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let malformed = || io::Error::new(io::ErrorKind::InvalidData, "unexpected /proc/self/stat");
    // The fields after the command name, which may hold spaces, start at the third.
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .ok_or_else(malformed)?
        .1
        .split_whitespace()
        .collect();
    let field = |number: usize| -> io::Result<u64> {
        fields
            .get(number - 3)
            .and_then(|text| text.parse().ok())
            .ok_or_else(malformed)
    };
    Ok((field(50)?, field(51)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_own_configuration_and_proxies_stay() {
        let cases = [
            ("DSH_SESSION_DIR", true),
            ("dsh_session_retention", true),
            ("HTTPS_PROXY", true),
            ("https_proxy", true),
            ("ALL_PROXY", true),
            ("AWS_SESSION_TOKEN", false),
            ("PROXY", false),
            ("DEEPSEEK_API_KEY", false),
        ];
        for (name, stays) in cases {
            assert_eq!(is_configuration(OsStr::new(name)), stays, "{name}");
        }
    }

    #[test]
    fn the_environment_block_lies_where_proc_environ_reads_it() {
        let (start, end) = environment_block().unwrap();
        let memory = std::fs::File::open("/proc/self/mem").unwrap();
        let mut block = vec![0u8; usize::try_from(end - start).unwrap()];
        memory.read_exact_at(&mut block, start).unwrap();
        assert_eq!(block, std::fs::read("/proc/self/environ").unwrap());
    }
}

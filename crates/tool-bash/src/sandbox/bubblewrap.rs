//! The bubblewrap backend: the `bwrap` command line that starts a shell (or a program) inside
//! its own namespaces.

use crate::local::Wrapper;
use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

/// The `bwrap` wrapper: `/` read-only, a fresh `/dev` and `/proc` (read-only as well), a private
/// `/tmp`, the roots writable and the protected places beneath them read-only again (with the
/// directories between bound too, so that none can be renamed; see `confine::binds`); user,
/// PID, UTS and IPC namespaces of the command's own, without the network a network namespace
/// too; a session of its own, every
/// capability dropped, and `program` (the seccomp filter's bytes) as its seccomp filter. The
/// working directory and the spill directory are bound read-only first when the private `/tmp`
/// would hide them.
pub(super) fn wrapper(
    program: PathBuf,
    writable: &[PathBuf],
    protected: &[PathBuf],
    network: bool,
    seccomp: Vec<u8>,
) -> Wrapper {
    let head: Vec<OsString> = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    let mut tail: Vec<OsString> = Vec::new();
    for (place, writable) in super::confine::binds(writable, protected) {
        let kind = if writable { "--bind" } else { "--ro-bind" };
        tail.extend([kind.into(), place.clone().into(), place.into()]);
    }
    // The fresh `/proc` and `/dev` read-only too: a root without capabilities may still write
    // many of `/proc/sys`'s files (the host's name, `kernel.core_pattern`), and `/dev` is a
    // writable tmpfs where a file could pass for a device.
    tail.extend([
        "--remount-ro".into(),
        "/proc".into(),
        "--remount-ro".into(),
        "/dev".into(),
    ]);
    if !network {
        tail.push("--unshare-net".into());
    }
    // A user namespace even for root: the bounding set is emptied in it, and the capabilities
    // of its root are the namespace's, not the host's. A PID namespace: the command sees and
    // signals its own processes only, neither the harness (its environment, its memory) nor
    // anything else. UTS: the host's name is not its to change. IPC: no System V or POSIX
    // message queue of the host's.
    tail.extend([
        "--unshare-user".into(),
        "--unshare-pid".into(),
        "--unshare-uts".into(),
        "--unshare-ipc".into(),
    ]);
    // No controlling terminal to type into.
    tail.push("--new-session".into());
    // Without this a harness running as root would give the command every capability inside
    // the namespaces: enough to remount the read-only binds writable.
    tail.extend(["--cap-drop".into(), "ALL".into()]);
    tail.push("--die-with-parent".into());
    let roots = writable.to_vec();
    Wrapper {
        program,
        head,
        tail,
        seccomp,
        hidden: Box::new(move |place: &Path| {
            place.starts_with("/tmp") && !roots.iter().any(|root| place.starts_with(root))
        }),
    }
}

impl Wrapper {
    /// The wrapper's command line for `program ARGS…` in `workdir`: `(wrapper, HEAD…
    /// [--ro-bind P P]… TAIL… [--seccomp FD] --chdir workdir -- program ARGS…)`. The working
    /// directory and `visible` (the spill directory) are bound read-only first where the
    /// wrapper would hide them; `seccomp` is the descriptor, inherited by the wrapper, it reads
    /// the seccomp filter from.
    pub(crate) fn wrap<'a>(
        &self,
        program: &std::ffi::OsStr,
        mut args: Vec<OsString>,
        workdir: &'a Path,
        visible: Option<&'a Path>,
        seccomp: Option<RawFd>,
    ) -> (PathBuf, Vec<OsString>) {
        let mut line = self.head.clone();
        for place in std::iter::once(workdir).chain(visible) {
            if (self.hidden)(place) {
                line.extend(["--ro-bind".into(), place.into(), place.into()]);
            }
        }
        line.extend(self.tail.iter().cloned());
        if let Some(fd) = seccomp {
            line.extend(["--seccomp".into(), fd.to_string().into()]);
        }
        line.extend([
            "--chdir".into(),
            workdir.into(),
            "--".into(),
            program.to_owned(),
        ]);
        line.append(&mut args);
        (self.program.clone(), line)
    }
}

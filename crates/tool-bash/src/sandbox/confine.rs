//! The parts of a command's confinement the harness builds once per executor, where allocating
//! is fine: the Landlock ruleset, the seccomp program and the mount plan; and which right each
//! of them enforces on this system.

use super::report::{Mechanism, MountNamespace, Right, RightReport};
use super::{SandboxBackend, SandboxError};
use crate::launch::{BpfInstruction, LandlockRuleset, MOUNT_BINDS_MAX, MountBind, MountPlan};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};
use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Device files every confined command may write and send ioctls to: the bit buckets and
/// terminals.
const WRITABLE_DEVICES: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
    "/dev/ptmx",
];

/// The first Landlock ABI whose rules cover connections to unix sockets by path
/// (`LANDLOCK_ACCESS_FS_RESOLVE_UNIX`, Linux 7.1): from there on, unix sockets are confined to
/// the writable roots by Landlock, and the seccomp filter lets them be created.
pub(super) const RESOLVE_UNIX_ABI: u32 = 9;

fn setup_error(what: impl fmt::Display) -> SandboxError {
    SandboxError::Setup(format!("Landlock ruleset: {what}"))
}

/// Builds the ruleset: every write right the ABI knows is handled, granted beneath `writable`
/// but for device nodes and device ioctls, and granted on the writable devices; from ABI 6 the
/// signal and abstract-socket scopes; with `deny_network`, TCP `bind` and `connect` are handled
/// and granted nowhere. Reads and execution are not handled, so they stay allowed. Hard
/// requirements: the crate fails rather than quietly dropping a right the probe said the
/// kernel has.
pub(super) fn landlock_ruleset(
    abi: u32,
    writable: &[PathBuf],
    deny_network: bool,
) -> Result<LandlockRuleset, SandboxError> {
    let fs_abi = match abi {
        1 => ABI::V1,
        2 => ABI::V2,
        3 | 4 => ABI::V3,
        5..RESOLVE_UNIX_ABI => ABI::V5,
        _ => ABI::V9,
    };
    let handled = AccessFs::from_write(fs_abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .map_err(setup_error)?;
    if deny_network && abi >= 4 {
        let network: BitFlags<AccessNet> = AccessNet::BindTcp | AccessNet::ConnectTcp;
        ruleset = ruleset.handle_access(network).map_err(setup_error)?;
    }
    if abi >= 6 {
        ruleset = ruleset
            .scope(Scope::from_all(ABI::V6))
            .map_err(setup_error)?;
    }
    let mut created = ruleset.create().map_err(setup_error)?;
    // Nothing beneath a root may become a device, or have a device's ioctls sent through it.
    let beneath_roots = handled & !(AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev);
    for root in writable {
        let fd = PathFd::new(root)
            .map_err(|e| SandboxError::Setup(format!("`{}`: {e}", root.display())))?;
        created = created
            .add_rule(PathBeneath::new(fd, beneath_roots))
            .map_err(setup_error)?;
    }
    let file_rights = handled & AccessFs::from_file(fs_abi) & !AccessFs::ResolveUnix;
    for device in WRITABLE_DEVICES {
        // A device this system lacks is simply not granted.
        let Ok(fd) = PathFd::new(device) else {
            continue;
        };
        created = created
            .add_rule(PathBeneath::new(fd, file_rights))
            .map_err(setup_error)?;
    }
    // The shell-to-be installs its standard streams on 0–2 before it enforces the ruleset: a
    // harness started with a standard stream closed may have been given one of those numbers.
    // The crate does not show the ruleset's descriptor, so it is always copied once: its
    // `try_clone` duplicates onto 3 or above, and the original is closed.
    created.try_clone().map_err(setup_error)
}

fn seccomp_error(what: impl fmt::Display) -> SandboxError {
    SandboxError::Setup(format!("seccomp filter: {what}"))
}

/// One condition on a system call's argument `index`, compared as 32 bits.
fn argument(index: u8, operator: SeccompCmpOp, value: u64) -> Result<SeccompRule, SandboxError> {
    let condition = SeccompCondition::new(index, SeccompCmpArgLen::Dword, operator, value)
        .map_err(seccomp_error)?;
    SeccompRule::new(vec![condition]).map_err(seccomp_error)
}

/// The seccomp program of every confined command: a deny list, each denial an `EPERM`.
///
/// - Always: `ioctl` `TIOCSTI` and `TIOCLINUX` (typing into a terminal), `mknod` of block and
///   character devices, `io_uring` (its operations would bypass this filter), and the kernel's
///   key rings (`keyctl`, `add_key`, `request_key`), which can hold another program's secrets.
/// - Always too: setting the setuid or setgid bit (`chmod` and its kin), another process's
///   resource limits (`prlimit64` with a pid and new limits), its priority, I/O priority or
///   scheduling (`setpriority`, `ioprio_set`, `sched_set*` of a pid but the caller's, and of a
///   whole user).
/// - With the network denied: every `socket` but a unix one, and below Landlock ABI 9 (which
///   confines unix sockets by path) the unix ones too; `socketpair` only of a stream or
///   sequenced-packet unix pair, the kind that can reach no other socket.
/// - On x86-64, every system call of the x32 ABI, which a filter on the 64-bit numbers would
///   not see.
///
/// What the filter leaves alone is allowed: it is no allow list, so a new kernel's system
/// calls keep working, and the rest of the confinement (Landlock, the read-only mount
/// namespace, the empty capability sets) is not the filter's to repeat.
pub(super) fn seccomp_program(
    deny_network: bool,
    landlock_abi: u32,
) -> Result<Vec<BpfInstruction>, SandboxError> {
    use SeccompCmpOp::{Eq, MaskedEq, Ne};
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(
        libc::SYS_ioctl,
        vec![
            argument(1, Eq, u64::from(libc::TIOCSTI as u32))?,
            argument(1, Eq, TIOCLINUX)?,
        ],
    );
    let device = |index| -> Result<Vec<SeccompRule>, SandboxError> {
        let kind = u64::from(libc::S_IFMT);
        Ok(vec![
            argument(index, MaskedEq(kind), u64::from(libc::S_IFCHR))?,
            argument(index, MaskedEq(kind), u64::from(libc::S_IFBLK))?,
        ])
    };
    rules.insert(libc::SYS_mknodat, device(2)?);
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_mknod, device(1)?);
    // Setuid and setgid bits: a root harness's command could otherwise leave a setuid-root
    // program in the workspace for another user to run outside the sandbox. Writing a file
    // clears the bits (no `CAP_FSETID`), so a mode change is the only way to set them.
    let set_id = |index| -> Result<Vec<SeccompRule>, SandboxError> {
        Ok(vec![
            argument(
                index,
                MaskedEq(u64::from(libc::S_ISUID)),
                u64::from(libc::S_ISUID),
            )?,
            argument(
                index,
                MaskedEq(u64::from(libc::S_ISGID)),
                u64::from(libc::S_ISGID),
            )?,
        ])
    };
    rules.insert(libc::SYS_fchmod, set_id(1)?);
    rules.insert(libc::SYS_fchmodat, set_id(2)?);
    rules.insert(SYS_FCHMODAT2, set_id(2)?);
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_chmod, set_id(1)?);
    // Other processes' limits and priorities: Landlock's signal scope does not cover these,
    // and a command could starve or kill (`RLIMIT_FSIZE`) the harness and its supervisor, or
    // keep the supervisor from sweeping (`RLIMIT_NOFILE`). Reading another's limits stays.
    rules.insert(
        libc::SYS_prlimit64,
        vec![
            SeccompRule::new(vec![
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, Ne, 0).map_err(seccomp_error)?,
                SeccompCondition::new(2, SeccompCmpArgLen::Qword, Ne, 0).map_err(seccomp_error)?,
            ])
            .map_err(seccomp_error)?,
        ],
    );
    // `who` 0 is the caller (its process, its group); every `PRIO_USER` or `IOPRIO_WHO_USER`
    // reaches all of its user's processes.
    rules.insert(
        libc::SYS_setpriority,
        vec![argument(1, Ne, 0)?, argument(0, Eq, PRIO_USER)?],
    );
    rules.insert(
        libc::SYS_ioprio_set,
        vec![argument(1, Ne, 0)?, argument(0, Eq, IOPRIO_WHO_USER)?],
    );
    for scheduler in [
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
    ] {
        rules.insert(scheduler, vec![argument(0, Ne, 0)?]);
    }
    for always in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
    ] {
        rules.insert(always, Vec::new());
    }
    if deny_network {
        let unix = u64::from(libc::AF_UNIX as u32);
        let socket = if landlock_abi >= RESOLVE_UNIX_ABI {
            vec![argument(0, Ne, unix)?]
        } else {
            Vec::new()
        };
        rules.insert(libc::SYS_socket, socket);
        let mut pair = vec![argument(0, Ne, unix)?];
        if landlock_abi < RESOLVE_UNIX_ABI {
            // A pair of any type but stream and sequenced packet is a datagram pair (the kernel
            // makes `SOCK_RAW` one), which may still send to any socket by address.
            for kind in 0..=SOCKET_TYPE_MASK {
                let kept = [libc::SOCK_STREAM, libc::SOCK_SEQPACKET];
                if !kept.iter().any(|k| u64::from(*k as u32) == kind) {
                    pair.push(argument(1, MaskedEq(SOCKET_TYPE_MASK), kind)?);
                }
            }
        }
        rules.insert(libc::SYS_socketpair, pair);
    }
    let arch = std::env::consts::ARCH.try_into().map_err(seccomp_error)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(seccomp_error)?;
    let program: seccompiler::BpfProgram = filter.try_into().map_err(seccomp_error)?;
    let mut instructions = x32_guard();
    instructions.extend(program);
    Ok(instructions)
}

/// `fchmodat2` (Linux 6.6), the same number on x86-64 and AArch64.
const SYS_FCHMODAT2: i64 = 452;

/// `PRIO_USER` (`sys/resource.h`) and `IOPRIO_WHO_USER` (`linux/ioprio.h`).
const PRIO_USER: u64 = 2;
const IOPRIO_WHO_USER: u64 = 3;

/// `TIOCLINUX`, the console's ioctl (`linux/tiocl.h`), which can also inject input.
const TIOCLINUX: u64 = 0x541C;

/// The bits of `socket`'s type that name the type (the rest are `SOCK_NONBLOCK` and
/// `SOCK_CLOEXEC`).
const SOCKET_TYPE_MASK: u64 = 0xf;

/// Before the program seccompiler builds: on x86-64, deny every system call whose number has
/// the x32 bit set (`nr >= 0x4000_0000`). Elsewhere nothing.
fn x32_guard() -> Vec<BpfInstruction> {
    if !cfg!(target_arch = "x86_64") {
        return Vec::new();
    }
    // BPF_LD|BPF_W|BPF_ABS, offset 0 (`seccomp_data.nr`); BPF_JMP|BPF_JGE|BPF_K; BPF_RET|BPF_K.
    const LOAD_NUMBER: u16 = 0x20;
    const JUMP_IF_AT_LEAST: u16 = 0x35;
    const RETURN: u16 = 0x06;
    const X32_BIT: u32 = 0x4000_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    vec![
        BpfInstruction {
            code: LOAD_NUMBER,
            jt: 0,
            jf: 0,
            k: 0,
        },
        BpfInstruction {
            code: JUMP_IF_AT_LEAST,
            jt: 0,
            jf: 1,
            k: X32_BIT,
        },
        BpfInstruction {
            code: RETURN,
            jt: 0,
            jf: 0,
            k: RET_ERRNO | libc::EPERM as u32,
        },
    ]
}

/// The program as `bwrap --seccomp` reads it: the instructions' bytes, in order.
pub(super) fn program_bytes(program: &[BpfInstruction]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for instruction in program {
        bytes.extend_from_slice(&instruction.code.to_ne_bytes());
        bytes.push(instruction.jt);
        bytes.push(instruction.jf);
        bytes.extend_from_slice(&instruction.k.to_ne_bytes());
    }
    bytes
}

fn c_path(path: &Path) -> Result<CString, SandboxError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SandboxError::Setup(format!("`{}` contains a NUL byte", path.display())))
}

/// The binds of the commands' mount namespace, `(path, writable)` in mount order: `writable`
/// mounted back writable and `protected` (those beneath a writable root; the rest are
/// read-only anyway) read-only, parents before children and, at one depth, a writable root
/// before the protected place at the same path. Every directory between a writable root and a
/// place nested in it (a protected place, or a writable root such as the private `TMPDIR`
/// inside the spill directory) is mounted over itself too, writable: a mount point cannot be
/// renamed in its namespace, so no command can move a protected place (or a nested root) out
/// from under its bind and put a directory or a link of its own in its path. Those beneath a
/// protected place need no such bind: they are read-only already. Both backends mount these.
pub(super) fn binds(writable: &[PathBuf], protected: &[PathBuf]) -> Vec<(PathBuf, bool)> {
    let protected: Vec<&Path> = protected
        .iter()
        .filter(|place| writable.iter().any(|root| place.starts_with(root)))
        .map(|place| &**place)
        .collect();
    let mut binds: Vec<(&Path, bool)> = writable.iter().map(|root| (&**root, true)).collect();
    binds.extend(protected.iter().map(|place| (*place, false)));
    let nested: Vec<&Path> = binds.iter().map(|(path, _)| *path).collect();
    for place in nested {
        for root in writable {
            if place == root || !place.starts_with(root) {
                continue;
            }
            for between in place.ancestors().skip(1) {
                if between == root {
                    break;
                }
                let under_protected = protected.iter().any(|p| between.starts_with(p));
                if !under_protected && !binds.iter().any(|(path, _)| *path == between) {
                    binds.push((between, true));
                }
            }
        }
    }
    binds.sort_by_key(|(path, writable)| (path.components().count(), !writable));
    binds
        .into_iter()
        .map(|(path, writable)| (path.to_path_buf(), writable))
        .collect()
}

/// The mount plan of the Landlock backend: the [`binds`], and the user namespace when the
/// harness may not mount.
pub(super) fn mount_plan(
    kind: MountNamespace,
    writable: &[PathBuf],
    protected: &[PathBuf],
) -> Result<MountPlan, SandboxError> {
    let binds = binds(writable, protected);
    if binds.len() > MOUNT_BINDS_MAX {
        return Err(SandboxError::Setup(format!(
            "at most {MOUNT_BINDS_MAX} writable roots and protected places, not {}",
            binds.len()
        )));
    }
    let user_namespace = match kind {
        MountNamespace::Own => None,
        MountNamespace::User => Some(
            super::report::user_namespace_waiter()
                .and_then(|waiter| crate::supervisor::user_namespace(&waiter))
                .map_err(|e| SandboxError::Setup(format!("the commands' user namespace: {e}")))?,
        ),
    };
    Ok(MountPlan {
        user_namespace,
        binds: binds
            .into_iter()
            .map(|(path, writable)| {
                Ok(MountBind {
                    path: c_path(&path)?,
                    writable,
                })
            })
            .collect::<Result<_, SandboxError>>()?,
    })
}

/// What the system offers the policy, as the executor found it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Offered {
    pub(super) backend: SandboxBackend,
    /// The Landlock ABI (0 for bubblewrap).
    pub(super) landlock_abi: u32,
    pub(super) seccomp: bool,
    pub(super) mount_namespace: bool,
    pub(super) deny_network: bool,
    pub(super) protects: bool,
}

/// Each right the policy denies and what enforces it, given what the system offers.
pub(super) fn rights(offered: Offered) -> Vec<RightReport> {
    use Mechanism::*;
    let abi = offered.landlock_abi;
    let landlock = |since: u32| offered.backend == SandboxBackend::Landlock && abi >= since;
    let bubblewrap = offered.backend == SandboxBackend::Bubblewrap;
    let when = |present: bool, mechanism: Mechanism| present.then_some(mechanism);
    let seccomp = when(offered.seccomp, Seccomp);
    let mounts = when(offered.mount_namespace || bubblewrap, MountNamespace);
    let mut table: Vec<(Right, Vec<Option<Mechanism>>)> = vec![
        (Right::Writes, vec![when(landlock(3), Landlock), mounts]),
        (Right::Metadata, vec![mounts]),
    ];
    if offered.protects {
        table.push((Right::ProtectedPlaces, vec![mounts]));
    }
    table.extend([
        (
            Right::DeviceNodes,
            vec![
                Some(CapabilityDrop),
                when(landlock(1), Landlock),
                seccomp,
                mounts,
            ],
        ),
        (
            Right::DeviceIoctls,
            vec![
                Some(Session),
                Some(CapabilityDrop),
                when(landlock(5), Landlock),
                seccomp,
            ],
        ),
        (Right::Capabilities, vec![Some(CapabilityDrop)]),
        (Right::Terminal, vec![Some(Session)]),
    ]);
    if offered.deny_network {
        let network_namespace = when(bubblewrap, NetworkNamespace);
        let unix_by_landlock = landlock(RESOLVE_UNIX_ABI);
        table.extend([
            (
                Right::Tcp,
                vec![when(landlock(4), Landlock), network_namespace, seccomp],
            ),
            (Right::OtherSockets, vec![network_namespace, seccomp]),
            (
                Right::UnixSockets,
                vec![
                    when(unix_by_landlock, Landlock),
                    seccomp.filter(|_| !unix_by_landlock),
                ],
            ),
            (
                Right::AbstractUnixSockets,
                vec![
                    when(landlock(6), Landlock),
                    network_namespace,
                    seccomp.filter(|_| !unix_by_landlock),
                ],
            ),
        ]);
    }
    table.extend([
        (
            Right::Signals,
            vec![when(landlock(6), Landlock), when(bubblewrap, PidNamespace)],
        ),
        (
            Right::HarnessMemory,
            vec![when(landlock(1), Landlock), when(bubblewrap, PidNamespace)],
        ),
    ]);
    table
        .into_iter()
        .map(|(right, mechanisms)| {
            let by: Vec<Mechanism> = mechanisms.into_iter().flatten().collect();
            RightReport {
                right,
                enforced: !by.is_empty(),
                by,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (path, writable) of each bind, in order.
    fn binds(writable: &[&str], protected: &[&str]) -> Vec<(String, bool)> {
        let writable: Vec<PathBuf> = writable.iter().map(PathBuf::from).collect();
        let protected: Vec<PathBuf> = protected.iter().map(PathBuf::from).collect();
        let plan = mount_plan(MountNamespace::Own, &writable, &protected).unwrap();
        plan.binds
            .iter()
            .map(|bind| (bind.path.to_string_lossy().into_owned(), bind.writable))
            .collect()
    }

    #[test]
    fn nested_places_are_pinned_and_mounted_parents_first() {
        let own = |path: &str, writable| (path.to_owned(), writable);
        // The store two levels below the workspace, the private TMPDIR inside it: the
        // directory between the workspace and the store is pinned, those inside the store
        // (read-only already) are not.
        assert_eq!(
            binds(
                &["/w", "/w/a/store/s/spill/tmp"],
                &["/w/a/store", "/outside"]
            ),
            vec![
                own("/w", true),
                own("/w/a", true),
                own("/w/a/store", false),
                own("/w/a/store/s/spill/tmp", true),
            ]
        );
        // A protected place at a root's own path: the root first, then the protection.
        assert_eq!(
            binds(&["/w"], &["/w"]),
            vec![own("/w", true), own("/w", false)]
        );
        // Nothing nested: the roots alone.
        assert_eq!(
            binds(&["/w", "/tmp/t"], &["/elsewhere/store"]),
            vec![own("/w", true), own("/tmp/t", true)]
        );
    }
}

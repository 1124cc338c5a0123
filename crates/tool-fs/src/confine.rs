//! Where a write may go, and the write itself: atomic (a temporary file in the same
//! directory, fsync, rename), keeping the replaced file's permissions.
//!
//! Under [`WritePolicy::Roots`] every step opens beneath a `cap-std` handle of the root
//! (`openat2` with `RESOLVE_BENEATH` where the kernel has it): the parents are created, the
//! temporary file is created and the rename is done relative to directory handles, so a
//! symlink, a `..` or a directory swapped in during the call cannot lead the write out. There
//! is no check-then-open. The rename replaces the directory entry and never writes through
//! it, so a hard link to a file outside the roots leaves that file untouched.

use crate::error::FsError;
use crate::options::WritePolicy;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A root of a roots policy: as the host named it, canonical (a symlinked `/tmp`), and the
/// directory handle opened once, when the plugin was made: a root later swapped for a symlink
/// (by a command that can write beside it) still means the directory that was there.
#[derive(Debug)]
struct Root {
    given: PathBuf,
    canonical: PathBuf,
    dir: Dir,
}

/// The write side of the plugin: the policy and its roots.
#[derive(Debug)]
pub(crate) struct Confinement {
    policy: WritePolicy,
    roots: Vec<Root>,
}

/// A file a write may go to.
#[derive(Debug)]
pub(crate) enum Target {
    /// Unconfined: the path itself.
    Ambient(PathBuf),
    /// Beneath a root: the root's handle and the path relative to it.
    Beneath {
        /// The root's handle.
        root: Dir,
        /// The path beneath it.
        rel: PathBuf,
    },
}

/// The existing file a write replaces: its bytes and mode.
#[derive(Debug)]
pub(crate) struct Existing {
    pub(crate) bytes: Vec<u8>,
    pub(crate) metadata: std::fs::Metadata,
}

impl Confinement {
    pub(crate) fn new(policy: WritePolicy) -> Confinement {
        let roots = match &policy {
            // A root that cannot be opened now allows nothing: it is left out, with a warning.
            WritePolicy::Roots(roots) => roots
                .iter()
                .filter_map(|given| {
                    let opened = std::fs::canonicalize(given).and_then(|canonical| {
                        let dir = Dir::open_ambient_dir(&canonical, ambient_authority())?;
                        Ok(Root {
                            given: given.clone(),
                            canonical,
                            dir,
                        })
                    });
                    opened
                        .map_err(|error| {
                            tracing::warn!(root = %given.display(), %error, "a write root that cannot be opened is left out");
                        })
                        .ok()
                })
                .collect(),
            _ => Vec::new(),
        };
        Confinement { policy, roots }
    }

    fn refused(&self, path: &Path) -> FsError {
        FsError::Refused {
            path: path.to_path_buf(),
            policy: self.policy.to_string(),
        }
    }

    /// Where a write of the absolute `path` goes, or the refusal naming the policy. A write
    /// the user `approved` goes to the destination the question named
    /// ([`destination`]), and only while the path still leads there.
    pub(crate) fn target(&self, path: &Path, approved: Option<&Path>) -> Result<Target, FsError> {
        if let Some(approved) = approved {
            if destination(path) != approved {
                return Err(FsError::Refused {
                    path: path.to_path_buf(),
                    policy: format!(
                        "{}; the path no longer leads to {}, the place the user approved",
                        self.policy,
                        approved.display()
                    ),
                });
            }
            return Ok(Target::Ambient(approved.to_path_buf()));
        }
        match &self.policy {
            WritePolicy::Anywhere => Ok(Target::Ambient(destination(path))),
            WritePolicy::ReadOnly => Err(self.refused(path)),
            WritePolicy::Roots(_) => {
                for root in &self.roots {
                    let rel = path
                        .strip_prefix(&root.given)
                        .or_else(|_| path.strip_prefix(&root.canonical));
                    let Ok(rel) = rel else { continue };
                    if rel.as_os_str().is_empty()
                        || !matches!(rel.components().next_back(), Some(Component::Normal(_)))
                    {
                        return Err(self.refused(path));
                    }
                    let dir = root
                        .dir
                        .try_clone()
                        .map_err(|e| FsError::io("cannot open the root of", &root.canonical, e))?;
                    let rel = follow_link(&dir, &root.canonical, rel)
                        .map_err(|e| self.beneath_error("cannot resolve", path, e))?;
                    return Ok(Target::Beneath { root: dir, rel });
                }
                Err(self.refused(path))
            }
        }
    }

    /// Maps an error of a confined step: leaving the root is the policy's refusal.
    fn beneath_error(&self, what: &'static str, path: &Path, error: std::io::Error) -> FsError {
        // cap-std reports a path that resolves outside its handle as `PermissionDenied`; the
        // file tools run as root too, where no permission bit denies anything else.
        if error.kind() == std::io::ErrorKind::PermissionDenied {
            tracing::info!(path = %path.display(), "a write outside the roots was refused");
            self.refused(path)
        } else {
            FsError::io(what, path, error)
        }
    }

    /// The file `target` would replace, when there is one.
    pub(crate) fn existing(
        &self,
        target: &Target,
        path: &Path,
        max_bytes: u64,
    ) -> Result<Option<Existing>, FsError> {
        // Never blocking on a FIFO or a device: opened without waiting, then refused unless a
        // regular file.
        let opened = match target {
            Target::Ambient(p) => crate::open::regular(p),
            Target::Beneath { root, rel } => {
                let mut options = OpenOptions::new();
                options.read(true);
                cap_std::fs::OpenOptionsExt::custom_flags(&mut options, crate::open::nonblock());
                root.open_with(rel, &options)
                    .map(cap_std::fs::File::into_std)
                    .and_then(crate::open::only_regular)
            }
        };
        let file = match opened {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.beneath_error("cannot open", path, e)),
        };
        let metadata = file
            .metadata()
            .map_err(|e| FsError::io("cannot inspect", path, e))?;
        if metadata.is_dir() {
            return Err(FsError::IsDirectory(path.to_path_buf()));
        }
        if metadata.len() > max_bytes {
            return Err(FsError::TooLarge(format!(
                "{} is {} bytes, over the {max_bytes} bytes the file tools change in one piece; change it with `bash`",
                path.display(),
                metadata.len()
            )));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
        file.take(max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| FsError::io("cannot read", path, e))?;
        Ok(Some(Existing { bytes, metadata }))
    }

    /// Writes `bytes` to `target` atomically, creating missing parents; `mode` is the replaced
    /// file's permissions, kept.
    pub(crate) fn write(
        &self,
        target: Target,
        path: &Path,
        bytes: &[u8],
        permissions: Option<std::fs::Permissions>,
    ) -> Result<(), FsError> {
        match target {
            Target::Ambient(path) => write_ambient(&path, bytes, permissions),
            Target::Beneath { root, rel } => write_beneath(&root, &rel, bytes, permissions)
                .map_err(|e| self.beneath_error("cannot write", path, e)),
        }
    }
}

fn write_ambient(
    path: &Path,
    bytes: &[u8],
    permissions: Option<std::fs::Permissions>,
) -> Result<(), FsError> {
    // `path` is a destination ([`destination`]): a symlink was followed there, as an editor
    // does; one swapped in since is replaced by the rename, not followed.
    let path = path.to_path_buf();
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .map_err(|e| FsError::io("cannot create the directory", &parent, e))?;
    let mut temp = tempfile::Builder::new()
        .prefix(".dsh-write-")
        .tempfile_in(&parent)
        .map_err(|e| FsError::io("cannot create a temporary file in", &parent, e))?;
    temp.write_all(bytes)
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|e| FsError::io("cannot write", &path, e))?;
    set_mode(temp.as_file(), permissions)
        .map_err(|e| FsError::io("cannot set the permissions of", &path, e))?;
    temp.persist(&path)
        .map_err(|e| FsError::io("cannot replace", &path, e.error))?;
    Ok(())
}

/// `0644` less the process's umask is what a plain create would give; the temporary file was
/// created `0600`, so a new file gets the usual mode explicitly.
#[cfg(unix)]
fn set_mode(
    file: &std::fs::File,
    permissions: Option<std::fs::Permissions>,
) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // The permission bits only: new content never inherits a set-user-id, set-group-id or
    // sticky bit (the kernel clears the first two on a write, too).
    let mode = permissions.map_or(0o644, |p| p.mode() & 0o777);
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

/// Elsewhere a new file keeps the platform's default, and a replaced one its permissions.
#[cfg(not(unix))]
fn set_mode(
    file: &std::fs::File,
    permissions: Option<std::fs::Permissions>,
) -> std::io::Result<()> {
    match permissions {
        Some(permissions) => file.set_permissions(permissions),
        None => Ok(()),
    }
}

/// `rel` with a symlink at its last component followed, while it stays beneath the root: an
/// absolute link into the root is taken relative to it, and anything else that leaves the root
/// is refused by cap-std. A link swapped in later is never followed: the write's rename
/// replaces the entry.
fn follow_link(root: &Dir, root_path: &Path, rel: &Path) -> std::io::Result<PathBuf> {
    match root.symlink_metadata(rel) {
        Ok(meta) if meta.file_type().is_symlink() => {}
        _ => return Ok(rel.to_path_buf()),
    }
    let target = root.read_link_contents(rel)?;
    let beneath = if target.is_absolute() {
        target
            .strip_prefix(root_path)
            .map(Path::to_path_buf)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::PermissionDenied))?
    } else {
        rel.parent().unwrap_or(Path::new("")).join(target)
    };
    root.canonicalize(beneath)
}

fn write_beneath(
    root: &Dir,
    rel: &Path,
    bytes: &[u8],
    permissions: Option<std::fs::Permissions>,
) -> std::io::Result<()> {
    let name = rel
        .file_name()
        .ok_or_else(|| std::io::Error::other("the path names no file"))?
        .to_owned();
    let parent_rel = rel.parent().unwrap_or(Path::new(""));
    let parent = if parent_rel.as_os_str().is_empty() {
        root.try_clone()?
    } else {
        root.create_dir_all(parent_rel)?;
        root.open_dir(parent_rel)?
    };
    let temp_name = temp_name(&name);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    let file = parent.open_with(&temp_name, &options)?;
    let mut file = file.into_std();
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| set_mode(&file, permissions));
    let renamed = written.and_then(|()| parent.rename(&temp_name, &parent, &name));
    if renamed.is_err() {
        let _ = parent.remove_file(&temp_name);
    }
    renamed
}

/// A temporary name beside `name`, unique in this process and unlikely elsewhere
/// (`create_new` refuses a clash rather than follow it).
fn temp_name(name: &std::ffi::OsStr) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    // At most 64 bytes of the name, so a name near the system's limit still has a temporary
    // one.
    let name = name.to_string_lossy();
    let mut end = name.len().min(64);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    PathBuf::from(format!(
        ".{}.dsh-{}-{n}-{nanos:x}.tmp",
        &name[..end],
        std::process::id()
    ))
}

/// Where an unconfined write of the absolute `path` lands: the path with every symlink
/// followed (the file's, when it exists; else its parent's, with the name kept), as the
/// question to the approver names it.
pub(crate) fn destination(path: &Path) -> PathBuf {
    if let Ok(resolved) = std::fs::canonicalize(path) {
        return resolved;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => {
            std::fs::canonicalize(parent)
                .map(|parent| parent.join(name))
                .unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

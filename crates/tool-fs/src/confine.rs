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

/// A root of a roots policy: as the host named it, and canonical (a symlinked `/tmp`).
#[derive(Clone, Debug)]
struct Root {
    given: PathBuf,
    canonical: PathBuf,
}

/// The write side of the plugin: the policy and its roots.
#[derive(Clone, Debug)]
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
            WritePolicy::Roots(roots) => roots
                .iter()
                .map(|given| Root {
                    given: given.clone(),
                    canonical: std::fs::canonicalize(given).unwrap_or_else(|_| given.clone()),
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

    /// Where a write of the absolute `path` goes, or the refusal naming the policy; an
    /// `escalated` write (the user approved it) goes where the path leads.
    pub(crate) fn target(&self, path: &Path, escalated: bool) -> Result<Target, FsError> {
        if escalated {
            return Ok(Target::Ambient(path.to_path_buf()));
        }
        match &self.policy {
            WritePolicy::Anywhere => Ok(Target::Ambient(path.to_path_buf())),
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
                    let dir = Dir::open_ambient_dir(&root.canonical, ambient_authority())
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
        let opened = match target {
            Target::Ambient(p) => std::fs::File::open(p),
            Target::Beneath { root, rel } => root.open(rel).map(cap_std::fs::File::into_std),
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
    // Unconfined, a symlink is written through, as an editor does.
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
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
    file.set_permissions(permissions.unwrap_or_else(|| std::fs::Permissions::from_mode(0o644)))
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
    PathBuf::from(format!(
        ".{}.dsh-{}-{n}-{nanos:x}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ))
}

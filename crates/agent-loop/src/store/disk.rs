//! The files of a session store, opened beneath the store's directory handles and never
//! through a symbolic link: every name is one path component opened with `openat` and
//! `O_NOFOLLOW` relative to the handle of the directory that holds it, and what was opened is
//! checked before it is used ([`judge`]): a file the store writes must be the only name of
//! its file (no hard link to one elsewhere), and only an open for writing repairs a mode. Also the cut of a torn last log line, and the size of
//! a session on disk.

use super::{StoreError, io_error};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Directories the store makes: the owner's alone.
const DIR_MODE: u32 = 0o700;
/// Files the store makes, and what a file of ours others could use is set back to.
const FILE_MODE: u32 = 0o600;

/// Why the store refused a file or directory it found in its place.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// A symbolic link: the store follows none, so nothing it opens is outside it.
    #[error("is a symbolic link, and the session store follows none")]
    Symlink,
    /// Not the kind of entry the store keeps there.
    #[error("is {found}, not {expected}")]
    WrongKind {
        /// What it is (`a FIFO`, `a directory`, …).
        found: &'static str,
        /// What the store keeps there (`a regular file` or `a directory`).
        expected: &'static str,
    },
    /// Owned by another user: the store uses only what its own user made.
    #[error(
        "is owned by user {owner}, not by this user ({user}): the session store uses only what \
         its own user made"
    )]
    ForeignOwner {
        /// The owner's user id.
        owner: u32,
        /// This process's effective user id.
        user: u32,
    },
    /// A directory its group or other users may write: they could have put anything in it.
    #[error("is writable by other users (mode {mode:o})")]
    WritableByOthers {
        /// Its permission bits.
        mode: u32,
    },
    /// A file the store writes (a log, a lock, metadata) that has other names: a hard link to
    /// a file elsewhere would let the store truncate, append to or `chmod` that file.
    #[error("has {links} hard links; the session store uses files of its own only")]
    HardLinks {
        /// How many names the file has.
        links: u64,
    },
}

impl Refusal {
    /// The command that fixes it, when one does.
    pub(super) fn fix(&self, path: &Path) -> Option<String> {
        match self {
            Refusal::WritableByOthers { .. } => Some(format!(
                "make it private with `chmod go-w {}`",
                quoted(path)
            )),
            _ => None,
        }
    }
}

/// A path as a shell word: bare when it holds nothing a shell reads specially.
fn quoted(path: &Path) -> String {
    let text = path.display().to_string();
    let plain = text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@%=".contains(&b));
    if plain {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// What an entry of a directory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
    Symlink,
    Other(&'static str),
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
            Kind::Symlink => "a symbolic link",
            Kind::Other(what) => what,
        }
    }

    fn of_metadata(meta: &Metadata) -> Kind {
        let kind = meta.file_type();
        if kind.is_file() {
            Kind::File
        } else if kind.is_dir() {
            Kind::Dir
        } else if kind.is_symlink() {
            Kind::Symlink
        } else if kind.is_fifo() {
            Kind::Other("a FIFO")
        } else if kind.is_socket() {
            Kind::Other("a socket")
        } else if kind.is_char_device() {
            Kind::Other("a character device")
        } else if kind.is_block_device() {
            Kind::Other("a block device")
        } else {
            Kind::Other("of an unknown kind")
        }
    }

    fn of_file_type(kind: FileType) -> Option<Kind> {
        Some(match kind {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            FileType::Fifo => Kind::Other("a FIFO"),
            FileType::Socket => Kind::Other("a socket"),
            FileType::CharacterDevice => Kind::Other("a character device"),
            FileType::BlockDevice => Kind::Other("a block device"),
            _ => return None,
        })
    }
}

/// What to do with an entry the store opened.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Use it.
    Accept,
    /// A file of ours its group or others may read or write: set it back to `0600`, then use
    /// it (what was in it is read as untrusted input anyway).
    MakePrivate,
    /// Leave it alone and say why.
    Refuse(Refusal),
}

/// The store's rule for what it opens: the kind it keeps there, owned by this user, for a
/// file of its own (`links` given) no other name, and, for a directory, writable by no one
/// else (entries another user could have put there cannot be trusted, so such a directory is
/// refused, with the fix named, rather than repaired).
pub(super) fn judge(
    expected: Kind,
    found: Kind,
    owner: u32,
    mode: u32,
    links: Option<u64>,
    user: u32,
) -> Verdict {
    if found != expected {
        return Verdict::Refuse(match found {
            Kind::Symlink => Refusal::Symlink,
            _ => Refusal::WrongKind {
                found: found.describe(),
                expected: expected.describe(),
            },
        });
    }
    if owner != user {
        return Verdict::Refuse(Refusal::ForeignOwner { owner, user });
    }
    if expected == Kind::File
        && let Some(links) = links
        && links != 1
    {
        return Verdict::Refuse(Refusal::HardLinks { links });
    }
    let mode = mode & 0o7777;
    match expected {
        Kind::Dir if mode & 0o022 != 0 => Verdict::Refuse(Refusal::WritableByOthers { mode }),
        Kind::File if mode & 0o077 != 0 => Verdict::MakePrivate,
        _ => Verdict::Accept,
    }
}

fn this_user() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn refused(path: PathBuf, reason: Refusal) -> StoreError {
    StoreError::Refused { path, reason }
}

/// How [`StoreDir::file`] opens a file. Every file but a spill file must be the only name of
/// its file ([`Refusal::HardLinks`]); only the writing opens that may create make a file of
/// ours private again, so a look at the store changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FileHow {
    /// A file of the store's own, for reading; absent is `None`.
    Read,
    /// A spill file, for reading: it may have other names (a fork links the parent's), so
    /// it must never be written.
    ReadLinked,
    /// For reading and writing, created (`0600`) when absent, made private.
    ReadWrite,
    /// For reading and appending, never created (absent is `None`) and not made private: the
    /// caller does that with [`make_private`] once everything else is checked.
    Append,
    /// Created (`0600`) for writing; one that exists is an error (`AlreadyExists`).
    CreateNew,
}

impl FileHow {
    fn own(self) -> bool {
        self != FileHow::ReadLinked
    }

    fn repairs(self) -> bool {
        matches!(self, FileHow::ReadWrite | FileHow::CreateNew)
    }
}

/// How [`StoreDir::dir`] opens a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DirHow {
    /// As it is; absent is `None`.
    Existing,
    /// Created (`0700`) when absent.
    Ensure,
    /// Created (`0700`); one that exists is an error (`AlreadyExists`).
    CreateNew,
}

/// An open directory of the store, and its path (for messages and for the paths handed to
/// others).
#[derive(Debug)]
pub(super) struct StoreDir {
    handle: File,
    path: PathBuf,
}

impl StoreDir {
    /// The store's root: created (`0700`, with its parents) when `create`, else `None` when
    /// absent. The root's own path may pass through symbolic links (it is the user's choice);
    /// nothing beneath it may. The root is checked like every directory of the store.
    pub(super) fn root(path: &Path, create: bool) -> Result<Option<StoreDir>, StoreError> {
        if create {
            std::fs::DirBuilder::new()
                .mode(DIR_MODE)
                .recursive(true)
                .create(path)
                .map_err(io_error(path))?;
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = match rustix::fs::open(path, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if !create => return Ok(None),
            Err(errno) => return Err(io_error(path)(errno.into())),
        };
        let dir = StoreDir {
            handle: File::from(fd),
            path: path.to_owned(),
        };
        dir.check(Kind::Dir)?;
        Ok(Some(dir))
    }

    /// The directory's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The path of the entry `name`.
    pub(super) fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Checks what this handle holds against [`judge`]; a directory is never repaired.
    fn check(&self, expected: Kind) -> Result<(), StoreError> {
        check_open(&self.handle, &self.path, expected)
    }

    /// The subdirectory `name`.
    pub(super) fn dir(&self, name: &str, how: DirHow) -> Result<Option<StoreDir>, StoreError> {
        let path = self.join(name);
        if how != DirHow::Existing {
            match rustix::fs::mkdirat(&self.handle, name, Mode::from_raw_mode(DIR_MODE)) {
                Ok(()) => {}
                Err(Errno::EXIST) if how == DirHow::Ensure => {}
                Err(errno) => return Err(io_error(&path)(errno.into())),
            }
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&self.handle, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if how == DirHow::Existing => return Ok(None),
            Err(errno) => return Err(self.open_failed(name, Kind::Dir, errno)),
        };
        let dir = StoreDir {
            handle: File::from(fd),
            path,
        };
        dir.check(Kind::Dir)?;
        Ok(Some(dir))
    }

    /// The regular file `name`, checked against [`judge`] (and, when `how` writes, made
    /// private when it is ours and others could use it).
    pub(super) fn file(&self, name: &str, how: FileHow) -> Result<Option<File>, StoreError> {
        let path = self.join(name);
        // Non-blocking, so that a FIFO put in a file's place cannot hold the open; a regular
        // file ignores the flag.
        let mut flags = OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
        flags |= match how {
            FileHow::Read | FileHow::ReadLinked => OFlags::RDONLY,
            FileHow::ReadWrite => OFlags::RDWR | OFlags::CREATE,
            FileHow::Append => OFlags::RDWR | OFlags::APPEND,
            FileHow::CreateNew => OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
        };
        let mode = Mode::from_raw_mode(FILE_MODE);
        let fd = match rustix::fs::openat(&self.handle, name, flags, mode) {
            Ok(fd) => fd,
            Err(Errno::NOENT)
                if matches!(how, FileHow::Read | FileHow::ReadLinked | FileHow::Append) =>
            {
                return Ok(None);
            }
            Err(errno) => return Err(self.open_failed(name, Kind::File, errno)),
        };
        let file = File::from(fd);
        match check_file(&file, &path, how.own())? {
            Verdict::MakePrivate if how.repairs() => make_private(&file, &path)?,
            _ => {}
        }
        let blocking = rustix::fs::fcntl_getfl(&file)
            .and_then(|flags| rustix::fs::fcntl_setfl(&file, flags - OFlags::NONBLOCK));
        blocking.map_err(|errno| io_error(&path)(errno.into()))?;
        Ok(Some(file))
    }

    /// An open that failed: a refusal when the entry is not what the store keeps there (a
    /// symbolic link, a directory for a file), the system's error otherwise.
    fn open_failed(&self, name: &str, expected: Kind, errno: Errno) -> StoreError {
        let path = self.join(name);
        if matches!(
            errno,
            Errno::LOOP | Errno::NOTDIR | Errno::ISDIR | Errno::NXIO | Errno::MLINK
        ) && let Some(found) = self.kind_of(name)
            && let Verdict::Refuse(reason) = judge(expected, found, 0, 0, None, 0)
        {
            // Only the kind can be wrong here (owner and mode are given as accepted): the
            // entry is not what the store keeps in its place.
            return refused(path, reason);
        }
        io_error(&path)(errno.into())
    }

    /// What the entry `name` is, without following it; `None` when it cannot be told.
    pub(super) fn kind_of(&self, name: &str) -> Option<Kind> {
        let stat = rustix::fs::statat(&self.handle, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        Kind::of_file_type(FileType::from_raw_mode(stat.st_mode))
    }

    /// Whether the entry `name` exists (of any kind; nothing is followed).
    pub(super) fn has(&self, name: &str) -> bool {
        rustix::fs::statat(&self.handle, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// The bytes the regular file `name` holds (0 for anything else).
    fn size_of(&self, name: &str) -> u64 {
        match rustix::fs::statat(&self.handle, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile => {
                u64::try_from(stat.st_size).unwrap_or(0)
            }
            _ => 0,
        }
    }

    /// The entries' names (UTF-8 ones; the store names nothing otherwise) and kinds.
    pub(super) fn entries(&self) -> Result<Vec<(String, Option<Kind>)>, StoreError> {
        let listing = rustix::fs::Dir::read_from(&self.handle)
            .map_err(|errno| io_error(&self.path)(errno.into()))?;
        let mut entries = Vec::new();
        for entry in listing {
            let entry = entry.map_err(|errno| io_error(&self.path)(errno.into()))?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if name == "." || name == ".." {
                continue;
            }
            let kind = Kind::of_file_type(entry.file_type()).or_else(|| self.kind_of(name));
            entries.push((name.to_owned(), kind));
        }
        Ok(entries)
    }

    /// When the directory itself last changed.
    pub(super) fn modified(&self) -> Option<std::time::SystemTime> {
        self.handle.metadata().and_then(|m| m.modified()).ok()
    }

    /// Puts the regular file `name` of `from` (open as `source`) here under the same name:
    /// a hard link where the system makes one and the file is private (then checked to be
    /// that very file), else a copy (`0600`), so the parent's file is never changed.
    pub(super) fn take_file(
        &self,
        from: &StoreDir,
        name: &str,
        source: &File,
    ) -> Result<(), StoreError> {
        let to = self.join(name);
        let from_path = from.join(name);
        let copy_failed = |source: io::Error| StoreError::Copy {
            from: from_path.clone(),
            to: to.clone(),
            source,
        };
        let wanted = source.metadata().map_err(io_error(&from_path))?;
        if wanted.mode() & 0o077 == 0
            && rustix::fs::linkat(&from.handle, name, &self.handle, name, AtFlags::empty()).is_ok()
        {
            // The name may have been replaced between the open and the link: keep the link
            // only if it is the file that was checked.
            let linked = self.file(name, FileHow::ReadLinked);
            let same = matches!(&linked, Ok(Some(file)) if file.metadata().is_ok_and(|m| {
                m.ino() == wanted.ino() && m.dev() == wanted.dev()
            }));
            if same {
                return Ok(());
            }
            rustix::fs::unlinkat(&self.handle, name, AtFlags::empty())
                .map_err(|errno| io_error(&to)(errno.into()))?;
        }
        let mut target = self
            .file(name, FileHow::CreateNew)?
            .ok_or_else(|| io_error(&to)(io::ErrorKind::NotFound.into()))?;
        let mut reader = source;
        io::copy(&mut reader, &mut target).map_err(copy_failed)?;
        Ok(())
    }
}

/// Checks an open directory against [`judge`]; a directory is never repaired.
fn check_open(file: &File, path: &Path, expected: Kind) -> Result<(), StoreError> {
    let meta = file.metadata().map_err(io_error(path))?;
    let found = Kind::of_metadata(&meta);
    match judge(expected, found, meta.uid(), meta.mode(), None, this_user()) {
        Verdict::Refuse(reason) => Err(refused(path.to_owned(), reason)),
        _ => Ok(()),
    }
}

/// Checks an open file against [`judge`] (`own`: it must be the only name of its file); what
/// is refused is an error, the rest the verdict, for the caller to act on.
fn check_file(file: &File, path: &Path, own: bool) -> Result<Verdict, StoreError> {
    let meta = file.metadata().map_err(io_error(path))?;
    let links = own.then(|| meta.nlink());
    let found = Kind::of_metadata(&meta);
    match judge(
        Kind::File,
        found,
        meta.uid(),
        meta.mode(),
        links,
        this_user(),
    ) {
        Verdict::Refuse(reason) => Err(refused(path.to_owned(), reason)),
        verdict => Ok(verdict),
    }
}

/// Sets a file of ours (checked, open) others could read or write back to `0600`.
pub(super) fn make_private(file: &File, path: &Path) -> Result<(), StoreError> {
    let meta = file.metadata().map_err(io_error(path))?;
    if meta.mode() & 0o077 == 0 {
        return Ok(());
    }
    tracing::warn!(
        path = %path.display(),
        mode = format_args!("{:o}", meta.mode() & 0o7777),
        "other users could use this file of the session store; set it to 0600"
    );
    rustix::fs::fchmod(file, Mode::from_raw_mode(FILE_MODE))
        .map_err(|errno| io_error(path)(errno.into()))
}

/// Where a log's last line ends.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Tail {
    /// The log is empty or ends with a newline.
    Ended,
    /// The bytes from `at` on are a last line without its newline, at most a line long: the
    /// writer died while writing it.
    Torn {
        /// Where the torn line starts.
        at: u64,
    },
    /// More than `limit` bytes follow the last newline: no writer of this store writes such a
    /// line, so it is not one torn by a crash.
    TooLong,
}

/// Finds where the log `file` (`len` bytes) ends, reading backwards no further than a block
/// past `limit` bytes from its end.
pub(super) fn find_tail(file: &File, len: u64, limit: u64) -> io::Result<Tail> {
    if len == 0 {
        return Ok(Tail::Ended);
    }
    let mut end = len;
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let start = end.saturating_sub(buffer.len() as u64);
        let size = usize::try_from(end - start).unwrap_or(0);
        file.read_exact_at(&mut buffer[..size], start)?;
        if end == len && buffer[size - 1] == b'\n' {
            return Ok(Tail::Ended);
        }
        let at = match buffer[..size].iter().rposition(|&b| b == b'\n') {
            Some(i) => start + i as u64 + 1,
            None if start == 0 => 0,
            None if len - start > limit => return Ok(Tail::TooLong),
            None => {
                end = start;
                continue;
            }
        };
        return Ok(if len - at > limit {
            Tail::TooLong
        } else {
            Tail::Torn { at }
        });
    }
}

/// The number of newlines in the first `up_to` bytes of `file` (read by position, so the
/// file's offset stays where it is).
pub(super) fn count_lines(file: &File, up_to: u64) -> io::Result<usize> {
    let mut counted = 0;
    let mut at = 0;
    let mut chunk = vec![0u8; 64 * 1024];
    while at < up_to {
        let want = usize::try_from(up_to - at).map_or(chunk.len(), |n| n.min(chunk.len()));
        let n = file.read_at(&mut chunk[..want], at)?;
        if n == 0 {
            break;
        }
        counted += chunk[..n].iter().filter(|&&b| b == b'\n').count();
        at += n as u64;
    }
    Ok(counted)
}

/// The bytes the regular files of a session directory hold (one level of subdirectories:
/// the spill directory). Nothing is followed; what cannot be read counts as nothing.
pub(super) fn dir_size(dir: &StoreDir) -> u64 {
    let Ok(entries) = dir.entries() else {
        return 0;
    };
    let mut total = 0;
    for (name, kind) in entries {
        total += match kind {
            Some(Kind::Dir) => match dir.dir(&name, DirHow::Existing) {
                Ok(Some(inner)) => inner
                    .entries()
                    .map(|entries| entries.iter().map(|(name, _)| inner.size_of(name)).sum())
                    .unwrap_or(0),
                _ => 0,
            },
            _ => dir.size_of(&name),
        };
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_store_uses_only_plain_entries_of_its_own_user_and_no_one_elses_directory() {
        const ME: u32 = 1000;
        let fifo = Kind::Other("a FIFO");
        let cases = [
            (Kind::File, Kind::File, ME, 0o600, Verdict::Accept),
            (Kind::File, Kind::File, ME, 0o644, Verdict::MakePrivate),
            (Kind::File, Kind::File, ME, 0o666, Verdict::MakePrivate),
            (Kind::Dir, Kind::Dir, ME, 0o700, Verdict::Accept),
            // Readable by others is theirs to decide; writable is not.
            (Kind::Dir, Kind::Dir, ME, 0o755, Verdict::Accept),
            (
                Kind::Dir,
                Kind::Dir,
                ME,
                0o1777,
                Verdict::Refuse(Refusal::WritableByOthers { mode: 0o1777 }),
            ),
            (
                Kind::Dir,
                Kind::Dir,
                ME,
                0o770,
                Verdict::Refuse(Refusal::WritableByOthers { mode: 0o770 }),
            ),
            (
                Kind::File,
                Kind::File,
                0,
                0o600,
                Verdict::Refuse(Refusal::ForeignOwner { owner: 0, user: ME }),
            ),
            (
                Kind::Dir,
                Kind::Dir,
                1001,
                0o700,
                Verdict::Refuse(Refusal::ForeignOwner {
                    owner: 1001,
                    user: ME,
                }),
            ),
            (
                Kind::File,
                Kind::Symlink,
                ME,
                0o777,
                Verdict::Refuse(Refusal::Symlink),
            ),
            (
                Kind::Dir,
                Kind::Symlink,
                ME,
                0o777,
                Verdict::Refuse(Refusal::Symlink),
            ),
            (
                Kind::File,
                fifo,
                ME,
                0o600,
                Verdict::Refuse(Refusal::WrongKind {
                    found: "a FIFO",
                    expected: "a regular file",
                }),
            ),
            (
                Kind::File,
                Kind::Dir,
                ME,
                0o700,
                Verdict::Refuse(Refusal::WrongKind {
                    found: "a directory",
                    expected: "a regular file",
                }),
            ),
        ];
        for (expected, found, owner, mode, verdict) in cases {
            assert_eq!(
                judge(expected, found, owner, mode, Some(1), ME),
                verdict,
                "{expected:?} {found:?} {owner} {mode:o}"
            );
        }
    }

    #[test]
    fn a_file_of_the_store_s_own_has_no_other_name_but_a_spill_file_may() {
        const ME: u32 = 1000;
        let cases = [
            (Kind::File, Some(1), Verdict::Accept),
            (
                Kind::File,
                Some(2),
                Verdict::Refuse(Refusal::HardLinks { links: 2 }),
            ),
            (
                Kind::File,
                Some(0),
                Verdict::Refuse(Refusal::HardLinks { links: 0 }),
            ),
            (Kind::File, None, Verdict::Accept),
            // A directory's link count counts its subdirectories.
            (Kind::Dir, Some(5), Verdict::Accept),
        ];
        for (kind, links, verdict) in cases {
            assert_eq!(
                judge(kind, kind, ME, 0o600, links, ME),
                verdict,
                "{links:?}"
            );
        }
    }

    #[test]
    fn a_fix_is_a_command_a_shell_reads_as_written() {
        let writable = Refusal::WritableByOthers { mode: 0o777 };
        let cases = [
            ("/tmp/s", "make it private with `chmod go-w /tmp/s`"),
            ("/tmp/a b", "make it private with `chmod go-w '/tmp/a b'`"),
            (
                "/tmp/it's",
                r"make it private with `chmod go-w '/tmp/it'\''s'`",
            ),
        ];
        for (path, fix) in cases {
            assert_eq!(writable.fix(Path::new(path)).as_deref(), Some(fix));
        }
        assert_eq!(Refusal::Symlink.fix(Path::new("/tmp/s")), None);
    }

    #[test]
    fn a_tail_is_torn_only_when_it_is_at_most_a_line_long() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let cases: [(&[u8], Tail); 6] = [
            (b"", Tail::Ended),
            (b"{}\n", Tail::Ended),
            (b"{}\n{\"to", Tail::Torn { at: 3 }),
            (b"{\"to", Tail::Torn { at: 0 }),
            (b"{}\n12345678", Tail::Torn { at: 3 }),
            (b"{}\n123456789", Tail::TooLong),
        ];
        for (text, tail) in cases {
            std::fs::write(&path, text).unwrap();
            let file = File::open(&path).unwrap();
            let len = file.metadata().unwrap().len();
            assert_eq!(find_tail(&file, len, 8).unwrap(), tail, "{text:?}");
        }
    }
}

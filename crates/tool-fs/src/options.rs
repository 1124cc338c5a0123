//! What a host decides for the file tools: the working directory, the write policy, the spill
//! directory and the limits.

use std::fmt;
use std::path::PathBuf;

/// Where `write` and `edit` may change files. Reads are allowed everywhere under every policy,
/// as the shell's sandbox allows them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WritePolicy {
    /// Writes anywhere (the sandbox mode `off`).
    Anywhere,
    /// Writes only beneath these directories (the sandbox mode `workspace-write`: the working
    /// directory and the session's temporary directory). Every write opens beneath a handle of
    /// its root, so no symlink, `..` or race leads it out.
    Roots(Vec<PathBuf>),
    /// No writes at all (the sandbox mode `read-only`).
    ReadOnly,
}

impl fmt::Display for WritePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WritePolicy::Anywhere => f.write_str("off (writes anywhere)"),
            WritePolicy::ReadOnly => f.write_str("read-only (no file may be written)"),
            WritePolicy::Roots(roots) => {
                let listed: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
                write!(
                    f,
                    "workspace-write (writes only beneath {})",
                    listed.join(", ")
                )
            }
        }
    }
}

/// The limits of the file tools; the defaults are the TypeScript harness's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FsLimits {
    /// The lines a `read` without `limit` shows (2 000).
    pub default_read_lines: u64,
    /// The characters a line shows before it is cut with a marker (2 000).
    pub max_line_chars: usize,
    /// The bytes of line text one `read` shows (50 KiB); a cut read names the `offset` that
    /// continues it.
    pub max_read_bytes: usize,
    /// The largest file a `read` without `offset` or `limit` takes (256 KiB); a larger one must
    /// be paged.
    pub max_unpaged_file_bytes: u64,
    /// The largest file `edit` (and `write`, for the old content) loads (256 MiB).
    pub max_edit_file_bytes: u64,
    /// The paths one `glob` shows (100).
    pub max_glob_paths: usize,
    /// The matches one `grep` shows (250).
    pub max_grep_matches: usize,
    /// Files up to this size travel whole in a diff card (256 KiB); larger ones as the changed
    /// lines with three lines of context.
    pub max_whole_diff_bytes: usize,
}

impl Default for FsLimits {
    fn default() -> Self {
        FsLimits {
            default_read_lines: 2_000,
            max_line_chars: 2_000,
            max_read_bytes: 50 * 1024,
            max_unpaged_file_bytes: 256 * 1024,
            max_edit_file_bytes: 256 * 1024 * 1024,
            max_glob_paths: 100,
            max_grep_matches: 250,
            max_whole_diff_bytes: 256 * 1024,
        }
    }
}

/// The host's choices for one [`FsPlugin`](crate::FsPlugin) (one session).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsOptions {
    /// The directory relative `file_path`s and `path`s resolve against.
    pub cwd: PathBuf,
    /// Where writes may go.
    pub policy: WritePolicy,
    /// Where a capped `glob` or `grep` saves its complete list (the session's spill
    /// directory); without one, a capped result says the list was not saved.
    pub spill_dir: Option<PathBuf>,
    /// The limits.
    pub limits: FsLimits,
}

impl FsOptions {
    /// Options with the default limits.
    pub fn new(cwd: PathBuf, policy: WritePolicy, spill_dir: Option<PathBuf>) -> FsOptions {
        FsOptions {
            cwd,
            policy,
            spill_dir,
            limits: FsLimits::default(),
        }
    }

    /// Replaces the limits.
    pub fn with_limits(mut self, limits: FsLimits) -> FsOptions {
        self.limits = limits;
        self
    }
}

//! The files of a session directory: private directories and files, the cut of a torn last
//! log line, and the size of a session on disk.

use super::{StoreError, TornTail, io_error};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// Creates a directory with mode `0700` (with its parents when `parents`; an existing one is
/// then accepted).
pub(super) fn private_dir(dir: &Path, parents: bool) -> Result<(), StoreError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.mode(0o700).recursive(parents);
    builder.create(dir).map_err(io_error(dir))
}

/// Opens a file created with mode `0600` (for appending when `append`; an existing one is
/// kept).
pub(super) fn private_file(path: &Path, append: bool) -> Result<File, StoreError> {
    let mut options = OpenOptions::new();
    options.create(true).mode(0o600);
    if append {
        options.append(true);
    } else {
        options.write(true).truncate(true);
    }
    options.open(path).map_err(io_error(path))
}

/// Cuts a last line without its newline (the writer died mid-line) from the log.
pub(super) fn cut_torn_tail(path: &Path) -> Result<Option<TornTail>, StoreError> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_error(path))?;
    let len = file.metadata().map_err(io_error(path))?.len();
    if len == 0 {
        return Ok(None);
    }
    // Read backwards in blocks until a newline (or the start) is found.
    let mut end = len;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut cut_at = 0;
    let mut last_byte_is_newline = false;
    loop {
        let start = end.saturating_sub(buffer.len() as u64);
        let size = usize::try_from(end - start).unwrap_or(0);
        file.seek(SeekFrom::Start(start)).map_err(io_error(path))?;
        file.read_exact(&mut buffer[..size])
            .map_err(io_error(path))?;
        if end == len && buffer[size - 1] == b'\n' {
            last_byte_is_newline = true;
            break;
        }
        if let Some(i) = buffer[..size].iter().rposition(|&b| b == b'\n') {
            cut_at = start + i as u64 + 1;
            break;
        }
        if start == 0 {
            break;
        }
        end = start;
    }
    if last_byte_is_newline {
        return Ok(None);
    }
    // The torn line's number: the lines before it, plus one.
    let mut counted = 0usize;
    file.seek(SeekFrom::Start(0)).map_err(io_error(path))?;
    let mut head = (&mut file).take(cut_at);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = head.read(&mut chunk).map_err(io_error(path))?;
        if n == 0 {
            break;
        }
        counted += chunk[..n].iter().filter(|&&b| b == b'\n').count();
    }
    file.set_len(cut_at).map_err(io_error(path))?;
    tracing::debug!(log = %path.display(), bytes = len - cut_at, "cut a torn last line");
    Ok(Some(TornTail {
        line: counted + 1,
        bytes: len - cut_at,
    }))
}

/// The bytes the files of a session directory hold (one level of subdirectories: the spill
/// directory).
pub(super) fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_dir() {
            total += std::fs::read_dir(entry.path())
                .map(|inner| {
                    inner
                        .flatten()
                        .filter_map(|e| e.metadata().ok())
                        .filter(std::fs::Metadata::is_file)
                        .map(|m| m.len())
                        .sum::<u64>()
                })
                .unwrap_or(0);
        } else {
            total += meta.len();
        }
    }
    total
}

//! Opening a file to read without ever waiting on it: a FIFO, a socket or a device (a
//! terminal, `/dev/kmsg`) named by the model would block `open` or `read` for ever, and hold a
//! blocking thread with it. The file is opened non-blocking and refused unless regular (or a
//! directory, which the callers report as such); a regular file ignores the flag, and a
//! procfs file that would wait (`/proc/kmsg`) fails its read instead.

use std::fs::File;
use std::io;
use std::path::Path;

/// The open flag that keeps `open` and `read` from waiting.
pub(crate) fn nonblock() -> i32 {
    i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0)
}

/// Opens `path` for reading without waiting; a FIFO, socket or device is an error.
pub(crate) fn regular(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nonblock())
        .open(path)?;
    only_regular(file)
}

/// `file` when it is a regular file or a directory; otherwise an error naming what it is.
pub(crate) fn only_regular(file: File) -> io::Result<File> {
    use std::os::unix::fs::FileTypeExt;
    let kind = file.metadata()?.file_type();
    if kind.is_file() || kind.is_dir() {
        return Ok(file);
    }
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{what}, which the file tools do not read or write (it could wait for ever); use `bash`"
        ),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn fifos_and_devices_are_refused_without_waiting_and_files_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("p");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        // Without the non-blocking open this waits for a writer for ever.
        let refused = regular(&fifo).unwrap_err();
        assert!(refused.to_string().starts_with("a FIFO"), "{refused}");
        let device = regular(Path::new("/dev/null")).unwrap_err();
        assert!(device.to_string().starts_with("a device"), "{device}");
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(
            std::io::read_to_string(regular(&file).unwrap()).unwrap(),
            "x"
        );
    }
}

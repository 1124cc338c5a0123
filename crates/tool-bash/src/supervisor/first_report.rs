//! The harness's wait for a supervisor's first report: the shell's pid, or why it did not
//! start.

use super::readable;
use rustix::fd::{AsFd, OwnedFd};
use std::io;

/// How long the harness waits for the first report at all. A supervisor that never reports
/// (stopped by a signal, say) fails the spawn instead of hanging the call.
pub(super) const FIRST_REPORT_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// What a look at the supervisor's first report found.
enum FirstReport {
    /// The shell's pid, or `-errno`.
    Word(i32),
    /// The supervisor is gone (or its report pipe ended) without a whole word.
    Gone,
    /// Nothing yet.
    Pending,
}

/// The first report read so far from the still blocking report pipe: the word's bytes, and how
/// many arrived.
struct FirstWord {
    bytes: [u8; 4],
    filled: usize,
}

impl FirstWord {
    /// Looks, without waiting, whether the report pipe or the supervisor's pidfd is ready, and
    /// reads what the pipe holds. The pipe comes first: a supervisor that reported and then
    /// exited has its report read.
    fn poll(&mut self, report: &OwnedFd, pidfd: &OwnedFd) -> FirstReport {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let mut fds = [
            PollFd::new(report, PollFlags::IN),
            PollFd::new(pidfd, PollFlags::IN),
        ];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        if !matches!(rustix::event::poll(&mut fds, Some(&now)), Ok(n) if n > 0) {
            return FirstReport::Pending;
        }
        let (report_ready, supervisor_gone) =
            (!fds[0].revents().is_empty(), !fds[1].revents().is_empty());
        if report_ready {
            let rest = &mut self.bytes[self.filled..];
            // The pipe is ready, so the read does not block.
            return match rustix::io::read(report, rest) {
                Ok(0) => FirstReport::Gone,
                Ok(n) => {
                    self.filled += n;
                    if self.filled == self.bytes.len() {
                        FirstReport::Word(i32::from_ne_bytes(self.bytes))
                    } else {
                        FirstReport::Pending
                    }
                }
                // EINTR: look again.
                Err(_) => FirstReport::Pending,
            };
        }
        if supervisor_gone {
            FirstReport::Gone
        } else {
            FirstReport::Pending
        }
    }
}

/// Reads the supervisor's first report: `Some` word (the shell's pid, or `-errno`), or `None`
/// if the supervisor left without one. It waits through the runtime for the report pipe or the
/// supervisor's pidfd, at most `limit` ([`FIRST_REPORT_LIMIT`]). It does not block its thread
/// first, as the clone-based launcher did: two `fork`s take long enough (a millisecond or more
/// on a busy machine) that a blocked worker costs other tasks more than a wake-up costs this
/// one.
pub(super) async fn first_word(
    report: &OwnedFd,
    pidfd: &OwnedFd,
    limit: std::time::Duration,
) -> io::Result<Option<i32>> {
    let mut word = FirstWord {
        bytes: [0; 4],
        filled: 0,
    };
    // Borrowed: the registrations end in this function, before the report pipe is registered
    // again as the command's `pipe::Receiver`.
    let report_ready = readable(report.as_fd())?;
    let supervisor_gone = readable(pidfd.as_fd())?;
    let wait = async {
        loop {
            match word.poll(report, pidfd) {
                FirstReport::Word(word) => return Ok(Some(word)),
                FirstReport::Gone => return Ok(None),
                FirstReport::Pending => {}
            }
            tokio::select! {
                ready = report_ready.readable() => ready?.clear_ready(),
                ready = supervisor_gone.readable() => ready?.clear_ready(),
            }
        }
    };
    match tokio::time::timeout(limit, wait).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the command's supervisor did not report within {limit:?}"),
        )),
    }
}

//! The answer to an approval question: one key on a terminal, read in non-canonical mode (no
//! Enter, no echo, Ctrl-C as a byte), the terminal's mode restored on every path; a line
//! where the terminal's mode cannot be changed.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Withdraws the question when the asking future is dropped (the call was cancelled): the
/// reader stops waiting for a key within a tenth of a second and restores the terminal.
pub(super) struct StopOnDrop(pub(super) Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// What the person typed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Typed {
    /// The key, or the line where no key can be read alone.
    Text(String),
    /// Ctrl-C.
    Interrupt,
    /// Nothing: the question was withdrawn first.
    Withdrawn,
}

/// Reads the answer on stdin: the key pressed (echoed with a newline on stderr), or a line
/// where stdin's mode cannot be set. Ctrl-C keeps its meaning (a turn's cancellation, or the
/// end of `chat`): SIGINT is raised once the terminal has its mode back.
pub(super) fn read_answer(withdrawn: &AtomicBool) -> std::io::Result<Typed> {
    #[cfg(unix)]
    {
        let stdin = std::io::stdin();
        let typed = raw::read_key(&stdin, withdrawn)?;
        if let Some(typed) = typed {
            let shown = match &typed {
                Typed::Text(key) if key.chars().all(|c| c.is_ascii_graphic()) => {
                    format!("{key}\n")
                }
                Typed::Interrupt => String::from("^C\n"),
                _ => String::from("\n"),
            };
            let mut stderr = std::io::stderr().lock();
            let _ = stderr.write_all(shown.as_bytes());
            let _ = stderr.flush();
            drop(stderr);
            if typed == Typed::Interrupt {
                let _ = rustix::process::kill_process(
                    rustix::process::getpid(),
                    rustix::process::Signal::INT,
                );
            }
            return Ok(typed);
        }
    }
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(Typed::Text(line))
}

#[cfg(unix)]
mod raw {
    use super::Typed;
    use rustix::termios::{self, LocalModes, OptionalActions, SpecialCodeIndex, Termios};
    use std::os::fd::AsFd;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// How long one read waits for a key before it looks at whether the question was
    /// withdrawn, in tenths of a second (the terminal's `VTIME`).
    const POLL: u8 = 1;

    /// Ctrl-C, which non-canonical mode without `ISIG` reads as a byte.
    const CTRL_C: u8 = 0x03;

    /// A terminal in non-canonical mode without echo or signals, until dropped: then in the
    /// mode it had, however the read ended (a key, an error, a panic).
    struct RawMode<'a, F: AsFd> {
        terminal: &'a F,
        saved: Termios,
    }

    impl<'a, F: AsFd> RawMode<'a, F> {
        /// `None` when `terminal` is no terminal whose mode can be read.
        fn enter(terminal: &'a F) -> std::io::Result<Option<RawMode<'a, F>>> {
            let Ok(saved) = termios::tcgetattr(terminal) else {
                return Ok(None);
            };
            let mut raw = saved.clone();
            raw.local_modes
                .remove(LocalModes::ICANON | LocalModes::ECHO | LocalModes::ISIG);
            raw.special_codes[SpecialCodeIndex::VMIN] = 0;
            raw.special_codes[SpecialCodeIndex::VTIME] = POLL;
            termios::tcsetattr(terminal, OptionalActions::Now, &raw)?;
            Ok(Some(RawMode { terminal, saved }))
        }
    }

    impl<F: AsFd> Drop for RawMode<'_, F> {
        fn drop(&mut self) {
            if let Err(error) = termios::tcsetattr(self.terminal, OptionalActions::Now, &self.saved)
            {
                tracing::warn!(%error, "cannot restore the terminal's mode");
            }
        }
    }

    /// Reads one key from `terminal` in non-canonical mode, its mode restored before this
    /// returns; `None` when it is no terminal (the caller reads a line instead).
    pub(super) fn read_key<F: AsFd>(
        terminal: &F,
        withdrawn: &AtomicBool,
    ) -> std::io::Result<Option<Typed>> {
        let Some(_raw) = RawMode::enter(terminal)? else {
            return Ok(None);
        };
        let mut byte = [0u8; 1];
        loop {
            if withdrawn.load(Ordering::SeqCst) {
                return Ok(Some(Typed::Withdrawn));
            }
            // `VMIN` 0 and `VTIME` [`POLL`]: at most a tenth of a second without a key.
            match rustix::io::read(terminal, &mut byte) {
                Ok(0) | Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => continue,
                Ok(_) if byte[0] == CTRL_C => return Ok(Some(Typed::Interrupt)),
                Ok(_) => return Ok(Some(Typed::Text(char::from(byte[0]).to_string()))),
                Err(error) => return Err(error.into()),
            }
        }
    }

    #[cfg(test)]
    mod tests {
        #![allow(clippy::unwrap_used)]

        use super::*;
        use rustix::fs::{Mode, OFlags};
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        use std::os::fd::OwnedFd;
        use std::sync::Arc;

        /// A pseudo-terminal: the side a person types into, and the side read.
        fn terminal() -> (OwnedFd, OwnedFd) {
            let typist = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
            grantpt(&typist).unwrap();
            unlockpt(&typist).unwrap();
            let name = ptsname(&typist, Vec::new()).unwrap();
            let read = rustix::fs::open(
                name.as_c_str(),
                OFlags::RDWR | OFlags::NOCTTY,
                Mode::empty(),
            )
            .unwrap();
            (typist, read)
        }

        /// Types `typed` once the reader waits (in canonical mode the line discipline would
        /// take Ctrl-C as a signal and drop it), and checks what was read.
        fn check(typed: &'static [u8], expected: Typed) {
            let (typist, read) = terminal();
            let before = termios::tcgetattr(&read).unwrap();
            assert!(before.local_modes.contains(LocalModes::ICANON));
            let typing = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(200));
                rustix::io::write(&typist, typed).unwrap();
                typist
            });
            let got = read_key(&read, &AtomicBool::new(false)).unwrap();
            // Kept open: the read side of a closed pseudo-terminal has no mode to read.
            let _typist = typing.join().unwrap();
            assert_eq!(got, Some(expected), "{typed:?}");
            let after = termios::tcgetattr(&read).unwrap();
            assert_eq!(after.local_modes, before.local_modes);
            assert_eq!(
                after.special_codes[SpecialCodeIndex::VMIN],
                before.special_codes[SpecialCodeIndex::VMIN]
            );
        }

        #[test]
        fn one_key_answers_without_enter_and_the_mode_comes_back() {
            // Canonical mode would hold `y` back until a newline came.
            check(b"y", Typed::Text("y".into()));
            check(b"an", Typed::Text("a".into()));
        }

        #[test]
        fn ctrl_c_is_read_as_an_interrupt_with_the_mode_restored() {
            check(&[CTRL_C], Typed::Interrupt);
        }

        #[test]
        fn a_withdrawn_question_stops_waiting_and_restores_the_mode() {
            let (_typist, read) = terminal();
            let before = termios::tcgetattr(&read).unwrap();
            let withdrawn = Arc::new(AtomicBool::new(false));
            let stop = Arc::clone(&withdrawn);
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(150));
                stop.store(true, Ordering::SeqCst);
            });
            assert_eq!(read_key(&read, &withdrawn).unwrap(), Some(Typed::Withdrawn));
            assert_eq!(
                termios::tcgetattr(&read).unwrap().local_modes,
                before.local_modes
            );
        }

        #[test]
        fn what_is_no_terminal_is_left_to_the_line_reader() {
            let (read, _write) = std::io::pipe().unwrap();
            assert_eq!(read_key(&read, &AtomicBool::new(false)).unwrap(), None);
        }
    }
}

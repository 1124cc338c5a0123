//! `grep`'s search pool: the files are searched on every core, and their results handed on in
//! the walk's order, so the listing is the same however the threads ran. A window bounds how
//! far the searchers run ahead of the consumer, so memory holds at most that many files'
//! matches.

use grep_regex::RegexMatcher;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// How many files the searchers may finish ahead of the consumer.
const WINDOW: usize = 64;

/// One file's matching lines: `(line number, line without its ending)`.
#[derive(Debug, Default)]
pub(crate) struct FileMatches {
    pub(crate) lines: Vec<(u64, String)>,
}

#[derive(Debug, Default)]
struct Ordered {
    done: BTreeMap<usize, FileMatches>,
    consumed: usize,
}

fn lock(state: &Mutex<Ordered>) -> MutexGuard<'_, Ordered> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn searcher() -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .build()
}

/// Searches `path`; a file that cannot be read (gone, unreadable) has no matches.
fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: &std::path::Path,
) -> FileMatches {
    let mut lines = Vec::new();
    // Opened without waiting, and only a regular file: a FIFO or device met on the way (or
    // named as the path) is skipped, never waited on.
    let file = match crate::open::regular(path) {
        Ok(file) if file.metadata().is_ok_and(|m| m.is_file()) => file,
        Ok(_) => return FileMatches { lines },
        Err(e) => {
            tracing::debug!(path = %path.display(), "grep skipped a file: {e}");
            return FileMatches { lines };
        }
    };
    let searched = searcher.search_file(
        matcher,
        &file,
        Lossy(|number, line| {
            lines.push((number, line.trim_end_matches(['\n', '\r']).to_owned()));
            Ok(true)
        }),
    );
    if let Err(e) = searched {
        tracing::debug!(path = %path.display(), "grep skipped a file: {e}");
    }
    FileMatches { lines }
}

/// Searches `files` with `matcher` in parallel and gives each file's matches to `consume`, in
/// the order of `files`.
pub(crate) fn search_in_order(
    files: &[PathBuf],
    matcher: &RegexMatcher,
    mut consume: impl FnMut(usize, FileMatches),
) {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let state = Mutex::new(Ordered::default());
    let progress = Condvar::new();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut searcher = searcher();
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(path) = files.get(i) else { break };
                    {
                        let mut s = lock(&state);
                        while i >= s.consumed + WINDOW {
                            s = progress.wait(s).unwrap_or_else(|e| e.into_inner());
                        }
                    }
                    // A panic in a search must not leave the consumer waiting for this file.
                    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        search_file(&mut searcher, matcher, path)
                    }))
                    .unwrap_or_default();
                    lock(&state).done.insert(i, found);
                    progress.notify_all();
                }
            });
        }
        let mut s = lock(&state);
        while s.consumed < files.len() {
            let at = s.consumed;
            match s.done.remove(&at) {
                Some(found) => {
                    s.consumed += 1;
                    drop(s);
                    progress.notify_all();
                    consume(at, found);
                    s = lock(&state);
                }
                None => s = progress.wait(s).unwrap_or_else(|e| e.into_inner()),
            }
        }
    });
}

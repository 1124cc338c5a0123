//! A model-based property test of [`StreamCollector`]: any writes of arbitrary bytes, any
//! window, read budgets and spill cap, reads settled or not, with a working spill sink, none,
//! or one that fails, checked against a plain model (the bytes written, decoded lossily).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::lossy;

use lossy::{Decoded, check_window, is_continuation, is_incomplete_character, lossy, stream};
use proptest::prelude::*;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use tool_bash::output::{SpillSink, StreamCollector};
use tool_bash::shell::StreamRead;

/// How the spill sink behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SinkMode {
    /// Files are created and written.
    Working,
    /// No sink is configured.
    Absent,
    /// Creating a file fails.
    CreateFails,
    /// Files are created but every write to them fails.
    WriteFails,
}

#[derive(Debug)]
struct TestSink {
    dir: tempfile::TempDir,
    mode: SinkMode,
}

impl SpillSink for TestSink {
    fn create(&self, label: &str) -> std::io::Result<(File, PathBuf)> {
        if self.mode == SinkMode::CreateFails {
            return Err(std::io::Error::other("the disk is full"));
        }
        let (file, path) = tempfile::Builder::new()
            .prefix(label)
            .tempfile_in(self.dir.path())?
            .keep()
            .map_err(|e| e.error)?;
        if self.mode == SinkMode::WriteFails {
            // A handle opened for reading only: every write fails.
            drop(file);
            return Ok((File::open(&path)?, path));
        }
        Ok((file, path))
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write(Vec<u8>),
    /// An unsettled read by reader `reader` of at most `budget` bytes of text.
    Read {
        reader: usize,
        budget: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => stream(4).prop_map(Op::Write),
        1 => prop::collection::vec(any::<u8>(), 50..300).prop_map(Op::Write),
        3 => (0usize..3, 0usize..60).prop_map(|(reader, budget)| Op::Read { reader, budget }),
    ]
}

fn sink_mode() -> impl Strategy<Value = SinkMode> {
    prop_oneof![
        4 => Just(SinkMode::Working),
        1 => Just(SinkMode::Absent),
        1 => Just(SinkMode::CreateFails),
        1 => Just(SinkMode::WriteFails),
    ]
}

/// The model of the collector's spill file.
struct Model {
    mode: SinkMode,
    window: usize,
    cap: u64,
    /// Every byte written so far.
    written: Vec<u8>,
    /// Whether the stream has been cut (outgrew its window, or `finish` cut it), which is when
    /// the collector must start a spill file.
    cut: bool,
}

impl Model {
    /// Whether a spill file exists and holds what it should (a sink that fails on writes
    /// still holds a file when the cap leaves nothing to write).
    fn has_file(&self) -> bool {
        self.cut
            && match self.mode {
                SinkMode::Working => true,
                SinkMode::WriteFails => self.cap == 0,
                SinkMode::Absent | SinkMode::CreateFails => false,
            }
    }

    /// The bytes the spill file holds: the stream from its start, up to the cap.
    fn file_len(&self) -> u64 {
        if self.has_file() {
            (self.written.len() as u64).min(self.cap)
        } else {
            0
        }
    }

    /// Whether the newest bytes are fewer than three continuation bytes, all that memory keeps
    /// after a byte that is neither in memory nor in the spill file: they may continue a
    /// character whose lead is lost, and whether its last byte has come is unknown.
    fn lead_lost(&self) -> bool {
        let total = self.written.len();
        let tail_start = total - (self.window - self.window / 3).min(total);
        let continuation = self.written[tail_start..].iter().all(is_continuation);
        self.cut
            && total - tail_start < 3
            && continuation
            && (self.file_len() as usize) < tail_start
    }

    /// Checks the collector's size and spill file against the model.
    fn check_file(&self, collector: &StreamCollector) -> Result<(), TestCaseError> {
        prop_assert_eq!(collector.total(), self.written.len() as u64);
        prop_assert_eq!(collector.spill_path().is_some(), self.has_file());
        if let Some(path) = collector.spill_path() {
            let held = std::fs::read(path).unwrap();
            prop_assert_eq!(&held[..], &self.written[..self.file_len() as usize]);
        }
        Ok(())
    }

    /// Checks one read by a reader at `offset`: it starts and ends between characters of the
    /// final stream, shows exactly their text within the budget, holds back only an incomplete
    /// character (and nothing once settled), keeps the newest text it can, and says whether
    /// the spill file holds what it skipped (naming the file exactly then).
    fn check_read(
        &self,
        decoded: &Decoded,
        offset: u64,
        budget: usize,
        settled: bool,
        read: &StreamRead,
    ) -> Result<(), TestCaseError> {
        let total = self.written.len() as u64;
        let start = offset + read.skipped_bytes;
        let end = read.next_offset;
        prop_assert!(
            start <= end && end <= total,
            "{offset} + {} .. {end} of {total}",
            read.skipped_bytes
        );
        let held = (total - end) as usize;
        if settled {
            prop_assert_eq!(held, 0, "a settled read holds nothing back");
        } else if held > 0 && self.lead_lost() {
            // Nothing in the newest bytes is known to end a character: the read waits.
            prop_assert_eq!(
                (end, read.text.as_str()),
                (offset, ""),
                "a read waits while the newest bytes follow a lost lead"
            );
        } else if held > 0 {
            prop_assert!(
                is_incomplete_character(&self.written[end as usize..]),
                "only an incomplete character is held back: {:?}",
                &self.written[end as usize..]
            );
        }
        prop_assert!(
            decoded.is_edge(start as usize),
            "a read starts inside a character at {start}"
        );
        prop_assert!(
            decoded.is_edge(end as usize),
            "a read ends inside a character at {end}"
        );
        prop_assert_eq!(
            &read.text,
            &decoded.text_between(start as usize, end as usize)
        );
        let limit = budget.max(4);
        prop_assert!(read.text.len() <= limit, "{} > {limit}", read.text.len());
        // The file holds the stream's first bytes: what a read skipped beyond them is lost.
        let lost_from = offset.max(self.file_len());
        prop_assert_eq!(
            &read.lost,
            &(lost_from < start).then_some(lost_from..start),
            "a skip loses exactly the bytes no file holds"
        );
        prop_assert_eq!(read.spill_path.is_some(), self.has_file());
        let stops_short = self.has_file() && self.file_len() < total;
        prop_assert_eq!(
            read.spill_limit_bytes,
            stops_short.then(|| self.file_len()),
            "a file that stops short of the stream says where"
        );
        if read.skipped_bytes > 0 && read.lost.is_none() {
            // The newest text that fits: one more character would not have.
            let before = decoded.unit_ending_at(start as usize).unwrap();
            prop_assert!(
                read.text.len() + before.text.len() + held > limit,
                "the read of {:?} could have kept {:?}",
                read.text,
                before.text
            );
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any interleaving of writes and reads, then settled reads and a foreground window.
    /// - Each reader's reads, with the text its skips stand for, rebuild the stream's lossy
    ///   decoding exactly: nothing lost, split or shown twice.
    /// - Every skip says whether the spill file holds it, and names the file exactly then.
    /// - The spill file holds the stream byte for byte from its start, up to the cap.
    /// - `finish` shows the stream whole when its text fits, else a head and a tail of whole
    ///   characters around a marker that counts the real bytes left out.
    #[test]
    fn reads_and_windows_rebuild_the_stream_exactly(
        ops in prop::collection::vec(op(), 0..40),
        window in prop_oneof![3usize..8, 3usize..80],
        cap in prop_oneof![Just(u64::MAX), 0u64..400],
        mode in sink_mode(),
        finish_budget in 0usize..120,
        late_budget in 0usize..200,
    ) {
        check_case(&ops, window, cap, mode, finish_budget, late_budget)?;
    }
}

/// Cases the property test once found, kept so they run on every build.
#[test]
fn cases_found_before_still_hold() {
    // The lead byte of a character is lost (no spill file) and only two of its continuation
    // bytes are in memory when a reader reads; the last one comes after.
    let ops = [
        Op::Write(vec![b'a', 0xF0, 0x9F, 0x98]),
        Op::Read {
            reader: 0,
            budget: 0,
        },
        Op::Write(vec![0x80]),
    ];
    if let Err(error) = check_case(&ops, 3, u64::MAX, SinkMode::Absent, 0, 0) {
        panic!("{error}");
    }
}

/// Runs `ops` against a collector and the model, then settles, reads late and finishes.
fn check_case(
    ops: &[Op],
    window: usize,
    cap: u64,
    mode: SinkMode,
    finish_budget: usize,
    late_budget: usize,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let sink: Option<Arc<dyn SpillSink>> = match mode {
        SinkMode::Absent => None,
        _ => Some(Arc::new(TestSink {
            dir: tempfile::tempdir_in(dir.path()).unwrap(),
            mode,
        })),
    };
    let mut collector = StreamCollector::new("stdout", window, cap, sink);
    let window = window.max(3);
    let final_stream: Vec<u8> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Write(bytes) => Some(bytes.clone()),
            Op::Read { .. } => None,
        })
        .collect::<Vec<_>>()
        .concat();
    let decoded = Decoded::new(&final_stream);
    let mut model = Model {
        mode,
        window,
        cap,
        written: Vec::new(),
        cut: false,
    };
    let mut cursors = [0u64; 3];
    let mut rebuilt = [String::new(), String::new(), String::new()];
    for op in ops {
        match op {
            Op::Write(bytes) => {
                collector.push(bytes);
                model.written.extend_from_slice(bytes);
                model.cut |= model.written.len() > model.window;
            }
            Op::Read { reader, budget } => {
                let offset = cursors[*reader];
                let read = collector.read_from(offset, *budget, false);
                model.check_read(&decoded, offset, *budget, false, &read)?;
                let start = (offset + read.skipped_bytes) as usize;
                rebuilt[*reader].push_str(&decoded.text_between(offset as usize, start));
                rebuilt[*reader].push_str(&read.text);
                cursors[*reader] = read.next_offset;
            }
        }
        model.check_file(&collector)?;
    }
    // The process is done: readers catch up with settled reads.
    for (reader, cursor) in cursors.iter_mut().enumerate() {
        let read = collector.read_from(*cursor, 1 << 20, true);
        model.check_read(&decoded, *cursor, 1 << 20, true, &read)?;
        let start = (*cursor + read.skipped_bytes) as usize;
        rebuilt[reader].push_str(&decoded.text_between(*cursor as usize, start));
        rebuilt[reader].push_str(&read.text);
        *cursor = read.next_offset;
        prop_assert_eq!(*cursor, final_stream.len() as u64);
        prop_assert_eq!(&rebuilt[reader], &lossy(&final_stream));
    }
    // A late reader from the start gets the newest text within its budget.
    let late = collector.read_from(0, late_budget, true);
    model.check_read(&decoded, 0, late_budget, true, &late)?;

    let budget = finish_budget.min(window);
    let shown = collector.finish(finish_budget);
    model.cut |= shown.truncated;
    model.check_file(&collector)?;
    let cut = check_window(&final_stream, &shown, budget)?;
    let total = final_stream.len() as u64;
    let spill_error = shown.spill_error.clone().unwrap_or_default();
    if model.cut && !model.has_file() {
        let expected = match mode {
            SinkMode::Absent => "no spill directory is configured",
            SinkMode::CreateFails => "the spill file could not be created: the disk is full",
            SinkMode::WriteFails | SinkMode::Working => "writing the spill file failed: ",
        };
        prop_assert!(spill_error.starts_with(expected), "{spill_error:?}");
    } else {
        prop_assert_eq!(&shown.spill_error, &None);
    }
    prop_assert_eq!(shown.spill_path.as_deref(), collector.spill_path());
    prop_assert_eq!(
        shown.spill_limit_bytes,
        (model.has_file() && model.file_len() < total).then_some(model.file_len())
    );
    if let Some(cut) = cut {
        // Each side keeps all it can: the next character in would not fit (or is not in
        // memory).
        let whole_in_memory = final_stream.len() <= window;
        let head_cap = window / 3;
        let (head_text, tail_text) = shown
            .text
            .split_once(&lossy::elision_marker(total - shown.shown_bytes))
            .unwrap();
        // Memory keeps `head_cap` bytes of head; a character they end inside of cannot be
        // told from one that more bytes complete, so it is left to the omitted middle.
        let head_room = if whole_in_memory {
            final_stream.len()
        } else {
            (head_cap.saturating_sub(3)..head_cap)
                .find(|&cut| is_incomplete_character(&final_stream[cut..head_cap]))
                .unwrap_or(head_cap)
        };
        if let Some(next) = decoded.unit_starting_at(cut.head_end)
            && next.end <= head_room
            && next.end <= cut.tail_start
        {
            prop_assert!(
                head_text.len() + next.text.len() > budget / 3,
                "the head {head_text:?} could have kept {:?}",
                next.text
            );
        }
        let tail_room = if whole_in_memory {
            0
        } else {
            let from = final_stream.len() - (window - head_cap);
            from + final_stream[from..]
                .iter()
                .take(3)
                .take_while(|b| is_continuation(b))
                .count()
        };
        if let Some(previous) = decoded.unit_ending_at(cut.tail_start)
            && previous.start >= tail_room
            && previous.start >= cut.head_end
        {
            prop_assert!(
                tail_text.len() + previous.text.len() > budget - head_text.len(),
                "the tail {tail_text:?} could have kept {:?}",
                previous.text
            );
        }
    }
    Ok(())
}

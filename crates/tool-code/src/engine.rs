//! The QuickJS side of a run. It lives on its own thread (an engine is neither `Send` nor
//! async), with the host's tokio runtime entered so that the program's nested calls run right
//! here ([`crate::nested`]). The host only watches the clock and the caller's cancellation,
//! and rings the engine's [`Bell`] when it raises the stop flag.

// A `ProgramError` is built at most once per run, so its size costs nothing worth boxing for.
#![allow(clippy::result_large_err)]

use crate::convert::{self, NotJson};
use crate::nested::{Bell, NestedCalls, RecordedCall, Started};
use crate::outcome::{ProgramError, ProgramErrorKind, StopReason};
use crate::plain::PlainClasses;
use crate::shape;
use crate::thrown::ThrownReader;
use crate::transpile::SourcePositions;
use rquickjs::context::{EvalOptions, intrinsic};
use rquickjs::promise::PromiseState;
use rquickjs::{Array, Context, Ctx, Function, Module, Object, Runtime, Value, WriteOptions};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

const PRELUDE: &str = include_str!("prelude.js");

/// The engine's account of a run.
#[derive(Debug)]
pub(crate) struct EngineReport {
    pub(crate) result: Result<serde_json::Value, ProgramError>,
    pub(crate) logs: Vec<String>,
    pub(crate) omitted_log_lines: usize,
    pub(crate) calls: Vec<RecordedCall>,
}

/// Everything the engine thread needs.
pub(crate) struct EngineJob {
    pub(crate) javascript: String,
    pub(crate) positions: SourcePositions,
    pub(crate) tool_names: Vec<String>,
    pub(crate) timeout_ms: u64,
    pub(crate) memory_bytes: usize,
    pub(crate) nested_calls: usize,
    pub(crate) log_bytes: usize,
    pub(crate) stop: Arc<AtomicU8>,
    pub(crate) bell: Arc<Bell>,
}

/// Runs a job to the end and reports it. Nested calls still running when the program ends
/// are cancelled and waited for.
pub(crate) fn run(job: EngineJob, nested: NestedCalls) -> EngineReport {
    let logs = Rc::new(RefCell::new(LogCapture::new(job.log_bytes)));
    let nested = Rc::new(nested);
    let result = run_program(&job, &logs, &nested);
    let capture = logs.take();
    let (logs, omitted_log_lines) = capture.finish();
    let calls = nested.finish(&job.bell);
    EngineReport {
        result,
        logs,
        omitted_log_lines,
        calls,
    }
}

fn run_program(
    job: &EngineJob,
    logs: &Rc<RefCell<LogCapture>>,
    nested: &Rc<NestedCalls>,
) -> Result<serde_json::Value, ProgramError> {
    let engine_error = |what: &str, error: rquickjs::Error| {
        ProgramError::new(
            ProgramErrorKind::Engine,
            format!("the JavaScript engine failed to {what}: {error}"),
        )
    };
    let prelude = prelude_bytecode()?;
    let runtime = Runtime::new().map_err(|e| engine_error("start", e))?;
    runtime.set_memory_limit(job.memory_bytes);
    let stop = Arc::clone(&job.stop);
    runtime.set_interrupt_handler(Some(Box::new(move || stop.load(Ordering::SeqCst) != 0)));
    let context = new_context(&runtime).map_err(|e| engine_error("create a context", e))?;
    let result = context
        .with(|ctx| drive(&ctx, prelude, job, logs, nested))
        .map_err(|error| located(error, &job.positions));
    // A memory bomb can fail anywhere, in the program or in the host's own calls into the
    // engine; whatever the symptom, a run that ended near the limit ended because of it.
    match result {
        Err(error)
            if error.kind != ProgramErrorKind::MemoryLimit
                && convert::says_out_of_memory(&error.message) =>
        {
            Err(StopReason::MemoryLimit.error(job.memory_bytes))
        }
        other => other,
    }
}

/// A context with the language and nothing else: no Date and no Performance, so the program
/// has no clock of its own; QuickJS has no file, network or process API unless the host adds
/// one.
fn new_context(runtime: &Runtime) -> rquickjs::Result<Context> {
    Context::custom::<(
        intrinsic::Eval,
        intrinsic::RegExpCompiler,
        intrinsic::RegExp,
        intrinsic::Json,
        intrinsic::Proxy,
        intrinsic::MapSet,
        intrinsic::TypedArrays,
        intrinsic::Promise,
        intrinsic::WeakRef,
    )>(runtime)
}

/// The prelude compiled to bytecode, once per process: parsing it was most of what starting a
/// run cost.
static PRELUDE_BYTECODE: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();

fn prelude_bytecode() -> Result<&'static [u8], ProgramError> {
    PRELUDE_BYTECODE
        .get_or_init(compile_prelude)
        .as_deref()
        .map_err(|error| {
            ProgramError::new(
                ProgramErrorKind::Engine,
                format!("the Code Mode prelude did not compile: {error}"),
            )
        })
}

fn compile_prelude() -> Result<Vec<u8>, String> {
    let runtime = Runtime::new().map_err(|e| e.to_string())?;
    let context = new_context(&runtime).map_err(|e| e.to_string())?;
    context.with(|ctx| {
        Module::declare(ctx.clone(), PRELUDE_FILE, PRELUDE)
            .and_then(|module| module.write(WriteOptions::default()))
            .map_err(|error| match error {
                // The prelude is the host's own code: its error is read as it is.
                rquickjs::Error::Exception => ctx
                    .catch()
                    .as_exception()
                    .and_then(|exception| exception.message())
                    .unwrap_or_default(),
                other => other.to_string(),
            })
    })
}

/// Loads the prelude into the context and calls its `install` with the host's functions and
/// the tool names; returns its `settle` and the engine's getter of an Error's stack.
fn install_prelude<'js>(
    ctx: &Ctx<'js>,
    bytecode: &'static [u8],
    host: HostFunctions<'js>,
    tool_names: &[String],
) -> rquickjs::Result<(Function<'js>, Option<Function<'js>>)> {
    // SAFETY: `Module::load` needs valid bytecode of the QuickJS it runs on. These bytes are
    // `Module::write`'s output for the prelude, written by this same QuickJS build in this
    // process and never changed. (The engine copies them as it reads them.)
    #[allow(unsafe_code)]
    let module = unsafe { Module::load(ctx.clone(), bytecode) }?;
    let (module, evaluated) = module.eval()?;
    // The prelude only defines functions, so its evaluation is over at once; if it failed, the
    // promise holds why.
    if let Some(Err(error)) = evaluated.result::<Value<'js>>() {
        return Err(error);
    }
    let install: Function<'js> = module.get("install")?;
    let names = Array::new(ctx.clone())?;
    for (index, name) in tool_names.iter().enumerate() {
        names.set(index, name.as_str())?;
    }
    let hooks: Object<'js> = install.call((host.call, host.ticket, host.log, names))?;
    Ok((hooks.get("settle")?, hooks.get("errorStack")?))
}

fn drive(
    ctx: &Ctx<'_>,
    prelude: &'static [u8],
    job: &EngineJob,
    logs: &Rc<RefCell<LogCapture>>,
    nested: &Rc<NestedCalls>,
) -> Result<serde_json::Value, ProgramError> {
    // Read before the program runs, like everything else the host relies on.
    let classes = PlainClasses::of(ctx).map_err(|e| {
        ProgramError::new(
            ProgramErrorKind::Engine,
            format!("the JavaScript engine failed to start a run: {e}"),
        )
    })?;
    let (settle, error_stack) = host_functions(ctx, classes, job, logs, nested)
        .and_then(|host| install_prelude(ctx, prelude, host, &job.tool_names))
        .map_err(|e| {
            stopped(job).unwrap_or_else(|| caught(ctx, &ThrownReader::new(classes, None), e))
        })?;
    let reader = ThrownReader::new(classes, error_stack);
    let caught = |error| caught(ctx, &reader, error);

    // The program is the body of an async function: top-level `await` and `return` work.
    let wrapped = format!("(async () => {{\n{}\n}})()", job.javascript);
    let mut options = EvalOptions::default();
    options.filename = Some(String::from(PROGRAM_FILE));
    let promise: Value<'_> = match ctx.eval_with_options(wrapped, options) {
        Ok(promise) => promise,
        Err(error) => {
            let mut failure = caught(error);
            if failure.kind == ProgramErrorKind::Exception
                && failure.name.as_deref() == Some("SyntaxError")
            {
                failure.kind = ProgramErrorKind::Syntax;
            }
            return Err(stopped(job).unwrap_or(failure));
        }
    };
    // The host reads the program's promise through the engine, never through `then` or any
    // other property the program could have replaced.
    let Some(promise) = promise.into_promise() else {
        return Err(ProgramError::new(
            ProgramErrorKind::Engine,
            "the program's async function gave no promise",
        ));
    };

    loop {
        while ctx.execute_pending_job() {
            if job.stop.load(Ordering::SeqCst) != 0 {
                break;
            }
        }
        if let Some(error) = stopped(job) {
            return Err(error);
        }
        match promise.state() {
            PromiseState::Pending => {}
            PromiseState::Resolved => {
                let value: Value<'_> = match promise.result() {
                    Some(Ok(value)) => value,
                    Some(Err(error)) => return Err(caught(error)),
                    None => Value::new_undefined(ctx.clone()),
                };
                return returned(ctx, &reader, job, value);
            }
            PromiseState::Rejected => {
                let error = match promise.result::<Value<'_>>() {
                    Some(Err(error)) => error,
                    _ => rquickjs::Error::Exception,
                };
                return Err(stopped(job).unwrap_or_else(|| caught(error)));
            }
        }
        let settled = nested.take_settled();
        if !settled.is_empty() {
            for settlement in settled {
                let done = convert::to_js(ctx, &settlement.payload).and_then(|payload| {
                    settle.call::<_, ()>((settlement.id, settlement.ok, payload))
                });
                if let Err(error) = done {
                    return Err(stopped(job).unwrap_or_else(|| caught(error)));
                }
            }
            continue;
        }
        if !nested.any_running() {
            return Err(ProgramError::new(
                ProgramErrorKind::Stalled,
                "the program is waiting on a promise that nothing can settle (no tool call is in flight)",
            ));
        }
        // A running call or the host's stop flag rings the bell.
        job.bell.wait();
    }
}

/// The error of a raised stop flag, if it is raised.
fn stopped(job: &EngineJob) -> Option<ProgramError> {
    StopReason::from_flag(job.stop.load(Ordering::SeqCst)).map(|reason| match reason {
        StopReason::MemoryLimit => reason.error(job.memory_bytes),
        StopReason::NestedCallLimit => reason.error(job.nested_calls),
        StopReason::TimeLimit => {
            reason.error(usize::try_from(job.timeout_ms).unwrap_or(usize::MAX))
        }
        StopReason::Cancelled => reason.error(0),
    })
}

/// The program's returned value as JSON, read by the host ([`convert::returned_to_json`]).
fn returned<'js>(
    ctx: &Ctx<'js>,
    reader: &ThrownReader<'js>,
    job: &EngineJob,
    value: Value<'js>,
) -> Result<serde_json::Value, ProgramError> {
    let not_json = |message: String| ProgramError::new(ProgramErrorKind::NotJson, message);
    convert::returned_to_json(ctx, reader.classes(), value).map_err(|refusal| match refusal {
        NotJson::TooDeep => not_json(format!(
            "the program returned a value {}",
            shape::too_deep_text()
        )),
        NotJson::Holds { what, path } => not_json(format!(
            "the program returned {what} at {path}, which is not JSON"
        )),
        NotJson::Refused(reason) => not_json(format!(
            "the program returned a value JSON cannot encode ({reason})"
        )),
        NotJson::Stopping(error) => stopped(job).unwrap_or_else(|| caught(ctx, reader, error)),
        NotJson::OutOfMemory(_) => StopReason::MemoryLimit.error(job.memory_bytes),
    })
}

/// The exception an engine call left behind, as a program error, described without running
/// any of the program's code ([`thrown`]).
fn caught<'js>(ctx: &Ctx<'js>, reader: &ThrownReader<'js>, error: rquickjs::Error) -> ProgramError {
    if !matches!(error, rquickjs::Error::Exception) {
        return ProgramError::new(ProgramErrorKind::Engine, error.to_string());
    }
    reader.describe(ctx, &ctx.catch())
}

/// The file name the engine gives the program in stack traces.
const PROGRAM_FILE: &str = "program";

/// The prelude's module name, which its stack frames carry.
const PRELUDE_FILE: &str = "prelude";

/// Points `error`'s stack at the program as written: each frame in the program gets the line
/// and column of the code it ran before its types were erased, and frames of the wrapper that
/// makes the program an async function are left out. The first such frame gives the error's
/// `line` and `column` when it has none.
fn located(mut error: ProgramError, positions: &SourcePositions) -> ProgramError {
    let Some(stack) = error.stack.take() else {
        return error;
    };
    let mut frames = String::with_capacity(stack.len());
    for frame in stack.lines() {
        match program_position(frame) {
            Some((start, end, line, column)) => {
                // The wrapper's opening line comes before the program's first line.
                let Some((line, column)) = line
                    .checked_sub(1)
                    .and_then(|line| positions.original(line, column))
                else {
                    continue;
                };
                if error.line.is_none() {
                    error.line = Some(line);
                    error.column = Some(column);
                }
                frames.push_str(&frame[..start]);
                frames.push_str(&format!("{line}:{column}"));
                frames.push_str(&frame[end..]);
            }
            None => frames.push_str(frame),
        }
        frames.push('\n');
    }
    error.stack = Some(frames);
    error
}

/// Where a stack frame names a position in the program: the byte range of its `line:column`
/// and the two numbers.
fn program_position(frame: &str) -> Option<(usize, usize, u32, u32)> {
    let marker = format!("{PROGRAM_FILE}:");
    let start = frame.find(&marker)? + marker.len();
    let rest = &frame[start..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ':'))
        .unwrap_or(rest.len());
    let (line, column) = rest[..end].split_once(':')?;
    Some((start, start + end, line.parse().ok()?, column.parse().ok()?))
}

/// What a nested call that did not succeed at once left for the prelude's `ticket`.
enum Ticket {
    /// It is running and settles later under this number.
    Running(u32),
    /// The nested-call limit is reached: the call was not made and the run is ending.
    Limit,
    /// The arguments are not JSON, for this reason: the call was not made.
    NotJson(String),
}

/// Raises the stop flag for `reason`, unless another reason was raised first.
fn raise(stop: &AtomicU8, reason: StopReason) {
    let _ = stop.compare_exchange(0, reason.flag(), Ordering::SeqCst, Ordering::SeqCst);
}

/// The functions the prelude's `install` takes from the host.
struct HostFunctions<'js> {
    call: Function<'js>,
    ticket: Function<'js>,
    log: Function<'js>,
}

fn host_functions<'js>(
    ctx: &Ctx<'js>,
    classes: PlainClasses,
    job: &EngineJob,
    logs: &Rc<RefCell<LogCapture>>,
    nested: &Rc<NestedCalls>,
) -> rquickjs::Result<HostFunctions<'js>> {
    let stop = Arc::clone(&job.stop);
    let calls = Rc::clone(nested);
    let names: Vec<Arc<str>> = job
        .tool_names
        .iter()
        .map(|name| Arc::from(name.as_str()))
        .collect();
    let ticket = Rc::new(RefCell::new(Ticket::Limit));
    let left = Rc::clone(&ticket);
    // `call(index, args, pending)`, for the tool at `index` in the prelude's list, returns the
    // value of a call that succeeded at once; otherwise `pending`, and `ticket()` says what
    // became of the call.
    let call = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>,
              index: usize,
              args: Value<'js>,
              pending: Value<'js>|
              -> rquickjs::Result<Value<'js>> {
            let Some(name) = names.get(index) else {
                return Err(rquickjs::Error::new_from_js("number", "tool"));
            };
            let args = match convert::arguments_to_json(&ctx, classes, args) {
                Ok(args) => args,
                Err(NotJson::Refused(reason)) => {
                    left.replace(Ticket::NotJson(reason));
                    return Ok(pending);
                }
                Err(NotJson::TooDeep) => {
                    left.replace(Ticket::NotJson(shape::too_deep_text()));
                    return Ok(pending);
                }
                Err(NotJson::Holds { what, path }) => {
                    left.replace(Ticket::NotJson(format!("{what} at {path}")));
                    return Ok(pending);
                }
                Err(NotJson::Stopping(error)) => return Err(error),
                // A program may catch the engine's out-of-memory error; a limit must not be.
                Err(NotJson::OutOfMemory(error)) => {
                    raise(&stop, StopReason::MemoryLimit);
                    return Err(error);
                }
            };
            match calls.start(Arc::clone(name), args) {
                Some(Started::Done(value)) => convert::to_js(&ctx, &value),
                Some(Started::Running(id)) => {
                    left.replace(Ticket::Running(id));
                    Ok(pending)
                }
                None => {
                    raise(&stop, StopReason::NestedCallLimit);
                    left.replace(Ticket::Limit);
                    Ok(pending)
                }
            }
        },
    )?;
    // A number: the call runs under it (0: it was not made, the limit is reached); a string:
    // the arguments are not JSON, and why.
    let ticket = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>| -> rquickjs::Result<Value<'js>> {
            Ok(match &*ticket.borrow() {
                Ticket::Running(id) => Value::new_number(ctx, f64::from(*id)),
                Ticket::Limit => Value::new_number(ctx, 0.0),
                Ticket::NotJson(reason) => rquickjs::String::from_str(ctx, reason)?.into_value(),
            })
        },
    )?;
    let capture = Rc::clone(logs);
    let log = Function::new(ctx.clone(), move |line: String| {
        capture.borrow_mut().push(line);
    })?;
    Ok(HostFunctions { call, ticket, log })
}

/// `console.log` output: the head and the tail are kept within a byte budget, and what falls
/// between them is counted and replaced by a note.
#[derive(Debug, Default)]
pub(crate) struct LogCapture {
    half: usize,
    head: Vec<String>,
    head_bytes: usize,
    tail: VecDeque<String>,
    tail_bytes: usize,
    omitted_lines: usize,
    omitted_bytes: usize,
}

impl LogCapture {
    pub(crate) fn new(limit_bytes: usize) -> LogCapture {
        LogCapture {
            half: limit_bytes / 2,
            ..LogCapture::default()
        }
    }

    pub(crate) fn push(&mut self, line: String) {
        let line = clip(line, self.half);
        let len = line.len();
        if self.tail.is_empty() && self.head_bytes + len <= self.half {
            self.head_bytes += len;
            self.head.push(line);
            return;
        }
        self.tail_bytes += len;
        self.tail.push_back(line);
        while self.tail_bytes > self.half {
            let Some(dropped) = self.tail.pop_front() else {
                break;
            };
            self.tail_bytes -= dropped.len();
            self.omitted_lines += 1;
            self.omitted_bytes += dropped.len();
        }
    }

    /// The kept lines, with a note where lines were left out, and how many were.
    pub(crate) fn finish(self) -> (Vec<String>, usize) {
        let mut lines = self.head;
        if self.omitted_lines > 0 {
            lines.push(format!(
                "[… {} lines ({} bytes) of console output omitted; the first and last lines are kept …]",
                self.omitted_lines, self.omitted_bytes
            ));
        }
        lines.extend(self.tail);
        (lines, self.omitted_lines)
    }
}

/// Cuts a single line longer than `limit` bytes at a character boundary, saying so.
fn clip(line: String, limit: usize) -> String {
    if line.len() <= limit {
        return line;
    }
    let mut end = limit;
    while end > 0 && !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [line cut at {limit} bytes]", &line[..end])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn logs_keep_head_and_tail_with_a_note() {
        let mut capture = LogCapture::new(20);
        for n in 0..10 {
            capture.push(format!("line{n}"));
        }
        let (lines, omitted) = capture.finish();
        assert_eq!(omitted, 6);
        assert_eq!(
            lines,
            vec![
                "line0".to_owned(),
                "line1".to_owned(),
                "[… 6 lines (30 bytes) of console output omitted; the first and last lines are kept …]"
                    .to_owned(),
                "line8".to_owned(),
                "line9".to_owned(),
            ]
        );
    }

    #[test]
    fn stack_frames_point_at_the_program_as_written() {
        let program = "interface A {\n  x: number;\n}\nfunction inner(a: A) {\n  throw new Error(\"x\");\n}\ninner({ x: 1 });";
        let positions = crate::transpile::to_javascript(program).unwrap().positions;
        // Generated: `function inner(a) {` / `\tthrow new Error("x");` / `}` / `inner({ x: 1 });`,
        // one line down for the wrapper; column 8 of the second is `new`, indented by a tab.
        let mut error = ProgramError::new(ProgramErrorKind::Exception, "x");
        error.stack = Some(String::from(
            "    at inner (program:3:8)\n    at <anonymous> (program:5:1)\n    at settle (prelude:20:5)\n    at <eval> (program:7:1)\n",
        ));
        let error = located(error, &positions);
        assert_eq!(
            error.stack.as_deref(),
            Some(
                "    at inner (program:5:9)\n    at <anonymous> (program:7:1)\n    at settle (prelude:20:5)\n"
            )
        );
        assert_eq!((error.line, error.column), (Some(5), Some(9)));
    }

    #[test]
    fn a_frame_names_a_program_position_only_with_both_numbers() {
        assert_eq!(
            program_position("    at f (program:3:11)"),
            Some((18, 22, 3, 11))
        );
        assert_eq!(program_position("    at f (program:3)"), None);
        assert_eq!(program_position("    at f (prelude:3:11)"), None);
        assert_eq!(program_position("    at native"), None);
    }
}

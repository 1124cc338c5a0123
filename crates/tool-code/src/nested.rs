//! The program's nested tool calls, driven on the engine thread.
//!
//! A call's future is polled the moment the program makes it, on the engine thread with the
//! host's tokio runtime entered, so a tool that answers at once (most do) settles without any
//! thread waking another: an idle CPU takes longer to wake a sleeping thread than a trivial
//! call takes to run. A call that is not done at once stays here and is polled again when it
//! wakes the engine, between JavaScript turns; what it waits on (a process, a socket, a timer)
//! runs on the runtime meanwhile.

use crate::shape;
use dsh_tools::{ExecContext, RESERVED_TOOL_NAME, ToolCallError, ToolRegistry};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

/// Wakes the engine thread: nested calls ring it when they can make progress, and the host
/// rings it when it raises the stop flag.
#[derive(Debug, Default)]
pub(crate) struct Bell {
    rung: AtomicBool,
    lock: Mutex<()>,
    ringing: Condvar,
}

impl Bell {
    /// Wakes the engine, now or at its next wait.
    pub(crate) fn ring(&self) {
        self.rung.store(true, Ordering::SeqCst);
        // Taken so that a ring cannot fall between the waiter's last look and its sleep.
        let _held = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.ringing.notify_one();
    }

    /// Sleeps until the bell rings (at once if it rang since the last wait).
    pub(crate) fn wait(&self) {
        let mut held = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        while !self.rung.swap(false, Ordering::SeqCst) {
            held = self
                .ringing
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Wake for Bell {
    fn wake(self: Arc<Self>) {
        self.ring();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ring();
    }
}

/// One nested call, as the result records it for replay and audit.
#[derive(Debug)]
pub(crate) struct RecordedCall {
    tool: Arc<str>,
    arguments: Value,
    /// `None` while it runs (and for good if the run ended first and it never reported).
    outcome: Option<Outcome>,
}

impl RecordedCall {
    /// The call as the result's `calls` holds it: `tool`, `arguments`, `ok`, and `value` or
    /// `error`. The value is moved out when no one else holds it.
    pub(crate) fn into_value(self) -> Value {
        let mut record = serde_json::Map::with_capacity(4);
        record.insert(String::from("tool"), Value::String(self.tool.to_string()));
        record.insert(String::from("arguments"), self.arguments);
        match self.outcome {
            Some(Ok(value)) => {
                record.insert(String::from("ok"), Value::Bool(true));
                let value = Arc::try_unwrap(value).unwrap_or_else(|shared| (*shared).clone());
                record.insert(String::from("value"), value);
            }
            Some(Err(error)) => {
                record.insert(String::from("ok"), Value::Bool(false));
                record.insert(
                    String::from("error"),
                    serde_json::to_value(error).unwrap_or(Value::Null),
                );
            }
            None => {
                record.insert(String::from("ok"), Value::Bool(false));
            }
        }
        Value::Object(record)
    }
}

/// A nested call's outcome, as the engine hands it to the program: its number, whether it
/// succeeded, and its value or its `ToolCallError` as JSON.
pub(crate) struct Settlement {
    pub(crate) id: u32,
    pub(crate) ok: bool,
    pub(crate) payload: Arc<Value>,
}

type Outcome = Result<Arc<Value>, ToolCallError>;
type Running = Pin<Box<dyn Future<Output = (u32, Outcome)>>>;

/// The nested calls of one run.
pub(crate) struct NestedCalls {
    registry: ToolRegistry,
    /// The context nested calls run in: its signal is a child of the `run_code` call's.
    ctx: ExecContext,
    waker: Waker,
    limit: usize,
    running: RefCell<FuturesUnordered<Running>>,
    settled: RefCell<VecDeque<Settlement>>,
    calls: RefCell<Vec<RecordedCall>>,
}

impl NestedCalls {
    pub(crate) fn new(
        registry: ToolRegistry,
        ctx: ExecContext,
        bell: Arc<Bell>,
        limit: usize,
    ) -> NestedCalls {
        NestedCalls {
            registry,
            ctx,
            waker: Waker::from(bell),
            limit,
            running: RefCell::new(FuturesUnordered::new()),
            settled: RefCell::new(VecDeque::new()),
            calls: RefCell::new(Vec::new()),
        }
    }

    /// Starts the program's next call, numbered from 1, and polls it once. `None` when the
    /// nested-call limit is reached: the call is not made.
    pub(crate) fn start(&self, name: Arc<str>, args: Value) -> Option<Started> {
        let id = {
            let mut calls = self.calls.borrow_mut();
            if calls.len() >= self.limit {
                return None;
            }
            calls.push(RecordedCall {
                tool: Arc::clone(&name),
                arguments: args.clone(),
                outcome: None,
            });
            u32::try_from(calls.len()).unwrap_or(u32::MAX)
        };
        tracing::debug!(tool = %name, id, "code mode nested call");
        let mut call: Running = if *name == *RESERVED_TOOL_NAME {
            Box::pin(std::future::ready((id, Err(refused(&name)))))
        } else {
            let registry = self.registry.clone();
            let ctx = self.ctx.clone();
            let tool = Arc::clone(&name);
            Box::pin(async move { (id, registry.call_value(&tool, args, &ctx).await) })
        };
        match call.poll_unpin(&mut Context::from_waker(&self.waker)) {
            Poll::Ready((id, outcome)) => match admitted(&name, outcome) {
                // The common case, handed straight back: no settlement, no promise kept waiting.
                Ok(value) => {
                    self.record(id, Ok(Arc::clone(&value)));
                    return Some(Started::Done(value));
                }
                failed => self.conclude(id, failed),
            },
            Poll::Pending => self.running.borrow_mut().push(call),
        }
        Some(Started::Running(id))
    }

    /// The settlements ready for the program: calls done at once, and calls that finished
    /// since they were last polled.
    pub(crate) fn take_settled(&self) -> Vec<Settlement> {
        self.poll_running();
        self.settled.borrow_mut().drain(..).collect()
    }

    /// Whether a call is still running (so something may yet settle a promise).
    pub(crate) fn any_running(&self) -> bool {
        !self.running.borrow().is_empty()
    }

    /// Cancels the calls still running and waits for each to end, so that nothing they started
    /// outlives the run, then returns every call's record.
    pub(crate) fn finish(&self, bell: &Bell) -> Vec<RecordedCall> {
        self.ctx.signal().cancel();
        loop {
            self.poll_running();
            if !self.any_running() {
                break;
            }
            bell.wait();
        }
        self.calls.take()
    }

    fn poll_running(&self) {
        let mut cx = Context::from_waker(&self.waker);
        loop {
            let next = self.running.borrow_mut().poll_next_unpin(&mut cx);
            match next {
                Poll::Ready(Some((id, outcome))) => {
                    let outcome = match self.tool_of(id) {
                        Some(name) => admitted(&name, outcome),
                        None => outcome,
                    };
                    self.conclude(id, outcome);
                }
                Poll::Ready(None) | Poll::Pending => return,
            }
        }
    }

    /// Records a call's outcome and queues its settlement for the program.
    fn conclude(&self, id: u32, outcome: Outcome) {
        let settlement = settlement(id, &outcome);
        self.record(id, outcome);
        self.settled.borrow_mut().push_back(settlement);
    }

    /// The tool of call `id`.
    fn tool_of(&self, id: u32) -> Option<Arc<str>> {
        self.calls
            .borrow()
            .get((id as usize).saturating_sub(1))
            .map(|record| Arc::clone(&record.tool))
    }

    /// Records a call's outcome for the result.
    fn record(&self, id: u32, outcome: Outcome) {
        if let Some(record) = self
            .calls
            .borrow_mut()
            .get_mut((id as usize).saturating_sub(1))
        {
            record.outcome = Some(outcome);
        }
    }
}

/// How a call the program made is going.
pub(crate) enum Started {
    /// It succeeded at once, with this value.
    Done(Arc<Value>),
    /// It is running (or failed at once); its settlement comes later under this number.
    Running(u32),
}

fn settlement(id: u32, outcome: &Outcome) -> Settlement {
    match outcome {
        Ok(value) => Settlement {
            id,
            ok: true,
            payload: Arc::clone(value),
        },
        Err(error) => Settlement {
            id,
            ok: false,
            payload: Arc::new(
                serde_json::to_value(error)
                    .unwrap_or_else(|_| Value::Object(serde_json::Map::new())),
            ),
        },
    }
}

/// A call's outcome as the program may have it: a tool's value nested deeper than the limit
/// for values is not handed over (nor recorded), and the call fails with `INVALID_TOOL_OUTPUT`.
fn admitted(name: &str, outcome: Outcome) -> Outcome {
    match outcome {
        Ok(value) if shape::json_too_deep(&value) => Err(ToolCallError {
            name: "ToolCallError",
            tool_name: name.to_owned(),
            code: dsh_tools::FailureCode::InvalidToolOutput,
            message: format!("the tool's value is {}", shape::too_deep_text()),
        }),
        other => other,
    }
}

fn refused(name: &str) -> ToolCallError {
    ToolCallError {
        name: "ToolCallError",
        tool_name: name.to_owned(),
        code: dsh_tools::FailureCode::UnknownTool,
        message: String::from("`run_code` cannot be called from inside a program"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Waits on `bell` in a thread of its own: whether the wait ended within ten seconds (a
    /// lost ring fails the test rather than hanging it).
    fn waited(bell: &Arc<Bell>, then: impl FnOnce()) -> bool {
        let (done, finished) = std::sync::mpsc::channel();
        let waiter = Arc::clone(bell);
        std::thread::spawn(move || {
            waiter.wait();
            let _ = done.send(());
        });
        then();
        finished
            .recv_timeout(std::time::Duration::from_secs(10))
            .is_ok()
    }

    #[test]
    fn a_ring_before_the_wait_is_not_lost_and_is_used_once() {
        let bell = Arc::new(Bell::default());
        bell.ring();
        assert!(waited(&bell, || {}), "a ring before the wait was lost");
        assert!(!bell.rung.load(Ordering::SeqCst));
        // A ring during a wait wakes it.
        assert!(
            waited(&bell, || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                bell.ring();
            }),
            "a ring during the wait was lost"
        );
    }
}

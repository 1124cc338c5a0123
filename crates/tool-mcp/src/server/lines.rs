//! The server's byte-stream transport, framed here rather than by rmcp, which drops invalid
//! JSON and over-long lines without a word and answers a malformed request with no `id`.
//!
//! Each line is read by [`rpc::read_message`] under [`MAX_CLIENT_MESSAGE_BYTES`] (a longer
//! line is read through and discarded, never kept), and what rmcp cannot take is answered here
//! as JSON-RPC 2.0 says: a parse error with `id: null`, an invalid request with the request's
//! id when one can be read, invalid params for a well-formed request whose params do not fit
//! its method, and a message of more than [`MAX_CLIENT_MESSAGE_VALUES`] JSON values refused
//! before rmcp parses it. At most [`MAX_REQUESTS_IN_FLIGHT`] requests are with rmcp
//! unanswered: the input is not read past the next request until one is answered, so a client
//! that does not read its answers stops being read instead of having them all kept.

#[cfg(doc)]
use super::rpc::MAX_CLIENT_MESSAGE_VALUES;
use super::rpc::{self, Frame, Incoming, MAX_CLIENT_MESSAGE_BYTES, RpcError};
use rmcp::model::{ClientNotification, ClientRequest, JsonRpcMessage, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// The most requests handed to rmcp and not yet answered: 32. The next request is read and
/// held until one of them is answered. Notifications (a cancel among them) are still read
/// while this many wait, and a cancel frees its request's place.
pub const MAX_REQUESTS_IN_FLIGHT: usize = 32;

/// The methods the server answers, whose params rmcp reads as their own types.
const SERVED_METHODS: [&str; 4] = ["initialize", "ping", "tools/list", "tools/call"];

/// Where the messages come from.
type Input = BufReader<Pin<Box<dyn AsyncRead + Send>>>;

/// Where the answers go; rmcp's messages and the refusals share it, each written whole.
type Output = Arc<tokio::sync::Mutex<Pin<Box<dyn AsyncWrite + Send>>>>;

/// The transport rmcp serves over: messages read by the task [`LineTransport::start`]
/// spawns, answers written to the output.
pub(crate) struct LineTransport {
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    output: Output,
    in_flight: Arc<InFlight>,
}

/// The requests handed to rmcp and not yet answered, by id (its JSON text), each holding one
/// of [`MAX_REQUESTS_IN_FLIGHT`] permits until its answer is written.
struct InFlight {
    requests: Mutex<HashMap<String, OwnedSemaphorePermit>>,
    room: Arc<Semaphore>,
}

impl InFlight {
    fn key(id: &RequestId) -> String {
        serde_json::to_string(id).unwrap_or_default()
    }

    fn requests(&self) -> std::sync::MutexGuard<'_, HashMap<String, OwnedSemaphorePermit>> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The request `id` is answered (or cancelled, when rmcp drops its answer): its id is free
    /// again, and its permit, returned, goes back when dropped.
    fn done(&self, id: &RequestId) -> Option<OwnedSemaphorePermit> {
        self.requests().remove(&Self::key(id))
    }
}

/// What one line from the client is.
#[derive(Debug)]
enum Line {
    /// A message for rmcp.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Not one: the error response to send back.
    Refused(Value),
    /// Nothing to do (a blank line, or a notification or response rmcp cannot read, which
    /// JSON-RPC leaves unanswered).
    Skipped,
}

impl LineTransport {
    /// The transport, and the task that reads `input` into it until the input ends.
    pub(crate) fn start<R, W>(input: R, output: W) -> LineTransport
    where
        R: AsyncRead + Send + 'static,
        W: AsyncWrite + Send + 'static,
    {
        let (sender, incoming) = mpsc::channel(16);
        let input: Input = BufReader::new(Box::pin(input));
        let output: Output = Arc::new(tokio::sync::Mutex::new(Box::pin(output)));
        let in_flight = Arc::new(InFlight {
            requests: Mutex::default(),
            room: Arc::new(Semaphore::new(MAX_REQUESTS_IN_FLIGHT)),
        });
        tokio::spawn(read_input(
            input,
            sender,
            Arc::clone(&output),
            Arc::clone(&in_flight),
        ));
        LineTransport {
            incoming,
            output,
            in_flight,
        }
    }
}

impl Transport<RoleServer> for LineTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let output = Arc::clone(&self.output);
        let in_flight = Arc::clone(&self.in_flight);
        async move {
            let message = serde_json::to_value(&item).map_err(std::io::Error::other)?;
            let answered = match &item {
                JsonRpcMessage::Response(response) => Some(&response.id),
                JsonRpcMessage::Error(error) => error.id.as_ref(),
                _ => None,
            };
            // The id is free before the answer goes out (a client may reuse it as soon as it
            // has read the answer); the place in flight only once the answer is written, so
            // answers nobody reads still hold the input back.
            let permit = answered.and_then(|id| in_flight.done(id));
            let written = write_line(&output, &message).await;
            drop(permit);
            written
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.incoming.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.incoming.close();
        std::future::ready(Ok(()))
    }
}

/// Writes one message and its newline, whole.
async fn write_line(output: &Output, message: &Value) -> std::io::Result<()> {
    let mut line = message.to_string();
    line.push('\n');
    let mut output = output.lock().await;
    output.write_all(line.as_bytes()).await?;
    output.flush().await
}

/// Reads the client's lines until the input ends (or rmcp stops taking them), answering those
/// that are not messages for rmcp.
async fn read_input(
    mut input: Input,
    messages: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
    output: Output,
    in_flight: Arc<InFlight>,
) {
    let mut line = Vec::new();
    loop {
        let refused = match rpc::read_message(&mut input, &mut line, MAX_CLIENT_MESSAGE_BYTES).await
        {
            Ok(Frame::End) => return,
            Err(error) => {
                tracing::warn!(%error, "cannot read the MCP client's input");
                return;
            }
            Ok(Frame::TooLong) => {
                tracing::warn!(
                    limit = MAX_CLIENT_MESSAGE_BYTES,
                    "an MCP message over the size limit was discarded"
                );
                RpcError::too_long().response(Value::Null)
            }
            Ok(Frame::Message) => match classify(&line) {
                Line::Message(message) => match admit(*message, &in_flight).await {
                    Ok(message) => {
                        if messages.send(message).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    Err(refused) => refused,
                },
                Line::Refused(answer) => answer,
                Line::Skipped => continue,
            },
        };
        if let Err(error) = write_line(&output, &refused).await {
            tracing::warn!(%error, "the MCP client stopped reading the server's output");
            return;
        }
    }
}

/// Lets a message through to rmcp: a request once fewer than [`MAX_REQUESTS_IN_FLIGHT`] are
/// unanswered, and not under the id of one of them (rmcp would answer only one of the two);
/// a cancel frees its request's place, since rmcp drops the answer of a cancelled request.
async fn admit(
    message: RxJsonRpcMessage<RoleServer>,
    in_flight: &InFlight,
) -> Result<RxJsonRpcMessage<RoleServer>, Value> {
    match &message {
        JsonRpcMessage::Request(request) => {
            let key = InFlight::key(&request.id);
            let in_use = || {
                let id = serde_json::to_value(&request.id).unwrap_or(Value::Null);
                Err(RpcError::invalid_request(format!(
                    "request id {key} is already in use by a request still being answered"
                ))
                .response(id))
            };
            if in_flight.requests().contains_key(&key) {
                return in_use();
            }
            let Ok(permit) = Arc::clone(&in_flight.room).acquire_owned().await else {
                return Ok(message);
            };
            let mut requests = in_flight.requests();
            if requests.contains_key(&key) {
                drop(requests);
                return in_use();
            }
            requests.insert(key, permit);
        }
        JsonRpcMessage::Notification(notification) => {
            if let ClientNotification::CancelledNotification(cancelled) = &notification.notification
                && let Some(id) = &cancelled.params.request_id
            {
                drop(in_flight.done(id));
            }
        }
        _ => {}
    }
    Ok(message)
}

/// Tells a message rmcp reads from a line to answer or skip.
fn classify(line: &[u8]) -> Line {
    let Ok(text) = std::str::from_utf8(line) else {
        return Line::Refused(RpcError::not_utf8().response(Value::Null));
    };
    // RFC 8259 lets a parser ignore a byte order mark; rmcp's framing did.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Line::Skipped;
    }
    if let Some((id, error)) = rpc::too_many_values(text) {
        return Line::Refused(error.response(id));
    }
    let unreadable = match serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(text) {
        // rmcp reads a request of a method it knows whose params do not fit as a custom
        // request, and would answer it as an unknown method.
        Ok(JsonRpcMessage::Request(request))
            if matches!(&request.request, ClientRequest::CustomRequest(custom)
                if SERVED_METHODS.contains(&custom.method.as_str())) =>
        {
            let id = serde_json::to_value(&request.id).unwrap_or(Value::Null);
            let method = request.request.method();
            return Line::Refused(
                RpcError::invalid_params(format!("the params do not fit `{method}`")).response(id),
            );
        }
        Ok(message) => return Line::Message(Box::new(message)),
        Err(error) => error,
    };
    match rpc::parse(text) {
        Err((id, error)) => Line::Refused(error.response(id)),
        Ok(Some(Incoming::Request { id, method })) => {
            Line::Refused(RpcError::invalid_params(format!("{method}: {unreadable}")).response(id))
        }
        Ok(None | Some(Incoming::Unanswered)) => {
            tracing::debug!(error = %unreadable, "an MCP message rmcp cannot read, skipped");
            Line::Skipped
        }
    }
}

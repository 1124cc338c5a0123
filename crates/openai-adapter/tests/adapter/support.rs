//! A small HTTP/1.1 server on 127.0.0.1 that answers each connection with the next scripted
//! reply and records what it was sent: the provider's side of the adapter tests, offline; and
//! the adapter's side every test starts from (a configuration for the server, a request, the
//! collected stream).

#![allow(dead_code, unreachable_pub)]

use agent_loop::{Message, ModelEvent, ModelRequest};
use futures::StreamExt;
use openai_adapter::{AdapterConfig, AdapterError, ApiKey, OpenAiAdapter, RetryPolicy, Timeouts};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A piece of a reply body.
#[derive(Clone, Debug)]
pub enum Part {
    /// Bytes written at once.
    Text(String),
    /// Write nothing more, and wait until the client closes the connection.
    Hang,
    /// The text written this many times, without holding it all at once.
    Repeat(String, usize),
    /// The text written at this interval until the client closes the connection.
    Every(String, std::time::Duration),
}

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub parts: Vec<Part>,
}

impl Reply {
    /// A `200` event stream of these `data:` payloads, each followed by a blank line.
    pub fn events(payloads: &[&str]) -> Reply {
        Reply::stream(
            payloads
                .iter()
                .map(|p| Part::Text(format!("data: {p}\n\n")))
                .collect(),
        )
    }

    /// A `200` event stream of these parts.
    pub fn stream(parts: Vec<Part>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("Content-Type".into(), "text/event-stream".into())],
            parts,
        }
    }

    /// An error status with a JSON body.
    pub fn error(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            parts: vec![Part::Text(body.to_owned())],
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// A request as the server received it.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: serde_json::Value,
}

/// The running server. Dropping it stops accepting.
pub struct Server {
    pub addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    closed: mpsc::UnboundedReceiver<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    /// Serves `replies`, one per connection, in order.
    pub async fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let (closed_tx, closed) = mpsc::unbounded_channel();
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let task = {
            let received = Arc::clone(&received);
            tokio::spawn(async move {
                loop {
                    let Ok((socket, _)) = listener.accept().await else {
                        return;
                    };
                    let reply = replies.lock().unwrap().pop_front();
                    let received = Arc::clone(&received);
                    let closed_tx = closed_tx.clone();
                    tokio::spawn(async move {
                        serve(socket, reply, received, closed_tx).await;
                    });
                }
            })
        };
        Server {
            addr,
            received,
            closed,
            task,
        }
    }

    /// The base URL of the server.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// What was received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// Waits until a client closed a connection the server held open with [`Part::Hang`].
    pub async fn client_closed(&mut self) {
        self.closed.recv().await.unwrap();
    }
}

async fn serve(
    mut socket: TcpStream,
    reply: Option<Reply>,
    received: Arc<Mutex<Vec<Received>>>,
    closed: mpsc::UnboundedSender<()>,
) {
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    received.lock().unwrap().push(request);
    let reply =
        reply.unwrap_or_else(|| Reply::error(599, r#"{"error":{"message":"no reply scripted"}}"#));
    let mut head = format!(
        "HTTP/1.1 {} Scripted\r\nConnection: close\r\n",
        reply.status
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    for part in reply.parts {
        match part {
            Part::Text(text) => {
                if socket.write_all(text.as_bytes()).await.is_err() {
                    return;
                }
                let _ = socket.flush().await;
            }
            Part::Repeat(text, times) => {
                for _ in 0..times {
                    if socket.write_all(text.as_bytes()).await.is_err() {
                        return;
                    }
                }
            }
            Part::Every(text, interval) => loop {
                if socket.write_all(text.as_bytes()).await.is_err() {
                    let _ = closed.send(());
                    return;
                }
                tokio::time::sleep(interval).await;
            },
            Part::Hang => {
                let mut buffer = [0u8; 64];
                // The client sends nothing more; a read returns once it closes.
                loop {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                let _ = closed.send(());
                return;
            }
        }
    }
    let _ = socket.shutdown().await;
}

async fn read_request(socket: &mut TcpStream) -> Option<Received> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = socket.read(&mut buffer).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buffer[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while data.len() < head_end + length {
        let n = socket.read(&mut buffer).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buffer[..n]);
    }
    let body = serde_json::from_slice(&data[head_end..head_end + length]).unwrap_or_default();
    Some(Received {
        method,
        path,
        headers,
        body,
    })
}

/// Its characters end none of the streamed texts, so the key's redaction never holds a
/// delta's tail back for the next one (`secrets.rs` covers that).
pub(crate) const KEY: &str = "QZ7XJ9VW8YQZXJ7VW9QZ";

pub(crate) type Item = Result<ModelEvent, AdapterError>;

pub(crate) fn fast_timeouts() -> Timeouts {
    Timeouts::new(
        Duration::from_secs(5),
        Duration::from_secs(5),
        Duration::from_secs(5),
    )
}

pub(crate) fn openai(server: &Server) -> AdapterConfig {
    AdapterConfig::openai("gpt-4o-mini")
        .base_url(&server.base_url())
        .api_key(ApiKey::new(KEY))
        .timeouts(fast_timeouts())
        .retry(RetryPolicy::new(
            2,
            Duration::from_millis(1),
            Duration::from_secs(5),
        ))
}

pub(crate) fn deepseek(server: &Server, model: &str) -> AdapterConfig {
    AdapterConfig::deepseek(model)
        .base_url(&server.base_url())
        .api_key(ApiKey::new(KEY))
        .timeouts(fast_timeouts())
        .retry(RetryPolicy::new(
            2,
            Duration::from_millis(1),
            Duration::from_secs(5),
        ))
}

pub(crate) fn hello() -> ModelRequest {
    ModelRequest::new("Be brief.", vec![Message::user("Say hello.")], vec![])
}

pub(crate) async fn collect(config: AdapterConfig, request: &ModelRequest) -> Vec<Item> {
    let adapter = OpenAiAdapter::new(config).unwrap();
    let events = adapter.events(request, CancellationToken::new());
    tokio::time::timeout(Duration::from_secs(20), events.collect::<Vec<_>>())
        .await
        .expect("the stream did not end")
}

pub(crate) fn text(delta: &str) -> Item {
    Ok(ModelEvent::TextDelta(delta.into()))
}

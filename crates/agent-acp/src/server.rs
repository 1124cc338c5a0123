//! The connection: reads the client's lines, answers `initialize`, opens sessions through the
//! host's [`SessionFactory`], runs prompts, and ends every session when the input ends.

use crate::files::{ClientFs, EditorFiles};
use crate::host::{OpenError, SessionSetup, SessionTools};
use crate::params::{mcp_servers, prompt_text, working_directory};
use crate::rpc::{self, Incoming, Outbox, RpcError};
use crate::tasks::Tasks;
use crate::updates::{self, Mode, Projection};
use crate::{AcpAgent, nested, permission};
use agent_loop::{
    Agent, AgentDirectory, EventRecord, ModelAdapter, SessionEndReason, SessionEvent, SessionLease,
    SessionLog, StoreError, TurnEndReason,
};
use dsh_tools::jobs::JobRuntime;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

/// The ACP protocol version spoken.
const PROTOCOL_VERSION: u64 = 1;

/// Serves one client reading `input` and writing `output` until `input` ends.
pub(crate) async fn serve<R, W>(agent: AcpAgent, input: R, output: W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (outbox, writer) = Outbox::writer(output);
    let server = Arc::new(Server {
        outbox: outbox.clone(),
        config: agent,
        sessions: Mutex::default(),
        loading: Mutex::default(),
        initialized: AtomicBool::new(false),
        client_fs: Mutex::default(),
        prompts: Mutex::default(),
        opening: Arc::new(tokio::sync::Semaphore::new(MAX_OPENING)),
        answering: Tasks::default(),
        closing: AtomicBool::new(false),
    });
    let mut stdin = tokio::io::BufReader::new(input);
    let mut line = Vec::new();
    loop {
        // Backpressure: while the client leaves the answers unread, its input is not read.
        server.outbox.room().await;
        match rpc::read_message(&mut stdin, &mut line, rpc::MAX_MESSAGE_BYTES).await {
            Ok(rpc::Frame::End) => break,
            Ok(rpc::Frame::Message) => match std::str::from_utf8(&line) {
                Ok(text) => server.receive(text).await,
                Err(_) => server
                    .outbox
                    .respond(Value::Null, Err(RpcError::not_utf8())),
            },
            Ok(rpc::Frame::TooLong) => {
                tracing::warn!(
                    limit = rpc::MAX_MESSAGE_BYTES,
                    "an ACP message over the size limit was discarded"
                );
                server
                    .outbox
                    .respond(Value::Null, Err(RpcError::too_long()));
            }
            Err(error) => {
                tracing::warn!(%error, "cannot read stdin");
                break;
            }
        }
    }
    server.shutdown().await;
    outbox.close();
    drop(server);
    drop(outbox);
    let _ = writer.await;
}

struct Server {
    outbox: Outbox,
    /// The host's model, store, session factory and choices.
    config: AcpAgent,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// The sessions a `session/load` on this connection is opening: a second load of one is
    /// told so before it looks at the store, whose lock the first holds (perhaps not yet with
    /// its pid written).
    loading: Mutex<std::collections::HashSet<String>>,
    /// Whether `initialize` was answered: every other request before it is refused.
    initialized: AtomicBool,
    /// The client's file methods, as its `initialize` advertised them.
    client_fs: Mutex<ClientFs>,
    /// The `session/prompt` requests being answered, by request id (its JSON text): the
    /// session each is for and the token that cancels it (`session/cancel`,
    /// `$/cancel_request`). Entered as the request is read, so a cancel read after it always
    /// finds it.
    prompts: Mutex<HashMap<String, RunningPrompt>>,
    /// The `session/new` and `session/load` requests being answered, at most [`MAX_OPENING`]:
    /// the reader waits for one to end before it starts another, and the end of input waits
    /// for all of them, so no session opens after [`Server::shutdown`] ended the others.
    opening: Arc<tokio::sync::Semaphore>,
    /// The prompts' tasks, which the end of input waits for, so each prompt is answered.
    answering: Tasks,
    /// Set as the input ends: a prompt is no longer begun.
    closing: AtomicBool,
}

/// The most `session/new` and `session/load` requests answered at once.
const MAX_OPENING: usize = 8;

/// A `session/prompt` being answered.
struct RunningPrompt {
    session_id: String,
    cancel: CancellationToken,
}

/// A session being loaded: out of [`Server::loading`] when the load ends, however it ends.
struct Loading<'a> {
    server: &'a Server,
    id: String,
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        self.server
            .loading
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.id);
    }
}

/// One open session: its agent, the tools and jobs behind it, and its place in the store.
struct Session {
    agent: Agent,
    jobs: JobRuntime,
    lease: Mutex<Option<SessionLease>>,
    /// The host's work when the session ends.
    on_end: Mutex<Option<crate::host::OnEnd>>,
    /// The message of the last model error, which fails the prompt that saw it.
    model_error: Arc<Mutex<Option<String>>>,
    /// Whether a prompt of the editor's is being answered (ACP allows one at a time).
    prompting: AtomicBool,
    _directory: AgentDirectory,
}

impl Server {
    /// Handles one line from the client. `initialize` is answered here, in the order the
    /// lines came, so a request sent right behind it is not refused as too early; every other
    /// request runs in a task of its own, so a `session/cancel` is read while a prompt runs.
    async fn receive(self: &Arc<Self>, line: &str) {
        match rpc::parse(line) {
            Err((id, error)) => self.outbox.respond(id, Err(error)),
            Ok(None) => {}
            Ok(Some(Incoming::Response { id, outcome })) => self.outbox.answer(&id, outcome),
            Ok(Some(Incoming::Notification { method, params })) => self.notified(&method, &params),
            Ok(Some(Incoming::Request { id, method, params })) if method == "initialize" => {
                let outcome = initialize(&params, &self.config.name, &self.config.version);
                if outcome.is_ok() {
                    *self.client_fs.lock().unwrap_or_else(|e| e.into_inner()) =
                        ClientFs::from_initialize(&params);
                    self.initialized.store(true, Ordering::SeqCst);
                }
                self.outbox.respond(id, outcome);
            }
            Ok(Some(Incoming::Request { id, method, .. }))
                if !self.initialized.load(Ordering::SeqCst) =>
            {
                self.outbox.respond(
                    id,
                    Err(RpcError::invalid_request(format!(
                        "`initialize` must be the first request of a connection; `{method}` came \
                         before it"
                    ))),
                );
            }
            Ok(Some(Incoming::Request { id, method, params })) if method == "session/prompt" => {
                let key = id.to_string();
                let begun = self.begin_prompt(&key, &params);
                let (session, text) = match begun {
                    Ok(begun) => begun,
                    Err(error) => return self.outbox.respond(id, Err(error)),
                };
                let cancel = CancellationToken::new();
                self.prompts
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(
                        key.clone(),
                        RunningPrompt {
                            session_id: params["sessionId"].as_str().unwrap_or_default().to_owned(),
                            cancel: cancel.clone(),
                        },
                    );
                let entry = self.answering.enter();
                let server = Arc::clone(self);
                tokio::spawn(async move {
                    let outcome = server.prompt(&session, &text, &cancel).await;
                    // The session takes its next prompt once this one is answered.
                    drop(session);
                    server
                        .prompts
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&key);
                    server.outbox.respond(id, outcome);
                    drop(entry);
                });
            }
            Ok(Some(Incoming::Request { id, method, params }))
                if method == "session/new" || method == "session/load" =>
            {
                // Waits for room: the opens end by themselves, never waiting for the client.
                let Ok(permit) = Arc::clone(&self.opening).acquire_owned().await else {
                    return;
                };
                let server = Arc::clone(self);
                tokio::spawn(async move {
                    let outcome = match method.as_str() {
                        "session/new" => server.new_session(&params).await,
                        _ => server.load_session(&params).await,
                    };
                    server.outbox.respond(id, outcome);
                    drop(permit);
                });
            }
            Ok(Some(Incoming::Request { id, method, .. })) => self.outbox.respond(
                id,
                Err(RpcError::new(rpc::METHOD_NOT_FOUND, "Method not found")
                    .with_data(json!({"method": method}))),
            ),
        }
    }

    /// The checks of a `session/prompt` made as it is read, in the order of the input: the id
    /// `key` not in use, the session open, the prompt readable, no other prompt of the session
    /// running (the session is then marked as prompting, until the returned session's
    /// [`Prompting`] ends).
    fn begin_prompt(&self, key: &str, params: &Value) -> Result<(Prompting, String), RpcError> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(RpcError::invalid_request("the connection is closing"));
        }
        if self
            .prompts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(key)
        {
            return Err(RpcError::invalid_request(format!(
                "request id {key} is already in use by a request still being answered"
            )));
        }
        let id = params["sessionId"]
            .as_str()
            .ok_or_else(|| RpcError::invalid_params("`sessionId` must be a string"))?;
        let session = self.session(id)?;
        let text = prompt_text(&params["prompt"])?;
        if session.prompting.swap(true, Ordering::SeqCst) {
            return Err(RpcError::invalid_request(
                "a prompt of this session is still running",
            ));
        }
        Ok((Prompting(session), text))
    }

    fn notified(&self, method: &str, params: &Value) {
        match method {
            "session/cancel" => {
                let id = params["sessionId"].as_str().unwrap_or_default();
                let Ok(session) = self.session(id) else {
                    tracing::warn!(session = id, "session/cancel for no open session");
                    return;
                };
                let mut cancelled = false;
                for prompt in self
                    .prompts
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .values()
                    .filter(|prompt| prompt.session_id == id)
                {
                    prompt.cancel.cancel();
                    cancelled = true;
                }
                // No prompt of the editor's: the turn running is one a job's notice opened.
                if !cancelled {
                    session.agent.cancel_turn();
                }
            }
            // JSON-RPC's cancellation (ACP's `$/cancel_request`): a prompt stops as
            // `session/cancel` stops it; the other requests end too soon to be worth it.
            "$/cancel_request" => {
                let request = params["requestId"].to_string();
                match self
                    .prompts
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&request)
                {
                    Some(prompt) => prompt.cancel.cancel(),
                    None => tracing::debug!(%request, "$/cancel_request for no running prompt"),
                }
            }
            // Notifications have no answer: one not understood is only logged.
            other => tracing::debug!(method = other, "an ACP notification not handled"),
        }
    }

    fn session(&self, id: &str) -> Result<Arc<Session>, RpcError> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| unknown_session(id))
    }

    async fn new_session(&self, params: &Value) -> Result<Value, RpcError> {
        let cwd = working_directory(params)?;
        let servers = mcp_servers(params)?;
        let lease = self
            .config
            .store
            .create(&cwd)
            .map_err(|e| RpcError::internal(format!("cannot create the session: {e}")))?;
        let id = lease.id().to_owned();
        self.open(lease, None, cwd, servers).await?;
        Ok(json!({"sessionId": id}))
    }

    async fn load_session(&self, params: &Value) -> Result<Value, RpcError> {
        let id = params["sessionId"]
            .as_str()
            .ok_or_else(|| RpcError::invalid_params("`sessionId` must be a string"))?;
        let cwd = working_directory(params)?;
        let servers = mcp_servers(params)?;
        let already_open =
            || RpcError::invalid_params(format!("session {id} is already open on this connection"));
        if self.session(id).is_ok() {
            return Err(already_open());
        }
        let fresh = self
            .loading
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.to_owned());
        if !fresh {
            return Err(already_open());
        }
        let _loading = Loading {
            server: self,
            id: id.to_owned(),
        };
        let resumed = self.config.store.resume(id).map_err(|error| match error {
            StoreError::NotFound { .. } | StoreError::InvalidId { .. } => unknown_session(id),
            // A load of the same session still opening holds its lock.
            StoreError::SessionInUse { pid, .. } if pid == std::process::id() => already_open(),
            in_use @ StoreError::SessionInUse { .. } => RpcError::invalid_params(in_use),
            other => RpcError::internal(other),
        })?;
        self.open(resumed.lease, Some(resumed.log), cwd, servers)
            .await?;
        // Every update of the history went out before this answer (one outbox, in order).
        Ok(json!({}))
    }

    /// Starts the agent of a session: the host's tools for the session's working directory,
    /// the editor's MCP servers and the nested calls announced, approvals through the editor,
    /// and the history replayed to the editor when continuing.
    async fn open(
        &self,
        mut lease: SessionLease,
        history: Option<SessionLog>,
        cwd: PathBuf,
        servers: Vec<crate::host::McpServer>,
    ) -> Result<(), RpcError> {
        let session_id = lease.id().to_owned();
        // A session `session/new` made that fails to open is discarded, not left crashed.
        lease.set_discard_on_drop(true);
        let setup = SessionSetup {
            session_id: session_id.clone(),
            cwd: cwd.clone(),
            spill_dir: lease.spill_dir().to_owned(),
            mcp_servers: servers,
            resumed: history.is_some(),
            editor_files: EditorFiles::offered(
                self.outbox.clone(),
                &session_id,
                *self.client_fs.lock().unwrap_or_else(|e| e.into_inner()),
            ),
        };
        let SessionTools {
            registry,
            jobs,
            sandbox,
            system_prompt,
            on_end,
        } = self
            .config
            .sessions
            .open(setup)
            .await
            .map_err(|error| match error {
                OpenError::InvalidParams(why) => RpcError::invalid_params(why),
                OpenError::Internal(why) => RpcError::internal(why),
            })?;
        nested::announce(&registry, self.outbox.clone(), &session_id)
            .map_err(RpcError::internal)?;
        if let Some(asked) = &self.config.asked {
            permission::install(&registry, asked, self.outbox.clone(), &session_id)
                .map_err(RpcError::internal)?;
        }
        let projection = Arc::new(Mutex::new(Projection::new(
            registry.clone(),
            Some(session_id.clone()),
            Mode::Replay,
        )));
        if let Some(log) = &history {
            let mut projection = projection.lock().unwrap_or_else(|e| e.into_inner());
            for record in &log.events {
                for update in projection.observe(&record.event) {
                    self.update(&session_id, update);
                }
            }
            projection.set_mode(Mode::Live);
        } else {
            projection
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .set_mode(Mode::Live);
        }
        let model_error: Arc<Mutex<Option<String>>> = Arc::default();
        let subscriber = {
            let outbox = self.outbox.clone();
            let session_id = session_id.clone();
            let model_error = Arc::clone(&model_error);
            move |record: &EventRecord| {
                if let SessionEvent::Error { message, .. } = &record.event {
                    *model_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(message.clone());
                }
                let updates = projection
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .observe(&record.event);
                for update in updates {
                    outbox.notify(
                        "session/update",
                        json!({"sessionId": session_id, "update": update}),
                    );
                }
            }
        };
        let adapter = Arc::new(Streamed {
            inner: Arc::clone(&self.config.adapter),
            outbox: self.outbox.clone(),
            session_id: session_id.clone(),
        });
        let mut builder = Agent::builder(registry.clone(), adapter);
        if let Some(system) = system_prompt {
            builder = builder.system_prompt(system);
        }
        if let Some(sandbox) = sandbox {
            builder = builder.sandbox(sandbox);
        }
        let mut builder = builder
            .cwd(cwd)
            .jobs(jobs.clone())
            .subscriber(subscriber)
            .session_id(session_id.clone())
            .session_log(&lease);
        if let Some(log) = history {
            builder = builder.resume(log);
        }
        let agent = builder
            .build()
            .map_err(|e| RpcError::internal(format!("cannot start the agent: {e}")))?;
        lease.set_discard_on_drop(false);
        let directory = AgentDirectory::new();
        directory.insert(&agent);
        jobs.set_turn_opener(Arc::new(directory.clone()));
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                session_id,
                Arc::new(Session {
                    agent,
                    jobs,
                    lease: Mutex::new(Some(lease)),
                    on_end: Mutex::new(on_end),
                    model_error,
                    prompting: AtomicBool::new(false),
                    _directory: directory,
                }),
            );
        Ok(())
    }

    fn update(&self, session_id: &str, update: Value) {
        self.outbox.notify(
            "session/update",
            json!({"sessionId": session_id, "update": update}),
        );
    }

    /// `session/prompt`: one turn for the editor's prompt. A turn the editor did not ask for
    /// (a background job's notice opened it) may be running: the prompt waits for it to end,
    /// then has its own turn. `cancel` stops the prompt, waiting or running.
    async fn prompt(
        &self,
        prompting: &Prompting,
        text: &str,
        cancel: &CancellationToken,
    ) -> Result<Value, RpcError> {
        let session = &prompting.0;
        let cancelled = || Ok(json!({"stopReason": "cancelled"}));
        let outcome = loop {
            if cancel.is_cancelled() {
                return cancelled();
            }
            *session
                .model_error
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = None;
            let run = session.agent.run(text);
            tokio::pin!(run);
            // Biased: the turn is begun (or found busy) before a cancel is looked at, so the
            // cancel below stops this prompt's turn and never a notice's.
            let ran = tokio::select! {
                biased;
                ran = &mut run => ran,
                () = cancel.cancelled() => {
                    session.agent.cancel_turn();
                    run.await
                }
            };
            match ran {
                Ok(outcome) => break outcome,
                Err(agent_loop::AgentError::Busy(_)) => {
                    tokio::select! {
                        () = session.agent.wait_idle() => {}
                        () = cancel.cancelled() => return cancelled(),
                    }
                }
                Err(other) => return Err(RpcError::internal(other)),
            }
        };
        let stop = match outcome.reason {
            TurnEndReason::Completed | TurnEndReason::Concluded => "end_turn",
            TurnEndReason::Cancelled => "cancelled",
            TurnEndReason::MaxSteps => "max_turn_requests",
            _ => {
                let message = session
                    .model_error
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    .unwrap_or_else(|| String::from("the model failed"));
                return Err(RpcError::internal(message));
            }
        };
        Ok(json!({"stopReason": stop}))
    }

    /// Ends every session: running turns cancelled, jobs stopped, the session recorded as
    /// ended, the host's work for its end run (e.g. its MCP servers shut down) and its lease
    /// released.
    async fn shutdown(&self) {
        // No prompt begins any more, and none waiting for a notice's turn begins one: each
        // is cancelled and answered before its session is disposed.
        self.closing.store(true, Ordering::SeqCst);
        for prompt in self
            .prompts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            prompt.cancel.cancel();
        }
        // The sessions still opening are opened, answered and then ended with the others.
        let _opened = self.opening.acquire_many(MAX_OPENING as u32).await;
        self.answering.idle().await;
        let sessions: Vec<Arc<Session>> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, session)| session)
            .collect();
        for session in sessions {
            session.agent.cancel_turn();
            session.agent.wait_idle().await;
            session.agent.dispose().await;
            session.jobs.teardown().await;
            session.agent.end_session(SessionEndReason::Completed);
            let on_end = session
                .on_end
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(end) = on_end {
                end().await;
            }
            drop(
                session
                    .lease
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take(),
            );
        }
    }
}

/// A session with a prompt of the editor's being answered: marked answered when this ends,
/// however its answer ends.
struct Prompting(Arc<Session>);

impl Drop for Prompting {
    fn drop(&mut self) {
        self.0.prompting.store(false, Ordering::SeqCst);
    }
}

fn unknown_session(id: &str) -> RpcError {
    RpcError::new(rpc::RESOURCE_NOT_FOUND, "Resource not found")
        .with_data(json!({"sessionId": id, "reason": "no such session"}))
}

/// `initialize`: the protocol version (ours, whatever the client asked for, which it checks)
/// and what this agent does.
fn initialize(params: &Value, name: &str, version: &str) -> Result<Value, RpcError> {
    if !params["protocolVersion"].is_u64() {
        return Err(RpcError::invalid_params(
            "`protocolVersion` must be a whole number",
        ));
    }
    Ok(json!({
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": true, "sse": false},
            // No session list, resume or close, and no logout: said, not left to defaults.
            "sessionCapabilities": {},
            "auth": {},
        },
        "authMethods": [],
        "agentInfo": {"name": name, "title": name, "version": version},
    }))
}

/// The model adapter of a session: the model's text and reasoning go to the editor as they
/// stream.
struct Streamed {
    inner: Arc<dyn ModelAdapter>,
    outbox: Outbox,
    session_id: String,
}

impl ModelAdapter for Streamed {
    fn stream(
        &self,
        request: agent_loop::ModelRequest,
        signal: CancellationToken,
    ) -> agent_loop::ModelStream {
        use futures::StreamExt;
        let outbox = self.outbox.clone();
        let session_id = self.session_id.clone();
        Box::pin(self.inner.stream(request, signal).map(move |item| {
            let update = match &item {
                Ok(agent_loop::ModelEvent::TextDelta(d)) if !d.is_empty() => {
                    updates::chunk("agent_message_chunk", d)
                }
                Ok(agent_loop::ModelEvent::ReasoningDelta(d)) if !d.is_empty() => {
                    updates::chunk("agent_thought_chunk", d)
                }
                _ => return item,
            };
            outbox.notify(
                "session/update",
                json!({"sessionId": session_id, "update": update}),
            );
            item
        }))
    }
}

//! Supervision of one server: connect, serve until the connection ends, list its tools into
//! its plugin scope (again on `tools/list_changed`), and restart with backoff or stop.

use super::{
    Ending, Handler, Live, McpFailure, SHUTDOWN_GRACE, Server, ServerState, Service, ToolsPlugin,
};
use crate::connect::{Endpoint, ServerProcess};
use crate::framing::{BoundedTransport, Refusals};
use rmcp::{ServiceError, ServiceExt};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

impl Server {
    pub(super) async fn supervise(self: Arc<Self>, ready: tokio::sync::oneshot::Sender<()>) {
        let mut ready = Some(ready);
        let mut failures: u32 = 0;
        let mut started_once = false;
        loop {
            if self.shutdown.is_cancelled() {
                break;
            }
            let connected = tokio::select! {
                connected = tokio::time::timeout(self.options.connect_timeout, self.connect()) => connected,
                () = self.shutdown.cancelled() => break,
            };
            let reason = match connected {
                Ok(Ok((service, process, refusals))) => {
                    let restarted = started_once;
                    started_once = true;
                    let ending = self
                        .serve(service, process, refusals, ready.take(), restarted)
                        .await;
                    // A start succeeds once the tools are listed: a server that always ends
                    // (or stalls) before is given up on like one that cannot be spawned.
                    if !matches!(ending, Ending::Unlisted) {
                        failures = 0;
                    }
                    match ending {
                        Ending::Shutdown => break,
                        Ending::Unlisted => String::from("the server did not list its tools"),
                        Ending::Exited => String::from("the server exited"),
                        Ending::Hung => String::from("the server stopped answering and was killed"),
                    }
                }
                Ok(Err(error)) => format!("the server failed to start: {error}"),
                Err(_) => format!(
                    "the server did not start within {}s",
                    self.options.connect_timeout.as_secs_f64()
                ),
            };
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
            failures += 1;
            let policy = self.options.restart;
            if failures > policy.max_attempts {
                let why = format!("{reason}; gave up after {} failed starts", failures);
                tracing::warn!(server = %self.name, "MCP server stopped: {why}");
                self.set_state(ServerState::Stopped {
                    reason: why.clone(),
                });
                self.shared.tell(
                    &self.name,
                    &format!(
                        "The MCP server `{}` is stopped ({why}); its tools are unavailable.",
                        self.name
                    ),
                );
                return;
            }
            tracing::warn!(server = %self.name, "MCP server: {reason}; restarting");
            self.set_state(ServerState::Restarting {
                reason: reason.clone(),
            });
            tokio::select! {
                () = tokio::time::sleep(policy.delay(failures)) => {}
                () = self.shutdown.cancelled() => break,
            }
        }
        if let Some(ready) = ready.take() {
            let _ = ready.send(());
        }
        self.set_state(ServerState::Stopped {
            reason: String::from("shut down"),
        });
    }

    /// Connects; also what the transport refuses on this connection (nothing over HTTP).
    async fn connect(&self) -> Result<(Service, Option<ServerProcess>, Arc<Refusals>), String> {
        let handler = Handler {
            list_changed: Arc::clone(&self.list_changed),
        };
        match &self.endpoint {
            Endpoint::Stream(connector) => {
                let connection = connector
                    .connect()
                    .await
                    .map_err(|e| format!("{} ({e})", connector.describe()))?;
                let refusals = Arc::new(Refusals::default());
                let transport = BoundedTransport::new(
                    &self.name,
                    connection.reader,
                    connection.writer,
                    Arc::clone(&refusals),
                );
                let service = handler
                    .serve(transport)
                    .await
                    .map_err(|e| format!("{}: {e}", connector.describe()))?;
                Ok((service, connection.process, refusals))
            }
            Endpoint::Http(http) => {
                use rmcp::transport::StreamableHttpClientTransport;
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                // `https` needs a crypto provider; install ring's unless the host has one.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let mut headers = std::collections::HashMap::new();
                for (name, value) in &http.headers {
                    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|e| format!("header {name}: {e}"))?;
                    let value = reqwest::header::HeaderValue::from_str(value)
                        .map_err(|e| format!("header {name}: {e}"))?;
                    headers.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(http.url.as_str())
                    .custom_headers(headers);
                let transport = StreamableHttpClientTransport::from_config(config);
                let service = handler
                    .serve(transport)
                    .await
                    .map_err(|e| format!("{}: {e}", http.url))?;
                Ok((service, None, Arc::default()))
            }
        }
    }

    /// Runs one connection: registers its tools, follows `list_changed`, and ends when the
    /// server exits, hangs or is shut down.
    async fn serve(
        self: &Arc<Self>,
        service: Service,
        process: Option<ServerProcess>,
        refusals: Arc<Refusals>,
        ready: Option<tokio::sync::oneshot::Sender<()>>,
        restarted: bool,
    ) -> Ending {
        let live = Live {
            peer: service.peer().clone(),
            refusals,
            closed: CancellationToken::new(),
            hung: CancellationToken::new(),
            ended: Arc::new(Mutex::new(None)),
        };
        let stop = service.cancellation_token();
        let mut waiting = Box::pin(service.waiting());
        // Whether `waiting` has finished: a finished future must not be polled again.
        let mut finished = false;
        *self.live.lock().unwrap_or_else(|e| e.into_inner()) = Some(live.clone());
        let listed = tokio::select! {
            listed = tokio::time::timeout(self.options.connect_timeout, self.refresh(&live)) => listed.unwrap_or(false),
            _ = &mut waiting => {
                finished = true;
                false
            }
        };
        {
            let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
            status.state = ServerState::Connected;
            if restarted {
                status.restarts += 1;
            }
        }
        if let Some(ready) = ready {
            let _ = ready.send(());
        }
        if restarted && listed {
            let tools = self.status().tools.join(", ");
            self.shared.tell(
                &self.name,
                &format!(
                    "The MCP server `{}` was restarted; its tools are available again: {tools}.",
                    self.name
                ),
            );
        }
        let ending = if !listed {
            Ending::Unlisted
        } else {
            // The reloads race the ending like any other branch: a reload the server never
            // answers must not delay a shutdown or hide a hang.
            let reloads = async {
                loop {
                    self.list_changed.notified().await;
                    let refreshed = self.refresh(&live);
                    let _ = tokio::time::timeout(self.options.connect_timeout, refreshed).await;
                }
            };
            tokio::select! {
                () = self.shutdown.cancelled() => Ending::Shutdown,
                () = live.hung.cancelled() => Ending::Hung,
                _ = &mut waiting => {
                    finished = true;
                    Ending::Exited
                }
                _ = reloads => Ending::Exited,
            }
        };
        let failure = match ending {
            Ending::Hung => McpFailure::ServerHung,
            _ => McpFailure::ServerExited,
        };
        *live.ended.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure);
        *self.live.lock().unwrap_or_else(|e| e.into_inner()) = None;
        live.closed.cancel();
        stop.cancel();
        if !finished {
            let _ = waiting.await;
        }
        // The connection is closed, so is the server's stdin: a server shut down gets a moment
        // to clean up after itself (stop its own children), one that exited or hung none.
        if let Some(process) = process {
            let grace = match ending {
                Ending::Shutdown => SHUTDOWN_GRACE,
                _ => Duration::ZERO,
            };
            process.stop(grace).await;
        }
        self.unregister();
        if !matches!(ending, Ending::Shutdown) {
            let what = match ending {
                Ending::Hung => "stopped answering and was killed",
                _ => "exited",
            };
            self.shared.tell(
                &self.name,
                &format!(
                    "The MCP server `{}` {what}; its tools are unavailable until it restarts.",
                    self.name
                ),
            );
        }
        ending
    }

    /// Lists the server's tools and registers them in place of the previous list. Whether
    /// the server answered: with a list, or with a protocol error (a server without tools),
    /// not a connection that closed.
    async fn refresh(self: &Arc<Self>, live: &Live) -> bool {
        // Tools the transport left out of an earlier list that failed are not this list's.
        let _ = live.refusals.take_tools();
        let tools = match live.peer.list_all_tools().await {
            Ok(tools) => tools,
            Err(error) => {
                tracing::warn!(server = %self.name, "MCP tools/list failed: {error}");
                let answered = matches!(error, ServiceError::McpError(_));
                if answered {
                    // A server that answered with an error (or past a limit) stays connected:
                    // its status says why it has no new tools.
                    let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
                    status.listing = Some(error.to_string());
                }
                return answered;
            }
        };
        let mut definitions = Vec::new();
        // A probe's `tools/list` may have been answered meanwhile: a tool refused twice is
        // listed once.
        let mut rejected = live.refusals.take_tools();
        let mut seen = std::collections::HashSet::new();
        rejected.retain(|refused| seen.insert(refused.clone()));
        let mut destructive = Vec::new();
        let mut taken: HashMap<String, String> = HashMap::new();
        for tool in tools {
            let tool = match serde_json::to_value(&tool) {
                Ok(tool) => tool,
                Err(error) => {
                    rejected.push((tool.name.to_string(), error.to_string()));
                    continue;
                }
            };
            match self.definition(&tool) {
                Ok((definition, asks)) => {
                    // Two names can clean to one (`a.b`, `a_b`): the first in the server's
                    // order keeps it.
                    if let Some(first) = taken.get(definition.name()) {
                        let why = format!(
                            "its registered name `{}` is also the name of the tool `{first}`, \
                             which the server lists first",
                            definition.name()
                        );
                        rejected.push((remote_name(&tool), why));
                        continue;
                    }
                    taken.insert(definition.name().to_owned(), remote_name(&tool));
                    if let Some(why) = asks {
                        destructive.push((definition.name().to_owned(), why));
                    }
                    definitions.push(definition);
                }
                Err((name, why)) => rejected.push((name, why)),
            }
        }
        for (name, why) in &rejected {
            tracing::warn!(server = %self.name, tool = %name, "MCP tool not registered: {why}");
        }
        let plugin = ToolsPlugin {
            name: format!("mcp:{}", self.name),
            definitions,
        };
        let mut names: Vec<String> = plugin
            .definitions
            .iter()
            .map(|d| d.name().to_owned())
            .collect();
        names.sort();
        // The status is read before the shared set is locked: `unregister` takes the two
        // locks in that order too.
        let previous = self.status().tools;
        {
            let mut set = self
                .shared
                .destructive
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for name in previous {
                set.remove(&name);
            }
            set.extend(destructive);
        }
        let mut handle = self.plugin.lock().unwrap_or_else(|e| e.into_inner());
        let applied = match handle.as_ref() {
            Some(handle) => handle.reload(plugin),
            None => self.scope.load(plugin).map(|loaded| {
                *handle = Some(loaded);
            }),
        };
        if let Err(error) = applied {
            tracing::warn!(server = %self.name, "MCP tools could not be registered: {error}");
        }
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        status.tools = names;
        status.rejected = rejected;
        status.listing = None;
        true
    }

    fn unregister(&self) {
        if let Some(handle) = self
            .plugin
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            handle.dispose();
        }
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        let mut set = self
            .shared
            .destructive
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for name in status.tools.drain(..) {
            set.remove(&name);
        }
    }
}

/// The name a listed tool has on its server.
fn remote_name(tool: &Value) -> String {
    tool.get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

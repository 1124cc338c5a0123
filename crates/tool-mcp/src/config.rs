//! The configuration users already have: `.mcp.json` and `--mcp-config FILE`.
//!
//! ```json
//! {"mcpServers": {
//!   "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}"],
//!          "env": {"DEBUG": "0"}, "cwd": "/tmp"},
//!   "docs": {"type": "http", "url": "https://example.com/mcp",
//!            "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
//! }}
//! ```
//!
//! Every string value may use `${VAR}` (the variable must be set) or `${VAR:-default}`. Errors
//! name the field they are about, as a dotted path (`mcpServers.fs.args[2]`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The name of the configuration file read from the working directory.
pub const CONFIG_FILE_NAME: &str = ".mcp.json";

/// A set of MCP servers by name, in name order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpConfig {
    /// The servers, by the name their tools are prefixed with.
    pub servers: BTreeMap<String, ServerConfig>,
}

/// How to reach one server.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerConfig {
    /// A program spawned with its stdio as the transport.
    Stdio(StdioServer),
    /// A streamable HTTP endpoint.
    Http(HttpServer),
}

/// A server spawned as a child process (`{"command", "args", "env", "cwd"}`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StdioServer {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it, on top of the inherited allowlist.
    pub env: BTreeMap<String, String>,
    /// Its working directory (default: the host's).
    pub cwd: Option<PathBuf>,
}

impl StdioServer {
    /// A server run as `command args…`.
    pub fn new(
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> StdioServer {
        StdioServer {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
        }
    }
}

/// A streamable HTTP server (`{"type": "http", "url", "headers"}`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpServer {
    /// The endpoint.
    pub url: String,
    /// Headers sent with every request.
    pub headers: BTreeMap<String, String>,
}

/// Why a configuration could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The text is not JSON.
    #[error("{source_name}: not JSON: {message}")]
    Syntax {
        /// The file (or other source) name.
        source_name: String,
        /// The parser's complaint.
        message: String,
    },
    /// A field is missing, of the wrong type, or refers to an unset variable.
    #[error("{source_name}: {field}: {message}")]
    Field {
        /// The file (or other source) name.
        source_name: String,
        /// The field, as a dotted path (`mcpServers.fs.args[2]`).
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

impl ConfigError {
    /// The field the error is about, when it is about one.
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Field { field, .. } => Some(field),
            _ => None,
        }
    }
}

impl McpConfig {
    /// Parses configuration text; `source_name` names it in errors, `lookup` resolves
    /// `${VAR}` references.
    pub fn parse(
        text: &str,
        source_name: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<McpConfig, ConfigError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ConfigError::Syntax {
                source_name: source_name.to_owned(),
                message: e.to_string(),
            })?;
        Reader {
            source_name,
            lookup: &lookup,
        }
        .config(&value)
    }

    /// Reads a configuration file, expanding variables from the process environment.
    pub fn load(path: &Path) -> Result<McpConfig, ConfigError> {
        McpConfig::load_with(path, |name| std::env::var(name).ok())
    }

    /// Reads a configuration file, expanding variables with `lookup` (a host that keeps its
    /// secrets out of its environment resolves them from where it keeps them).
    pub fn load_with(
        path: &Path,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<McpConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        McpConfig::parse(&text, &path.display().to_string(), lookup)
    }

    /// `.mcp.json` in `dir` when there is one, else an empty configuration.
    pub fn load_from_dir(dir: &Path) -> Result<McpConfig, ConfigError> {
        McpConfig::load_from_dir_with(dir, |name| std::env::var(name).ok())
    }

    /// As [`McpConfig::load_from_dir`], expanding variables with `lookup`.
    pub fn load_from_dir_with(
        dir: &Path,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<McpConfig, ConfigError> {
        let path = dir.join(CONFIG_FILE_NAME);
        if path.is_file() {
            McpConfig::load_with(&path, lookup)
        } else {
            Ok(McpConfig::default())
        }
    }

    /// Adds `other`'s servers; a server of the same name is replaced by `other`'s.
    pub fn merge(&mut self, other: McpConfig) {
        self.servers.extend(other.servers);
    }

    /// Whether no server is configured.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

struct Reader<'a> {
    source_name: &'a str,
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl Reader<'_> {
    fn error(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Field {
            source_name: self.source_name.to_owned(),
            field: field.to_owned(),
            message: message.into(),
        }
    }

    fn config(&self, value: &serde_json::Value) -> Result<McpConfig, ConfigError> {
        let root = value
            .as_object()
            .ok_or_else(|| self.error("(root)", "expected an object with `mcpServers`"))?;
        let servers = root
            .get("mcpServers")
            .ok_or_else(|| self.error("mcpServers", "missing"))?
            .as_object()
            .ok_or_else(|| self.error("mcpServers", "expected an object of servers by name"))?;
        let mut config = McpConfig::default();
        for (name, server) in servers {
            let field = format!("mcpServers.{name}");
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(self.error(
                    &field,
                    "a server name must be letters, digits, `_` or `-` (it prefixes tool names)",
                ));
            }
            config
                .servers
                .insert(name.clone(), self.server(&field, server)?);
        }
        Ok(config)
    }

    fn server(&self, field: &str, value: &serde_json::Value) -> Result<ServerConfig, ConfigError> {
        let object = value
            .as_object()
            .ok_or_else(|| self.error(field, "expected an object"))?;
        let kind = match object.get("type") {
            None => None,
            Some(kind) => Some(
                kind.as_str()
                    .ok_or_else(|| self.error(&format!("{field}.type"), "expected a string"))?,
            ),
        };
        let allowed: &[&str] = match kind {
            None | Some("stdio") => &["type", "command", "args", "env", "cwd"],
            Some("http" | "streamable-http" | "streamableHttp") => &["type", "url", "headers"],
            Some(other) => {
                return Err(self.error(
                    &format!("{field}.type"),
                    format!("unknown server type {other:?} (expected \"stdio\" or \"http\")"),
                ));
            }
        };
        if let Some(unknown) = object.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(self.error(
                &format!("{field}.{unknown}"),
                format!("unknown field (expected one of: {})", allowed.join(", ")),
            ));
        }
        if allowed.contains(&"url") {
            let url = self.required_string(field, object, "url")?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(self.error(
                    &format!("{field}.url"),
                    format!("{url:?} is not an http:// or https:// URL"),
                ));
            }
            return Ok(ServerConfig::Http(HttpServer {
                url,
                headers: self.string_map(field, object, "headers")?,
            }));
        }
        let command = self.required_string(field, object, "command")?;
        if command.trim().is_empty() {
            return Err(self.error(&format!("{field}.command"), "empty"));
        }
        let args = match object.get("args") {
            None => Vec::new(),
            Some(args) => {
                let list = args
                    .as_array()
                    .ok_or_else(|| self.error(&format!("{field}.args"), "expected an array"))?;
                list.iter()
                    .enumerate()
                    .map(|(i, arg)| self.string(&format!("{field}.args[{i}]"), arg))
                    .collect::<Result<_, _>>()?
            }
        };
        let cwd = match object.get("cwd") {
            None => None,
            Some(cwd) => Some(PathBuf::from(self.string(&format!("{field}.cwd"), cwd)?)),
        };
        Ok(ServerConfig::Stdio(StdioServer {
            command,
            args,
            env: self.string_map(field, object, "env")?,
            cwd,
        }))
    }

    fn required_string(
        &self,
        field: &str,
        object: &serde_json::Map<String, serde_json::Value>,
        key: &str,
    ) -> Result<String, ConfigError> {
        let path = format!("{field}.{key}");
        let value = object
            .get(key)
            .ok_or_else(|| self.error(&path, "missing"))?;
        self.string(&path, value)
    }

    fn string_map(
        &self,
        field: &str,
        object: &serde_json::Map<String, serde_json::Value>,
        key: &str,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        let Some(value) = object.get(key) else {
            return Ok(BTreeMap::new());
        };
        let path = format!("{field}.{key}");
        let map = value
            .as_object()
            .ok_or_else(|| self.error(&path, "expected an object of strings"))?;
        map.iter()
            .map(|(name, value)| Ok((name.clone(), self.string(&format!("{path}.{name}"), value)?)))
            .collect()
    }

    fn string(&self, field: &str, value: &serde_json::Value) -> Result<String, ConfigError> {
        let text = value
            .as_str()
            .ok_or_else(|| self.error(field, "expected a string"))?;
        expand(text, self.lookup).map_err(|message| self.error(field, message))
    }
}

/// Expands `${VAR}` and `${VAR:-default}`; `$` not followed by `{` is kept as it is.
fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("unclosed `${{` in {text:?}"))?;
        let reference = &after[..end];
        let (name, default) = match reference.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (reference, None),
        };
        let valid = !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit();
        if !valid {
            return Err(format!("`${{{reference}}}` is not a variable reference"));
        }
        match (lookup(name), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(format!(
                    "the environment variable {name} is not set (write ${{{name}:-default}} for a default)"
                ));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/u".into()),
            "TOKEN" => Some("s3cret".into()),
            _ => None,
        }
    }

    fn parse(text: &str) -> Result<McpConfig, ConfigError> {
        McpConfig::parse(text, ".mcp.json", env)
    }

    #[test]
    fn both_kinds_of_server_parse_with_variables_expanded() {
        let config = parse(
            r#"{"mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "server", "${HOME}/src"],
                       "env": {"LEVEL": "${LEVEL:-info}"}, "cwd": "${HOME}"},
                "docs": {"type": "http", "url": "https://example.com/mcp",
                         "headers": {"Authorization": "Bearer ${TOKEN}"}}
            }}"#,
        )
        .unwrap();
        let mut expected = McpConfig::default();
        expected.servers.insert(
            "fs".into(),
            ServerConfig::Stdio(StdioServer {
                command: "npx".into(),
                args: vec!["-y".into(), "server".into(), "/home/u/src".into()],
                env: [("LEVEL".to_owned(), "info".to_owned())].into(),
                cwd: Some(PathBuf::from("/home/u")),
            }),
        );
        expected.servers.insert(
            "docs".into(),
            ServerConfig::Http(HttpServer {
                url: "https://example.com/mcp".into(),
                headers: [("Authorization".to_owned(), "Bearer s3cret".to_owned())].into(),
            }),
        );
        assert_eq!(config, expected);
    }

    #[test]
    fn errors_name_the_field() {
        for (text, field, message) in [
            (r#"{}"#, "mcpServers", "missing"),
            (
                r#"{"mcpServers": {"a": {}}}"#,
                "mcpServers.a.command",
                "missing",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "args": ["ok", 3]}}}"#,
                "mcpServers.a.args[1]",
                "expected a string",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "env": {"K": "${NOPE}"}}}}"#,
                "mcpServers.a.env.K",
                "the environment variable NOPE is not set (write ${NOPE:-default} for a default)",
            ),
            (
                r#"{"mcpServers": {"a": {"type": "http", "url": "ftp://x"}}}"#,
                "mcpServers.a.url",
                "\"ftp://x\" is not an http:// or https:// URL",
            ),
            (
                r#"{"mcpServers": {"a": {"type": "sse", "url": "http://x"}}}"#,
                "mcpServers.a.type",
                "unknown server type \"sse\" (expected \"stdio\" or \"http\")",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "url": "http://x"}}}"#,
                "mcpServers.a.url",
                "unknown field (expected one of: type, command, args, env, cwd)",
            ),
            (
                r#"{"mcpServers": {"a b": {"command": "x"}}}"#,
                "mcpServers.a b",
                "a server name must be letters, digits, `_` or `-` (it prefixes tool names)",
            ),
        ] {
            let error = parse(text).unwrap_err();
            assert_eq!(error.field(), Some(field), "{text}: {error}");
            assert_eq!(
                error.to_string(),
                format!(".mcp.json: {field}: {message}"),
                "{text}"
            );
        }
    }

    #[test]
    fn text_that_is_not_json_is_a_syntax_error() {
        let error = parse("{").unwrap_err();
        assert!(matches!(error, ConfigError::Syntax { .. }), "{error}");
    }

    #[test]
    fn a_later_file_replaces_servers_of_the_same_name() {
        let mut base =
            parse(r#"{"mcpServers": {"a": {"command": "one"}, "b": {"command": "b"}}}"#).unwrap();
        base.merge(parse(r#"{"mcpServers": {"a": {"command": "two"}}}"#).unwrap());
        assert_eq!(
            base.servers.get("a"),
            Some(&ServerConfig::Stdio(StdioServer::new(
                "two",
                Vec::<String>::new()
            )))
        );
        assert_eq!(base.servers.len(), 2);
    }
}

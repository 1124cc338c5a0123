//! The editor's params that need more than a field read: a session's working directory, its
//! MCP servers, and a prompt's content blocks as the user's words.

use crate::host::{McpServer, McpTransport};
use crate::rpc::RpcError;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The session's `cwd`: an absolute path to a directory.
pub(super) fn working_directory(params: &Value) -> Result<PathBuf, RpcError> {
    let cwd = params["cwd"]
        .as_str()
        .map(PathBuf::from)
        .ok_or_else(|| RpcError::invalid_params("`cwd` must be a string"))?;
    if !cwd.is_absolute() || !cwd.is_dir() {
        return Err(RpcError::invalid_params(format!(
            "`cwd` must be an absolute path to a directory: {}",
            cwd.display()
        )));
    }
    Ok(cwd)
}

/// The `mcpServers` of `session/new` or `session/load`, in the editor's order: stdio and HTTP
/// servers (this agent does not announce SSE).
pub(super) fn mcp_servers(params: &Value) -> Result<Vec<McpServer>, RpcError> {
    let mut config = Vec::new();
    let servers = match &params["mcpServers"] {
        Value::Null => return Ok(config),
        Value::Array(servers) => servers,
        _ => return Err(RpcError::invalid_params("`mcpServers` must be an array")),
    };
    let pairs = |value: &Value, what: &str| -> Result<BTreeMap<String, String>, RpcError> {
        match value {
            Value::Null => Ok(BTreeMap::new()),
            Value::Array(items) => items
                .iter()
                .map(
                    |item| match (item["name"].as_str(), item["value"].as_str()) {
                        (Some(name), Some(value)) => Ok((name.to_owned(), value.to_owned())),
                        _ => Err(RpcError::invalid_params(format!(
                            "each of `{what}` has a string `name` and `value`"
                        ))),
                    },
                )
                .collect(),
            _ => Err(RpcError::invalid_params(format!(
                "`{what}` must be an array"
            ))),
        }
    };
    for server in servers {
        let name = server["name"]
            .as_str()
            .ok_or_else(|| RpcError::invalid_params("an MCP server needs a string `name`"))?;
        let entry = match server["type"].as_str() {
            None | Some("stdio") => {
                let command = server["command"].as_str().ok_or_else(|| {
                    RpcError::invalid_params(format!("MCP server `{name}` needs a `command`"))
                })?;
                let args: Vec<String> = match &server["args"] {
                    Value::Null => Vec::new(),
                    Value::Array(args) => args
                        .iter()
                        .map(|a| a.as_str().map(str::to_owned))
                        .collect::<Option<_>>()
                        .ok_or_else(|| {
                            RpcError::invalid_params(format!(
                                "MCP server `{name}`: `args` must be strings"
                            ))
                        })?,
                    _ => {
                        return Err(RpcError::invalid_params(format!(
                            "MCP server `{name}`: `args` must be an array"
                        )));
                    }
                };
                McpTransport::Stdio {
                    command: command.to_owned(),
                    args,
                    env: pairs(&server["env"], "env")?,
                }
            }
            Some("http") => {
                let url = server["url"]
                    .as_str()
                    .ok_or_else(|| {
                        RpcError::invalid_params(format!("MCP server `{name}` needs a `url`"))
                    })?
                    .to_owned();
                McpTransport::Http {
                    url,
                    headers: pairs(&server["headers"], "headers")?,
                }
            }
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "MCP server `{name}`: transport `{other}` is not supported (mcpCapabilities)"
                )));
            }
        };
        config.push(McpServer {
            name: name.to_owned(),
            transport: entry,
        });
    }
    Ok(config)
}

/// The user's words from a prompt's content blocks: text, links to resources, and the text of
/// embedded resources; images and audio were not announced and are refused.
pub(super) fn prompt_text(prompt: &Value) -> Result<String, RpcError> {
    let blocks = prompt
        .as_array()
        .ok_or_else(|| RpcError::invalid_params("`prompt` must be an array of content blocks"))?;
    let mut parts = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => parts.push(
                block["text"]
                    .as_str()
                    .ok_or_else(|| RpcError::invalid_params("a text block needs `text`"))?
                    .to_owned(),
            ),
            Some("resource_link") => {
                let uri = block["uri"].as_str().unwrap_or_default();
                let name = block["name"].as_str().unwrap_or(uri);
                parts.push(format!("[{name}]({uri})"));
            }
            Some("resource") => {
                let resource = &block["resource"];
                let uri = resource["uri"].as_str().unwrap_or_default();
                let text = resource["text"].as_str().ok_or_else(|| {
                    RpcError::invalid_params("only text resources can be embedded")
                })?;
                parts.push(format!("<resource uri=\"{uri}\">\n{text}\n</resource>"));
            }
            other => {
                return Err(RpcError::invalid_params(format!(
                    "content of type {} is not supported (promptCapabilities)",
                    other.unwrap_or("(none)")
                )));
            }
        }
    }
    Ok(parts.join("\n"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn the_editors_mcp_servers_are_read_in_their_order() {
        let config = mcp_servers(&json!({"mcpServers": [
            {"name": "files", "command": "/usr/bin/fs", "args": ["/w"],
             "env": [{"name": "TOKEN", "value": "t"}]},
            {"type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer x"}]}
        ]}))
        .unwrap();
        let expected = vec![
            McpServer {
                name: "files".into(),
                transport: McpTransport::Stdio {
                    command: "/usr/bin/fs".into(),
                    args: vec!["/w".into()],
                    env: BTreeMap::from([("TOKEN".into(), "t".into())]),
                },
            },
            McpServer {
                name: "web".into(),
                transport: McpTransport::Http {
                    url: "http://127.0.0.1:1/mcp".into(),
                    headers: BTreeMap::from([("Authorization".into(), "Bearer x".into())]),
                },
            },
        ];
        assert_eq!(config, expected);
        let refused = mcp_servers(&json!({"mcpServers": [
            {"type": "sse", "name": "old", "url": "http://x", "headers": []}
        ]}))
        .unwrap_err();
        assert_eq!(refused.code, crate::rpc::INVALID_PARAMS);
    }

    #[test]
    fn a_prompt_reads_text_links_and_embedded_text_and_refuses_images() {
        let text = prompt_text(&json!([
            {"type": "text", "text": "Look at"},
            {"type": "resource_link", "uri": "file:///w/a.rs", "name": "a.rs"},
            {"type": "resource", "resource": {"uri": "file:///w/b.rs", "text": "fn b() {}"}}
        ]))
        .unwrap();
        assert_eq!(
            text,
            "Look at\n[a.rs](file:///w/a.rs)\n<resource uri=\"file:///w/b.rs\">\nfn b() {}\n</resource>"
        );
        let refused = prompt_text(&json!([{"type": "image", "data": "", "mimeType": "image/png"}]))
            .unwrap_err();
        assert_eq!(refused.code, crate::rpc::INVALID_PARAMS);
        assert_eq!(
            prompt_text(&json!("words")).unwrap_err().code,
            crate::rpc::INVALID_PARAMS
        );
    }
}

//! [`FsPlugin`]: the five tools over one session's state (the files it has seen, the locks
//! that order calls on each file, the write policy).

use crate::args::{EditArgs, GlobArgs, GrepArgs, ReadArgs, WriteArgs};
use crate::cards::{self, ReadMeta};
use crate::confine::Confinement;
use crate::error::FsError;
use crate::guard::{self, ContentHash, Guard, Stamp};
use crate::history::FileHistory;
use crate::options::FsOptions;
use crate::render;
use crate::search::{self, SearchError};
use crate::value::{EditValue, GlobValue, GrepValue, ReadValue, WriteValue};
use dsh_tools::approval::ESCALATION_PREFIX;
use dsh_tools::{
    ContentBlock, ExecContext, Plugin, PluginError, RegistrationError, Scope, ToolDefinition,
    ToolError, ToolOutput, ValueSchema,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The plugin name of [`FsPlugin`].
pub const FS_TOOLS: &str = "fs-tools";

/// The model-visible names of the five tools, in the order they are registered.
pub const FS_TOOL_NAMES: [&str; 5] = ["read", "write", "edit", "glob", "grep"];

const READ_DESCRIPTION: &str = "Read a text file. Lines come numbered (`     1\\tline`), 2000 \
from `offset` by default (`limit` for more or fewer); a line over 2000 characters is cut, a \
page stops at 50 KiB, and a cut read says which `offset` continues it. Characters that look \
like others (no-break spaces, zero-width characters, lone carriage returns) are shown as \
⟨U+XXXX⟩ and ⟨CR⟩ tokens: old_string in `edit` must contain the real characters. Read a file \
before you `write` over it or `edit` it.";
const WRITE_DESCRIPTION: &str = "Create a file or replace its whole content; missing parent \
directories are created and the file's permissions kept. An existing file must have been read \
with `read` first, and not changed since. To change part of a file, prefer `edit`.";
const EDIT_DESCRIPTION: &str = "Replace text in a file: old_string must occur exactly once \
(copy it from `read`'s output without the line-number prefix, tabs and spaces as they are), \
or set replace_all to replace every occurrence. The file's line endings are kept. The file \
must have been read with `read` first, and not changed since.";
const GLOB_DESCRIPTION: &str = "Find files by name with a glob pattern (\"**/*.rs\", \
\"src/**/*.{ts,tsx}\"); a pattern without \"/\" matches file names at any depth. Files only, \
newest first, at most 100 listed with the total; .gitignore'd and version-control directories \
are skipped.";
const GREP_DESCRIPTION: &str = "Search file contents with a regular expression (ripgrep \
syntax), honouring .gitignore like `rg`. Matching lines come with their line numbers, grouped \
by file, at most 250 listed with the total; `include` keeps only files matching a glob \
(\"*.rs\").";

/// The shared state of one plugin instance (one session).
#[derive(Debug)]
struct State {
    options: FsOptions,
    confinement: Confinement,
    guard: Guard,
    /// Where each change's previous content is kept, when the host keeps it.
    history: std::sync::OnceLock<FileHistory>,
}

impl State {
    /// `path` absolute: relative ones against the working directory.
    fn resolve(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.options.cwd.join(path)
        }
    }

    /// Records what a file this plugin just wrote holds.
    fn record_written(&self, path: &Path, bytes: &[u8]) {
        if let Ok(metadata) = std::fs::metadata(path) {
            self.guard.record(
                &guard::key(path),
                Stamp::new(&metadata, ContentHash::of(bytes)),
            );
        }
    }

    fn read(&self, path: &Path, args: &ReadArgs) -> Result<ReadValue, FsError> {
        let (value, stamp) =
            crate::read::read_page(path, args.offset, args.limit, &self.options.limits)?;
        self.guard.record(&guard::key(path), stamp);
        Ok(value)
    }

    /// The existing file at `target` if any, after the stale-read check.
    fn checked_existing(
        &self,
        target: &crate::confine::Target,
        path: &Path,
    ) -> Result<Option<crate::confine::Existing>, FsError> {
        let existing =
            self.confinement
                .existing(target, path, self.options.limits.max_edit_file_bytes)?;
        if let Some(existing) = &existing {
            let now = Stamp::new(&existing.metadata, ContentHash::of(&existing.bytes));
            self.guard
                .check(&guard::key(path), path, now)
                .map_err(FsError::Stale)?;
        }
        Ok(existing)
    }

    /// Keeps the content a change replaces and the one it writes, before it writes: a change
    /// whose previous content cannot be kept is not made.
    fn keep(
        &self,
        tool: &str,
        path: &Path,
        before: Option<&[u8]>,
        after: &[u8],
    ) -> Result<(), FsError> {
        if let Some(history) = self.history.get() {
            history.record(tool, path, before, after)?;
        }
        Ok(())
    }

    fn write(
        &self,
        path: &Path,
        content: &str,
        approved: Option<&Path>,
    ) -> Result<WriteValue, FsError> {
        let target = self.confinement.target(path, approved)?;
        let existing = self.checked_existing(&target, path)?;
        self.keep(
            "write",
            path,
            existing.as_ref().map(|e| e.bytes.as_slice()),
            content.as_bytes(),
        )?;
        let created = existing.is_none();
        let permissions = existing.as_ref().map(|e| e.metadata.permissions());
        // The old text for the diff card: the bytes themselves when they are UTF-8 (no copy).
        let old = existing.map(|e| {
            String::from_utf8(e.bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        });
        self.confinement
            .write(target, path, content.as_bytes(), permissions)?;
        self.record_written(path, content.as_bytes());
        let shown = path.display().to_string();
        Ok(WriteValue {
            created,
            bytes: content.len() as u64,
            lines: line_count(content),
            change: crate::change::file_change(
                &shown,
                old.as_deref(),
                content,
                self.options.limits.max_whole_diff_bytes,
            ),
            path: shown,
        })
    }

    fn edit(
        &self,
        path: &Path,
        args: &EditArgs,
        approved: Option<&Path>,
    ) -> Result<EditValue, FsError> {
        let target = self.confinement.target(path, approved)?;
        let Some(existing) = self.checked_existing(&target, path)? else {
            return Err(FsError::NotFound(format!(
                "{} To create a file, use `write`.",
                crate::missing::not_found(path)
            )));
        };
        let permissions = existing.metadata.permissions();
        let old = crate::read::text_of(path, existing.bytes)?;
        let edited = crate::edit::apply(
            &old,
            &args.old_string,
            &args.new_string,
            args.replace_all.unwrap_or(false),
        )
        .map_err(FsError::Edit)?;
        self.keep("edit", path, Some(old.as_bytes()), edited.text.as_bytes())?;
        self.confinement
            .write(target, path, edited.text.as_bytes(), Some(permissions))?;
        self.record_written(path, edited.text.as_bytes());
        let shown = path.display().to_string();
        Ok(EditValue {
            replacements: edited.lines.len() as u64,
            lines: edited.lines,
            crlf_adapted: edited.crlf_adapted,
            change: crate::change::file_change(
                &shown,
                Some(&old),
                &edited.text,
                self.options.limits.max_whole_diff_bytes,
            ),
            path: shown,
        })
    }
}

/// Lines of `text`: newlines, and one more for a last line without one.
fn line_count(text: &str) -> u64 {
    let newlines = text.matches('\n').count() as u64;
    newlines + u64::from(!text.is_empty() && !text.ends_with('\n'))
}

/// Loads `read`, `write`, `edit`, `glob` and `grep` into a scope. One instance is one
/// session: the stale-read guard and the per-file locks are shared by its five tools (and by
/// clones of the plugin).
#[derive(Clone, Debug)]
pub struct FsPlugin {
    state: Arc<State>,
}

impl FsPlugin {
    /// The tools with `options`.
    pub fn new(options: FsOptions) -> FsPlugin {
        FsPlugin {
            state: Arc::new(State {
                confinement: Confinement::new(options.policy.clone()),
                guard: Guard::default(),
                history: std::sync::OnceLock::new(),
                options,
            }),
        }
    }

    /// The same tools, keeping in `history` the content each `write` and `edit` replaces
    /// (and the one it writes), for [`FileHistory::undo`]; a change whose previous content
    /// cannot be kept is refused. A plugin keeps one history: a second one is ignored.
    pub fn keeping_history(self, history: FileHistory) -> FsPlugin {
        if self.state.history.set(history).is_err() {
            tracing::warn!("the file tools already keep a history; the second one is ignored");
        }
        self
    }

    /// The options the plugin was made with.
    pub fn options(&self) -> &FsOptions {
        &self.state.options
    }

    /// The five definitions, in [`FS_TOOL_NAMES`] order.
    pub fn definitions(&self) -> Result<Vec<ToolDefinition>, RegistrationError> {
        Ok(vec![
            read_tool(Arc::clone(&self.state))?,
            write_tool(Arc::clone(&self.state))?,
            edit_tool(Arc::clone(&self.state))?,
            glob_tool(Arc::clone(&self.state))?,
            grep_tool(Arc::clone(&self.state))?,
        ])
    }
}

impl Plugin for FsPlugin {
    fn name(&self) -> &str {
        FS_TOOLS
    }

    fn apply(&self, scope: &Scope) -> Result<(), PluginError> {
        for definition in self
            .definitions()
            .map_err(|e| PluginError::apply(FS_TOOLS, e))?
        {
            scope
                .register(definition)
                .map_err(|e| PluginError::apply(FS_TOOLS, e))?;
        }
        Ok(())
    }
}

fn schema_error(
    name: &'static str,
    which: &'static str,
) -> impl Fn(dsh_tools::SchemaError) -> RegistrationError {
    move |source| RegistrationError::Schema {
        name: name.to_owned(),
        which,
        source,
    }
}

/// The output of a tool whose value is a `T`: the schema generated from it, the model text
/// rendered from it (a value that does not read back, rewritten by a hook, shows as its JSON),
/// and the presentation meta projected from it.
fn typed_output<T>(
    name: &'static str,
    render: fn(&T) -> String,
    meta: fn(&Value, &T) -> Option<Value>,
) -> Result<ToolOutput, RegistrationError>
where
    T: JsonSchema + DeserializeOwned + 'static,
{
    let schema =
        ValueSchema::for_type_in_field_order::<T>().map_err(schema_error(name, "output"))?;
    Ok(ToolOutput::new(schema, move |_, value| {
        let text = match dsh_tools::json::from_value::<T>(value) {
            Ok(typed) => render(&typed),
            Err(_) => value.to_string(),
        };
        vec![ContentBlock::text(text)]
    })
    .with_presentation_meta(move |args, value| {
        let typed = dsh_tools::json::from_value::<T>(value).ok()?;
        meta(args, &typed)
    }))
}

fn parameters<T: JsonSchema + DeserializeOwned>(
    name: &'static str,
) -> Result<ValueSchema, RegistrationError> {
    ValueSchema::for_type_in_field_order::<T>().map_err(schema_error(name, "parameters"))
}

fn to_value(value: impl Serialize) -> Result<Value, ToolError> {
    serde_json::to_value(value)
        .map_err(|e| ToolError::failed(format!("output could not be serialised: {e}")))
}

/// Reads the arguments as `T`, naming the field when one does not fit.
fn typed<T: DeserializeOwned>(exec: &ExecContext) -> Result<T, ToolError> {
    exec.typed_args()
        .map_err(|e| ToolError::invalid_args(e.to_string()))
}

fn non_blank(field: &str, value: &str) -> Result<(), ToolError> {
    if value.trim().is_empty() {
        return Err(ToolError::invalid_args(format!(
            "/{field}: must not be empty"
        )));
    }
    Ok(())
}

/// Runs blocking file work off the runtime's threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, FsError> + Send + 'static,
) -> Result<T, ToolError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(ToolError::from),
        Err(e) => Err(ToolError::failed(format!(
            "the file operation did not finish: {e}"
        ))),
    }
}

fn read_tool(state: Arc<State>) -> Result<ToolDefinition, RegistrationError> {
    ToolDefinition::builder("read", READ_DESCRIPTION)
        .parameters(parameters::<ReadArgs>("read")?)
        .output(typed_output(
            "read",
            render::render_read,
            |_, v: &ReadValue| serde_json::to_value(ReadMeta::of(v)).ok(),
        )?)
        .concurrency_safe(|_| true)
        .present_call(cards::present_read_call)
        .present_result(cards::present_read_result)
        .execute(move |_, exec: ExecContext| {
            let state = Arc::clone(&state);
            async move {
                let args: ReadArgs = typed(&exec)?;
                non_blank("file_path", &args.file_path)?;
                if args.offset == Some(0) {
                    return Err(ToolError::invalid_args("/offset: line numbers start at 1"));
                }
                if args.limit == Some(0) {
                    return Err(ToolError::invalid_args("/limit: must be at least 1"));
                }
                let path = state.resolve(&args.file_path);
                let lock = state.guard.lock(&guard::key(&path));
                let _held = lock.lock().await;
                let value = blocking(move || state.read(&path, &args)).await?;
                to_value(value)
            }
        })
        .build()
}

fn write_tool(state: Arc<State>) -> Result<ToolDefinition, RegistrationError> {
    ToolDefinition::builder("write", WRITE_DESCRIPTION)
        .parameters(parameters::<WriteArgs>("write")?)
        .output(typed_output(
            "write",
            render::render_write,
            |_, v: &WriteValue| serde_json::to_value(v.change.to_file_diff()).ok(),
        )?)
        .present_call(cards::present_write_call)
        .present_result(cards::present_change_result)
        .execute(move |_, exec: ExecContext| {
            let state = Arc::clone(&state);
            async move {
                let args: WriteArgs = typed(&exec)?;
                non_blank("file_path", &args.file_path)?;
                let path = state.resolve(&args.file_path);
                let lock = state.guard.lock(&guard::key(&path));
                let _held = lock.lock().await;
                let content = Arc::new(args.content);
                let value = confined(&exec, &state, move |state, approved| {
                    state.write(&path, &content, approved)
                })
                .await?;
                to_value(value)
            }
        })
        .build()
}

fn edit_tool(state: Arc<State>) -> Result<ToolDefinition, RegistrationError> {
    ToolDefinition::builder("edit", EDIT_DESCRIPTION)
        .parameters(parameters::<EditArgs>("edit")?)
        .output(typed_output("edit", render::render_edit, |_, v: &EditValue| {
            serde_json::to_value(v.change.to_file_diff()).ok()
        })?)
        .present_call(cards::present_edit_call)
        .present_result(cards::present_change_result)
        .execute(move |_, exec: ExecContext| {
            let state = Arc::clone(&state);
            async move {
                let args: EditArgs = typed(&exec)?;
                non_blank("file_path", &args.file_path)?;
                if args.old_string.is_empty() {
                    return Err(ToolError::invalid_args(
                        "/old_string: must not be empty; to create a file or replace all of it, use `write`",
                    ));
                }
                if args.old_string == args.new_string {
                    return Err(ToolError::invalid_args(
                        "/new_string: is the same as old_string; an edit must change something",
                    ));
                }
                let path = state.resolve(&args.file_path);
                let lock = state.guard.lock(&guard::key(&path));
                let _held = lock.lock().await;
                let args = Arc::new(args);
                let value = confined(&exec, &state, move |state, approved| {
                    state.edit(&path, &args, approved)
                })
                .await?;
                to_value(value)
            }
        })
        .build()
}

/// Runs a write or edit off the runtime's threads. One the policy refuses is asked of the
/// approver as a request to leave the sandbox (as `bash`'s escalation is: asked every time,
/// denied where there is no agent or no approver); only when it is granted does the change run
/// again, unconfined.
async fn confined<T: Send + 'static>(
    exec: &ExecContext,
    state: &Arc<State>,
    op: impl Fn(&State, Option<&Path>) -> Result<T, FsError> + Send + Sync + 'static,
) -> Result<T, ToolError> {
    let op = Arc::new(op);
    let attempt = |approved: Option<PathBuf>| {
        let state = Arc::clone(state);
        let op = Arc::clone(&op);
        async move {
            match tokio::task::spawn_blocking(move || op(&state, approved.as_deref())).await {
                Ok(result) => Ok(result),
                Err(e) => Err(ToolError::failed(format!(
                    "the file operation did not finish: {e}"
                ))),
            }
        }
    };
    match attempt(None).await? {
        Err(refused @ FsError::Refused { .. }) => {
            let FsError::Refused { path, policy } = &refused else {
                return Err(refused.into());
            };
            // The question names where the write would land, every symlink followed, and
            // only that place is then written.
            let path_for = path.clone();
            let destination =
                tokio::task::spawn_blocking(move || crate::confine::destination(&path_for))
                    .await
                    .map_err(|e| {
                        ToolError::failed(format!("the file operation did not finish: {e}"))
                    })?;
            let shown = if destination == *path {
                path.display().to_string()
            } else {
                format!(
                    "{} (which leads to {})",
                    path.display(),
                    destination.display()
                )
            };
            let question =
                format!("{ESCALATION_PREFIX}write {shown} outside the sandbox ({policy})");
            match exec.request_approval(question).await {
                Ok(()) => {
                    tracing::info!(call = exec.call_id(), path = %path.display(), "an approved write runs outside the sandbox");
                    attempt(Some(destination)).await?.map_err(ToolError::from)
                }
                Err(denied) => Err(ToolError::failed(format!("{refused} ({denied})"))),
            }
        }
        other => other.map_err(ToolError::from),
    }
}

/// Runs a search off the runtime's threads; a bad pattern is the caller's mistake.
async fn searching<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SearchError> + Send + 'static,
) -> Result<T, ToolError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(SearchError::Pattern(bad))) => Err(ToolError::invalid_args(bad.0)),
        Ok(Err(SearchError::Fs(e))) => Err(e.into()),
        Err(e) => Err(ToolError::failed(format!("the search did not finish: {e}"))),
    }
}

fn glob_tool(state: Arc<State>) -> Result<ToolDefinition, RegistrationError> {
    ToolDefinition::builder("glob", GLOB_DESCRIPTION)
        .parameters(parameters::<GlobArgs>("glob")?)
        .output(typed_output(
            "glob",
            render::render_glob,
            |args, v: &GlobValue| {
                let pattern = args
                    .get("pattern")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                serde_json::to_value(cards::glob_card(v, pattern)).ok()
            },
        )?)
        .concurrency_safe(|_| true)
        .present_call(cards::present_search_call)
        .present_result(cards::present_search_result)
        .execute(move |_, exec: ExecContext| {
            let state = Arc::clone(&state);
            async move {
                let args: GlobArgs = typed(&exec)?;
                non_blank("pattern", &args.pattern)?;
                let root = state.resolve(args.path.as_deref().unwrap_or("."));
                let root = clean(root);
                let value = searching(move || {
                    let limits = &state.options.limits;
                    search::glob(
                        &root,
                        &args.pattern,
                        limits.max_glob_paths,
                        state.options.spill_dir.as_deref(),
                    )
                })
                .await?;
                to_value(value)
            }
        })
        .build()
}

fn grep_tool(state: Arc<State>) -> Result<ToolDefinition, RegistrationError> {
    ToolDefinition::builder("grep", GREP_DESCRIPTION)
        .parameters(parameters::<GrepArgs>("grep")?)
        .output(typed_output(
            "grep",
            render::render_grep,
            |args, v: &GrepValue| {
                let pattern = args
                    .get("pattern")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                serde_json::to_value(cards::grep_card(v, pattern)).ok()
            },
        )?)
        .concurrency_safe(|_| true)
        .present_call(cards::present_search_call)
        .present_result(cards::present_search_result)
        .execute(move |_, exec: ExecContext| {
            let state = Arc::clone(&state);
            async move {
                let args: GrepArgs = typed(&exec)?;
                non_blank("pattern", &args.pattern)?;
                let root = clean(state.resolve(args.path.as_deref().unwrap_or(".")));
                let value = searching(move || {
                    let limits = &state.options.limits;
                    search::grep(
                        &root,
                        &args.pattern,
                        args.include.as_deref(),
                        limits.max_grep_matches,
                        limits.max_line_chars,
                        state.options.spill_dir.as_deref(),
                    )
                })
                .await?;
                to_value(value)
            }
        })
        .build()
}

/// `path` without `.` components (`cwd/.` shows as `cwd`); `..` is kept, it may cross a link.
fn clean(path: PathBuf) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

//! The environment policy, end to end through the local executor: what `env` prints in a real
//! command, and that a planted start-up file never runs. The parent environment is passed
//! through `EnvPolicy::parent_env`, so these tests never change the process environment.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pretty_assertions::assert_eq;
use std::collections::BTreeMap;
use std::path::Path;
use tool_bash::env::{EnvInherit, EnvPolicy};
use tool_bash::local::{LocalConfig, LocalExecutor};
use tool_bash::shell::{ManagedEnv, ShellExecutor, ShellRequest, ShellRunResult};

async fn run(policy: EnvPolicy, request: ShellRequest) -> ShellRunResult {
    let mut config = LocalConfig::default();
    config.env_policy = policy;
    let executor = LocalExecutor::new(config);
    let spec = executor.resolve(request, None).unwrap();
    executor.run(spec).await.unwrap()
}

/// The names `env` printed (lines after the first `--env--` line), sorted.
fn env_names(stdout: &str) -> Vec<String> {
    let mut names: Vec<String> = stdout
        .split_once("--env--\n")
        .expect("the command printed its environment")
        .1
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name.to_owned()))
        .collect();
    names.sort();
    names
}

fn path() -> String {
    std::env::var("PATH").unwrap()
}

/// A start-up file that leaves a marker when bash sources it.
fn hook(dir: &Path) -> (String, std::path::PathBuf) {
    let marker = dir.join("start-up-file-ran");
    let hook = dir.join("hook.sh");
    std::fs::write(&hook, format!("touch '{}'\n", marker.display())).unwrap();
    (hook.display().to_string(), marker)
}

#[tokio::test]
async fn the_default_policy_keeps_every_planted_credential_and_start_up_hook_from_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let (hook, marker) = hook(dir.path());
    let parent = [
        ("PATH", path()),
        ("HOME", "/home/someone".to_owned()),
        ("GIT_AUTHOR_NAME", "Someone".to_owned()),
        ("TOKENIZERS_PARALLELISM", "false".to_owned()),
        ("AZURE_OPENAI_KEY", "planted".to_owned()),
        ("OPENAI_KEY", "planted".to_owned()),
        ("STRIPE_KEY", "planted".to_owned()),
        ("GITHUB_PAT", "planted".to_owned()),
        ("MYSQL_PWD", "planted".to_owned()),
        ("DATABASE_URL", "postgres://u:p@h/db".to_owned()),
        ("SENTRY_DSN", "https://abc@o1.ingest.sentry.io/1".to_owned()),
        ("NETRC", "/home/someone/.netrc".to_owned()),
        ("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock".to_owned()),
        ("XAUTHORITY", "/home/someone/.Xauthority".to_owned()),
        ("OPENAI_API_KEYS", "planted".to_owned()),
        ("GITHUB_TOKENS", "planted".to_owned()),
        ("APP_SECRETS", "planted".to_owned()),
        ("DB_PASSWORDS", "planted".to_owned()),
        ("SUPABASE_JWT", "planted".to_owned()),
        ("DB_PW", "planted".to_owned()),
        ("STRIPE_SK", "planted".to_owned()),
        (
            "ALERTS",
            "https://hooks.slack.com/services/T000/B000/XXXX".to_owned(),
        ),
        (
            "NOTIFY_URL",
            "https://discord.com/api/webhooks/123/planted".to_owned(),
        ),
        ("BASH_ENV", hook.clone()),
        ("ENV", hook.clone()),
        (
            "BASH_FUNC_echo%%",
            "() {  builtin echo hijacked; }".to_owned(),
        ),
        ("PROMPT_COMMAND", "echo prompt-ran".to_owned()),
        ("SHELLOPTS", "xtrace".to_owned()),
        ("BASHOPTS", "failglob".to_owned()),
        ("PS4", "$(touch /nonexistent/ps4)+ ".to_owned()),
        ("CDPATH", "/".to_owned()),
        ("GLOBIGNORE", "*".to_owned()),
        ("IFS", "x".to_owned()),
        // POSIX mode changes how bash runs the command; `EXECIGNORE` changes which programs
        // its command search finds.
        ("POSIXLY_CORRECT", "1".to_owned()),
        ("EXECIGNORE", "*/env".to_owned()),
        ("DSH_CALL_ID", "stale".to_owned()),
    ];
    let policy = EnvPolicy::new()
        .parent_env(parent)
        .set("BASH_ENV", hook.clone());
    let mut request = ShellRequest::new("echo visible; echo --env--; env");
    request.env = BTreeMap::from([
        ("BASH_ENV".to_owned(), hook.clone()),
        ("EXTRA".to_owned(), "yes".to_owned()),
    ]);
    request.managed = ManagedEnv {
        session_id: Some("s1".into()),
        call_id: Some("c1".into()),
    };
    let result = run(policy, request).await;

    assert_eq!(result.stderr.text, "", "no trace, no start-up error");
    assert!(
        result.stdout.text.starts_with("visible\n"),
        "{}",
        result.stdout.text
    );
    assert_eq!(
        env_names(&result.stdout.text),
        [
            "DSH_CALL_ID",
            "DSH_SESSION_ID",
            "EXTRA",
            "GIT_AUTHOR_NAME",
            "GIT_PAGER",
            "GIT_TERMINAL_PROMPT",
            "HOME",
            "NO_COLOR",
            "PAGER",
            "PATH",
            // bash exports `PWD`, `SHLVL` and `_` itself.
            "PWD",
            "SHLVL",
            "TERM",
            "TOKENIZERS_PARALLELISM",
            "_",
        ]
    );
    assert!(
        !marker.exists(),
        "bash sourced the BASH_ENV/ENV file before the command"
    );
}

#[tokio::test]
async fn core_mode_gives_a_command_only_the_core_variables_and_what_is_set() {
    let policy = EnvPolicy::new()
        .inherit(EnvInherit::Core)
        .exclude("tz")
        .set("SSH_AUTH_SOCK", "/run/deliberate.sock")
        .parent_env([
            ("PATH", path()),
            ("HOME", "/home/someone".to_owned()),
            ("LC_ALL", "C".to_owned()),
            ("TZ", "UTC".to_owned()),
            ("EDITOR", "vi".to_owned()),
            ("SSH_AUTH_SOCK", "/tmp/ambient.sock".to_owned()),
        ]);
    let result = run(
        policy,
        ShellRequest::new("echo \"sock=$SSH_AUTH_SOCK\"; echo --env--; env"),
    )
    .await;
    assert!(
        result
            .stdout
            .text
            .starts_with("sock=/run/deliberate.sock\n"),
        "{}",
        result.stdout.text
    );
    assert_eq!(
        env_names(&result.stdout.text),
        [
            "GIT_PAGER",
            "GIT_TERMINAL_PROMPT",
            "HOME",
            "LC_ALL",
            "NO_COLOR",
            "PAGER",
            "PATH",
            "PWD",
            "SHLVL",
            "SSH_AUTH_SOCK",
            "TERM",
            "_",
        ]
    );
}

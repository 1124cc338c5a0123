//! Credentials and shell start-up hooks in the harness's own environment never reach a command
//! run with the default [`EnvPolicy`](tool_bash::EnvPolicy). This file holds one test on
//! purpose: it plants variables in the process environment, which is only sound while no other
//! thread reads the environment. Every other policy test passes its parent environment through
//! `EnvPolicy::parent_env` instead (`tests/env_policy.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pretty_assertions::assert_eq;
use std::collections::BTreeMap;
use tool_bash::local::LocalExecutor;
use tool_bash::shell::{ManagedEnv, ShellExecutor, ShellRequest};

/// Variables a hostile environment holds, none of which may reach a command.
const PLANTED: &[(&str, &str)] = &[
    ("FOO_API_KEY", "sk-planted-secret"),
    ("AZURE_OPENAI_KEY", "planted"),
    ("OPENAI_KEY", "planted"),
    ("STRIPE_KEY", "planted"),
    ("GITHUB_PAT", "planted"),
    ("MYSQL_PWD", "planted"),
    ("DATABASE_URL", "postgres://u:p@h/db"),
    ("SENTRY_DSN", "https://abc@o1.ingest.sentry.io/1"),
    ("NETRC", "/home/someone/.netrc"),
    ("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock"),
    ("PROMPT_COMMAND", "echo prompt-hook-ran"),
];

#[test]
fn planted_credentials_and_start_up_hooks_are_invisible_and_managed_facts_cannot_be_overridden() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("bash-env-ran");
    let hook = dir.path().join("hook.sh");
    std::fs::write(&hook, format!("touch '{}'\n", marker.display())).unwrap();
    // SAFETY: this binary runs this single test, and the runtime (the only other thread user)
    // is created after the variables are set.
    #[allow(unsafe_code)]
    unsafe {
        for (name, value) in PLANTED {
            std::env::set_var(name, value);
        }
        std::env::set_var("BASH_ENV", &hook);
        std::env::set_var("ENV", &hook);
        std::env::set_var("DSH_CALL_ID", "stale-ambient-value");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let executor = LocalExecutor::default();
        let mut request = ShellRequest::new(
            "echo \"session=$DSH_SESSION_ID call=${DSH_CALL_ID:-unset} term=$TERM pager=$PAGER extra=$EXTRA\"; env",
        );
        request.env = BTreeMap::from([
            ("DSH_SESSION_ID".to_owned(), "forged".to_owned()),
            ("EXTRA".to_owned(), "yes".to_owned()),
            ("BASH_ENV".to_owned(), hook.display().to_string()),
        ]);
        request.managed = ManagedEnv {
            session_id: Some("s1".into()),
            call_id: None,
        };
        let spec = executor.resolve(request, None).unwrap();
        let result = executor.run(spec).await.unwrap();
        let mut lines = result.stdout.text.lines();
        assert_eq!(
            lines.next(),
            Some("session=s1 call=unset term=dumb pager=cat extra=yes")
        );
        let leaked: Vec<&str> = lines
            .filter_map(|line| line.split_once('=').map(|(name, _)| name))
            .filter(|name| {
                PLANTED.iter().any(|(planted, _)| planted == name)
                    || ["BASH_ENV", "ENV", "DSH_CALL_ID"].contains(name)
            })
            .collect();
        assert_eq!(leaked, Vec::<&str>::new());
        assert!(
            !marker.exists(),
            "bash ran the BASH_ENV/ENV start-up file before the command"
        );
    });
}

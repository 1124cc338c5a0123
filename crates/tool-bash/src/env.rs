//! The child environment: the parent's, with credentials scrubbed, then the caller's entries,
//! then non-interactive defaults, then the managed `DSH_*` facts (which nothing overrides).

use crate::shell::ManagedEnv;
use std::collections::BTreeMap;
use std::ffi::OsString;

/// Exact variable names that are always scrubbed (compared upper-cased).
pub const SCRUBBED_NAMES: &[&str] = &[
    "API_KEY",
    "APIKEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
    "NPM_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
];

/// Name suffixes that mark a credential (`OPENAI_API_KEY`, `SLACK_BOT_TOKEN`, …).
pub const SCRUBBED_SUFFIXES: &[&str] = &[
    "_API_KEY",
    "_APIKEY",
    "_TOKEN",
    "_ACCESS_KEY",
    "_SECRET_KEY",
    "_PRIVATE_KEY",
    "_CREDENTIALS",
];

/// Name fragments that mark a credential anywhere in the name.
pub const SCRUBBED_FRAGMENTS: &[&str] = &["SECRET", "PASSWORD", "PASSWD"];

/// Non-interactive defaults, so a command never waits on a pager, a prompt or a colour-aware
/// terminal.
pub const NON_INTERACTIVE: &[(&str, &str)] = &[
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// Whether a variable name looks like a credential.
pub fn is_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SCRUBBED_NAMES.contains(&upper.as_str())
        || SCRUBBED_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || SCRUBBED_FRAGMENTS.iter().any(|f| upper.contains(f))
}

fn is_managed(name: &str) -> bool {
    name.get(..4)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("DSH_"))
}

/// Builds the child environment from `parent` (usually `std::env::vars_os()`).
pub fn child_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    caller: &BTreeMap<String, String>,
    managed: &ManagedEnv,
) -> Vec<(OsString, OsString)> {
    let mut env: BTreeMap<OsString, OsString> = parent
        .into_iter()
        .filter(|(name, _)| {
            let name = name.to_string_lossy();
            !is_credential(&name) && !is_managed(&name)
        })
        .collect();
    for (name, value) in caller {
        if !is_managed(name) {
            env.insert(name.into(), value.into());
        }
    }
    for (name, value) in NON_INTERACTIVE {
        env.insert((*name).into(), (*value).into());
    }
    for (name, value) in managed.vars() {
        env.insert(name.into(), value.into());
    }
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_recognised() {
        for name in [
            "FOO_API_KEY",
            "openai_api_key",
            "GITHUB_TOKEN",
            "SLACK_BOT_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "DB_PASSWORD",
            "MY_SECRET_THING",
            "SSH_PRIVATE_KEY",
        ] {
            assert!(is_credential(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "SSH_AUTH_SOCK",
            "AWS_REGION",
            "TOKENIZERS_PARALLELISM",
        ] {
            assert!(!is_credential(name), "{name}");
        }
    }

    #[test]
    fn managed_facts_win_and_ambient_ones_are_dropped() {
        let parent = vec![
            ("PATH".into(), "/bin".into()),
            ("FOO_API_KEY".into(), "sk-123".into()),
            ("DSH_CALL_ID".into(), "stale".into()),
            ("TERM".into(), "xterm".into()),
        ];
        let caller = BTreeMap::from([
            ("DSH_SESSION_ID".to_owned(), "forged".to_owned()),
            ("EXTRA".to_owned(), "1".to_owned()),
        ]);
        let managed = ManagedEnv {
            session_id: Some("s1".into()),
            call_id: None,
        };
        let env: BTreeMap<String, String> = child_env(parent, &caller, &managed)
            .into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect();
        assert_eq!(env.get("DSH_SESSION_ID").map(String::as_str), Some("s1"));
        assert!(!env.contains_key("DSH_CALL_ID"));
        assert!(!env.contains_key("FOO_API_KEY"));
        assert_eq!(env.get("TERM").map(String::as_str), Some("dumb"));
        assert_eq!(env.get("EXTRA").map(String::as_str), Some("1"));
        assert_eq!(env.get("PATH").map(String::as_str), Some("/bin"));
    }
}

//! Unit tests of the `env` module.

#![allow(clippy::unwrap_used)]
use super::*;
use pretty_assertions::assert_eq;

fn glob(pattern: &str) -> Glob {
    Glob::new(pattern.to_owned())
}

fn upper(name: &str) -> String {
    name.to_ascii_uppercase()
}

/// Why the default policy keeps `name=value` from commands, if it does.
fn default_rule(name: &str, value: &str) -> Option<Withheld> {
    EnvPolicy::default().withholds(OsStr::new(name), OsStr::new(value))
}

/// Every default exclude pattern, with a name it must drop and a near miss it must keep.
const DEFAULT_EXCLUDE_CASES: &[(&str, &str, &str)] = &[
    ("*KEY", "AZURE_OPENAI_KEY", "KEYTIMEOUT"),
    ("*KEY_*", "AWS_ACCESS_KEY_ID", "KEYMAP_FILE"),
    ("*_KEYS", "OPENAI_API_KEYS", "HOTKEYS"),
    ("*_KEYS_*", "SSH_KEYS_DIR", "KEYSTORE_TYPE"),
    ("*SECRET*", "client_secret", "SECURITY_LEVEL"),
    ("*TOKEN", "GITHUB_TOKEN", "TOKENIZERS_PARALLELISM"),
    ("*TOKEN_*", "HF_TOKEN_PATH", "TOKENIZER_DIR"),
    ("*_TOKENS", "GITHUB_TOKENS", "TOKENS"),
    ("*_TOKENS_*", "HF_TOKENS_FILE", "TOKENSERVER_URL"),
    ("*PASSWORD*", "PGPASSWORD", "PASSWORT"),
    ("*PASSWD*", "LDAP_PASSWD", "PASSED_TESTS"),
    ("*PASSPHRASE*", "GPG_PASSPHRASE", "PHRASEBOOK"),
    ("PASS", "pass", "PASSES"),
    ("PASS_*", "PASS_FILE", "PASSAGE_DIR"),
    ("*_PASS", "DB_PASS", "BYPASS"),
    ("*_PASS_*", "SMTP_PASS_FILE", "COMPASS_HOME"),
    ("*_PWD*", "MYSQL_PWD", "OLDPWD"),
    ("PWD?*", "PWD_FILE", "PWD"),
    ("*_PW", "DB_PW", "PWM_CHIP"),
    ("*_PW_*", "SMTP_PW_FILE", "PW_TEST_HTML_REPORT_OPEN"),
    (
        "*CREDENTIAL*",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "CREDIT_LIMIT",
    ),
    ("*AUTH", "BASIC_AUTH", "GIT_AUTHOR_NAME"),
    ("*AUTH[!O]*", "SSH_AUTH_SOCK", "GIT_AUTHOR_EMAIL"),
    ("*AUTHOR[!_]*", "XAUTHORITY", "GIT_AUTHOR_DATE"),
    ("PAT", "PAT", "PATH"),
    ("PAT_*", "PAT_FILE", "PATCH_LEVEL"),
    ("*_PAT", "GITHUB_PAT", "MANPATH"),
    ("*_PAT_*", "GH_PAT_READONLY", "PYTHONPATH"),
    ("*_SK", "STRIPE_SK", "RAM_DISK"),
    ("*_SK_*", "STRIPE_SK_LIVE", "SKIP_TESTS"),
    ("*JWT*", "SUPABASE_JWT", "JWKS_URL"),
    ("*PRIVATE*", "SSH_PRIVATE_FILE", "PRIVILEGED"),
    ("*DSN*", "SENTRY_DSN", "DNS_SERVER"),
    ("*COOKIE*", "COOKIE_JAR", "COOKBOOK_DIR"),
    ("*SESSION*", "DBUS_SESSION_BUS_ADDRESS", "SESS_DIR"),
    ("*NETRC*", "NETRC", "NET_RC"),
    ("*ASKPASS*", "GIT_ASKPASS", "ASK_TIMEOUT"),
    ("*PGPASS*", "PGPASSFILE", "PGHOST"),
];

#[test]
fn every_default_exclude_drops_its_case_and_keeps_its_near_miss() {
    let covered: Vec<&str> = DEFAULT_EXCLUDE_CASES.iter().map(|c| c.0).collect();
    assert_eq!(
        covered, DEFAULT_EXCLUDES,
        "one case per default pattern, in order"
    );
    for (pattern, dropped, kept) in DEFAULT_EXCLUDE_CASES {
        assert!(
            glob(pattern).matches(&upper(dropped)),
            "{pattern} ~ {dropped}"
        );
        assert!(!glob(pattern).matches(&upper(kept)), "{pattern} !~ {kept}");
        assert_eq!(
            default_rule(dropped, "v"),
            Some(Withheld::DefaultExclude(
                DEFAULT_EXCLUDES
                    .iter()
                    .find(|p| glob(p).matches(&upper(dropped)))
                    .map(|p| (*p).to_owned())
                    .unwrap()
            )),
            "{dropped}"
        );
        assert_eq!(default_rule(kept, "v"), None, "{kept} must be kept");
    }
}

#[test]
fn the_issue_list_is_dropped_by_the_default_policy() {
    for name in [
        "AZURE_OPENAI_KEY",
        "OPENAI_KEY",
        "STRIPE_KEY",
        "GITHUB_PAT",
        "MYSQL_PWD",
        "SENTRY_DSN",
        "NETRC",
        "SSH_AUTH_SOCK",
        "XAUTHORITY",
        "FOO_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "NPM_TOKEN",
        // Plurals, and the short and token-format names of issue 31.
        "OPENAI_API_KEYS",
        "GITHUB_TOKENS",
        "APP_SECRETS",
        "DB_PASSWORDS",
        "AUTH_JWT",
        "DB_PW",
        "STRIPE_SK",
    ] {
        assert!(
            matches!(default_rule(name, "v"), Some(Withheld::DefaultExclude(_))),
            "{name}"
        );
    }
    for name in ["PATH", "HOME", "LANG", "AWS_REGION", "EDITOR", "CARGO_HOME"] {
        assert_eq!(default_rule(name, "/usr/bin"), None, "{name}");
    }
}

#[test]
fn every_start_up_variable_is_dropped_from_every_layer() {
    let names = [
        "BASH_ENV",
        "ENV",
        "BASH_FUNC_ls%%",
        "PROMPT_COMMAND",
        "PS4",
        "SHELLOPTS",
        "BASHOPTS",
        "CDPATH",
        "GLOBIGNORE",
        "IFS",
        "POSIXLY_CORRECT",
        "EXECIGNORE",
    ];
    assert_eq!(names.len(), START_UP_VARS.len());
    for (name, pattern) in names.iter().zip(START_UP_VARS) {
        assert!(glob(pattern).matches(&upper(name)), "{pattern} ~ {name}");
    }
    // Even with nothing excluded by default, every layer drops them.
    let mut policy = EnvPolicy::new().ignore_default_excludes(true);
    for name in names {
        policy = policy.set(name, "from-set");
    }
    let policy = policy.parent_env(names.map(|n| (n, "inherited")));
    let caller: BTreeMap<String, String> = names
        .iter()
        .map(|n| ((*n).to_owned(), "from-caller".to_owned()))
        .collect();
    let env = child_env(&policy, &caller, &ManagedEnv::default());
    let names_left: Vec<OsString> = env.into_iter().map(|(name, _)| name).collect();
    let defaults: Vec<OsString> = {
        let mut d: Vec<OsString> = NON_INTERACTIVE.iter().map(|(n, _)| n.into()).collect();
        d.sort();
        d
    };
    assert_eq!(names_left, defaults);
    // Near misses survive: names that merely contain a start-up name.
    for name in [
        "ENVIRONMENT",
        "MY_BASH_ENV",
        "BASH_FUNCTIONS",
        "PS1",
        "IFS_MODE",
        "POSIXLY",
        "EXECIGNORE_FILE",
    ] {
        assert_eq!(default_rule(name, "v"), None, "{name}");
    }
}

#[test]
fn urls_with_a_password_are_dropped_whatever_the_name() {
    for value in [
        "postgres://u:p@h/db",
        "redis://:secret@cache:6379",
        "https://mirror.example https://ci:tok@private.example/simple",
        "mysql+pymysql://root:hunter2@db",
        "amqp://guest:guest@rabbit?heartbeat=30",
    ] {
        assert_eq!(
            default_rule("DATABASE_URL", value),
            Some(Withheld::UrlWithPassword),
            "{value}"
        );
    }
    for value in [
        "postgres://h/db",
        "https://user@host/path",
        "ssh://git@github.com/o/r",
        "https://host/a:b@c",
        "https://u:@host",
        "://u:p@h",
        "user:password@host",
    ] {
        assert_eq!(default_rule("DATABASE_URL", value), None, "{value}");
    }
    let ignoring = EnvPolicy::new().ignore_default_excludes(true);
    assert_eq!(
        ignoring.withholds(
            OsStr::new("DATABASE_URL"),
            OsStr::new("postgres://u:p@h/db")
        ),
        None,
        "the URL rule is one of the defaults"
    );
}

#[test]
fn webhook_urls_are_dropped_whatever_the_name() {
    let dropped = [
        "https://hooks.slack.com/services/T000/B000/XXXX",
        "https://discord.com/api/webhooks/123/token",
        "https://discordapp.com/api/webhooks/123/token?wait=true",
        "https://acme.webhook.office.com/webhookb2/a@b/IncomingWebhook/c/d",
        "https://chat.example.com/hooks/abc123",
        "https://hooks.zapier.com/hooks/catch/1/abc/",
        "https://webhook.site/0c1f",
        "alerts: HTTPS://HOOKS.SLACK.COM/services/T/B/X (ops)",
        "https://ci:8080/hooks/x",
    ];
    let kept = [
        "https://hooks.slack.com",
        "https://hooks.slack.com/",
        "https://example.com/hooks",
        "https://example.com/hooks/",
        "https://example.com/githooks/pre-commit",
        "https://slack.com/services/T000",
        "https://example.com/docs?page=webhooks/x",
        "/srv/git/hooks/pre-commit",
        "://hooks.slack.com/services/T/B/X",
    ];
    let rule = |value: &str| default_rule("NOTIFY", value);
    assert_eq!(
        dropped.map(rule),
        dropped.map(|_| Some(Withheld::WebhookUrl))
    );
    assert_eq!(kept.map(rule), kept.map(|_| None));
    let ignoring = EnvPolicy::new().ignore_default_excludes(true);
    assert_eq!(
        ignoring.withholds(OsStr::new("NOTIFY"), OsStr::new(dropped[0])),
        None,
        "the webhook rule is one of the defaults"
    );
}

fn names(env: BTreeMap<OsString, OsString>) -> Vec<String> {
    env.into_keys()
        .map(|name| name.into_string().unwrap())
        .collect()
}

const PARENT: &[(&str, &str)] = &[
    ("PATH", "/bin"),
    ("HOME", "/home/u"),
    ("LC_TIME", "C"),
    ("TZ", "UTC"),
    ("EDITOR", "vi"),
    ("CARGO_HOME", "/c"),
    ("OPENAI_KEY", "sk"),
    ("DSH_CALL_ID", "stale"),
    ("BASH_ENV", "/x"),
];

#[test]
fn each_inherit_mode_keeps_what_it_says() {
    let cases = [
        (
            EnvInherit::All,
            vec!["CARGO_HOME", "EDITOR", "HOME", "LC_TIME", "PATH", "TZ"],
        ),
        (EnvInherit::Core, vec!["HOME", "LC_TIME", "PATH", "TZ"]),
        (EnvInherit::None, vec![]),
    ];
    for (mode, expected) in cases {
        let env = EnvPolicy::new().inherit(mode).inherited(PARENT.to_vec());
        assert_eq!(names(env), expected, "{mode:?}");
    }
    let core = EnvPolicy::new().inherit(EnvInherit::Core);
    for name in [
        "USER", "logname", "USERNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL",
    ] {
        assert_eq!(
            core.withholds(OsStr::new(name), OsStr::new("v")),
            None,
            "{name}"
        );
    }
    for name in ["EDITOR", "XDG_RUNTIME_DIR", "LCX", "DISPLAY"] {
        assert_eq!(
            core.withholds(OsStr::new(name), OsStr::new("v")),
            Some(Withheld::NotInherited),
            "{name}"
        );
    }
}

#[test]
fn excludes_include_only_and_set_apply_in_order() {
    let policy = EnvPolicy::new()
        .exclude("cargo_*")
        .include_only("P*")
        .include_only("[ce]*")
        .set("OPENAI_KEY", "deliberately-given")
        .set("ZED", "set-after-include-only")
        .set("BASH_ENV", "/never")
        .set("DSH_SESSION_ID", "forged");
    let env = policy.inherited(PARENT.to_vec());
    assert_eq!(
        env.into_iter()
            .map(|(n, v)| (n.into_string().unwrap(), v.into_string().unwrap()))
            .collect::<Vec<_>>(),
        [
            ("EDITOR", "vi"),
            ("OPENAI_KEY", "deliberately-given"),
            ("PATH", "/bin"),
            ("ZED", "set-after-include-only"),
        ]
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
    );
    assert_eq!(
        policy.withholds(OsStr::new("CARGO_HOME"), OsStr::new("/c")),
        Some(Withheld::Exclude("cargo_*".to_owned()))
    );
    assert_eq!(
        policy.withholds(OsStr::new("HOME"), OsStr::new("/h")),
        Some(Withheld::NotIncluded)
    );
    let ignoring = EnvPolicy::new().ignore_default_excludes(true);
    assert_eq!(
        names(ignoring.inherited(PARENT.to_vec())),
        [
            "CARGO_HOME",
            "EDITOR",
            "HOME",
            "LC_TIME",
            "OPENAI_KEY",
            "PATH",
            "TZ"
        ]
    );
}

#[test]
fn the_memo_follows_the_parent_and_the_configuration() {
    let policy = EnvPolicy::new();
    assert_eq!(names(policy.inherited(PARENT.to_vec())).len(), 6);
    // Same policy, another parent: filtered afresh.
    assert_eq!(
        names(policy.inherited([("EDITOR", "vi"), ("GH_TOKEN", "t")])),
        ["EDITOR"]
    );
    // A clone reconfigured after use does not answer from the original's memo.
    let reconfigured = policy.clone().exclude("EDITOR");
    assert_eq!(
        names(reconfigured.inherited([("EDITOR", "vi"), ("GH_TOKEN", "t")])),
        Vec::<String>::new()
    );
    assert_eq!(
        names(policy.inherited([("EDITOR", "vi"), ("GH_TOKEN", "t")])),
        ["EDITOR"]
    );
}

#[test]
fn globs_follow_the_documented_syntax() {
    let cases: &[(&str, &str, bool)] = &[
        ("PATH", "path", true),
        ("PATH", "PATHS", false),
        ("*", "", true),
        ("?", "", false),
        ("A?C", "ABC", true),
        ("A*C", "AC", true),
        ("A*C", "ABXC", true),
        ("A*C", "ABXCD", false),
        ("*A*B*", "XAYBZ", true),
        ("[a-c]X", "BX", true),
        ("[a-c]X", "DX", false),
        ("[!a-c]X", "DX", true),
        ("[^A]", "A", false),
        ("[]]", "]", true),
        ("[", "[", true),
        ("[AB", "[AB", true),
        ("A[-]B", "A-B", true),
        ("?X", "ÄX", true),
        ("?X", "ÄÄX", false),
        ("é*", "éTÉ", true),
    ];
    for (pattern, name, expected) in cases {
        assert_eq!(
            glob(pattern).matches(&upper(name)),
            *expected,
            "{pattern} vs {name}"
        );
    }
}

#[test]
fn fast_shapes_agree_with_the_token_matcher() {
    let shapes = [
        ("PAT", Shape::Exact("PAT".to_owned())),
        ("lc_*", Shape::Prefix("LC_".to_owned())),
        ("*_PAT", Shape::Suffix("_PAT".to_owned())),
        ("*KEY_*", Shape::Contains("KEY_".to_owned())),
        ("*AUTH[!O]*", Shape::General),
        ("PWD?*", Shape::General),
        ("**X", Shape::General),
    ];
    for (pattern, shape) in shapes {
        assert_eq!(glob(pattern).shape, shape, "{pattern}");
    }
    let names = [
        "",
        "PAT",
        "PATH",
        "GITHUB_PAT",
        "LC_ALL",
        "KEY_",
        "XKEY_Y",
        "OPENAI_KEY",
        "PWD",
        "PWDX",
        "SSH_AUTH_SOCK",
        "AUTHOR",
        "X",
        "XX",
        "ÉTÉ",
    ];
    let patterns = DEFAULT_EXCLUDES
        .iter()
        .chain(CORE_VARS)
        .chain(START_UP_VARS)
        .chain(&["*", "", "**X", "X*X"]);
    for pattern in patterns {
        let glob = glob(pattern);
        for name in names {
            let chars: Vec<char> = upper(name).chars().collect();
            assert_eq!(
                glob.matches(&upper(name)),
                glob.matches_tokens(&chars, |c| c),
                "{pattern} vs {name}"
            );
        }
    }
}

#[test]
fn managed_facts_win_and_ambient_ones_are_dropped() {
    let policy = EnvPolicy::new().parent_env([
        ("PATH", "/bin"),
        ("FOO_API_KEY", "sk-123"),
        ("DSH_CALL_ID", "stale"),
        ("TERM", "xterm"),
    ]);
    let caller = BTreeMap::from([
        ("DSH_SESSION_ID".to_owned(), "forged".to_owned()),
        ("EXTRA".to_owned(), "1".to_owned()),
        ("BASH_ENV".to_owned(), "/injected".to_owned()),
    ]);
    let managed = ManagedEnv {
        session_id: Some("s1".into()),
        call_id: None,
    };
    let env: BTreeMap<String, String> = child_env(&policy, &caller, &managed)
        .into_iter()
        .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
        .collect();
    let expected: BTreeMap<String, String> = [
        ("DSH_SESSION_ID", "s1"),
        ("EXTRA", "1"),
        ("GIT_PAGER", "cat"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("NO_COLOR", "1"),
        ("PAGER", "cat"),
        ("PATH", "/bin"),
        ("TERM", "dumb"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(env, expected);
}

#[test]
fn debug_output_names_no_values() {
    let policy = EnvPolicy::new()
        .set("TOKEN_FOR_TOOL", "sk-visible?")
        .parent_env([("A", "parent-secret")]);
    let shown = format!("{policy:?}");
    assert!(!shown.contains("sk-visible?"), "{shown}");
    assert!(!shown.contains("parent-secret"), "{shown}");
    assert!(shown.contains("TOKEN_FOR_TOOL"), "{shown}");
}

//! The child environment and the [`EnvPolicy`] that decides it.
//!
//! A command's environment is built in four layers, each overriding the one before:
//!
//! 1. the parent's variables (the harness's own, or [`EnvPolicy::parent_env`]) filtered by the
//!    policy, then the policy's explicit [`set`](EnvPolicy::set) entries;
//! 2. the caller's per-request entries ([`ShellRequest::env`](crate::shell::ShellRequest::env));
//! 3. the non-interactive defaults ([`NON_INTERACTIVE`]);
//! 4. the managed `DSH_*` facts, which nothing overrides: any other `DSH_*` entry, inherited,
//!    `set` or per-request, is dropped.
//!
//! Shell start-up variables ([`START_UP_VARS`]: `BASH_ENV`, `ENV`, `BASH_FUNC_*`, …) make bash
//! run code or change how it parses before the command's first line, so they are dropped from
//! every layer, including `set` and the caller's entries: no configuration and no request can
//! hand a command a start-up file.
//!
//! # Filtering the parent
//!
//! In this order, a variable is dropped when
//!
//! 1. it is a start-up variable or a `DSH_*` name;
//! 2. [`EnvInherit`] does not inherit it (`Core` keeps only [`CORE_VARS`], `None` nothing);
//! 3. unless [`ignore_default_excludes`](EnvPolicy::ignore_default_excludes) is set: its name
//!    matches one of [`DEFAULT_EXCLUDES`], or its value embeds a URL with a password
//!    (`scheme://user:password@`) or a webhook URL, whose path is its token (see below);
//! 4. its name matches one of the policy's own [`exclude`](EnvPolicy::exclude) patterns;
//! 5. [`include_only`](EnvPolicy::include_only) patterns are configured and its name matches
//!    none of them.
//!
//! The `set` entries are applied after all of this, so an explicitly set variable always
//! reaches the command (start-up and `DSH_*` names excepted), whatever the excludes and
//! `include_only` say. That is the way to hand one excluded variable, such as `SSH_AUTH_SOCK`,
//! to commands on purpose.
//!
//! # Patterns
//!
//! A pattern is a glob matched against the whole variable name, ASCII case-insensitively:
//! `*` matches any run of characters (also none), `?` exactly one character, `[abc]` one of the
//! listed characters, `[a-z]` one in the range, `[!abc]` (or `[^abc]`) one character not
//! listed; every other character matches itself. A `[` without a closing `]` is an ordinary
//! character, so every string is a valid pattern. Word boundaries are spelled with `_`: the
//! default rule for `PAT` is the four globs `PAT`, `PAT_*`, `*_PAT` and `*_PAT_*`, so
//! `GITHUB_PAT` is dropped and `PATH` is not.
//!
//! # URLs with a password
//!
//! A value is dropped when, anywhere in it, a `://` preceded by a scheme character (an ASCII
//! letter or digit, `+`, `-` or `.`) starts an authority (everything up to the next `/`, `?`,
//! `#`, whitespace or the end of the value) that holds an `@` whose user information before it
//! has a `:` followed by a non-empty password: `postgres://u:p@h/db` and `redis://:p@h` are
//! dropped; `https://user@host` (no password) and `https://host/a:b@c` (the `@` is in the path)
//! are kept. Every `://` in the value is checked, so a list of URLs is covered.
//!
//! # Webhook URLs
//!
//! A webhook URL is its own credential: whoever has it can post as the integration, and the
//! token is in its path (`https://hooks.slack.com/services/T…/B…/…`,
//! `https://discord.com/api/webhooks/ID/TOKEN`). Among the same URLs as above, a value is
//! dropped when one has a path with a non-empty segment and either its host's first label is
//! `hooks` or starts with `webhook` (`hooks.slack.com`, `hooks.zapier.com`, `webhook.site`),
//! or a segment of its path is `hooks` or starts with `webhook` (`webhooks`, `webhookb2`) and
//! another segment follows it (Discord, Mattermost's `/hooks/ID`, Microsoft Teams'
//! `/webhookb2/…`), compared ASCII case-insensitively. `https://hooks.slack.com/` and
//! `https://example.com/hooks` (no token) and `https://example.com/githooks/x` are kept.

mod values;

use crate::shell::ManagedEnv;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::sync::{LazyLock, Mutex, PoisonError};
use values::{embeds_url_password, embeds_webhook_url};

/// Non-interactive defaults, so a command never waits on a pager, a prompt or a colour-aware
/// terminal.
pub const NON_INTERACTIVE: &[(&str, &str)] = &[
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// What [`EnvInherit::Core`] keeps (patterns): the variables a command needs to find programs,
/// its home and its temporary directory, to know who runs it, and to read and write text in
/// the user's language and time zone. `USERNAME` is what some tools read instead of `USER`,
/// `LANGUAGE` is gettext's companion of `LANG`, and `TMP`/`TEMP` are the temporary-directory
/// names tools ported from other systems look for; none of them carries a credential or an
/// access path to a running service. `TERM` is inherited for completeness only: the
/// non-interactive defaults set it to `dumb`.
pub const CORE_VARS: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "USERNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM",
    "TMPDIR", "TMP", "TEMP", "TZ",
];

/// The default exclude patterns (see the module docs for the pattern syntax). Together they
/// drop names that hold a credential or point at one:
///
/// | rule | patterns | dropped, for example | kept, for example |
/// |---|---|---|---|
/// | `KEY` ending a word | `*KEY`, `*KEY_*` | `OPENAI_KEY`, `APIKEY`, `AWS_ACCESS_KEY_ID` | `KEYTIMEOUT`, `KEYMAP` |
/// | `KEYS` as a word after another | `*_KEYS`, `*_KEYS_*` | `OPENAI_API_KEYS`, `SSH_KEYS_DIR` | `HOTKEYS`, `KEYSTORE_TYPE` |
/// | `SECRET` anywhere (`SECRETS` too) | `*SECRET*` | `CLIENT_SECRET`, `APP_SECRETS` | `SECURITY_LEVEL` |
/// | `TOKEN` ending a word | `*TOKEN`, `*TOKEN_*` | `GITHUB_TOKEN`, `HF_TOKEN_PATH` | `TOKENIZERS_PARALLELISM` |
/// | `TOKENS` as a word after another | `*_TOKENS`, `*_TOKENS_*` | `GITHUB_TOKENS`, `HF_TOKENS_FILE`, also `MAX_TOKENS` | `TOKENS`, `TOKENSERVER_URL` |
/// | `PASSWORD`, `PASSWD`, `PASSPHRASE` anywhere (plurals too) | `*PASSWORD*`, `*PASSWD*`, `*PASSPHRASE*` | `PGPASSWORD`, `DB_PASSWORDS`, `LDAP_PASSWD`, `GPG_PASSPHRASE` | `PASSED_TESTS` |
/// | `PASS` as a word | `PASS`, `PASS_*`, `*_PASS`, `*_PASS_*` | `DB_PASS`, `SMTP_PASS_FILE` | `BYPASS`, `COMPASS_HOME` |
/// | `PWD`, except `PWD` and `OLDPWD` | `*_PWD*`, `PWD?*` | `MYSQL_PWD`, `PWD_FILE` | `PWD`, `OLDPWD` |
/// | `PW` as a word after another | `*_PW`, `*_PW_*` | `DB_PW`, `SMTP_PW_FILE` | `PWM_CHIP`, `PW_TEST_HTML_REPORT_OPEN` |
/// | `CREDENTIAL` anywhere | `*CREDENTIAL*` | `GOOGLE_APPLICATION_CREDENTIALS` | `CREDIT_LIMIT` |
/// | `AUTH`, except the word `AUTHOR` | `*AUTH`, `*AUTH[!O]*`, `*AUTHOR[!_]*` | `SSH_AUTH_SOCK`, `BASIC_AUTH`, `XAUTHORITY` | `GIT_AUTHOR_NAME` |
/// | `PAT` as a word | `PAT`, `PAT_*`, `*_PAT`, `*_PAT_*` | `GITHUB_PAT` | `PATH`, `MANPATH`, `PATCH_LEVEL` |
/// | `SK` (a secret key) as a word after another | `*_SK`, `*_SK_*` | `STRIPE_SK`, `STRIPE_SK_LIVE` | `RAM_DISK`, `SKIP_TESTS` |
/// | `JWT` anywhere | `*JWT*` | `SUPABASE_JWT`, `JWT_FILE` | `JWKS_URL` |
/// | `PRIVATE` anywhere | `*PRIVATE*` | `SSH_PRIVATE_KEY_FILE` | `PRIVILEGED` |
/// | `DSN` anywhere | `*DSN*` | `SENTRY_DSN` | `DNS_SERVER` |
/// | `COOKIE` anywhere | `*COOKIE*` | `COOKIE_JAR` | `COOKBOOK_DIR` |
/// | `SESSION` anywhere | `*SESSION*` | `AWS_SESSION_TOKEN`, `DBUS_SESSION_BUS_ADDRESS` | `SESS_DIR` |
/// | credential files and helpers | `*NETRC*`, `*ASKPASS*`, `*PGPASS*` | `NETRC`, `GIT_ASKPASS`, `PGPASSFILE` | `NET_RC`, `PGHOST` |
///
/// The last row names files and helper programs that hand out credentials (curl's and git's
/// `.netrc`, the askpass helpers an editor installs for git and ssh, PostgreSQL's password
/// file); a command that can read the variable can read the credential. The plural rules are
/// bound to a word (`_KEYS`, `_TOKENS`) so that `HOTKEYS` and `TOKENS` stay; a count named
/// like a list of tokens (`MAX_TOKENS`) is withheld with them, since its name cannot tell it
/// apart; [`EnvPolicy::set`] hands one over. `PW` and `SK` are too short to be words on their
/// own at the start of a name (`PW_TEST_*` is Playwright's, `SK_` many things), so only a
/// name that ends in them after another word, or has them between two, is dropped.
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "*KEY",
    "*KEY_*",
    "*_KEYS",
    "*_KEYS_*",
    "*SECRET*",
    "*TOKEN",
    "*TOKEN_*",
    "*_TOKENS",
    "*_TOKENS_*",
    "*PASSWORD*",
    "*PASSWD*",
    "*PASSPHRASE*",
    "PASS",
    "PASS_*",
    "*_PASS",
    "*_PASS_*",
    "*_PWD*",
    "PWD?*",
    "*_PW",
    "*_PW_*",
    "*CREDENTIAL*",
    "*AUTH",
    "*AUTH[!O]*",
    "*AUTHOR[!_]*",
    "PAT",
    "PAT_*",
    "*_PAT",
    "*_PAT_*",
    "*_SK",
    "*_SK_*",
    "*JWT*",
    "*PRIVATE*",
    "*DSN*",
    "*COOKIE*",
    "*SESSION*",
    "*NETRC*",
    "*ASKPASS*",
    "*PGPASS*",
];

/// Shell start-up variables (patterns), dropped from every layer. Each makes bash run code, or
/// change how it reads the command, before or around the command's own first line:
/// `BASH_ENV` (and `ENV` in POSIX mode) names a file bash sources first; `BASH_FUNC_*`
/// (exported functions, `BASH_FUNC_name%%`) defines functions that shadow commands;
/// `PROMPT_COMMAND` and `PS4` are expanded, command substitutions included, by interactive
/// prompts and by `set -x` tracing; `SHELLOPTS` and `BASHOPTS` switch options on at start-up;
/// `CDPATH` redirects `cd`; `GLOBIGNORE` changes what globs match; `IFS` changes word
/// splitting; `POSIXLY_CORRECT` puts bash in POSIX mode at start-up (as `SHELLOPTS=posix`
/// would); `EXECIGNORE` hides programs from command search, so another one of the same name
/// runs.
pub const START_UP_VARS: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "BASH_FUNC_*",
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

/// Which of the parent's variables a command inherits before the exclude rules run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum EnvInherit {
    /// Every variable (the default).
    #[default]
    All,
    /// Only [`CORE_VARS`].
    Core,
    /// None: the command sees only `set` entries, the caller's entries, the non-interactive
    /// defaults and the managed facts.
    None,
}

/// How the local executor builds a command's environment from the harness's, modelled on
/// codex's `shell_environment_policy` (see the [module docs](self) for the layers, the order
/// of the rules and the pattern syntax).
///
/// The default inherits everything except [`DEFAULT_EXCLUDES`], URLs with a password, webhook
/// URLs and the [`START_UP_VARS`]:
///
/// ```
/// use tool_bash::env::{EnvInherit, EnvPolicy};
///
/// let parent = [
///     ("PATH", "/usr/bin"),
///     ("HOSTNAME", "build-7"),
///     ("GITHUB_PAT", "ghp_x"),
///     ("DATABASE_URL", "postgres://app:hunter2@db/app"),
///     ("BASH_ENV", "/home/u/.bashrc"),
/// ];
/// let names = |policy: &EnvPolicy| -> Vec<String> {
///     let env = policy.inherited(parent);
///     env.keys().map(|name| name.to_string_lossy().into_owned()).collect()
/// };
/// assert_eq!(names(&EnvPolicy::default()), ["HOSTNAME", "PATH"]);
///
/// // Only the core variables, and a fixed locale.
/// let core = EnvPolicy::new()
///     .inherit(EnvInherit::Core)
///     .set("LC_ALL", "C.UTF-8");
/// assert_eq!(names(&core), ["LC_ALL", "PATH"]);
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct EnvPolicy {
    inherit: EnvInherit,
    ignore_default_excludes: bool,
    exclude: Vec<Glob>,
    include_only: Vec<Glob>,
    set: BTreeMap<String, String>,
    parent: Option<Vec<(OsString, OsString)>>,
    memo: Memo,
}

/// A parent environment and what the policy made of it. The harness's environment rarely
/// changes between spawns, and comparing it with the last one is several times cheaper than
/// matching every variable against every pattern again. A clone starts empty, and every
/// builder method empties it, so it never outlives the configuration that filled it.
#[derive(Default)]
struct Memo(Mutex<Option<(Vars, BTreeMap<OsString, OsString>)>>);

/// Environment variables in their original order.
type Vars = Vec<(OsString, OsString)>;

impl Clone for Memo {
    fn clone(&self) -> Memo {
        Memo::default()
    }
}

impl fmt::Debug for EnvPolicy {
    /// Names and patterns only: values (of `set` and of an explicit parent) may be secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvPolicy")
            .field("inherit", &self.inherit)
            .field("ignore_default_excludes", &self.ignore_default_excludes)
            .field("exclude", &self.exclude)
            .field("include_only", &self.include_only)
            .field("set", &self.set.keys().collect::<Vec<_>>())
            .field(
                "parent",
                &match &self.parent {
                    Some(vars) => format!("{} explicit variables", vars.len()),
                    None => "the process environment".to_owned(),
                },
            )
            .finish()
    }
}

impl EnvPolicy {
    /// The default policy.
    pub fn new() -> EnvPolicy {
        EnvPolicy::default()
    }

    /// Which variables are inherited at all (default [`EnvInherit::All`]).
    pub fn inherit(mut self, inherit: EnvInherit) -> EnvPolicy {
        self.memo = Memo::default();
        self.inherit = inherit;
        self
    }

    /// Whether [`DEFAULT_EXCLUDES`] and the URL rules (a password, a webhook) are skipped
    /// (default `false`). Start-up variables and `DSH_*` names are dropped regardless.
    pub fn ignore_default_excludes(mut self, ignore: bool) -> EnvPolicy {
        self.memo = Memo::default();
        self.ignore_default_excludes = ignore;
        self
    }

    /// Adds an exclude pattern: inherited variables whose name matches it are dropped.
    pub fn exclude(mut self, pattern: impl Into<String>) -> EnvPolicy {
        self.memo = Memo::default();
        self.exclude.push(Glob::new(pattern.into()));
        self
    }

    /// Adds an include-only pattern. Once there is at least one, an inherited variable survives
    /// only if its name matches one of them (`set` entries are applied afterwards regardless).
    pub fn include_only(mut self, pattern: impl Into<String>) -> EnvPolicy {
        self.memo = Memo::default();
        self.include_only.push(Glob::new(pattern.into()));
        self
    }

    /// Sets a variable for every command, after the parent has been filtered. It wins over an
    /// inherited value and loses to a caller's per-request entry; a start-up variable or a
    /// `DSH_*` name is ignored (with a warning).
    pub fn set(mut self, name: impl Into<String>, value: impl Into<String>) -> EnvPolicy {
        self.memo = Memo::default();
        let name = name.into();
        // Refused here, once, rather than at every spawn.
        match forbidden_everywhere(&name) {
            Some(rule) => tracing::warn!(name, %rule, "EnvPolicy::set entry ignored"),
            None => {
                self.set.insert(name, value.into());
            }
        }
        self
    }

    /// Filters these variables instead of the harness's own environment (read at every spawn
    /// when this is not called). A host that builds commands' environments from a snapshot or
    /// a configuration file passes it here; tests use it to avoid changing the process
    /// environment.
    pub fn parent_env<K, V>(mut self, vars: impl IntoIterator<Item = (K, V)>) -> EnvPolicy
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        self.memo = Memo::default();
        self.parent = Some(
            vars.into_iter()
                .map(|(name, value)| (name.into(), value.into()))
                .collect(),
        );
        self
    }

    /// The first layer for `parent`: its variables filtered by the policy, then the `set`
    /// entries (see the module docs for the rules and their order).
    pub fn inherited<K, V>(
        &self,
        parent: impl IntoIterator<Item = (K, V)>,
    ) -> BTreeMap<OsString, OsString>
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let parent: Vars = parent
            .into_iter()
            .map(|(name, value)| (name.into(), value.into()))
            .collect();
        let mut memo = self.memo.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((input, output)) = memo.as_ref()
            && *input == parent
        {
            return output.clone();
        }
        let output = self.filter(&parent);
        *memo = Some((parent, output.clone()));
        output
    }

    /// [`inherited`](EnvPolicy::inherited) without the memo.
    fn filter(&self, parent: &[(OsString, OsString)]) -> BTreeMap<OsString, OsString> {
        let mut env = BTreeMap::new();
        let trace = tracing::enabled!(tracing::Level::DEBUG);
        let mut withheld = Vec::new();
        for (name, value) in parent {
            match self.withholds(name, value) {
                Some(rule) if trace => {
                    withheld.push(format!("{} ({rule})", name.to_string_lossy()));
                }
                Some(_) => {}
                None => {
                    env.insert(name.clone(), value.clone());
                }
            }
        }
        if !withheld.is_empty() {
            // Names and rules only: the values are what is being kept away.
            tracing::debug!(?withheld, "environment variables withheld from commands");
        }
        for (name, value) in &self.set {
            env.insert(name.into(), value.into());
        }
        env
    }

    /// The rule that keeps an inherited variable from the command, if any.
    fn withholds(&self, name: &OsStr, value: &OsStr) -> Option<Withheld> {
        let name = name.to_string_lossy();
        let upper = name.to_ascii_uppercase();
        if let Some(rule) = forbidden_in_any_layer(&name, &upper) {
            return Some(rule);
        }
        let inherited = match self.inherit {
            EnvInherit::All => true,
            EnvInherit::Core => CORE.iter().any(|glob| glob.matches(&upper)),
            EnvInherit::None => false,
        };
        if !inherited {
            return Some(Withheld::NotInherited);
        }
        if !self.ignore_default_excludes {
            if let Some(glob) = DEFAULTS.iter().find(|glob| glob.matches(&upper)) {
                return Some(Withheld::DefaultExclude(glob.source.clone()));
            }
            let value = value.to_string_lossy();
            if embeds_url_password(&value) {
                return Some(Withheld::UrlWithPassword);
            }
            if embeds_webhook_url(&value) {
                return Some(Withheld::WebhookUrl);
            }
        }
        if let Some(glob) = self.exclude.iter().find(|glob| glob.matches(&upper)) {
            return Some(Withheld::Exclude(glob.source.clone()));
        }
        if !self.include_only.is_empty() && !self.include_only.iter().any(|g| g.matches(&upper)) {
            return Some(Withheld::NotIncluded);
        }
        None
    }
}

/// Whether the default policy withholds `name` (with `value`) from commands as a credential: a
/// name of the default excludes (`*_API_KEY`, `*TOKEN*`, `*SECRET*`, …) or a value that embeds a
/// URL with a password or a webhook's token. A host that keeps its own secrets out of reach
/// (`tool_bash::sandbox::withdraw_secrets`) takes these.
pub fn is_credential(name: &OsStr, value: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_ascii_uppercase();
    let value = value.to_string_lossy();
    DEFAULTS.iter().any(|glob| glob.matches(&upper))
        || embeds_url_password(&value)
        || embeds_webhook_url(&value)
}

/// Why a variable was kept from a command.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Withheld {
    StartUp,
    Managed,
    NotInherited,
    DefaultExclude(String),
    UrlWithPassword,
    WebhookUrl,
    Exclude(String),
    NotIncluded,
}

impl fmt::Display for Withheld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Withheld::StartUp => f.write_str("shell start-up variable"),
            Withheld::Managed => f.write_str("managed DSH_* name"),
            Withheld::NotInherited => f.write_str("not inherited"),
            Withheld::DefaultExclude(pattern) => write!(f, "default exclude {pattern}"),
            Withheld::UrlWithPassword => f.write_str("URL with a password"),
            Withheld::WebhookUrl => f.write_str("webhook URL"),
            Withheld::Exclude(pattern) => write!(f, "exclude {pattern}"),
            Withheld::NotIncluded => f.write_str("not in include_only"),
        }
    }
}

/// The rule that drops `name` from every layer, if any.
fn forbidden_everywhere(name: &str) -> Option<Withheld> {
    forbidden_in_any_layer(name, &name.to_ascii_uppercase())
}

/// [`forbidden_everywhere`] for a name already upper-cased into `upper`.
fn forbidden_in_any_layer(name: &str, upper: &str) -> Option<Withheld> {
    if START_UP.iter().any(|glob| glob.matches(upper)) {
        Some(Withheld::StartUp)
    } else if is_managed(name) {
        Some(Withheld::Managed)
    } else {
        None
    }
}

static CORE: LazyLock<Vec<Glob>> = LazyLock::new(|| globs(CORE_VARS));
static DEFAULTS: LazyLock<Vec<Glob>> = LazyLock::new(|| globs(DEFAULT_EXCLUDES));
static START_UP: LazyLock<Vec<Glob>> = LazyLock::new(|| globs(START_UP_VARS));

fn globs(patterns: &[&str]) -> Vec<Glob> {
    patterns
        .iter()
        .map(|p| Glob::new((*p).to_owned()))
        .collect()
}

fn is_managed(name: &str) -> bool {
    name.get(..4)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("DSH_"))
}

/// A compiled pattern (see the module docs for the syntax), upper-cased so that matching an
/// upper-cased name is case-insensitive.
#[derive(Clone)]
struct Glob {
    source: String,
    tokens: Vec<Token>,
    shape: Shape,
}

/// The common shapes a glob takes, matched with plain string searches: the policy checks
/// some forty patterns against every variable at every spawn, and a spawn must stay cheap.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Shape {
    /// `LIT`.
    Exact(String),
    /// `LIT*`.
    Prefix(String),
    /// `*LIT`.
    Suffix(String),
    /// `*LIT*`.
    Contains(String),
    /// Anything else: the tokens are matched one by one.
    General,
}

impl Shape {
    fn of(tokens: &[Token]) -> Shape {
        let leading = tokens.first() == Some(&Token::Star);
        let rest = if leading { &tokens[1..] } else { tokens };
        let trailing = rest.last() == Some(&Token::Star);
        let middle = if trailing {
            &rest[..rest.len() - 1]
        } else {
            rest
        };
        let literal: Option<String> = middle
            .iter()
            .map(|token| match token {
                Token::Literal(c) => Some(*c),
                _ => None,
            })
            .collect();
        match (literal, leading, trailing) {
            (None, _, _) => Shape::General,
            (Some(lit), false, false) => Shape::Exact(lit),
            (Some(lit), false, true) => Shape::Prefix(lit),
            (Some(lit), true, false) => Shape::Suffix(lit),
            (Some(lit), true, true) => Shape::Contains(lit),
        }
    }
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.source, f)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Star,
    AnyOne,
    Literal(char),
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Token {
    fn matches_one(&self, c: char) -> bool {
        match self {
            Token::Star | Token::AnyOne => true,
            Token::Literal(l) => *l == c,
            Token::Class { negated, ranges } => {
                ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != *negated
            }
        }
    }
}

impl Glob {
    fn new(source: String) -> Glob {
        let chars: Vec<char> = source.to_ascii_uppercase().chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while let Some(&c) = chars.get(i) {
            i += 1;
            match c {
                '*' => tokens.push(Token::Star),
                '?' => tokens.push(Token::AnyOne),
                '[' => match parse_class(&chars[i..]) {
                    Some((class, used)) => {
                        tokens.push(class);
                        i += used;
                    }
                    None => tokens.push(Token::Literal('[')),
                },
                c => tokens.push(Token::Literal(c)),
            }
        }
        let shape = Shape::of(&tokens);
        Glob {
            source,
            tokens,
            shape,
        }
    }

    /// Whether the glob matches all of `name` (already upper-cased).
    fn matches(&self, name: &str) -> bool {
        match &self.shape {
            Shape::Exact(lit) => name == lit,
            Shape::Prefix(lit) => name.starts_with(lit.as_str()),
            Shape::Suffix(lit) => name.ends_with(lit.as_str()),
            Shape::Contains(lit) => name.contains(lit.as_str()),
            Shape::General if name.is_ascii() => self.matches_tokens(name.as_bytes(), char::from),
            Shape::General => {
                let chars: Vec<char> = name.chars().collect();
                self.matches_tokens(&chars, |c| c)
            }
        }
    }

    /// The token-by-token match. Iterative, with one backtrack point (the last `*`), so it
    /// cannot recurse deeply.
    fn matches_tokens<T: Copy>(&self, name: &[T], to_char: impl Fn(T) -> char) -> bool {
        let (mut t, mut n) = (0, 0);
        let mut backtrack: Option<(usize, usize)> = None;
        while n < name.len() {
            match self.tokens.get(t) {
                Some(Token::Star) => {
                    backtrack = Some((t, n));
                    t += 1;
                    continue;
                }
                Some(token) if token.matches_one(to_char(name[n])) => {
                    t += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
            match backtrack {
                Some((star, from)) => {
                    t = star + 1;
                    n = from + 1;
                    backtrack = Some((star, from + 1));
                }
                None => return false,
            }
        }
        self.tokens[t..].iter().all(|token| *token == Token::Star)
    }
}

/// Parses a class after its `[`: the token and the characters used (through the `]`), or
/// `None` when there is no closing `]`. A `]` first in the class is a member.
fn parse_class(chars: &[char]) -> Option<(Token, usize)> {
    let mut i = 0;
    let negated = matches!(chars.first(), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let c = *chars.get(i)?;
        if c == ']' && !first {
            return Some((Token::Class { negated, ranges }, i + 1));
        }
        first = false;
        match (chars.get(i + 1), chars.get(i + 2)) {
            (Some('-'), Some(&hi)) if hi != ']' => {
                ranges.push((c, hi));
                i += 3;
            }
            _ => {
                ranges.push((c, c));
                i += 1;
            }
        }
    }
}

/// Builds a command's environment: `policy` applied to its parent (the harness's environment
/// unless [`EnvPolicy::parent_env`] gave one), then the caller's entries, the non-interactive
/// defaults and the managed facts (see the module docs). A caller entry naming a start-up
/// variable or a `DSH_*` name is dropped with a warning.
pub fn child_env(
    policy: &EnvPolicy,
    caller: &BTreeMap<String, String>,
    managed: &ManagedEnv,
) -> Vec<(OsString, OsString)> {
    let mut env = match &policy.parent {
        Some(parent) => policy.inherited(parent.iter().cloned()),
        None => policy.inherited(std::env::vars_os()),
    };
    for (name, value) in caller {
        match forbidden_everywhere(name) {
            Some(Withheld::StartUp) => {
                tracing::warn!(name, "a request's start-up variable was dropped");
            }
            Some(_) => {}
            None => {
                env.insert(name.into(), value.into());
            }
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
mod tests;

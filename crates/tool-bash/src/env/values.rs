//! The values the environment policy withholds whatever their variable's name: those that
//! embed a URL with a password or a webhook URL (see the [parent module's docs](super) for
//! the exact rules).

/// Whether `value` embeds `scheme://user:password@` (see the [`env`](super) docs for the exact
/// rule).
pub(super) fn embeds_url_password(value: &str) -> bool {
    embedded_urls(value).any(|url| {
        url.authority
            .rsplit_once('@')
            .and_then(|(userinfo, _host)| userinfo.split_once(':'))
            .is_some_and(|(_user, password)| !password.is_empty())
    })
}

/// Whether `value` embeds a webhook URL, whose path carries its token (see the [`env`](super)
/// docs).
pub(super) fn embeds_webhook_url(value: &str) -> bool {
    let hook_name = |name: &str| {
        name.eq_ignore_ascii_case("hooks")
            || name
                .get(..7)
                .is_some_and(|start| start.eq_ignore_ascii_case("webhook"))
    };
    embedded_urls(value).any(|url| {
        let host = url
            .authority
            .rsplit_once('@')
            .map_or(url.authority, |(_, host)| host);
        let first_label = host.split(['.', ':']).next().unwrap_or_default();
        let segments: Vec<&str> = url.path.split('/').filter(|s| !s.is_empty()).collect();
        let hook_host = hook_name(first_label) && !segments.is_empty();
        let hook_segment = segments
            .split_last()
            .is_some_and(|(_, before_last)| before_last.iter().any(|s| hook_name(s)));
        hook_host || hook_segment
    })
}

/// One URL found in a value: its authority (`user:password@host:port`) and its path, each up
/// to the next `/`, `?`, `#`, whitespace or the end of the value.
struct EmbeddedUrl<'a> {
    authority: &'a str,
    path: &'a str,
}

/// The URLs in `value`: one for each `://` preceded by a scheme character (an ASCII letter or
/// digit, `+`, `-` or `.`).
fn embedded_urls(value: &str) -> impl Iterator<Item = EmbeddedUrl<'_>> {
    let is_scheme_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.');
    let ends_part = |c: char| matches!(c, '?' | '#') || c.is_whitespace();
    let mut rest = value;
    std::iter::from_fn(move || {
        while let Some(at) = rest.find("://") {
            let preceded_by_scheme = rest[..at].chars().next_back().is_some_and(is_scheme_char);
            rest = &rest[at + 3..];
            if !preceded_by_scheme {
                continue;
            }
            let authority_end = rest
                .find(|c: char| c == '/' || ends_part(c))
                .unwrap_or(rest.len());
            let (authority, after) = rest.split_at(authority_end);
            let path = match after.strip_prefix('/') {
                Some(path) => &path[..path.find(ends_part).unwrap_or(path.len())],
                None => "",
            };
            return Some(EmbeddedUrl { authority, path });
        }
        None
    })
}

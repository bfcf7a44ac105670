//! Connection strings made safe to print: the one place passwords are
//! taken out of them, for the CLI, the harness and xtask alike.
//!
//! A password can hide in a URL's user info (`postgres://u:PW@h/db`, also
//! percent-encoded or with unencoded `@ / ? #` in it), in a URL query
//! parameter (`?password=PW`, in any case, with a percent-encoded key), or in
//! a keyword/value string (`host=h password=PW`, `password = 'a b'`,
//! `password='it\'s'`). Anything this cannot read with confidence is not
//! shown at all. Passwords from the environment (`PGPASSWORD`) are never in
//! the string, so they cannot come out of it.

/// What is shown instead of a secret.
pub const MASK: &str = "***";

/// Shown instead of a string that is neither a URL nor a keyword/value list
/// we could read: it might be a password on its own.
pub const UNREADABLE: &str =
    "(connection string not shown: it is neither a URL nor a key=value list)";

/// `conninfo` with every password replaced by [`MASK`].
pub fn redact_conninfo(conninfo: &str) -> String {
    redact(conninfo).0
}

/// `text` (an error message about `conninfo`) with every secret of
/// `conninfo` replaced by [`MASK`], in case a lower layer quoted it.
pub fn scrub(text: &str, conninfo: &str) -> String {
    let (_, mut secrets) = redact(conninfo);
    // Longest first, so a secret containing another is masked whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_string();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        out = out.replace(secret.as_str(), MASK);
    }
    out
}

/// The redacted form and every secret found (as written and decoded).
fn redact(conninfo: &str) -> (String, Vec<String>) {
    let mut secrets = Vec::new();
    let shown = match url_scheme(conninfo) {
        Some(end) => redact_url(&conninfo[..end], &conninfo[end..], &mut secrets),
        None => redact_keyword_value(conninfo, &mut secrets).unwrap_or_else(|| {
            secrets.push(conninfo.trim().to_string());
            UNREADABLE.to_string()
        }),
    };
    let decoded: Vec<String> = secrets.iter().filter_map(|s| percent_decode(s)).collect();
    secrets.extend(decoded);
    (shown, secrets)
}

/// Byte offset just past `scheme://`, when `s` starts with a URL scheme.
fn url_scheme(s: &str) -> Option<usize> {
    let i = s.find("://")?;
    let scheme = &s[..i];
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(i + 3)
}

fn redact_url(scheme: &str, rest: &str, secrets: &mut Vec<String>) -> String {
    // The user info ends at the last '@': a password may hold an unencoded
    // '@', '/', '?' or '#'. If the '@' was really in the query, everything
    // before it is treated as user info: too much is masked, never too
    // little.
    let shown = match rest.rfind('@') {
        Some(at) => match rest[..at].split_once(':') {
            Some((user, password)) => {
                secrets.push(password.to_string());
                format!("{user}:{MASK}{}", &rest[at..])
            }
            None => rest.to_string(),
        },
        None => rest.to_string(),
    };
    format!("{scheme}{}", redact_params(&shown, secrets))
}

/// Mask the value of every secret `?key=value` / `&key=value` parameter in
/// `s`, wherever it is, and any `#fragment` (the drivers ignore it).
fn redact_params(s: &str, secrets: &mut Vec<String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(['?', '&', '#']) {
        out.push_str(&rest[..=i]);
        let after = &rest[i + 1..];
        if rest.as_bytes()[i] == b'#' {
            if !after.is_empty() {
                secrets.push(after.to_string());
                out.push_str(MASK);
            }
            return out;
        }
        let end = after.find(['&', '#', '?']).unwrap_or(after.len());
        let pair = &after[..end];
        match pair.split_once('=') {
            Some((key, value)) if is_secret_key(key) => {
                secrets.push(value.to_string());
                out.push_str(key);
                out.push('=');
                out.push_str(MASK);
            }
            _ => out.push_str(pair),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// `password`, `PASSWORD`, `pass%77ord`, `sslpassword`, `passwd`, ...
pub(crate) fn is_secret_key(key: &str) -> bool {
    let key = percent_decode(key)
        .unwrap_or_else(|| key.to_string())
        .to_ascii_lowercase();
    ["pass", "pwd", "secret", "token"]
        .iter()
        .any(|k| key.contains(k))
}

/// libpq's keyword/value syntax: `key = value` pairs separated by
/// whitespace; a value is bare (backslash escapes the next character) or
/// single-quoted (backslash escapes `'` and `\`). `None` when `s` is not
/// in that syntax (an unterminated quote included).
fn redact_keyword_value(s: &str, secrets: &mut Vec<String>) -> Option<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    let skip_ws = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i == chars.len() {
            break;
        }
        let start = i;
        while i < chars.len() && !chars[i].is_whitespace() && chars[i] != '=' {
            i += 1;
        }
        let key: String = chars[start..i].iter().collect();
        skip_ws(&mut i);
        if key.is_empty() || i == chars.len() || chars[i] != '=' {
            return None;
        }
        i += 1;
        skip_ws(&mut i);
        let value_start = i;
        if i < chars.len() && chars[i] == '\'' {
            i += 1;
            loop {
                match chars.get(i) {
                    None => return None,
                    Some('\\') => i += 2,
                    Some('\'') => {
                        i += 1;
                        break;
                    }
                    Some(_) => i += 1,
                }
            }
        } else {
            while i < chars.len() && !chars[i].is_whitespace() {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
        }
        let i_end = i.min(chars.len());
        let value: String = chars[value_start..i_end].iter().collect();
        i = i_end;
        if is_secret_key(&key) {
            secrets.push(value.clone());
            let inner = value.trim_start_matches('\'').trim_end_matches('\'');
            secrets.push(inner.to_string());
            secrets.push(inner.replace("\\'", "'").replace("\\\\", "\\"));
            out.push(format!("{key}={MASK}"));
        } else {
            out.push(format!("{key}={value}"));
        }
    }
    Some(out.join(" "))
}

/// `%XX` decoded, when `s` has any and decodes to UTF-8.
pub(crate) fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return None;
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        for (given, shown) in [
            (
                "postgres://u:secret@h:5432/db",
                "postgres://u:***@h:5432/db",
            ),
            ("postgres://h/db", "postgres://h/db"),
            ("postgres://u@h/db", "postgres://u@h/db"),
            ("postgres://u:p@ss/x?y@h/db", "postgres://u:***@h/db"),
            (
                "postgres://h/db?sslmode=disable&password=pw",
                "postgres://h/db?sslmode=disable&password=***",
            ),
            (
                "postgres://h/db?PASS%77ORD=pw",
                "postgres://h/db?PASS%77ORD=***",
            ),
            (
                "postgres://h/db?a=b?password=pw",
                "postgres://h/db?a=b?password=***",
            ),
            (
                "postgres://h/db?application_name=a@b&password=pw",
                "postgres://h/db?application_name=a@b&password=***",
            ),
            ("postgres://u:pw@h/db#frag", "postgres://u:***@h/db#***"),
            // libpq host lists: the password is still the user info's.
            (
                "postgres://u:s3cret@h1:5432,h2:5433/db?target_session_attrs=read-write",
                "postgres://u:***@h1:5432,h2:5433/db?target_session_attrs=read-write",
            ),
            (
                "postgres://u:p@ss@[::1]:5432,[::2]/db",
                "postgres://u:***@[::1]:5432,[::2]/db",
            ),
            (
                "postgres:///db?host=h1,h2&port=1,2&password=pw",
                "postgres:///db?host=h1,h2&port=1,2&password=***",
            ),
        ] {
            assert_eq!(redact_conninfo(given), shown, "{given}");
        }
    }

    #[test]
    fn keyword_value_strings() {
        for (given, shown) in [
            ("host=h password=pw", "host=h password=***"),
            (
                "host=h password = 'a b' port=1",
                "host=h password=*** port=1",
            ),
            (r"password='it\'s' host=h", "password=*** host=h"),
            (r"password=a\ b host=h", "password=*** host=h"),
            ("host=h dbname=d", "host=h dbname=d"),
            ("host=h password='unterminated", UNREADABLE),
            ("just-a-password", UNREADABLE),
        ] {
            assert_eq!(redact_conninfo(given), shown, "{given}");
        }
    }

    #[test]
    fn scrub_masks_every_form_of_the_secret() {
        let url = "postgres://u:s%33cret@h/db?password=other";
        assert_eq!(
            scrub("bad s3cret, s%33cret and other", url),
            "bad ***, *** and ***"
        );
        assert_eq!(scrub("a 'b c' d", "host=h password='b c'"), "a *** d");
        assert_eq!(
            scrub(
                "h2:5433: password authentication failed (s3cret)",
                "postgres://u:s3cret@h1,h2:5433/db"
            ),
            "h2:5433: password authentication failed (***)"
        );
    }
}

//! A URL listing several hosts, cut into one URL per host, as libpq reads
//! the list: `postgres://u@h1:p1,h2:p2/db` (each host with an optional
//! port, IPv6 addresses in brackets) or `?host=h1,h2&port=p1,p2` (one port
//! for all hosts, or one per host). Each per-host URL is the original with
//! only its host (and port) changed and the parameters this layer reads
//! itself taken out, so sqlx reads every other part exactly as it would
//! read a single-host URL (the `.pgpass` lookup per host included).

/// Parameters read here and never passed to sqlx (which would log them as
/// unknown).
pub(super) const OURS: [&str; 2] = ["target_session_attrs", "connect_timeout"];

/// A URL taken apart at the places this module changes.
#[derive(Debug)]
struct Parts<'a> {
    /// `postgres://` and the user info with its `@`, if any.
    head: &'a str,
    /// The host list of the authority (may be empty).
    hosts: &'a str,
    /// The path, up to the query.
    path: &'a str,
    /// `key=value` pairs of the query: the pair as written, its key and
    /// its value.
    query: Vec<(&'a str, &'a str, &'a str)>,
    /// `#...`, if any.
    fragment: &'a str,
}

fn parts(url: &str) -> Parts<'_> {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let (before_fragment, fragment) = match url[scheme_end..].find('#') {
        Some(i) => url.split_at(scheme_end + i),
        None => (url, ""),
    };
    let (before_query, query) = match before_fragment[scheme_end..].find('?') {
        Some(i) => (
            &before_fragment[..scheme_end + i],
            &before_fragment[scheme_end + i + 1..],
        ),
        None => (before_fragment, ""),
    };
    // The authority ends at the first '/', as the URL parser sqlx uses
    // reads it; the user info ends at its last '@'.
    let authority_end = before_query[scheme_end..]
        .find('/')
        .map_or(before_query.len(), |i| scheme_end + i);
    let authority = &before_query[scheme_end..authority_end];
    let hosts_start = authority
        .rfind('@')
        .map_or(scheme_end, |i| scheme_end + i + 1);
    Parts {
        head: &before_query[..hosts_start],
        hosts: &before_query[hosts_start..authority_end],
        path: &before_query[authority_end..],
        query: query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                (pair, k, v)
            })
            .collect(),
        fragment,
    }
}

/// A key as libpq compares it: percent-decoded.
pub(super) fn key_is(key: &str, name: &str) -> bool {
    crate::redact::percent_decode(key).as_deref().unwrap_or(key) == name
}

/// A value percent-decoded.
pub(super) fn decoded(value: &str) -> String {
    crate::redact::percent_decode(value).unwrap_or_else(|| value.to_owned())
}

/// The last value of parameter `name` in `url`, decoded.
pub(super) fn param(url: &str, name: &str) -> Option<String> {
    parts(url)
        .query
        .into_iter()
        .filter(|(_, k, _)| key_is(k, name))
        .map(|(_, _, v)| decoded(v))
        .next_back()
}

/// One URL per listed host, in the order given (a single-host URL gives
/// itself back, minus [`OURS`]). `Err` says what is wrong with the list.
pub(super) fn per_host_urls(url: &str) -> Result<Vec<String>, String> {
    let p = parts(url);
    let query_list = |name: &str| -> Option<&str> {
        p.query
            .iter()
            .filter(|(_, k, _)| key_is(k, name))
            .map(|(_, _, v)| *v)
            .next_back()
    };
    if query_list("hostaddr").is_some_and(|v| decoded(v).contains(',')) {
        return Err(
            "a list of hostaddr values is not supported: list the hosts in the \
             URL (postgres://h1:5432,h2:5432/db) or in host=h1,h2"
                .into(),
        );
    }
    // Which hosts, with which ports, and where the list was written.
    let from_query = query_list("host").map(decoded).filter(|h| h.contains(','));
    let port_list = query_list("port").map(decoded).filter(|v| v.contains(','));
    let targets: Vec<(String, Option<String>)> = if let Some(list) = from_query {
        let hosts: Vec<&str> = list.split(',').collect();
        let ports: Vec<Option<String>> = match &port_list {
            None => vec![None; hosts.len()],
            Some(ports) => {
                let ports: Vec<&str> = ports.split(',').collect();
                if ports.len() != hosts.len() {
                    return Err(format!(
                        "{} ports were given for {} hosts: give one port for all or one per host",
                        ports.len(),
                        hosts.len()
                    ));
                }
                ports.into_iter().map(|p| Some(p.to_owned())).collect()
            }
        };
        hosts
            .into_iter()
            .map(str::to_owned)
            .zip(ports)
            .collect::<Vec<_>>()
    } else if let Some(ports) = port_list {
        return Err(format!(
            "port lists the ports {ports:?} but the URL names one host: list the hosts too \
             (postgres://h1:p1,h2:p2/db)"
        ));
    } else if p.hosts.contains(',') {
        split_authority(p.hosts)?
            .into_iter()
            .map(|(h, port)| (h.to_owned(), port.map(str::to_owned)))
            .collect()
    } else {
        // One host: the URL as written, less our parameters.
        return Ok(vec![rebuild(&p, None)]);
    };
    for (host, port) in &targets {
        if host.is_empty() {
            return Err("an empty host in the host list".into());
        }
        if let Some(port) = port
            && port.parse::<u16>().is_err()
        {
            return Err(format!("invalid port {port:?} in the host list"));
        }
    }
    Ok(targets
        .iter()
        .map(|(host, port)| rebuild(&p, Some((host, port.as_deref()))))
        .collect())
}

/// `host[:port]` entries of an authority's host list, brackets kept.
fn split_authority(hosts: &str) -> Result<Vec<(&str, Option<&str>)>, String> {
    let mut out = Vec::new();
    let mut rest = hosts;
    loop {
        let (entry, next) = if rest.starts_with('[') {
            let close = rest
                .find(']')
                .ok_or_else(|| format!("an unclosed '[' in the host list {hosts:?}"))?;
            match rest[close..].find(',') {
                Some(i) => (&rest[..close + i], Some(&rest[close + i + 1..])),
                None => (rest, None),
            }
        } else {
            match rest.split_once(',') {
                Some((entry, next)) => (entry, Some(next)),
                None => (rest, None),
            }
        };
        let host_end = if entry.starts_with('[') {
            entry.find(']').map_or(entry.len(), |i| i + 1)
        } else {
            entry.find(':').unwrap_or(entry.len())
        };
        let (host, port) = entry.split_at(host_end);
        let port = match port.strip_prefix(':') {
            Some(p) => Some(p),
            None if port.is_empty() => None,
            None => return Err(format!("unexpected {port:?} after host {host:?}")),
        };
        out.push((host, port));
        match next {
            Some(next) => rest = next,
            None => return Ok(out),
        }
    }
}

/// The URL again, with our parameters left out and, when `target` is
/// given, that host and port in place of the host list (in the authority
/// or in `host=`/`port=`, wherever the list was).
fn rebuild(p: &Parts<'_>, target: Option<(&str, Option<&str>)>) -> String {
    let listed_in_query = p
        .query
        .iter()
        .any(|(_, k, v)| key_is(k, "host") && decoded(v).contains(','));
    let mut url = String::from(p.head);
    match target {
        Some((host, port)) if !listed_in_query => {
            url.push_str(host);
            if let Some(port) = port {
                url.push(':');
                url.push_str(port);
            }
        }
        _ => url.push_str(p.hosts),
    }
    url.push_str(p.path);
    let mut query: Vec<String> = Vec::new();
    for &(pair, k, _) in &p.query {
        if OURS.iter().any(|ours| key_is(k, ours)) {
            continue;
        }
        match target {
            Some((host, _)) if listed_in_query && key_is(k, "host") => {
                query.push(format!("{k}={host}"));
            }
            // A port list gives each host its own; a single port is kept
            // for all of them.
            Some((_, Some(port))) if listed_in_query && key_is(k, "port") => {
                query.push(format!("{k}={port}"));
            }
            _ => query.push(pair.to_owned()),
        }
    }
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query.join("&"));
    }
    url.push_str(p.fragment);
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(url: &str) -> Vec<String> {
        per_host_urls(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    #[test]
    fn one_host_is_the_url_less_our_parameters() {
        assert_eq!(urls("postgres://u:p@h:5/db"), ["postgres://u:p@h:5/db"]);
        assert_eq!(
            urls(
                "postgres://h/db?sslmode=require&target_session_attrs=read-write&connect_timeout=3#f"
            ),
            ["postgres://h/db?sslmode=require#f"]
        );
        assert_eq!(
            urls("postgres://h/db?target_session_attrs=any"),
            ["postgres://h/db"]
        );
    }

    #[test]
    fn hosts_in_the_authority() {
        assert_eq!(
            urls(
                "postgres://u:p%40w@h1:5432,h2,[::1]:7,[fe80::2]/db?sslmode=disable&target_session_attrs=read-write"
            ),
            [
                "postgres://u:p%40w@h1:5432/db?sslmode=disable",
                "postgres://u:p%40w@h2/db?sslmode=disable",
                "postgres://u:p%40w@[::1]:7/db?sslmode=disable",
                "postgres://u:p%40w@[fe80::2]/db?sslmode=disable",
            ]
        );
        assert_eq!(
            urls("postgresql://a:1,b:2"),
            ["postgresql://a:1", "postgresql://b:2"]
        );
    }

    #[test]
    fn hosts_in_the_query() {
        assert_eq!(
            urls("postgres:///db?host=h1,h2&port=1,2&user=u"),
            [
                "postgres:///db?host=h1&port=1&user=u",
                "postgres:///db?host=h2&port=2&user=u"
            ]
        );
        assert_eq!(
            urls("postgres://x/db?host=h1,h2&port=9"),
            [
                "postgres://x/db?host=h1&port=9",
                "postgres://x/db?host=h2&port=9"
            ]
        );
        assert_eq!(
            urls("postgres://x/db?host=h1%2Ch2"),
            ["postgres://x/db?host=h1", "postgres://x/db?host=h2"]
        );
    }

    #[test]
    fn bad_lists_are_named() {
        for (url, says) in [
            ("postgres://h1,,h2/db", "empty host"),
            ("postgres://h1:x,h2/db", "invalid port"),
            ("postgres://h1:99999,h2/db", "invalid port"),
            ("postgres://[::1,h2/db", "unclosed"),
            ("postgres://[::1]x,h2/db", "unexpected"),
            (
                "postgres:///db?host=a,b&port=1,2,3",
                "3 ports were given for 2 hosts",
            ),
            ("postgres://h/db?port=1,2", "names one host"),
            ("postgres://h/db?hostaddr=1.1.1.1,2.2.2.2", "hostaddr"),
        ] {
            let err = per_host_urls(url).expect_err(url);
            assert!(err.contains(says), "{url}: {err}");
        }
    }

    #[test]
    fn params_are_read_decoded_and_last_wins() {
        let url = "postgres://h/db?target%5Fsession_attrs=read%2Donly&target_session_attrs=primary";
        assert_eq!(
            param(url, "target_session_attrs").as_deref(),
            Some("primary")
        );
        assert_eq!(urls(url), ["postgres://h/db"]);
        assert_eq!(param("postgres://h/db", "connect_timeout"), None);
    }
}

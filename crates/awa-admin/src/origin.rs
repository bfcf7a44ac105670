//! The origin rule, enforced here and nowhere else: every request's `Host`
//! must name this server, and a server that answers beyond loopback must
//! require the token for reads.
//!
//! Why: a page on any web site can make a browser on the operator's
//! machine talk to `http://127.0.0.1:8088/` under a name the attacker
//! controls (DNS rebinding: `evil.example` first resolves to the
//! attacker, then to 127.0.0.1). The browser then treats the answers as
//! `evil.example`'s own and lets its script read job args and errors,
//! which need no token by default. Such a request always carries the
//! attacker's name in `Host`, so answering only to names we know closes
//! it. An IP literal in `Host` cannot be rebound, which is why a server
//! listening on every address (`0.0.0.0`, `::`) accepts any of them.
//!
//! Allowed by default: `localhost`, loopback addresses (127.0.0.0/8,
//! `::1`), the address the server listens on, each with any port or none.
//! `--allowed-host NAME[:PORT]` adds more (a proxy's public name).

use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// A host as a `Host` header or `--allowed-host` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Ip(IpAddr),
    /// Lowercase, without a trailing dot.
    Name(String),
}

/// `host[:port]`, `[v6][:port]`; None when it is not a plain authority.
fn parse(text: &str) -> Option<(Host, Option<u16>)> {
    let port = |p: &str| -> Option<Option<u16>> {
        match p {
            "" => Some(None),
            p => Some(Some(p.strip_prefix(':')?.parse().ok()?)),
        }
    };
    if let Some(rest) = text.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        let ip: std::net::Ipv6Addr = ip.parse().ok()?;
        return Some((Host::Ip(IpAddr::V6(ip)), port(after)?));
    }
    let (host, port) = match text.rsplit_once(':') {
        Some((h, p)) => (h, Some(p.parse::<u16>().ok()?)),
        None => (text, None),
    };
    if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
        return Some((Host::Ip(IpAddr::V4(ip)), port));
    }
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .split('.')
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    valid.then_some((Host::Name(name), port))
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// A `--allowed-host` value that is not a host name or address.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "--allowed-host {0:?} is not a host: give a name or address with an optional port, \
     e.g. jobs.example.com, jobs.example.com:443 or [2001:db8::1]:8088 (no scheme, path or wildcard)"
)]
pub struct BadHost(pub String);

/// Which `Host` values this server answers to.
#[derive(Debug, Clone)]
pub struct AllowedHosts {
    /// The listen address, when not loopback already.
    listen: Option<IpAddr>,
    /// Listening on every address: any IP literal names this server.
    any_ip: bool,
    extra: Vec<(Host, Option<u16>)>,
}

impl Default for AllowedHosts {
    fn default() -> Self {
        Self::loopback()
    }
}

impl AllowedHosts {
    /// `localhost` and loopback addresses only.
    pub fn loopback() -> Self {
        Self {
            listen: None,
            any_ip: false,
            extra: Vec::new(),
        }
    }

    /// Loopback plus the address `listen` names (every IP literal when it
    /// is the unspecified address).
    pub fn for_listen(listen: SocketAddr) -> Self {
        let ip = listen.ip();
        Self {
            listen: Some(ip),
            any_ip: ip.is_unspecified(),
            extra: Vec::new(),
        }
    }

    /// Also answer to `host` (`name`, `name:port`, an address).
    pub fn allow(&mut self, host: &str) -> Result<(), BadHost> {
        let parsed = parse(host.trim()).ok_or_else(|| BadHost(host.to_string()))?;
        self.extra.push(parsed);
        Ok(())
    }

    /// Whether a request whose authority is `authority` is for us.
    pub fn allows(&self, authority: &str) -> bool {
        let Some((host, port)) = parse(authority) else {
            return false;
        };
        let built_in = match &host {
            Host::Ip(ip) => is_loopback(*ip) || self.any_ip || self.listen == Some(*ip),
            Host::Name(name) => name == "localhost",
        };
        built_in
            || self
                .extra
                .iter()
                .any(|(h, p)| *h == host && (p.is_none() || *p == port))
    }
}

/// The authority a request names: HTTP/2's `:authority` (in the URI), or
/// HTTP/1's `Host` header.
fn authority(req: &Request) -> Option<String> {
    if let Some(a) = req.uri().authority() {
        return Some(a.as_str().to_string());
    }
    let value = req.headers().get(header::HOST)?;
    value.to_str().ok().map(str::to_string)
}

/// What a refusal may echo of the header: printable and short.
fn shown(text: &str) -> String {
    let printable: String = text.chars().filter(|c| !c.is_control()).take(100).collect();
    format!("{printable:?}")
}

/// Refuse, before anything else runs, a request whose `Host` is not ours.
pub async fn guard(
    State(hosts): State<Arc<AllowedHosts>>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    match authority(&req) {
        Some(a) if hosts.allows(&a) => Ok(next.run(req).await),
        Some(a) => {
            tracing::debug!(host = %shown(&a), "refused a request for another host");
            Err(ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                "host_not_allowed",
                format!(
                    "this server does not answer to the host {} (a guard against DNS rebinding): \
                     use its address, e.g. http://127.0.0.1:PORT/, or add the name with \
                     --allowed-host",
                    shown(&a)
                ),
            ))
        }
        None => Err(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "host_not_allowed",
            "the request has no Host header; send one naming this server",
        )),
    }
}

/// Why a listen address was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "--listen {0} is not a loopback address, so anyone who can reach it could read job args \
     and errors: set AWA_ADMIN_TOKEN and pass --require-token-for-reads, or listen on \
     127.0.0.1 behind a proxy (with --allowed-host for its name)"
)]
pub struct ExposedListen(pub SocketAddr);

/// A server that answers beyond loopback must require the token for
/// reads (and so have one).
pub fn check_listen(listen: SocketAddr, config: &crate::AdminConfig) -> Result<(), ExposedListen> {
    if is_loopback(listen.ip()) || (config.token.is_some() && config.token_for_reads) {
        Ok(())
    } else {
        Err(ExposedListen(listen))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(listen: &str) -> AllowedHosts {
        AllowedHosts::for_listen(listen.parse().unwrap())
    }

    #[test]
    fn loopback_names_and_the_listen_address_with_or_without_port() {
        let h = at("127.0.0.1:8088");
        for ok in [
            "localhost",
            "LOCALHOST:8088",
            "localhost.",
            "127.0.0.1",
            "127.0.0.1:8088",
            "127.1.2.3:9",
            "[::1]",
            "[::1]:8088",
            "[::ffff:127.0.0.1]:8088",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8088",
            "localhost.evil.example",
            "10.0.0.5",
            "[2001:db8::1]",
            "",
            "127.0.0.1:notaport",
            "user@127.0.0.1",
            "::1",
            "127.0.0.1/x",
        ] {
            assert!(!h.allows(bad), "{bad}");
        }
        let h = at("10.0.0.5:8088");
        assert!(h.allows("10.0.0.5") && h.allows("10.0.0.5:8088") && h.allows("localhost"));
        assert!(!h.allows("10.0.0.6") && !h.allows("evil.example"));
        let h = at("[2001:db8::1]:8088");
        assert!(h.allows("[2001:db8::1]") && h.allows("[2001:db8::1]:8088"));
        assert!(!h.allows("[2001:db8::2]"));
    }

    #[test]
    fn every_address_means_any_ip_literal_but_no_name() {
        for listen in ["0.0.0.0:8088", "[::]:8088"] {
            let h = at(listen);
            assert!(h.allows("192.0.2.7:8088") && h.allows("[2001:db8::9]"));
            assert!(!h.allows("evil.example") && !h.allows("evil.example:8088"));
        }
    }

    #[test]
    fn allowed_hosts_are_added_exactly() {
        let mut h = at("127.0.0.1:8088");
        h.allow("Jobs.Example.com").unwrap();
        h.allow("ops.example.com:443").unwrap();
        assert!(h.allows("jobs.example.com") && h.allows("jobs.example.com:8088"));
        assert!(h.allows("ops.example.com:443") && !h.allows("ops.example.com:8088"));
        assert!(!h.allows("ops.example.com") && !h.allows("x.jobs.example.com"));
        for bad in ["*", "*.example.com", "http://x", "x/y", "", "a..b", "[::1"] {
            assert_eq!(h.allow(bad), Err(BadHost(bad.to_string())), "{bad}");
        }
    }
}

//! Connection URLs read the way libpq reads them, for every Awa entry point
//! that is handed a URL rather than a pool (the CLI, migrations, the `awa`
//! client's `connect`).
//!
//! sqlx parses each host's URL itself, `sslmode` and `sslrootcert`
//! included; what this adds:
//!
//! * **Several hosts**, as libpq lists them: `postgres://u@h1:p1,h2:p2/db`
//!   (IPv6 in brackets) or `?host=h1,h2&port=p1,p2` (one port for all, or
//!   one per host). sqlx connects to one host; [`Conninfo`] holds one set of
//!   options per host, in order, and the connecting layer
//!   (`awa_maint::connect`) tries them in turn.
//! * **`target_session_attrs`** (`any`, `read-write`, `read-only`,
//!   `primary`, `standby`, `prefer-standby`, libpq's meanings:
//!   [`TargetSession`]) and **`connect_timeout`** (seconds per host, at
//!   least 2; 0 or absent: no limit of its own), which sqlx does not know.
//!   Both are taken out before sqlx sees the URL.
//! * **Only `postgres://` and `postgresql://`.** sqlx ignores the scheme, so
//!   `mysql://h/db` would quietly be tried as PostgreSQL and a bare word would
//!   fail as an unreadable URL; both are refused here with a message that
//!   says what to write instead.
//! * **`sslmode=require` with a root certificate checks the chain**, as
//!   libpq does for backwards compatibility: when the file named by
//!   `sslrootcert` (or `PGSSLROOTCERT`) exists, `require` behaves like
//!   `verify-ca`.
//! * **`verify-ca` and `verify-full` without a readable root certificate
//!   file** are refused, naming the file, before any connection is tried.
//! * **Errors never show a password**: the URL in a message is redacted and
//!   the driver's text is scrubbed of the URL's secrets. A password-like
//!   parameter sqlx does not know (`passwd=`, `Password=`, `sslpassword=`)
//!   is refused before sqlx sees it, because sqlx would log its value.
//!
//! TLS itself is OpenSSL, through sqlx's native-tls backend, so a
//! certificate is verified as libpq verifies it (a self-signed `CA:TRUE`
//! server certificate as its own `sslrootcert`, the CN when there is no
//! subjectAltName); `awa-cli/tests/cli/tls.rs` holds the whole matrix
//! against libpq (ADR 13).
//!
//! Where it still differs from libpq (sqlx's behaviour): `allow` is
//! `disable`; there is no default `~/.postgresql/root.crt`; with `verify-ca`
//! or `verify-full` the system's trusted roots count besides
//! `sslrootcert`; `prefer` with a root certificate whose check fails stays
//! on unverified TLS where libpq retries without TLS; a client key must be
//! PKCS#8; key=value connection strings are not accepted; a list of
//! `hostaddr` values is refused; `load_balance_hosts` is not read (hosts
//! are always tried in order).

mod hosts;
mod session;

pub use session::{SessionState, TargetSession};

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgSslMode};

use crate::redact::{redact_conninfo, scrub};

/// A connection string that cannot be used. The text never holds a
/// password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error(
        "the database URL is not a postgres:// or postgresql:// URL ({shown}); write it as \
         postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=...] \
         (key=value connection strings and other schemes are not supported)"
    )]
    NotPostgres { shown: String },
    #[error("invalid connection URL {shown}: {reason}")]
    Invalid { shown: String, reason: String },
    #[error("cannot read the root certificate file {path:?} named by sslrootcert: {reason}")]
    RootCert { path: String, reason: String },
}

/// Whether `url` starts with `postgres://` or `postgresql://` (the scheme in
/// any case).
pub fn is_postgres_url(url: &str) -> bool {
    let url = url.trim_start();
    ["postgres://", "postgresql://"].iter().any(|prefix| {
        url.get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    })
}

/// A URL as read: sqlx's options for each listed host, in order, and what
/// a session must be to be kept.
#[derive(Debug, Clone)]
pub struct Conninfo {
    hosts: Vec<PgConnectOptions>,
    target: TargetSession,
    connect_timeout: Option<Duration>,
}

impl Conninfo {
    /// Options per host, in the URL's order (at least one).
    pub fn hosts(&self) -> &[PgConnectOptions] {
        &self.hosts
    }

    /// The first host's options: the only ones of a single-host URL.
    pub fn first(&self) -> &PgConnectOptions {
        &self.hosts[0]
    }

    pub fn target(&self) -> TargetSession {
        self.target
    }

    /// `connect_timeout`: the most one host may take to connect.
    pub fn connect_timeout(&self) -> Option<Duration> {
        self.connect_timeout
    }

    /// Whether a connection may ever have to move to another host (more
    /// than one host listed).
    pub fn fails_over(&self) -> bool {
        self.hosts.len() > 1
    }
}

/// `host:port` (IPv6 in brackets) or the socket directory, for messages.
pub fn host_label(options: &PgConnectOptions) -> String {
    if let Some(socket) = options.get_socket() {
        return socket.display().to_string();
    }
    let host = options.get_host();
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{}", options.get_port())
    } else {
        format!("{host}:{}", options.get_port())
    }
}

/// What sqlx connects with for `url`, per host, checked and adjusted as the
/// module documentation says.
pub fn connect_options(url: &str) -> Result<Conninfo, UrlError> {
    if !is_postgres_url(url) {
        return Err(UrlError::NotPostgres {
            shown: redact_conninfo(url),
        });
    }
    let invalid = |reason: String| UrlError::Invalid {
        shown: redact_conninfo(url),
        reason,
    };
    // sqlx logs an unknown parameter with its value (a warning): refuse a
    // secret-looking one before it gets the chance.
    if let Some(key) = query_pairs(url).map(|(key, _)| key).find(|key| {
        let decoded = crate::redact::percent_decode(key);
        decoded.as_deref().unwrap_or(key) != "password" && crate::redact::is_secret_key(key)
    }) {
        return Err(invalid(format!(
            "unknown parameter {key:?}; the password goes in the user info \
             (postgres://USER:PASSWORD@HOST/DB) or in password=, or in PGPASSWORD"
        )));
    }
    let target = match hosts::param(url, "target_session_attrs") {
        None => TargetSession::default(),
        Some(value) => TargetSession::parse(&value).ok_or_else(|| {
            invalid(format!(
                "target_session_attrs={value:?} is not one of {}",
                TargetSession::NAMES.join(", ")
            ))
        })?,
    };
    let connect_timeout = match hosts::param(url, "connect_timeout") {
        None => None,
        Some(value) => {
            let secs: i64 = value.trim().parse().map_err(|_| {
                invalid(format!(
                    "connect_timeout={value:?} is not a whole number of seconds"
                ))
            })?;
            // libpq: zero or less waits without limit, and less than 2
            // seconds is 2.
            (secs > 0).then(|| Duration::from_secs(secs.max(2) as u64))
        }
    };
    let urls = hosts::per_host_urls(url.trim()).map_err(invalid)?;
    let mut hosts = Vec::with_capacity(urls.len());
    for one in &urls {
        let options = PgConnectOptions::from_str(one)
            .map(without_jit)
            .map_err(|e| {
                // sqlx wraps its own configuration errors once more.
                invalid(scrub(&e.to_string(), url).replacen(
                    "error with configuration: error with configuration: ",
                    "error with configuration: ",
                    1,
                ))
            })?;
        hosts.push(with_root_cert(options, url)?);
    }
    Ok(Conninfo {
        hosts,
        target,
        connect_timeout,
    })
}

/// libpq's reading of `sslrootcert` (module documentation).
fn with_root_cert(options: PgConnectOptions, url: &str) -> Result<PgConnectOptions, UrlError> {
    let mode = options.get_ssl_mode();
    let verifying = matches!(mode, PgSslMode::VerifyCa | PgSslMode::VerifyFull);
    let require = matches!(mode, PgSslMode::Require);
    let Some(root_cert) = root_cert(url).filter(|_| verifying || require) else {
        return Ok(options);
    };
    // libpq looks at the file: `require` verifies against it only if it is
    // there, `verify-*` refuse to go on without it (where sqlx would only
    // say "No such file or directory" at connect time).
    let usable = root_cert.trim_start().starts_with("-----BEGIN")
        || match std::fs::File::open(&root_cert) {
            Ok(_) => true,
            Err(e) if verifying => {
                return Err(UrlError::RootCert {
                    path: root_cert,
                    reason: e.to_string(),
                });
            }
            Err(_) => false,
        };
    if require && usable {
        return Ok(options.ssl_mode(PgSslMode::VerifyCa));
    }
    Ok(options)
}

/// Sessions Awa opens itself run with `jit = off`. Every statement Awa
/// sends is short, over small or never-analyzed ring partitions whose
/// estimates are far too high; PostgreSQL would JIT-compile the read views
/// (measured: `jobs ORDER BY id DESC LIMIT 100` on a 32-slot substrate,
/// 16 s with JIT, 17 ms without). Pools an application builds itself keep
/// their own settings; the functions behind the read views set it for
/// themselves where they can.
fn without_jit(options: PgConnectOptions) -> PgConnectOptions {
    options.options([("jit", "off")])
}

/// The root certificate file named by the URL (the last of the names sqlx
/// reads it under) or else by `PGSSLROOTCERT`.
fn root_cert(url: &str) -> Option<String> {
    query_pairs(url)
        .filter(|(key, _)| matches!(*key, "sslrootcert" | "ssl-root-cert" | "ssl-ca"))
        .map(|(_, value)| {
            let value = value.replace('+', " ");
            crate::redact::percent_decode(&value).unwrap_or(value)
        })
        .next_back()
        .or_else(|| std::env::var("PGSSLROOTCERT").ok())
        .filter(|v| !v.is_empty())
}

/// The URL's `key=value` query parameters as written (not decoded).
fn query_pairs(url: &str) -> impl DoubleEndedIterator<Item = (&str, &str)> {
    let query = url
        .split_once('?')
        .map_or("", |(_, query)| query.split('#').next().unwrap_or(""));
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_postgres_schemes() {
        for ok in [
            "postgres://h/db",
            "postgresql://u@h:5432/db?sslmode=require",
            "POSTGRES://h/db",
            " postgres://h/db",
        ] {
            assert!(connect_options(ok).is_ok(), "{ok}");
        }
        for bad in [
            "mysql://u:s3cretpw@h/db",
            "http://h/db",
            "postgres:/h/db",
            "s3cretpw",
            "host=h password=s3cretpw",
            "",
        ] {
            let err = connect_options(bad).expect_err(bad).to_string();
            assert!(
                err.contains("not a postgres:// or postgresql:// URL"),
                "{bad}: {err}"
            );
            assert!(!err.contains("s3cretpw"), "{bad}: {err}");
        }
    }

    #[test]
    fn invalid_urls_do_not_show_the_password() {
        let err = connect_options("postgres://u:s3cretpw@h:notaport/db")
            .expect_err("a bad port")
            .to_string();
        assert!(err.starts_with("invalid connection URL"), "{err}");
        assert!(!err.contains("s3cretpw"), "{err}");
        let err = connect_options("postgres://h/db?password=s3cretpw&sslmode=sometimes")
            .expect_err("a bad sslmode")
            .to_string();
        assert!(err.contains("sometimes"), "{err}");
        assert!(!err.contains("s3cretpw"), "{err}");
    }

    #[test]
    fn unknown_password_parameters_are_refused_unseen() {
        for url in [
            "postgres://h/db?passwd=s3cretpw",
            "postgres://h/db?sslmode=require&Password=s3cretpw",
            "postgres://h/db?sslpassword=s3cretpw",
        ] {
            let err = connect_options(url).expect_err(url).to_string();
            assert!(err.contains("unknown parameter"), "{err}");
            assert!(!err.contains("s3cretpw"), "{err}");
        }
        assert!(connect_options("postgres://h/db?password=pw").is_ok());
        assert!(connect_options("postgres://h/db?pass%77ord=pw").is_ok());
    }

    #[test]
    fn require_with_a_root_certificate_verifies_the_chain() {
        let ca = std::env::temp_dir().join(format!("awa-conninfo-{}.pem", std::process::id()));
        std::fs::write(&ca, "").unwrap();
        let ca = ca.to_str().unwrap().to_owned();
        let mode = |url: &str| {
            format!(
                "{:?}",
                connect_options(&url.replace("/ca.pem", &ca))
                    .unwrap()
                    .first()
                    .get_ssl_mode()
            )
        };
        assert_eq!(mode("postgres://h/db?sslmode=require"), "Require");
        assert_eq!(
            mode("postgres://h/db?sslmode=require&sslrootcert=/ca.pem"),
            "VerifyCa"
        );
        assert_eq!(
            mode("postgres://h/db?sslrootcert=/ca.pem&sslmode=verify-full"),
            "VerifyFull"
        );
        assert_eq!(mode("postgres://h/db?sslmode=disable"), "Disable");
        let _ = std::fs::remove_file(&ca);
    }

    #[test]
    fn a_missing_root_certificate_is_named() {
        let err =
            connect_options("postgres://h/db?sslmode=verify-full&sslrootcert=/no/such%20ca.pem")
                .expect_err("a missing file")
                .to_string();
        assert!(
            err.contains("\"/no/such ca.pem\" named by sslrootcert"),
            "{err}"
        );
        // Not needed without verification: libpq's `require` without the
        // file stays `require`.
        for mode in ["disable", "prefer", "require"] {
            let url = format!("postgres://h/db?sslmode={mode}&sslrootcert=/no/such.pem");
            let options = connect_options(&url).expect(mode);
            assert!(
                !matches!(options.first().get_ssl_mode(), PgSslMode::VerifyCa),
                "{mode}"
            );
        }
    }

    #[test]
    fn several_hosts_in_order_with_the_session_wanted() {
        let info = connect_options(
            "postgres://u:s3cretpw@10.0.0.1:5433,db2,[::1]:7/app?sslmode=disable\
             &target_session_attrs=read-write&connect_timeout=1&application_name=w",
        )
        .expect("a libpq host list");
        let labels: Vec<String> = info.hosts().iter().map(host_label).collect();
        assert_eq!(labels, ["10.0.0.1:5433", "db2:5432", "[::1]:7"]);
        assert_eq!(info.target(), TargetSession::ReadWrite);
        assert_eq!(info.connect_timeout(), Some(Duration::from_secs(2)));
        assert!(info.fails_over());
        for host in info.hosts() {
            assert_eq!(host.get_database(), Some("app"));
            assert_eq!(host.get_username(), "u");
            assert_eq!(host.get_application_name(), Some("w"));
            assert!(matches!(host.get_ssl_mode(), PgSslMode::Disable));
        }

        let info = connect_options("postgres:///app?host=a,b&port=1,2").expect("query lists");
        let labels: Vec<String> = info.hosts().iter().map(host_label).collect();
        assert_eq!(labels, ["a:1", "b:2"]);
        assert_eq!(info.target(), TargetSession::Any);
        assert_eq!(info.connect_timeout(), None);

        let one = connect_options("postgres://h/db?connect_timeout=0").expect("one host");
        assert!(!one.fails_over());
        assert_eq!(one.connect_timeout(), None);
        for name in TargetSession::NAMES {
            let url = format!("postgres://h1,h2/db?target_session_attrs={name}");
            assert_eq!(connect_options(&url).expect(name).target().as_str(), name);
        }
    }

    #[test]
    fn bad_host_lists_and_attributes_are_refused_without_the_password() {
        for (url, says) in [
            (
                "postgres://u:s3cretpw@h1,h2/db?target_session_attrs=master",
                "is not one of any, read-write, read-only, primary, standby, prefer-standby",
            ),
            (
                "postgres://u:s3cretpw@h1,h2/db?connect_timeout=soon",
                "not a whole number",
            ),
            ("postgres://u:s3cretpw@h1,,h2/db", "empty host"),
            ("postgres://u:s3cretpw@h1:port,h2/db", "invalid port"),
            (
                "postgres://u:s3cretpw@h/db?host=a,b&port=1,2,3",
                "3 ports were given for 2 hosts",
            ),
        ] {
            let err = connect_options(url).expect_err(url).to_string();
            assert!(err.contains(says), "{url}: {err}");
            assert!(
                err.starts_with("invalid connection URL postgres://u:***@"),
                "{err}"
            );
            assert!(!err.contains("s3cretpw"), "{err}");
        }
    }
}

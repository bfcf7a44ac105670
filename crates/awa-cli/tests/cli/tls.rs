//! TLS (OpenSSL, through sqlx's native-tls backend, as libpq uses it), and
//! password authentication, against a private
//! PostgreSQL cluster: the library's connections (a sqlx pool, as an
//! application makes one, and `awa_maint::migrate`) and the `awa` binary.
//!
//! The test makes its own CA and server certificate. The certificate names
//! only `localhost`, so `verify-full` to `localhost` must pass and
//! `verify-full` to `127.0.0.1` (the same server, a name the certificate
//! does not carry) must be refused, while `verify-ca` accepts both. TLS
//! and a password-checked role are switched on after the cluster started
//! (`ALTER SYSTEM` and a reload), so a server that is not a local cluster,
//! whose files we cannot write, is seen before anything is attempted.
//!
//! One cluster for everything: a single test.

use crate::common;

use awa_harness::{ClusterOptions, PgServer, ServerKind, TestDb};
use common::{Run, assert_hidden, awa, awa_every_way};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgConnection};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const WRONG_PASSWORD: &str = "s3cretpw";
const RIGHT_PASSWORD: &str = "right-pw-7";

struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("a CA key");
        let cert = params.self_signed(&key).expect("a self-signed CA");
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// Certificate and key (PEM) for a server known by `names`.
    fn server_cert(&self, names: &[&str]) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names.clone()).expect("server params");
        params
            .distinguished_name
            .push(DnType::CommonName, &names[0]);
        let key = KeyPair::generate().expect("a server key");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        (cert.pem(), key.serialize_pem())
    }
}

/// Writes `contents` to `dir/name` with `mode`, owned like `dir` (the
/// server's account, which is not ours when we run as root): PostgreSQL
/// refuses a key file that others can read or that it does not own.
fn write_owned(dir: &Path, name: &str, contents: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write a TLS file");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    let owner = std::fs::metadata(dir).expect("stat the data directory");
    std::os::unix::fs::chown(&path, Some(owner.uid()), Some(owner.gid())).expect("chown");
    path
}

fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

async fn exec(conn: &mut PgConnection, sql: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

async fn uses_tls(conn: &mut PgConnection) -> bool {
    sqlx::query_scalar("select ssl from pg_stat_ssl where pid = pg_backend_pid()")
        .fetch_one(conn)
        .await
        .expect("read pg_stat_ssl")
}

/// A pool the way an application makes one, straight from the URL.
async fn pool_uses_tls(url: &str) -> Result<bool, sqlx::Error> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect(url)
        .await?;
    let mut conn = pool.acquire().await?;
    let tls = uses_tls(&mut conn).await;
    drop(conn);
    pool.close().await;
    Ok(tls)
}

/// OpenSSL refusing the server's certificate (sqlx passes it on as its TLS
/// error), not the server refusing us.
fn assert_certificate_refused(err: &sqlx::Error) {
    assert!(
        matches!(err, sqlx::Error::Tls(_)) && err.to_string().contains("certificate verify failed"),
        "expected the certificate to be refused, got {err:?}"
    );
}

fn server_log(server: &PgServer) -> String {
    server
        .log_path()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default()
}

fn tls_refusal(run: &Run, how: &str) {
    run.refused("TLS");
    assert!(
        run.stderr.contains("could not connect to PostgreSQL")
            && run.stderr.contains("sslrootcert"),
        "{how}: the message should say what failed and what to check: {run:#?}"
    );
}

#[tokio::test]
async fn tls_and_passwords_on_a_private_cluster() {
    let server = PgServer::start(ClusterOptions::for_tests())
        .await
        .expect("a private PostgreSQL cluster");
    if server.kind() != ServerKind::LocalCluster {
        eprintln!(
            "skipping the TLS test: the server is a {:?} one, and the test must write \
             certificate files where the server can read them (only a local cluster)",
            server.kind()
        );
        return;
    }

    let mut admin = PgConnection::connect(server.url())
        .await
        .expect("connect as the superuser");
    let data_dir: String = sqlx::query_scalar("select current_setting('data_directory')")
        .fetch_one(&mut admin)
        .await
        .expect("data_directory");
    let hba_file: String = sqlx::query_scalar("select current_setting('hba_file')")
        .fetch_one(&mut admin)
        .await
        .expect("hba_file");
    let data_dir = PathBuf::from(data_dir);

    let ca = Ca::new("Awa test CA");
    let other_ca = Ca::new("Some other CA");
    let (cert, key) = ca.server_cert(&["localhost"]);
    let cert_file = write_owned(&data_dir, "awa-test-server.crt", &cert, 0o644);
    let key_file = write_owned(&data_dir, "awa-test-server.key", &key, 0o600);
    let ca_file = write_owned(&data_dir, "awa-test-ca.pem", &ca.pem, 0o644);
    let other_ca_file = write_owned(&data_dir, "awa-test-other-ca.pem", &other_ca.pem, 0o644);
    let ca_path = ca_file.to_str().expect("a UTF-8 path").to_owned();
    let other_ca_path = other_ca_file.to_str().expect("a UTF-8 path").to_owned();

    // A role that must give its password (scram), ahead of initdb's `trust`
    // lines; the superuser the harness connects as stays on `trust`.
    exec(
        &mut admin,
        &format!("create role app login password {}", literal(RIGHT_PASSWORD)),
    )
    .await;
    let hba = std::fs::read_to_string(&hba_file).expect("read pg_hba.conf");
    std::fs::write(
        &hba_file,
        format!("host all app 127.0.0.1/32 scram-sha-256\n{hba}"),
    )
    .expect("write pg_hba.conf");

    for sql in [
        format!(
            "alter system set ssl_cert_file = {}",
            literal(cert_file.to_str().unwrap())
        ),
        format!(
            "alter system set ssl_key_file = {}",
            literal(key_file.to_str().unwrap())
        ),
        "alter system set ssl = on".to_owned(),
        "select pg_reload_conf()".to_owned(),
    ] {
        exec(&mut admin, &sql).await;
    }
    // The reload is asynchronous: wait for the first TLS connection.
    let deadline = Instant::now() + Duration::from_secs(20);
    let require = format!("{}?sslmode=require", server.url());
    loop {
        match PgConnection::connect(&require).await {
            Ok(conn) => {
                let _ = conn.close().await;
                break;
            }
            Err(e) if Instant::now() > deadline => panic!(
                "the server did not take up TLS after the reload ({e}); its log:\n{}",
                server_log(&server)
            ),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    admin.close().await.ok();

    // The harness works on the TLS server too (its URL has no sslmode, so
    // libpq's default `prefer` applies and TLS is used).
    let db = TestDb::empty_on(&server).await.expect("a test database");
    let url = db.url().to_owned();
    assert!(url.starts_with("postgres://postgres@127.0.0.1:"), "{url}");
    let localhost = url.replacen("@127.0.0.1:", "@localhost:", 1);

    // (a) sslmode as libpq documents it, through a plain sqlx pool.
    assert!(
        pool_uses_tls(&format!("{url}?sslmode=require"))
            .await
            .unwrap()
    );
    assert!(
        pool_uses_tls(&format!("{url}?sslmode=prefer"))
            .await
            .unwrap()
    );
    assert!(pool_uses_tls(&url).await.unwrap(), "prefer is the default");
    assert!(
        !pool_uses_tls(&format!("{url}?sslmode=disable"))
            .await
            .unwrap()
    );

    // (b) verify-full against the name the certificate carries.
    let verify_full_ok = format!("{localhost}?sslmode=verify-full&sslrootcert={ca_path}");
    assert!(pool_uses_tls(&verify_full_ok).await.unwrap());
    // verify-ca checks the chain but not the name.
    let verify_ca_ip = format!("{url}?sslmode=verify-ca&sslrootcert={ca_path}");
    assert!(pool_uses_tls(&verify_ca_ip).await.unwrap());

    // (c) refusals: a host name the certificate does not carry, and a
    // certificate from a CA we were not told to trust.
    let verify_full_wrong_name = format!("{url}?sslmode=verify-full&sslrootcert={ca_path}");
    let err = pool_uses_tls(&verify_full_wrong_name)
        .await
        .expect_err("verify-full to a name not in the certificate");
    assert_certificate_refused(&err);
    assert!(err.to_string().contains("IP address mismatch"), "{err}");
    let verify_ca_wrong_ca = format!("{localhost}?sslmode=verify-ca&sslrootcert={other_ca_path}");
    let err = pool_uses_tls(&verify_ca_wrong_ca)
        .await
        .expect_err("verify-ca with another CA");
    assert_certificate_refused(&err);

    // The library's own URL entry point: migrate over verify-full, and
    // libpq's rule that `require` with a root certificate checks the chain.
    awa_maint::migrate(&verify_full_ok)
        .await
        .expect("migrate over verify-full");
    let err = awa_maint::migrate(&format!(
        "{url}?sslmode=require&sslrootcert={other_ca_path}"
    ))
    .await
    .expect_err("require with a root certificate verifies the chain");
    assert!(
        err.to_string().contains("certificate verify failed"),
        "{err}"
    );
    awa_maint::migrate(&format!("{url}?sslmode=require&sslrootcert={ca_path}"))
        .await
        .expect("require with the right root certificate");

    // (d) the CLI: connects with require and verify-full, refuses the
    // mismatched name and the unknown CA with a clear error.
    let run = awa(&format!("{url}?sslmode=require"), &["migrate", "--json"]);
    assert!(run.ok(), "{run:#?}");
    let stats = awa(&verify_full_ok, &["queue", "stats", "--json"]);
    assert!(stats.json().is_object(), "{stats:#?}");
    for (how, bad) in [
        ("verify-full, wrong name", &verify_full_wrong_name),
        ("verify-ca, unknown CA", &verify_ca_wrong_ca),
    ] {
        let run = awa(bad, &["queue", "stats"]);
        tls_refusal(&run, how);
        let run = awa(bad, &["migrate"]);
        tls_refusal(&run, how);
    }
    let run = awa(&verify_full_wrong_name, &["queue", "stats"]);
    assert!(
        run.stderr.contains("IP address mismatch"),
        "should say the certificate does not name the host: {run:#?}"
    );
    let run = awa(&verify_full_wrong_name, &["--json", "queue", "stats"]);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).expect("a JSON error");
    assert!(json["error"].as_str().unwrap().contains("TLS"), "{json}");

    // A password in the URL of a refused TLS connection is not shown.
    let with_password = verify_full_wrong_name.replacen(
        "postgres://postgres@",
        &format!("postgres://app:{WRONG_PASSWORD}@"),
        1,
    );
    for (how, run) in awa_every_way(&with_password, &["queue", "stats"]) {
        tls_refusal(&run, &how);
        assert_hidden(WRONG_PASSWORD, &how, &run);
    }

    // Password authentication: the right password works (over TLS), a
    // wrong one is refused by the server, and never printed, whether in the
    // user info or in `password=`.
    let app = |password: &str| {
        url.replacen(
            "postgres://postgres@",
            &format!("postgres://app:{password}@"),
            1,
        )
    };
    let run = awa(
        &format!("{}?sslmode=require", app(RIGHT_PASSWORD)),
        &["queue", "stats", "--json"],
    );
    // `app` has no rights on the awa schema: refused there, after logging in.
    assert!(
        run.ok() || run.stderr.contains("permission denied for schema"),
        "the right password gets past authentication: {run:#?}"
    );
    assert_hidden(RIGHT_PASSWORD, "right password", &run);
    let app_no_password = url.replacen("postgres://postgres@", "postgres://app@", 1);
    for bad in [
        app(WRONG_PASSWORD),
        format!("{}?sslmode=require", app(WRONG_PASSWORD)),
        format!("{app_no_password}?password={WRONG_PASSWORD}"),
        format!("{app_no_password}?sslmode=disable&password={WRONG_PASSWORD}"),
    ] {
        let mut runs = awa_every_way(&bad, &["queue", "stats"]);
        runs.push(("migrate".into(), awa(&bad, &["migrate"])));
        runs.push((
            "migrate -v --json".into(),
            awa(&bad, &["-v", "--json", "migrate"]),
        ));
        for (how, run) in runs {
            run.refused("password authentication failed");
            assert_hidden(WRONG_PASSWORD, &how, &run);
        }
        let err = awa_maint::migrate(&bad)
            .await
            .expect_err("a wrong password");
        assert!(
            !format!("{err} {err:?}").contains(WRONG_PASSWORD),
            "{err:?}"
        );
    }
}

/// A self-signed server certificate made the way PostgreSQL's
/// documentation shows (`openssl req -new -x509 -nodes -subj "/CN=NAME"`):
/// the name only in the subject's CN, no subjectAltName, and, as every
/// self-signed certificate `openssl req -x509` makes, `CA:TRUE`.
fn self_signed_ca_cert(name: &str) -> (String, String) {
    let mut params = CertificateParams::new(Vec::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().expect("a key");
    let cert = params.self_signed(&key).expect("self-signed");
    (cert.pem(), key.serialize_pem())
}

/// The session's own view of its transport, asked by both clients.
const SSL_IN_USE: &str = "select ssl from pg_stat_ssl where pid = pg_backend_pid()";

/// What libpq (`psql`, from the server's own binaries) does with `url`, the
/// reference: `Ok(uses TLS)` or its error. No `~/.postgresql/root.crt` and
/// no `PGSSLROOTCERT`, so only what the URL says counts.
fn libpq_connects(bindir: &Path, home: &Path, url: &str) -> Result<bool, String> {
    let out = std::process::Command::new(bindir.join("psql"))
        .args(["-XAtq", "-c", SSL_IN_USE, url])
        .env("HOME", home)
        .env_remove("PGSSLROOTCERT")
        .env_remove("PGSSLMODE")
        .output()
        .expect("run psql");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    match String::from_utf8_lossy(&out.stdout).trim() {
        "t" => Ok(true),
        "f" => Ok(false),
        other => panic!("psql answered {other:?} to {SSL_IN_USE}"),
    }
}

/// What Awa does with `url`: `Ok(uses TLS)` or its error. Every Awa entry
/// point reads a URL through `awa_core::conninfo`.
async fn awa_connects(url: &str) -> Result<bool, sqlx::Error> {
    let options = awa_core::conninfo::connect_options(url)
        .map_err(|e| sqlx::Error::Configuration(e.into()))?;
    let mut conn = PgConnection::connect_with(options.first()).await?;
    let tls = uses_tls(&mut conn).await;
    conn.close().await?;
    Ok(tls)
}

/// Both certificate shapes, every sslmode, with and without the root
/// certificate, the right and a wrong host name, with libpq as the
/// reference: Awa connects exactly where libpq connects, with TLS exactly
/// where libpq uses it, for a CA-signed leaf and for the documentation's
/// self-signed `CA:TRUE` certificate alike (ADR 13: OpenSSL, as libpq).
#[tokio::test]
async fn certificate_shapes_and_sslmodes_against_libpq() {
    let server = PgServer::start(ClusterOptions::for_tests())
        .await
        .expect("a private PostgreSQL cluster");
    if server.kind() != ServerKind::LocalCluster {
        eprintln!("skipping: certificate files can only be written for a local cluster");
        return;
    }
    let bindir = std::process::Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|dir| dir.join("psql").exists());
    let Some(bindir) = bindir else {
        eprintln!("skipping: no psql next to pg_config to compare with");
        return;
    };
    let home = tempfile::tempdir().expect("an empty HOME for psql");
    let mut admin = PgConnection::connect(server.url()).await.expect("connect");
    let data_dir: String = sqlx::query_scalar("select current_setting('data_directory')")
        .fetch_one(&mut admin)
        .await
        .expect("data_directory");
    let data_dir = PathBuf::from(data_dir);
    let db = TestDb::empty_on(&server).await.expect("a test database");
    let base = db.url().to_owned();
    assert!(
        base.contains("@127.0.0.1:") && !base.contains('?'),
        "{base}"
    );

    let ca = Ca::new("Awa shapes CA");
    let (leaf, leaf_key) = ca.server_cert(&["localhost"]);
    let (own, own_key) = self_signed_ca_cert("localhost");
    let shapes = [
        ("CA-signed leaf", leaf, leaf_key, ca.pem.clone()),
        ("self-signed CA:TRUE", own.clone(), own_key, own),
    ];
    for (shape, cert, key, root) in shapes {
        let tag = shape.replace([' ', ':'], "-");
        let cert_file = write_owned(&data_dir, &format!("{tag}.crt"), &cert, 0o644);
        let key_file = write_owned(&data_dir, &format!("{tag}.key"), &key, 0o600);
        let root_file = write_owned(&data_dir, &format!("{tag}-root.pem"), &root, 0o644);
        let cert_path = cert_file.to_str().unwrap().to_owned();
        for sql in [
            format!("alter system set ssl_cert_file = {}", literal(&cert_path)),
            format!(
                "alter system set ssl_key_file = {}",
                literal(key_file.to_str().unwrap())
            ),
            "alter system set ssl = on".to_owned(),
            "select pg_reload_conf()".to_owned(),
        ] {
            exec(&mut admin, &sql).await;
        }
        // New sessions see the reloaded settings once the postmaster has
        // taken them up, and with them its new TLS context.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut probe = PgConnection::connect(server.url()).await.expect("probe");
            let now: String = sqlx::query_scalar("select current_setting('ssl_cert_file')")
                .fetch_one(&mut probe)
                .await
                .unwrap();
            probe.close().await.ok();
            if now == cert_path {
                break;
            }
            assert!(Instant::now() < deadline, "the reload was not taken up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        let root = root_file.to_str().unwrap();
        let mut compared = 0;
        for host in ["localhost", "127.0.0.1"] {
            let at = base.replacen("@127.0.0.1:", &format!("@{host}:"), 1);
            for mode in [
                "disable",
                "allow",
                "prefer",
                "require",
                "verify-ca",
                "verify-full",
            ] {
                for with_root in [false, true] {
                    let mut url = format!("{at}?sslmode={mode}");
                    if with_root {
                        url.push_str(&format!("&sslrootcert={root}"));
                    }
                    let how = format!("{shape}, {host}, sslmode={mode}, root: {with_root}");
                    let libpq = libpq_connects(&bindir, home.path(), &url);
                    let awa = awa_connects(&url).await;
                    compared += 1;
                    match (&libpq, &awa) {
                        (Ok(libpq_tls), Ok(awa_tls)) => assert_eq!(
                            libpq_tls, awa_tls,
                            "{how}: both connected, TLS in use: libpq {libpq_tls}, Awa {awa_tls}"
                        ),
                        (Err(_), Err(_)) => {}
                        (Err(libpq_says), Ok(_)) => {
                            panic!("{how}: Awa connected where libpq refused: {libpq_says}")
                        }
                        (Ok(_), Err(err)) => {
                            panic!("{how}: Awa refused where libpq connected: {err:?}")
                        }
                    }
                }
            }
        }
        assert_eq!(compared, 24);
        // The CLI, through its own connection path: verify-full to the
        // name the certificate carries, and a clear refusal for another.
        let at = base.replacen("@127.0.0.1:", "@localhost:", 1);
        let run = awa(
            &format!("{at}?sslmode=verify-full&sslrootcert={root}"),
            &["migrate"],
        );
        assert!(run.ok(), "{shape}: {run:#?}");
        let run = awa(
            &format!("{base}?sslmode=verify-full&sslrootcert={root}"),
            &["queue", "stats"],
        );
        tls_refusal(&run, shape);
        assert!(
            run.stderr.contains("IP address mismatch"),
            "{shape}: {run:#?}"
        );
    }
    admin.close().await.ok();
}

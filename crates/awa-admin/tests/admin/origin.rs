//! The origin rule over real connections: a request whose `Host` does not
//! name the server (DNS rebinding) is refused with 421 before anything
//! runs, whatever token it carries; loopback names, the listen address
//! (with or without port) and `--allowed-host` names are answered. The
//! same holds for a worker's metrics endpoint. A server beyond loopback
//! needs the token for reads.

use crate::common;

use awa_admin::{AdminConfig, AllowedHosts, AppState, origin};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::*;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 request over TCP with exactly these header lines; the
/// status and body.
async fn raw(addr: SocketAddr, request_line: &str, headers: &[String]) -> (u16, String) {
    let mut stream = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::net::TcpStream::connect(addr),
    )
    .await
    .expect("connect in time")
    .unwrap();
    let mut text = format!("{request_line}\r\n");
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    text.push_str("Connection: close\r\nContent-Length: 0\r\n\r\n");
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut reply))
        .await
        .expect("an answer in time")
        .unwrap();
    let reply = String::from_utf8_lossy(&reply).into_owned();
    let status = reply
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line in {reply:?}"));
    let body = reply
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// Serve `config` on `listen` (port 0) as `awa serve` does; the address.
async fn start(
    pool: &sqlx::PgPool,
    listen: &str,
    mut config: AdminConfig,
    extra: &[&str],
) -> Option<(SocketAddr, tokio::sync::oneshot::Sender<()>)> {
    let listener = awa_admin::bind(listen.parse().unwrap()).await.ok()?;
    let addr = listener.local_addr().unwrap();
    config.allowed_hosts = AllowedHosts::for_listen(addr);
    for h in extra {
        config.allowed_hosts.allow(h).unwrap();
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(awa_admin::serve(
        listener,
        AppState::new(pool.clone(), config, None),
        async move {
            let _ = rx.await;
        },
    ));
    Some((addr, tx))
}

fn host(h: &str) -> String {
    format!("Host: {h}")
}

fn refused(status: u16, body: &str) {
    assert_eq!(status, 421, "{body}");
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["error"]["code"], "host_not_allowed", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("--allowed-host") || message.contains("no Host header"),
        "says what to do: {message}"
    );
    assert_eq!(v["error"].as_object().unwrap().len(), 2);
}

#[tokio::test]
async fn a_foreign_host_is_refused_and_the_servers_own_names_are_answered() {
    let (_db, pool) = setup().await;
    seed(&pool).await;
    let before = fingerprint(&pool).await;
    let (addr, _stop) = start(&pool, "127.0.0.1:0", config(true), &["jobs.example.com"])
        .await
        .expect("loopback binds");
    let port = addr.port();
    let auth = format!("Authorization: Bearer {TOKEN}");

    // DNS rebinding: the attacker's name, on our address and port.
    for h in ["evil.example", &format!("evil.example:{port}")] {
        let (status, body) = raw(addr, "GET /api/jobs HTTP/1.1", &[host(h)]).await;
        refused(status, &body);
        assert!(!body.contains("\"args\""), "no job data: {body}");
        // Every path, and before the token is looked at: even a valid
        // token does not make an action run.
        for path in ["/", "/healthz", "/openapi.json", "/metrics", "/nope"] {
            let (status, body) = raw(addr, &format!("GET {path} HTTP/1.1"), &[host(h)]).await;
            refused(status, &body);
        }
        let (status, body) = raw(
            addr,
            "POST /api/queues/alpha/pause HTTP/1.1",
            &[host(h), auth.clone()],
        )
        .await;
        refused(status, &body);
    }
    // No Host at all (HTTP/1.0 allows it; a browser always sends one).
    let (status, body) = raw(addr, "GET /api/jobs HTTP/1.0", &[]).await;
    refused(status, &body);
    assert_eq!(fingerprint(&pool).await, before, "nothing changed");

    // The listen address with and without port, loopback names, the
    // IPv6 loopback, and the added name.
    for h in [
        format!("127.0.0.1:{port}"),
        "127.0.0.1".to_string(),
        format!("localhost:{port}"),
        "localhost".to_string(),
        format!("[::1]:{port}"),
        "[::1]".to_string(),
        "jobs.example.com".to_string(),
        format!("JOBS.example.com:{port}"),
    ] {
        let (status, body) = raw(addr, "GET /api/jobs HTTP/1.1", &[host(&h)]).await;
        assert_eq!(status, 200, "{h}: {body}");
        assert!(body.contains("\"jobs\""), "{h}: {body}");
    }
    // An allowed host still needs the token for actions.
    let (status, _) = raw(
        addr,
        "POST /api/queues/alpha/pause HTTP/1.1",
        &[host("localhost")],
    )
    .await;
    assert_eq!(status, 401);
    // An absolute-form request names its host in the URI: same rule.
    let (status, body) = raw(
        addr,
        "GET http://evil.example/api/jobs HTTP/1.1",
        &[host("localhost")],
    )
    .await;
    refused(status, &body);
}

#[tokio::test]
async fn a_server_on_the_ipv6_loopback_answers_to_it() {
    let (_db, pool) = setup().await;
    let Some((addr, _stop)) = start(&pool, "[::1]:0", config(false), &[]).await else {
        eprintln!("no IPv6 loopback on this machine; skipped");
        return;
    };
    let port = addr.port();
    for h in [format!("[::1]:{port}"), "[::1]".into(), "localhost".into()] {
        let (status, body) = raw(addr, "GET /api/queues HTTP/1.1", &[host(&h)]).await;
        assert_eq!(status, 200, "{h}: {body}");
    }
    let (status, body) = raw(addr, "GET /api/queues HTTP/1.1", &[host("evil.example")]).await;
    refused(status, &body);
}

#[tokio::test]
async fn listening_on_every_address_answers_ip_literals_but_no_foreign_name() {
    let (_db, pool) = setup().await;
    let mut config = config(true);
    config.token_for_reads = true;
    config.allowed_hosts = AllowedHosts::for_listen("0.0.0.0:8088".parse().unwrap());
    let app = app(&pool, config);
    let get_as = |h: &'static str| {
        Request::get("/api/queues")
            .header(header::HOST, h)
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .body(Body::empty())
            .unwrap()
    };
    for h in [
        "192.0.2.7:8088",
        "192.0.2.7",
        "[2001:db8::7]:8088",
        "localhost",
    ] {
        let reply = send_as_is(&app, get_as(h)).await;
        assert_eq!(reply.status, StatusCode::OK, "{h}: {}", reply.text);
    }
    for h in ["evil.example", "evil.example:8088", "192.0.2.7.nip.io"] {
        let reply = send_as_is(&app, get_as(h)).await;
        assert_eq!(reply.status, StatusCode::MISDIRECTED_REQUEST, "{h}");
        assert_eq!(reply.error_code(), "host_not_allowed");
    }
}

#[test]
fn a_server_beyond_loopback_must_require_the_token_for_reads() {
    let open = AdminConfig::new(schema());
    let token_only = config(true);
    let mut guarded = config(true);
    guarded.token_for_reads = true;
    for listen in ["127.0.0.1:8088", "127.0.0.2:8088", "[::1]:8088"] {
        let listen: SocketAddr = listen.parse().unwrap();
        for c in [&open, &token_only, &guarded] {
            assert!(origin::check_listen(listen, c).is_ok(), "{listen}");
        }
    }
    for listen in [
        "0.0.0.0:8088",
        "[::]:8088",
        "10.0.0.5:8088",
        "[2001:db8::1]:80",
    ] {
        let listen: SocketAddr = listen.parse().unwrap();
        for c in [&open, &token_only] {
            let err = origin::check_listen(listen, c).unwrap_err();
            assert!(
                err.to_string().contains("--require-token-for-reads"),
                "{err}"
            );
        }
        assert!(origin::check_listen(listen, &guarded).is_ok());
    }
}

#[tokio::test]
async fn a_workers_metrics_endpoint_follows_the_same_rule() {
    let metrics = awa_admin::metrics::Metrics::install().unwrap();
    let listener = awa_admin::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let mut hosts = AllowedHosts::for_listen(addr);
    hosts.allow("scrape.internal").unwrap();
    tokio::spawn(awa_admin::metrics::serve_worker(listener, metrics, hosts));
    for h in [
        addr.to_string(),
        "localhost".into(),
        "[::1]".into(),
        "scrape.internal".into(),
    ] {
        let (status, body) = raw(addr, "GET /metrics HTTP/1.1", &[host(&h)]).await;
        assert_eq!(status, 200, "{h}: {body}");
    }
    let (status, body) = raw(addr, "GET /metrics HTTP/1.1", &[host("evil.example")]).await;
    refused(status, &body);
}

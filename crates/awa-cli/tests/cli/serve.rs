//! `awa serve` and `awa worker run --metrics-addr` as processes: they come
//! up on DATABASE_URL, say whether actions are allowed, answer over HTTP,
//! log actions with their actor, and never print the token.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const TOKEN: &str = "cli-serve-token-5f0e1d2c3b4a69788796";

struct Server {
    child: Child,
    addr: String,
    /// The line that named the address.
    first: String,
    lines: mpsc::Receiver<String>,
}

/// Start `awa ARGS` and wait for the line naming its address.
fn start(url: &str, args: &[&str], token: Option<&str>, marker: &str) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_awa"));
    cmd.arg("--database-url").arg(url).args(args);
    cmd.env_remove("AWA_ADMIN_TOKEN");
    if let Some(t) = token {
        cmd.env("AWA_ADMIN_TOKEN", t);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the server says where it listens");
        if line.contains(marker) {
            break line;
        }
    };
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("an address in {first:?}"))
        .to_string();
    Server {
        child,
        addr,
        first,
        lines,
    }
}

impl Server {
    /// One HTTP/1.0 request naming the server by its address: status and
    /// body.
    fn request(&self, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
        self.request_as(&self.addr.clone(), method, path, token, body)
    }

    /// One HTTP/1.0 request with `Host: host`.
    fn request_as(
        &self,
        host: &str,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &str,
    ) -> (u16, String) {
        let connect_to = self.addr.replace("0.0.0.0", "127.0.0.1");
        let mut stream = TcpStream::connect(&connect_to).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        write!(
            stream,
            "{method} {path} HTTP/1.0\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
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

    /// Stop with SIGTERM; everything it wrote to stderr.
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().unwrap();
        let mut out = format!("{}\n", self.first);
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            out.push_str(&line);
            out.push('\n');
        }
        if let Some(mut stdout) = self.child.stdout.take() {
            let _ = stdout.read_to_string(&mut out);
        }
        assert!(
            status.success() || status.code().is_none(),
            "{status:?}: {out}"
        );
        out
    }
}

impl Drop for Server {
    /// A test that fails before `stop()` leaves no process behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the text format has a sample of `name` with these labels and
/// this value.
fn sample(text: &str, name: &str, labels: &[&str], value: &str) -> bool {
    text.lines().any(|line| {
        line.starts_with(&format!("{name}{{"))
            && labels.iter().all(|l| line.contains(l))
            && line.rsplit_once(' ').is_some_and(|(_, v)| v == value)
    })
}

#[tokio::test]
async fn serve_is_read_only_without_a_token_and_logs_actions_with_one() {
    let db = common::migrated_db().await;
    let url = db.url().to_string();
    common::enqueue(&url, "mail", "send", 3);

    let open = start(
        &url,
        &["serve", "--listen", "127.0.0.1:0"],
        None,
        "awa serve:",
    );
    assert!(open.addr.starts_with("127.0.0.1:"));
    let (status, body) = open.request("GET", "/api/queues", None, "");
    assert_eq!(status, 200, "{body}");
    let queues: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(queues["queues"][0]["counts"]["available"], 3);
    let (status, body) = open.request("POST", "/api/queues/mail/pause", None, "");
    assert_eq!(status, 403, "{body}");
    let (status, _) = open.request("GET", "/", None, "");
    assert_eq!(status, 200);
    let (status, metrics) = open.request("GET", "/metrics", None, "");
    assert_eq!(status, 200);
    assert!(
        sample(
            &metrics,
            "awa_queue_depth",
            &["queue=\"mail\"", "state=\"available\""],
            "3"
        ),
        "{metrics}"
    );
    let log = open.stop();
    assert!(log.contains("read-only"), "says so at start: {log}");

    let guarded = start(
        &url,
        &["-v", "serve", "--listen", "127.0.0.1:0"],
        Some(TOKEN),
        "awa serve:",
    );
    let (status, _) = guarded.request("POST", "/api/queues/mail/pause", None, "");
    assert_eq!(status, 401);
    let (status, body) = guarded.request("POST", "/api/queues/mail/pause", Some(TOKEN), "");
    assert_eq!(status, 200, "{body}");
    let log = guarded.stop();
    assert!(!log.contains(TOKEN), "the token was printed: {log}");
    assert!(
        log.contains("admin action") && log.contains("queue.pause") && log.contains("actor=token:"),
        "{log}"
    );
    let run = common::awa(&url, &["--json", "storage", "status"]);
    assert!(run.ok(), "{run:?}");
    assert!(run.json()["pinned_alert"].is_null());

    // A token too short to be safe is refused before serving.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_awa"));
    let short = cmd
        .args(["--database-url", &url, "serve", "--listen", "127.0.0.1:0"])
        .env("AWA_ADMIN_TOKEN", "short")
        .output()
        .unwrap();
    assert!(!short.status.success());
    let stderr = String::from_utf8_lossy(&short.stderr);
    assert!(
        stderr.contains("too short") && !stderr.contains("\"short\""),
        "{stderr}"
    );
}

/// `awa ARGS` run to completion: exit code and stderr.
fn refused_run(url: &str, args: &[&str], token: Option<&str>) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_awa"));
    cmd.arg("--database-url").arg(url).args(args);
    cmd.env_remove("AWA_ADMIN_TOKEN");
    if let Some(t) = token {
        cmd.env("AWA_ADMIN_TOKEN", t);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn serve_answers_only_its_own_hosts_and_beyond_loopback_only_with_reads_guarded() {
    let db = common::migrated_db().await;
    let url = db.url().to_string();
    common::enqueue(&url, "mail", "send", 2);

    // DNS rebinding: a page under the attacker's name reaching the
    // loopback server. Refused; the server's own names are answered.
    let local = start(
        &url,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--allowed-host",
            "jobs.example.com",
        ],
        None,
        "awa serve:",
    );
    let port = local.addr.rsplit_once(':').unwrap().1.to_string();
    for h in ["evil.example".to_string(), format!("evil.example:{port}")] {
        let (status, body) = local.request_as(&h, "GET", "/api/jobs", None, "");
        assert_eq!(status, 421, "{h}: {body}");
        assert!(
            body.contains("host_not_allowed") && !body.contains("\"args\""),
            "{body}"
        );
    }
    for h in [
        local.addr.clone(),
        "127.0.0.1".into(),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "jobs.example.com".into(),
    ] {
        let (status, body) = local.request_as(&h, "GET", "/api/jobs", None, "");
        assert_eq!(status, 200, "{h}: {body}");
    }
    local.stop();

    // Beyond loopback: refused unless reads need the token, before
    // connecting; a refused combination of flags is a bad command line
    // (exit 2, as every value refused after parsing).
    for token in [None, Some(TOKEN)] {
        let (code, stderr) = refused_run(&url, &["serve", "--listen", "0.0.0.0:0"], token);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("--require-token-for-reads"), "{stderr}");
    }
    let (code, stderr) = refused_run(
        &url,
        &[
            "serve",
            "--allowed-host",
            "http://x/",
            "--listen",
            "127.0.0.1:0",
        ],
        None,
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("is not a host"), "{stderr}");

    let wide = start(
        &url,
        &[
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--require-token-for-reads",
        ],
        Some(TOKEN),
        "awa serve:",
    );
    let (status, body) = wide.request_as("evil.example", "GET", "/api/jobs", Some(TOKEN), "");
    assert_eq!(status, 421, "{body}");
    let (status, _) = wide.request_as("127.0.0.1", "GET", "/api/jobs", None, "");
    assert_eq!(status, 401, "reads need the token");
    let (status, body) = wide.request_as("192.0.2.7:8088", "GET", "/api/jobs", Some(TOKEN), "");
    assert_eq!(status, 200, "any address names a server on 0.0.0.0: {body}");
    wide.stop();
}

#[tokio::test]
async fn a_worker_serves_its_metrics_when_asked() {
    let db = common::migrated_db().await;
    let url = db.url().to_string();
    common::enqueue(&url, "m", "noop", 4);
    let worker = start(
        &url,
        &common::worker_run(
            "m",
            "noop",
            &["--no-maintenance", "--metrics-addr", "127.0.0.1:0"],
        ),
        None,
        "metrics at",
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, text) = worker.request("GET", "/metrics", None, "");
        assert_eq!(status, 200);
        if sample(
            &text,
            "awa_jobs_completed_total",
            &["kind=\"noop\"", "queue=\"m\""],
            "4",
        ) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never saw 4 completions: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The origin rule of `awa serve` holds here too.
    let (status, body) = worker.request_as("evil.example", "GET", "/metrics", None, "");
    assert_eq!(status, 421, "{body}");
    worker.stop();
}

#[tokio::test]
async fn storage_status_alerts_on_a_snapshot_pinned_past_the_threshold() {
    let db = common::migrated_db().await;
    let url = db.url().to_string();
    let pool = db.pool().await.unwrap();
    let mut pinning = pool.acquire().await.unwrap();
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *pinning)
        .await
        .unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid() /* long report */")
        .fetch_one(&mut *pinning)
        .await
        .unwrap();
    // Reported once older than the report's 5 s floor; poll for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let text = loop {
        let run = common::awa(&url, &["storage", "status", "--pinned-alert-after", "1s"]);
        assert!(run.ok(), "{run:?}");
        if run.stdout.contains("ALERT:") {
            break run.stdout;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no alert: {}",
            run.stdout
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(text.contains(&format!("backend pid {pid}")), "{text}");
    assert!(text.contains("long report"), "names the query: {text}");
    let json = common::awa(
        &url,
        &["--json", "storage", "status", "--pinned-alert-after", "1s"],
    )
    .json();
    assert_eq!(json["pinned_alert"]["pid"], pid);
    assert_eq!(json["maintenance"]["pinned_snapshot"]["pid"], pid);
    let calm = common::awa(&url, &["--json", "storage", "status"]).json();
    assert!(
        calm["pinned_alert"].is_null(),
        "under the default 5 minutes"
    );
    sqlx::query("ROLLBACK")
        .execute(&mut *pinning)
        .await
        .unwrap();
}

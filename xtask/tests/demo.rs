//! `cargo xtask demo` as a process, on a database of its own: it reports
//! the pickup latency of an idle queue besides the one behind the backlog;
//! `--listen` is accepted, and a busy address is refused at once, named;
//! `--serve` keeps a system shaped like a real one running under the
//! dashboard (several queues, failures, retries, dead letters, scheduled,
//! paused and cron work) and stops cleanly on Ctrl-C.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn xtask() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.env_remove("AWA_ADMIN_TOKEN").env("AWA_LOG", "error");
    cmd
}

#[tokio::test]
async fn the_demo_reports_idle_pickup_latency_too() {
    let db = awa_harness::TestDb::empty().await.expect("a database");
    let out = xtask()
        .args(["demo", "--jobs", "400"])
        .env("DATABASE_URL", db.url())
        .output()
        .expect("run xtask demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |start: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("no line starting {start:?}:\n{stdout}"))
            .to_string()
    };
    assert!(
        line("pickup latency").contains("behind the backlog: p50"),
        "{stdout}"
    );
    let idle = line("idle: p50");
    assert!(idle.contains("100 jobs one at a time"), "{idle}");
    assert!(line("completed == enqueued").contains("yes"), "{stdout}");
}

#[test]
fn a_busy_address_is_named_before_anything_runs() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let started = Instant::now();
    let out = xtask()
        .args(["demo", "--jobs", "10", "--listen", &addr.to_string()])
        // Never reached: the address is checked first.
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/nothing")
        .output()
        .expect("run xtask demo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")) && stderr.contains("--listen"),
        "names the address and the way out: {stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "refused at once"
    );
}

/// GET `path` from `addr`: the status line's code and the body.
fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the demo");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").expect("an HTTP reply");
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, body.to_string())
}

fn count(queues: &serde_json::Value, queue: &str, state: &str) -> i64 {
    queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == queue)
        .and_then(|q| q["counts"][state].as_i64())
        .unwrap_or(0)
}

/// The child process, killed if the test ends before it stopped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[tokio::test]
async fn serve_keeps_a_realistic_system_running_until_ctrl_c() {
    let db = awa_harness::TestDb::empty().await.expect("a database");
    let child = xtask()
        .args([
            "demo",
            "--jobs",
            "200",
            "--serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .env("DATABASE_URL", db.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start xtask demo --serve");
    let mut child = Child(child);
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the demo printed where it serves")
            .unwrap();
        if let Some(rest) = line.strip_prefix("serving the demo data at http://") {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    // Drain the rest of its output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});

    // Within a generous deadline every kind of work shows up.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut seen = String::new();
    let wanted = |q: &serde_json::Value, cron: &serde_json::Value| {
        let queues: Vec<&str> = q["queues"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|q| q["queue"].as_str())
            .collect();
        [
            "email", "images", "webhooks", "payments", "reports", "exports",
        ]
        .iter()
        .all(|name| queues.contains(name))
            && count(q, "email", "completed") > 0
            && count(q, "email", "scheduled") >= 20
            && count(q, "images", "failed") > 0
            && count(q, "webhooks", "retryable") + count(q, "webhooks", "available") > 0
            && count(q, "payments", "dead_lettered") > 0
            && count(q, "exports", "available") == 40
            && q["queues"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["queue"] == "exports" && x["paused"] == true)
            && cron["schedules"].as_array().map_or(0, Vec::len) == 2
    };
    loop {
        let (code, queues) = http_get(&addr, "/api/queues");
        let (_, cron) = http_get(&addr, "/api/cron");
        if code == 200 {
            let q: serde_json::Value = serde_json::from_str(&queues).unwrap();
            let c: serde_json::Value = serde_json::from_str(&cron).unwrap();
            if wanted(&q, &c) {
                // Retries really happen: a webhook completes after failing.
                let (_, jobs) = http_get(&addr, "/api/jobs?queue=webhooks&state=completed&limit=5");
                let jobs: serde_json::Value = serde_json::from_str(&jobs).unwrap();
                if jobs["jobs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|j| j["attempt"].as_i64().unwrap_or(0) >= 2)
                {
                    break;
                }
            }
            seen = format!("{q}\n{c}");
        }
        assert!(
            Instant::now() < deadline,
            "the demo's system did not show every kind of work; last seen:\n{seen}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.0.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "Ctrl-C stops the demo");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "{status:?}");
}

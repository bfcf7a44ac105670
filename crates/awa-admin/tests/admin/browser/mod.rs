//! The dashboard test's browser: Debian's `chromium`, headless, driven over
//! the Chrome DevTools protocol, which is JSON commands and replies on a
//! websocket. Only what the test uses: run JavaScript, open a page, set
//! the screen size and the time zone, click and type as a user does (real
//! input events, so a covered or hidden button cannot be clicked), and
//! take full-page screenshots. A generated binding of the whole protocol
//! was the largest crate the workspace compiled, for these few commands.

use futures::{SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

/// How long chromium may take to start and one command to be answered:
/// generous, as the rest of the suite may be loading the machine.
const PATIENCE: Duration = Duration::from_secs(60);

type Reply = Result<Value, String>;

/// Who waits for which reply, by command id.
type Waiting = Mutex<HashMap<u64, oneshot::Sender<Reply>>>;

/// The websocket to the browser, shared by the browser and its page: a
/// task owns the socket, sends what `out` gets and hands each reply to
/// whoever waits for its id. Events are not used.
#[derive(Debug, Clone)]
struct Connection {
    out: mpsc::UnboundedSender<Message>,
    waiting: Arc<Waiting>,
    next_id: Arc<AtomicU64>,
}

impl Connection {
    async fn open(url: &str) -> Result<Self, String> {
        let (mut socket, _) = tokio_tungstenite::connect_async(url)
            .await
            .map_err(|e| format!("connecting to chromium at {url}: {e}"))?;
        let (out, mut outgoing) = mpsc::unbounded_channel::<Message>();
        let waiting: Arc<Waiting> = Arc::default();
        let replies = waiting.clone();
        // Ends when the browser closes the socket or every sender is gone;
        // dropping the waiting senders then fails their calls.
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    msg = outgoing.recv() => match msg {
                        Some(msg) => {
                            if socket.send(msg).await.is_err() {
                                break;
                            }
                        }
                        None => break,
                    },
                    msg = socket.next() => match msg {
                        Some(Ok(Message::Text(text))) => deliver(&replies, &text),
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => break,
                    },
                }
            }
            replies.lock().expect("replies lock").clear();
        });
        Ok(Self {
            out,
            waiting,
            next_id: Arc::new(AtomicU64::new(1)),
        })
    }

    /// One command (to the page's session, or to the browser) and its
    /// result.
    async fn call(&self, session: Option<&str>, method: &str, params: Value) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            msg["sessionId"] = json!(session);
        }
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().expect("replies lock").insert(id, tx);
        self.out
            .send(Message::text(msg.to_string()))
            .map_err(|_| format!("{method}: the connection to chromium is closed"))?;
        match tokio::time::timeout(PATIENCE, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(format!("{method}: chromium closed the connection")),
            Err(_) => Err(format!("{method}: no answer within {PATIENCE:?}")),
        }
    }
}

/// Hands a reply to its caller; anything else (an event) is dropped.
fn deliver(waiting: &Waiting, text: &str) {
    let Ok(msg) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let Some(id) = msg.get("id").and_then(Value::as_u64) else {
        return;
    };
    let Some(tx) = waiting.lock().expect("replies lock").remove(&id) else {
        return;
    };
    let reply = match msg.get("error") {
        Some(err) => Err(err.to_string()),
        None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
    };
    let _ = tx.send(reply);
}

/// A running chromium; killed when dropped, closed by [`Browser::close`].
#[derive(Debug)]
pub struct Browser {
    child: Child,
    conn: Connection,
}

impl Browser {
    /// Starts `chromium` headless with a fresh profile in `profile` and
    /// connects to it (the port is the one it chose and printed).
    pub async fn launch(chromium: &Path, profile: &Path) -> Result<Self, String> {
        let mut child = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
                "--remote-debugging-port=0",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", chromium.display()))?;
        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let listening = async {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("chromium: {line}");
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    return Some(url.trim().to_owned());
                }
            }
            None
        };
        let url = tokio::time::timeout(PATIENCE, listening)
            .await
            .map_err(|_| format!("chromium did not listen within {PATIENCE:?}"))?
            .ok_or("chromium exited before it listened")?;
        // The rest of its stderr goes with the test's output (shown when
        // the test fails); read on, so chromium never blocks on the pipe.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("chromium: {line}");
            }
        });
        let conn = Connection::open(&url).await?;
        Ok(Self { child, conn })
    }

    /// A new tab showing `url`, loaded.
    pub async fn new_page(&self, url: &str) -> Result<Page, String> {
        let target = self
            .conn
            .call(None, "Target.createTarget", json!({ "url": "about:blank" }))
            .await?;
        let attached = self
            .conn
            .call(
                None,
                "Target.attachToTarget",
                json!({ "targetId": target["targetId"], "flatten": true }),
            )
            .await?;
        let session = attached["sessionId"]
            .as_str()
            .ok_or("Target.attachToTarget: no session id")?
            .to_owned();
        let page = Page {
            conn: self.conn.clone(),
            session,
        };
        if url != "about:blank" {
            page.goto(url).await?;
        }
        Ok(page)
    }

    /// Asks chromium to quit and waits until it has.
    pub async fn close(mut self) -> Result<(), String> {
        // The reply may not come: the browser is going away.
        let _ = self.conn.call(None, "Browser.close", json!({})).await;
        match tokio::time::timeout(PATIENCE, self.child.wait()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("waiting for chromium: {e}")),
            Err(_) => Err(format!("chromium did not quit within {PATIENCE:?}")),
        }
    }
}

/// One tab, through its protocol session.
#[derive(Debug)]
pub struct Page {
    conn: Connection,
    session: String,
}

impl Page {
    async fn call(&self, method: &str, params: Value) -> Reply {
        self.conn.call(Some(&self.session), method, params).await
    }

    /// Runs `js` in the page (awaiting a promise) and returns its value.
    pub async fn evaluate<T: DeserializeOwned>(&self, js: &str) -> Result<T, String> {
        let reply = self
            .call(
                "Runtime.evaluate",
                json!({ "expression": js, "returnByValue": true, "awaitPromise": true }),
            )
            .await?;
        if let Some(thrown) = reply.get("exceptionDetails") {
            return Err(format!("{js}: threw {thrown}"));
        }
        let value = reply["result"].get("value").cloned().unwrap_or(Value::Null);
        serde_json::from_value(value).map_err(|e| format!("{js}: {e}"))
    }

    /// Opens `url` and waits until it has loaded.
    pub async fn goto(&self, url: &str) -> Result<(), String> {
        let reply = self.call("Page.navigate", json!({ "url": url })).await?;
        if let Some(failed) = reply.get("errorText") {
            return Err(format!("opening {url}: {failed}"));
        }
        let loaded = format!(
            "location.origin === new URL({}).origin && document.readyState === 'complete'",
            json!(url)
        );
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !self.evaluate::<bool>(&loaded).await.unwrap_or(false) {
            if tokio::time::Instant::now() > deadline {
                return Err(format!("{url} did not load within {PATIENCE:?}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// The screen the page is laid out for, as a phone (`mobile`) or not.
    pub async fn set_screen(&self, width: i64, height: i64, mobile: bool) -> Result<(), String> {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile }),
        )
        .await
        .map(drop)
    }

    /// The time zone the page's clock is in (an IANA name).
    pub async fn set_time_zone(&self, zone: &str) -> Result<(), String> {
        self.call(
            "Emulation.setTimezoneOverride",
            json!({ "timezoneId": zone }),
        )
        .await
        .map(drop)
    }

    /// Clicks the middle of the first element matching `selector`, scrolled
    /// into view, with the mouse: whatever lies on top there gets the click.
    pub async fn click(&self, selector: &str) -> Result<(), String> {
        let js = format!(
            "(() => {{ const e = document.querySelector({}); if (!e) return null; \
             e.scrollIntoView({{ block: 'center', inline: 'center' }}); \
             const r = e.getBoundingClientRect(); \
             return [r.left + r.width / 2, r.top + r.height / 2]; }})()",
            json!(selector)
        );
        let (x, y) = self
            .evaluate::<Option<(f64, f64)>>(&js)
            .await?
            .ok_or_else(|| format!("no element {selector}"))?;
        for (kind, button) in [
            ("mouseMoved", "none"),
            ("mousePressed", "left"),
            ("mouseReleased", "left"),
        ] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({ "type": kind, "x": x, "y": y, "button": button, "clickCount": 1 }),
            )
            .await?;
        }
        Ok(())
    }

    /// Types `text` into the element that has the focus.
    pub async fn type_text(&self, text: &str) -> Result<(), String> {
        self.call("Input.insertText", json!({ "text": text }))
            .await
            .map(drop)
    }

    /// A PNG of the whole page, not only the part in view, at `path`.
    pub async fn screenshot(&self, path: &Path) -> Result<(), String> {
        use base64::Engine as _;
        let metrics = self.call("Page.getLayoutMetrics", json!({})).await?;
        let size = &metrics["cssContentSize"];
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({
                    "format": "png",
                    "captureBeyondViewport": true,
                    "clip": { "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1 },
                }),
            )
            .await?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().ok_or("a screenshot without data")?)
            .map_err(|e| format!("the screenshot's base64: {e}"))?;
        std::fs::write(path, png).map_err(|e| format!("writing {}: {e}", path.display()))
    }
}

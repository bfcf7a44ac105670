//! The dashboard in a real headless browser (Debian's `chromium`, over the
//! DevTools protocol): each page shows the database's numbers, retrying a
//! dead letter and the cron controls work from their buttons (and the
//! database agrees), the storage page names a pinned snapshot, times carry
//! their zone, and every page fits both a 375 px phone and a 1280 px
//! screen: nothing wider than the phone's screen, every action button
//! wholly in view and not cut off by a scrolling box. Screenshots of every
//! page at both widths go to `target/screenshots/` (`NAME.png` and
//! `NAME-375px.png`) for review.
//!
//! Without chromium this test skips with a loud message, unless CI is set:
//! then it fails (`.ci/run` installs chromium).

use crate::browser;
use crate::common;

use awa_admin::AppState;
use browser::{Browser, Page};
use common::*;
use std::path::PathBuf;
use std::time::Duration;

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|p| p.is_file())
}

fn screenshots() -> PathBuf {
    // CARGO_TARGET_TMPDIR is <target>/tmp.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Evaluate `js` until it yields true (the page refreshes on its own).
async fn wait_for(page: &Page, what: &str, js: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let ok = page.evaluate::<bool>(js).await.unwrap_or(false);
        if ok {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            let body = page
                .evaluate::<String>("document.body.innerText")
                .await
                .unwrap_or_default();
            panic!("timed out waiting for {what}; the page shows:\n{body}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn text(page: &Page, selector: &str) -> String {
    let js = format!(
        "(() => {{ const e = document.querySelector({}); return e ? e.textContent : null; }})()",
        serde_json::to_string(selector).unwrap()
    );
    page.evaluate::<Option<String>>(&js)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no element {selector}"))
}

async fn count(page: &Page, selector: &str) -> usize {
    let js = format!(
        "document.querySelectorAll({}).length",
        serde_json::to_string(selector).unwrap()
    );
    page.evaluate::<usize>(&js).await.unwrap()
}

async fn visit(page: &Page, base: &str, hash: &str, ready: &str) {
    page.evaluate::<serde_json::Value>(&format!(
        "location.hash = {}",
        serde_json::to_string(hash).unwrap()
    ))
    .await
    .unwrap();
    let _ = base;
    wait_for(page, hash, ready).await;
}

async fn shoot(page: &Page, name: &str) {
    let path = screenshots().join(format!("{name}.png"));
    page.screenshot(&path).await.unwrap();
    assert!(
        std::fs::metadata(&path).unwrap().len() > 1000,
        "{name}.png written"
    );
}

/// What is wrong with the layout now, as sentences (empty: nothing).
/// Every visible button must lie wholly within the viewport's width and
/// within every box around it that clips or scrolls; on a narrow screen,
/// moreover, no element may reach past the screen's edge or spill out of
/// its own box (long errors must wrap, tables must not need scrolling).
const LAYOUT_PROBLEMS: &str = r##"(() => {
  const W = document.documentElement.clientWidth;
  const problems = [];
  const shown = e => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== "hidden";
  };
  const name = e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
    (e.dataset && e.dataset.action ? "[data-action=" + e.dataset.action + "]" : "") +
    " \"" + (e.textContent || "").trim().slice(0, 40) + "\"";
  if (document.documentElement.scrollWidth > W) {
    problems.push("the page is " + document.documentElement.scrollWidth + " px wide in a " + W + " px viewport");
  }
  for (const b of document.querySelectorAll("button")) {
    if (!shown(b)) continue;
    const r = b.getBoundingClientRect();
    if (r.left < -0.5 || r.right > W + 0.5) {
      problems.push(name(b) + " is outside the viewport: x " + r.left.toFixed(0) + ".." + r.right.toFixed(0));
    }
    for (let a = b.parentElement; a; a = a.parentElement) {
      if (getComputedStyle(a).overflowX === "visible") continue;
      const ar = a.getBoundingClientRect();
      if (r.left < ar.left - 0.5 || r.right > ar.right + 0.5) {
        problems.push(name(b) + " is cut off by a scrolling " + name(a));
      }
    }
  }
  if (W < 640) {
    for (const e of document.querySelectorAll("body *")) {
      if (!shown(e)) continue;
      const r = e.getBoundingClientRect();
      if (r.left < -0.5 || r.right > W + 0.5) {
        problems.push(name(e) + " reaches past the screen: x " + r.left.toFixed(0) + ".." + r.right.toFixed(0));
      }
      const style = getComputedStyle(e);
      if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1 && style.display !== "inline") {
        problems.push(name(e) + " holds content " + e.scrollWidth + " px wide in a " + e.clientWidth + " px box");
      }
    }
  }
  return problems;
})()"##;

async fn layout_problems(page: &Page) -> Vec<String> {
    page.evaluate::<Vec<String>>(LAYOUT_PROBLEMS).await.unwrap()
}

async fn set_width(page: &Page, width: i64) {
    let (height, mobile) = if width < 640 {
        (800, true)
    } else {
        (900, false)
    };
    page.set_screen(width, height, mobile).await.unwrap();
    wait_for(
        page,
        &format!("a {width} px viewport"),
        &format!("document.documentElement.clientWidth === {width}"),
    )
    .await;
}

/// The page as it is now, at 1280 and at 375 px: no layout problem at
/// either width (asserted) and a screenshot of each. Ends at 1280 px.
async fn check_and_shoot(page: &Page, name: &str) {
    let buttons = count(page, "main button").await;
    for (width, file) in [(1280, name.to_string()), (375, format!("{name}-375px"))] {
        set_width(page, width).await;
        // A refresh may be replacing the page: give it a moment to settle.
        let mut problems = layout_problems(page).await;
        for _ in 0..20 {
            if problems.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            problems = layout_problems(page).await;
        }
        assert!(
            problems.is_empty(),
            "the {name} page at {width} px:\n{}",
            problems.join("\n")
        );
        assert_eq!(
            count(page, "main button").await,
            buttons,
            "the same actions at every width ({name})"
        );
        shoot(page, &file).await;
    }
    set_width(page, 1280).await;
}

/// `at` as the page shows it in Asia/Tokyo (the zone the browser is
/// given; no daylight saving): local time and the zone's name.
fn in_tokyo(at: chrono::DateTime<chrono::Utc>) -> String {
    let offset = chrono::FixedOffset::east_opt(9 * 3600).unwrap();
    format!(
        "{} GMT+9",
        at.with_timezone(&offset).format("%Y-%m-%d %H:%M:%S")
    )
}

#[tokio::test]
async fn every_page_shows_the_database_and_retry_works() {
    let Some(chromium) = chromium() else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "chromium is not installed: .ci/run installs it with apt-get install -y chromium"
            );
        }
        eprintln!(
            "\n\n*** SKIPPED the dashboard browser test: chromium is not installed \
             (apt-get install -y chromium) ***\n\n"
        );
        return;
    };
    let (_db, pool) = setup().await;
    // A snapshot held open from the start: old enough by the storage page.
    let mut pinning = pool.acquire().await.unwrap();
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *pinning)
        .await
        .unwrap();
    let pinning_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *pinning)
        .await
        .unwrap();
    let seeded = seed(&pool).await;
    seed_cron(&pool).await;
    // A dead letter whose kind and error are long and unbroken: they must
    // wrap on a phone, not push the row's buttons off the screen.
    let long_kind = "generate_the_quarterly_report_for_every_tenant_".repeat(3);
    let long_error = format!("{} and then it broke", "E".repeat(700));
    let mut stress = awa_core::NewJob::new(queue("dead"), &long_kind, serde_json::json!({}));
    stress.max_attempts = Some(1);
    let mut conn = pool.acquire().await.unwrap();
    use awa_ready::ReadyPlane;
    awa_ready::PgReadyPlane::new(schema())
        .enqueue(&mut conn, &[stress])
        .await
        .unwrap();
    drop(conn);
    let claimed = claim(&pool, "dead", 1).await.remove(0);
    finish(
        &pool,
        &[(
            claimed.token,
            awa_exec::Finish::Fail {
                error: long_error.clone(),
            },
        )],
    )
    .await;
    let mut conn = pool.acquire().await.unwrap();
    // One cancelled job, so that column has something to show.
    use awa_exec::ExecPlane;
    awa_exec::PgExecPlane::new(schema())
        .cancel_job(&mut conn, seeded.alpha[2])
        .await
        .unwrap()
        .expect("cancelled");
    awa_control::runtimes::register(
        &mut conn,
        &awa_control::runtimes::RuntimeInfo {
            instance_id: uuid::Uuid::new_v4(),
            role: "worker",
            queues: vec!["alpha".into(), "dead".into()],
        },
    )
    .await
    .unwrap();
    // Two more schedules (besides seed_cron's), one of which the leader
    // could not fire.
    for name in ["hourly", "broken"] {
        awa_control::cron::create(
            &mut conn,
            &awa_control::cron::Schedule::new(name, "0 3 * * *", "alpha", "report"),
        )
        .await
        .unwrap();
    }
    awa_control::cron::record_error(&mut conn, "broken", "enqueue refused: too big")
        .await
        .unwrap();
    // What the leader's health task does every few seconds: the charts.
    use awa_history::HistoryPlane;
    let history = awa_history::PgHistoryPlane::new(schema());
    history.publish_health(&mut conn).await.unwrap();
    history.publish_activity(&mut conn).await.unwrap();
    drop(conn);

    let mut config = config(true);
    config.pinned_alert = Duration::from_secs(1);
    let listener = awa_admin::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(awa_admin::serve(
        listener,
        AppState::new(pool.clone(), config, None),
        async move {
            let _ = stop_rx.await;
        },
    ));

    let profile = tempfile::tempdir().unwrap();
    let browser = Browser::launch(&chromium, profile.path()).await.unwrap();
    // The zone is set before the page loads: times must name it.
    let page = browser.new_page("about:blank").await.unwrap();
    page.set_time_zone("Asia/Tokyo").await.unwrap();
    page.set_screen(1280, 900, false).await.unwrap();
    page.goto(&format!("{base}/#/queues")).await.unwrap();

    // Queues: every count cell equals the database's.
    wait_for(
        &page,
        "the queues table",
        "!!document.querySelector('#queues [data-queue=\"alpha\"]')",
    )
    .await;
    let mut conn = pool.acquire().await.unwrap();
    let stats = history.queue_stats(&mut conn, None).await.unwrap();
    drop(conn);
    for (q, states) in &stats {
        for s in [
            "available",
            "scheduled",
            "retryable",
            "snoozed",
            "running",
            "completed",
            "failed",
            "cancelled",
            "dead_lettered",
        ] {
            let want = states.get(s).copied().unwrap_or(0).to_string();
            let sel = format!("#queues td[data-queue=\"{q}\"][data-state=\"{s}\"]");
            assert_eq!(text(&page, &sel).await, want, "{q} {s}");
        }
    }
    assert_eq!(
        text(
            &page,
            "#queues td[data-queue=\"alpha\"][data-state=\"cancelled\"]"
        )
        .await,
        "1"
    );
    assert_eq!(
        count(&page, "#queues [data-spark] svg polyline").await,
        stats.len()
    );
    assert_eq!(
        count(&page, "#queues button:disabled").await,
        stats.len(),
        "actions wait for the token"
    );
    assert_eq!(
        count(&page, "#token-form:not([hidden])").await,
        1,
        "the page asks for the token"
    );
    // The hour charts: what the health task recorded.
    let recorded: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT coalesce(sum(completed), 0)::bigint, coalesce(sum(failed + dead_lettered), 0)::bigint \
           FROM awa.queue_minutes",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let (completed, failed) = recorded[0];
    assert_eq!(
        (completed, failed),
        (1, 3),
        "the seed's outcomes were recorded"
    );
    assert!(
        text(&page, "[data-chart-summary=\"throughput\"]")
            .await
            .starts_with(&format!("{completed} completed")),
    );
    assert!(
        text(&page, "[data-chart-summary=\"failures\"]")
            .await
            .starts_with(&format!("{failed} failed")),
    );
    assert!(count(&page, "[data-chart=\"throughput\"] rect.series").await >= 1);
    assert!(count(&page, "[data-chart=\"failures\"] rect.series").await >= 1);
    assert!(
        count(&page, "[data-chart=\"latency\"] rect.series").await >= 1,
        "the seed's claims were sampled"
    );
    let footer = text(&page, "footer").await;
    assert!(footer.contains("times in Asia/Tokyo"), "{footer}");
    check_and_shoot(&page, "queues").await;

    // Jobs, filtered by queue.
    visit(
        &page,
        &base,
        "#/jobs?queue=alpha",
        "!!document.querySelector('#jobs')",
    )
    .await;
    let alpha_jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.jobs WHERE queue = 'alpha'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count(&page, "#jobs tbody tr").await as i64, alpha_jobs);
    assert_eq!(
        text(&page, &format!("[data-job-state=\"{}\"]", seeded.completed)).await,
        state_of(&pool, seeded.completed).await
    );
    check_and_shoot(&page, "jobs").await;

    // One job; its times in the browser's zone, named.
    visit(
        &page,
        &base,
        &format!("#/job/{}", seeded.dead[0]),
        "!!document.querySelector('#job-detail')",
    )
    .await;
    assert_eq!(text(&page, "[data-field=\"state\"]").await, "dead_lettered");
    assert_eq!(text(&page, "[data-field=\"last error\"]").await, "boom");
    assert_eq!(
        text(&page, "[data-field=\"priority\"]").await,
        "3 (1 runs first, 4 last)"
    );
    let created: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT created_at FROM awa.jobs WHERE id = $1")
            .bind(seeded.dead[0].0)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        text(&page, "[data-field=\"created\"]").await,
        in_tokyo(created)
    );
    check_and_shoot(&page, "job").await;

    // DLQ: unlock with the token, click retry on one entry, see it leave.
    visit(&page, &base, "#/dlq", "!!document.querySelector('#dlq')").await;
    assert_eq!(count(&page, "#dlq tbody tr").await, 3);
    page.click("#token-input").await.unwrap();
    page.type_text(TOKEN).await.unwrap();
    page.click("#token-form button").await.unwrap();
    wait_for(
        &page,
        "the token form to go",
        "getComputedStyle(document.getElementById('token-form')).display === 'none'",
    )
    .await;
    let retry = format!(
        "[data-dlq-id=\"{}\"] button[data-action=\"retry\"]",
        seeded.dead[0]
    );
    wait_for(
        &page,
        "the retry button to unlock",
        &format!(
            "!!document.querySelector('{}') && !document.querySelector('{}').disabled",
            retry.replace('\'', "\\'"),
            retry.replace('\'', "\\'")
        ),
    )
    .await;
    // Every entry's actions are there, enabled, at both widths.
    assert_eq!(count(&page, "#dlq button:enabled").await, 6);
    check_and_shoot(&page, "dlq").await;
    page.click(&retry).await.unwrap();
    wait_for(
        &page,
        "the retried entry to leave",
        &format!("!document.querySelector('[data-dlq-id=\"{}\"]') && document.querySelectorAll('#dlq tbody tr').length === 2", seeded.dead[0]),
    )
    .await;
    assert_eq!(
        state_of(&pool, seeded.dead[0]).await,
        "available",
        "the database agrees"
    );
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.dlq_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 2);

    // Cron: run now, then pause, from the buttons; the database agrees.
    visit(&page, &base, "#/cron", "!!document.querySelector('#cron')").await;
    // The seeded schedule and two more, one of which the leader could not
    // fire: it shows why.
    assert_eq!(count(&page, "#cron tbody tr").await, 3);
    let why = text(&page, "[data-cron-error=\"broken\"]").await;
    assert!(
        why.contains("cannot fire since") && why.contains("too big"),
        "{why}"
    );
    assert_eq!(text(&page, "[data-cron-error=\"hourly\"]").await, "–");
    check_and_shoot(&page, "cron").await;
    page.evaluate::<serde_json::Value>("window.confirm = () => true")
        .await
        .unwrap();
    let run = format!("[data-cron=\"{CRON}\"] button[data-action=\"cron-run\"]");
    wait_for(
        &page,
        "the run-now button to unlock",
        &format!("!!document.querySelector('{run}') && !document.querySelector('{run}').disabled"),
    )
    .await;
    page.click(&run).await.unwrap();
    wait_for(
        &page,
        "the run to be reported",
        "(document.querySelector('#banner').textContent || '').includes('enqueued job')",
    )
    .await;
    let (last_job, enabled): (Option<i64>, bool) =
        sqlx::query_as("SELECT last_job_id, enabled FROM awa.cron_jobs WHERE name = $1")
            .bind(CRON)
            .fetch_one(&pool)
            .await
            .unwrap();
    let last_job = last_job.expect("run now recorded its job");
    assert!(enabled);
    assert!(
        text(&page, "#banner")
            .await
            .contains(&format!("enqueued job {last_job}"))
    );
    assert_eq!(
        state_of(&pool, awa_core::JobId(last_job)).await,
        "available"
    );
    let pause = format!("[data-cron=\"{CRON}\"] button[data-action=\"cron-pause\"]");
    page.click(&pause).await.unwrap();
    wait_for(
        &page,
        "the schedule to show paused",
        &format!(
            "(document.querySelector('[data-cron-state=\"{CRON}\"]') || {{}}).textContent === 'paused' \
             && !!document.querySelector('[data-cron=\"{CRON}\"] button[data-action=\"cron-resume\"]')"
        ),
    )
    .await;
    let enabled: bool = sqlx::query_scalar("SELECT enabled FROM awa.cron_jobs WHERE name = $1")
        .bind(CRON)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!enabled, "the database agrees");

    // Storage: ring cursors as stored, and the pinned snapshot named.
    visit(
        &page,
        &base,
        "#/storage",
        "!!document.querySelector('#pinned-alert')",
    )
    .await;
    let slots: Vec<(String, i32)> = sqlx::query_as(
        "SELECT DISTINCT ON (ring) ring, slot FROM awa.ring_ledger ORDER BY ring, generation DESC",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(!slots.is_empty());
    for (ring, slot) in slots {
        assert_eq!(
            text(&page, &format!("[data-ring-slot=\"{ring}\"]")).await,
            slot.to_string(),
            "ring {ring}"
        );
    }
    let alert = text(&page, "#pinned-alert").await;
    assert!(alert.contains(&format!("pid {pinning_pid}")), "{alert}");
    check_and_shoot(&page, "storage").await;

    // Runtimes.
    visit(
        &page,
        &base,
        "#/runtimes",
        "!!document.querySelector('#runtimes')",
    )
    .await;
    assert_eq!(count(&page, "#runtimes tbody tr").await, 1);
    check_and_shoot(&page, "runtimes").await;

    sqlx::query("ROLLBACK")
        .execute(&mut *pinning)
        .await
        .unwrap();
    browser.close().await.unwrap();
    let _ = stop_tx.send(());
    server.await.unwrap().unwrap();
}

/// A headless chromium and its first page (`base` at `hash`), at desktop
/// width. None when chromium is missing (see above).
async fn launch(base: &str, hash: &str, profile: &std::path::Path) -> Option<(Browser, Page)> {
    let Some(chromium) = chromium() else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "chromium is not installed: .ci/run installs it with apt-get install -y chromium"
            );
        }
        eprintln!(
            "\n\n*** SKIPPED the dashboard browser test: chromium is not installed \
             (apt-get install -y chromium) ***\n\n"
        );
        return None;
    };
    let browser = Browser::launch(&chromium, profile).await.unwrap();
    let page = browser.new_page(&format!("{base}/{hash}")).await.unwrap();
    page.set_screen(1280, 900, false).await.unwrap();
    Some((browser, page))
}

/// Issue 22: the job page shows every attempt as a timeline (number,
/// outcome, times, runtime, error) and a running job's holder; retry from
/// the job page; bulk cancel and retry from the jobs page, each confirming
/// with the count of matching jobs the server gave before acting.
#[tokio::test]
async fn the_job_page_shows_every_attempt_and_bulk_actions_count_first() {
    let (_db, pool) = setup().await;
    let (failed, running, _) = seed_failures(&pool).await;
    let listener = awa_admin::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(awa_admin::serve(
        listener,
        AppState::new(pool.clone(), config(true), None),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let profile = tempfile::tempdir().unwrap();
    let Some((browser, page)) = launch(&base, &format!("#/job/{failed}"), profile.path()).await
    else {
        return;
    };

    // The timeline: three attempts, each with its error and runtime.
    wait_for(
        &page,
        "the attempts timeline",
        "document.querySelectorAll('#attempts li').length === 3",
    )
    .await;
    let pid = std::process::id();
    for n in 1..=3 {
        let item = text(&page, &format!("#attempts li[data-attempt=\"{n}\"]")).await;
        assert!(item.contains(&format!("#{n} ")), "{item}");
        assert!(item.contains(&format!("pid {pid}")), "{item}");
        assert_eq!(
            text(&page, &format!("[data-attempt-error=\"{n}\"]")).await,
            format!("error {n}")
        );
    }
    assert_eq!(
        count(&page, "#attempts li[data-outcome=\"retried\"]").await,
        2
    );
    assert_eq!(
        count(&page, "#attempts li[data-outcome=\"failed\"]").await,
        1
    );
    shoot(&page, "job-attempts").await;
    page.set_screen(375, 800, true).await.unwrap();
    wait_for(
        &page,
        "the timeline within 375 px",
        "document.documentElement.scrollWidth <= 375",
    )
    .await;
    shoot(&page, "job-attempts-375px").await;
    page.set_screen(1280, 900, false).await.unwrap();

    // A running job names its holder and its running attempt.
    visit(
        &page,
        &base,
        &format!("#/job/{running}"),
        "!!document.querySelector('[data-field=\"holder\"]')",
    )
    .await;
    let holder = text(&page, "[data-field=\"holder\"]").await;
    assert!(holder.contains(&format!("pid {pid}")), "{holder}");
    assert_eq!(
        count(&page, "#attempts li[data-outcome=\"running\"]").await,
        1
    );

    // Unlock actions; confirmations are answered yes and recorded.
    page.click("#token-input").await.unwrap();
    page.type_text(TOKEN).await.unwrap();
    page.click("#token-form button").await.unwrap();
    page.evaluate::<serde_json::Value>(
        "window.confirm = m => { window.__asked = (window.__asked || []).concat([m]); return true; }",
    )
    .await
    .unwrap();
    let asked = |i: usize| {
        let page = &page;
        async move {
            page.evaluate::<String>(&format!("(window.__asked || [])[{i}] || ''"))
                .await
                .unwrap()
        }
    };

    // Retry from the job page.
    visit(
        &page,
        &base,
        &format!("#/job/{failed}"),
        "!!document.querySelector('button[data-action=\"retry\"]:not(:disabled)')",
    )
    .await;
    page.click("button[data-action=\"retry\"]").await.unwrap();
    wait_for(
        &page,
        "the job to be back",
        "document.querySelector('[data-field=\"state\"]') && document.querySelector('[data-field=\"state\"]').textContent === 'available'",
    )
    .await;
    assert_eq!(state_of(&pool, failed).await, "available");

    // Bulk cancel from the jobs page: the count comes first.
    visit(
        &page,
        &base,
        "#/jobs?queue=gamma",
        "!!document.querySelector('button[data-action=\"cancel-matching\"]:not(:disabled)')",
    )
    .await;
    page.click("button[data-action=\"cancel-matching\"]")
        .await
        .unwrap();
    wait_for(
        &page,
        "both gamma jobs cancelled",
        "document.querySelectorAll('#jobs [data-job-state]').length === 2 && [...document.querySelectorAll('#jobs [data-job-state]')].every(e => e.textContent === 'cancelled')",
    )
    .await;
    let question = asked(1).await;
    assert!(
        question.contains("Cancel 2 unfinished jobs of queue gamma"),
        "{question}"
    );
    assert_eq!(state_of(&pool, running).await, "cancelled");
    shoot(&page, "jobs-bulk").await;

    // Bulk retry of what was cancelled.
    visit(
        &page,
        &base,
        "#/jobs?queue=gamma&state=cancelled",
        "!!document.querySelector('button[data-action=\"retry-matching\"]:not(:disabled)')",
    )
    .await;
    page.click("button[data-action=\"retry-matching\"]")
        .await
        .unwrap();
    wait_for(
        &page,
        "no cancelled job left",
        "!!document.querySelector('#no-jobs')",
    )
    .await;
    let question = asked(2).await;
    assert!(
        question.contains("Retry 2 cancelled jobs of queue gamma"),
        "{question}"
    );
    assert_eq!(state_of(&pool, failed).await, "available");
    assert_eq!(state_of(&pool, running).await, "available");

    browser.close().await.unwrap();
    let _ = stop_tx.send(());
    server.await.unwrap().unwrap();
}

//! Attempt history and kept failures (ADR 11) against real PostgreSQL,
//! through the planes' own calls: every attempt's record travels with the
//! job, a running job names its holder, failures stay readable and
//! retryable outside the rings, and retry / cancel by selection.

use awa_control::runtimes::{self, RuntimeInfo};
use awa_core::{JobId, JobSelection, JobState, NewJob, QueueName, SchemaName};
use awa_deferred::{DeferredPlane, PgDeferredPlane};
use awa_dlq::DlqPlane;
use awa_exec::{ExecPlane, Finish, Frontier, PgExecPlane};
use awa_history::{HistoryPlane, JobFilter, JobView, PgHistoryPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use sqlx::PgConnection;
use std::time::Duration;

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

fn schema() -> SchemaName {
    SchemaName::default_schema()
}

async fn runtime(conn: &mut PgConnection) -> uuid::Uuid {
    let id = uuid::Uuid::new_v4();
    runtimes::register(
        conn,
        &RuntimeInfo {
            instance_id: id,
            role: "worker",
            queues: vec![],
        },
    )
    .await
    .unwrap();
    id
}

async fn enqueue(conn: &mut PgConnection, job: NewJob) -> JobId {
    PgReadyPlane::new(schema())
        .enqueue(conn, &[job])
        .await
        .unwrap()[0]
        .job_id
}

/// Claim the one job waiting in `queue` (promoting due deferred work
/// first), as runtime `instance`.
async fn claim_one(
    conn: &mut PgConnection,
    queue: &str,
    instance: Option<uuid::Uuid>,
) -> awa_core::ClaimedJob {
    let exec = PgExecPlane::new(schema());
    let mut frontier = Frontier::default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        PgDeferredPlane::new(schema())
            .promote_due(conn, 100)
            .await
            .unwrap();
        let mut got = exec
            .claim(conn, &q(queue), 1, &mut frontier, instance)
            .await
            .unwrap();
        if let Some(job) = got.pop() {
            return job;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing to claim in {queue}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn finish(conn: &mut PgConnection, job: &awa_core::ClaimedJob, result: Finish) {
    let done = PgExecPlane::new(schema())
        .finish(conn, &[(job.token, result)])
        .await
        .unwrap();
    assert!(done[0].accepted, "{done:?}");
}

async fn view(conn: &mut PgConnection, id: JobId) -> JobView {
    PgHistoryPlane::new(schema())
        .job(conn, id)
        .await
        .unwrap()
        .expect("the job is readable")
}

fn retry(error: &str) -> Finish {
    Finish::Retry {
        delay: Some(Duration::ZERO),
        error: error.into(),
    }
}

#[tokio::test]
async fn three_failures_show_three_errors_with_times_and_runtimes() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let first = runtime(&mut conn).await;
    let second = runtime(&mut conn).await;
    let mut job = NewJob::new(q("triage"), "flaky", serde_json::json!({"user": 42}));
    job.max_attempts = Some(3);
    let id = enqueue(&mut conn, job).await;

    // Not run yet: no records.
    assert_eq!(view(&mut conn, id).await.attempts, Some(vec![]));

    let errors = [
        "timeout talking to smtp",
        "connection reset",
        "quota exceeded",
    ];
    let runs = [first, first, second];
    for (error, instance) in errors.iter().zip(runs) {
        let claimed = claim_one(&mut conn, "triage", Some(instance)).await;
        finish(&mut conn, &claimed, retry(error)).await;
    }

    let job = view(&mut conn, id).await;
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.last_error.as_deref(), Some("quota exceeded"));
    assert!(job.holder.is_none());
    let attempts = job.attempts.expect("one-job reads carry attempts");
    assert_eq!(attempts.len(), 3, "{attempts:#?}");
    let registry = runtimes::list(&mut conn).await.unwrap();
    for (i, a) in attempts.iter().enumerate() {
        assert_eq!(a.attempt, i as i32 + 1);
        assert_eq!(a.error.as_deref(), Some(errors[i]));
        let (started, ended) = (a.started_at.clone().unwrap(), a.ended_at.clone().unwrap());
        assert!(started <= ended, "{a:?}");
        if i > 0 {
            assert!(attempts[i - 1].ended_at.clone().unwrap() <= started);
        }
        let rt = a.runtime.as_ref().expect("the runtime is recorded");
        assert_eq!(rt.id, Some(runs[i]));
        let entry = registry.iter().find(|r| r.instance_id == runs[i]).unwrap();
        assert_eq!(rt.host.as_deref(), Some(entry.host.as_str()));
        assert_eq!(rt.pid, Some(std::process::id() as i32));
    }
    let outcomes: Vec<&str> = attempts.iter().map(|a| a.outcome.as_str()).collect();
    assert_eq!(outcomes, ["retried", "retried", "failed"]);

    // Lists leave the records out; the failure is listed once.
    let listed = PgHistoryPlane::new(schema())
        .list_page(
            &mut conn,
            &JobFilter {
                queue: Some(q("triage")),
                ..Default::default()
            },
            10,
        )
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, JobState::Failed);
    assert!(listed[0].attempts.is_none());
    let json = serde_json::to_value(&listed[0]).unwrap();
    assert!(json.get("attempts").is_none(), "{json}");
}

#[tokio::test]
async fn a_running_job_names_its_holder_and_its_completion_becomes_a_record() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let me = runtime(&mut conn).await;
    let history = PgHistoryPlane::new(schema());

    // First-try success: the job path writes no record anywhere.
    let quick = enqueue(&mut conn, NewJob::new(q("h"), "k", serde_json::json!({}))).await;
    let claimed = claim_one(&mut conn, "h", Some(me)).await;
    finish(&mut conn, &claimed, Finish::Complete).await;
    let stored: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM awa.ready_entries WHERE attempts IS NOT NULL)
              + (SELECT count(*) FROM awa.done_entries)
              + (SELECT count(*) FROM awa.failure_entries)
              + (SELECT count(*) FROM awa.deferred_jobs)",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert_eq!(stored, 0, "a first-try success stores no attempt record");
    // ...and reads as one completed attempt, with its start and runtime
    // while the claim ring still holds the batch.
    let done = view(&mut conn, quick).await.attempts.unwrap();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].outcome, "completed");
    assert_eq!(done[0].attempt, 1);
    assert!(done[0].started_at.clone().unwrap() <= done[0].ended_at.clone().unwrap());
    assert_eq!(done[0].runtime.as_ref().unwrap().id, Some(me));

    // A running job: holder in the list and in the detail; the running
    // attempt closes its timeline.
    let id = enqueue(&mut conn, NewJob::new(q("h"), "k", serde_json::json!({}))).await;
    let claimed = claim_one(&mut conn, "h", Some(me)).await;
    finish(&mut conn, &claimed, retry("first try failed")).await;
    let claimed = claim_one(&mut conn, "h", Some(me)).await;
    let job = view(&mut conn, id).await;
    assert_eq!(job.state, JobState::Running);
    let holder = job.holder.expect("a running job names its holder");
    assert_eq!(holder.instance_id, me);
    assert_eq!(holder.pid, Some(std::process::id() as i32));
    assert!(holder.heartbeat_age_secs.unwrap() >= 0.0);
    let attempts = job.attempts.unwrap();
    let outcomes: Vec<&str> = attempts.iter().map(|a| a.outcome.as_str()).collect();
    assert_eq!(outcomes, ["retried", "running"]);
    assert_eq!(attempts[1].attempt, 2);
    assert!(attempts[1].ended_at.is_none());
    assert_eq!(attempts[1].runtime.as_ref().unwrap().id, Some(me));
    let listed = history
        .list_page(
            &mut conn,
            &JobFilter {
                state: Some(JobState::Running),
                ..Default::default()
            },
            10,
        )
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].holder.as_ref().unwrap().instance_id, me);
    assert!(listed[0].holder.as_ref().unwrap().host.is_some());

    finish(&mut conn, &claimed, Finish::Complete).await;
    let job = view(&mut conn, id).await;
    assert_eq!(job.state, JobState::Completed);
    assert!(job.holder.is_none());
    let attempts = job.attempts.unwrap();
    let outcomes: Vec<&str> = attempts.iter().map(|a| a.outcome.as_str()).collect();
    assert_eq!(outcomes, ["retried", "completed"]);
    assert_eq!(attempts[0].error.as_deref(), Some("first try failed"));
    assert_eq!(attempts[1].runtime.as_ref().unwrap().id, Some(me));

    // A holder the registry has forgotten is still named, without host.
    let id = enqueue(&mut conn, NewJob::new(q("h"), "k", serde_json::json!({}))).await;
    let gone = runtime(&mut conn).await;
    claim_one(&mut conn, "h", Some(gone)).await;
    runtimes::deregister(&mut conn, gone).await.unwrap();
    let holder = view(&mut conn, id).await.holder.unwrap();
    assert_eq!(holder.instance_id, gone);
    assert_eq!(holder.host, None);
}

#[tokio::test]
async fn every_way_an_attempt_ends_is_recorded_and_the_history_is_bounded() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("INSERT INTO awa.queue_meta (queue, dlq_enabled) VALUES ('dead', true)")
        .execute(&mut *conn)
        .await
        .unwrap();
    let me = runtime(&mut conn).await;

    // Snooze, release and rescue do or do not use up the attempt; each is
    // a record; the last one is dead-lettered and the DLQ keeps them all.
    let mut job = NewJob::new(q("dead"), "k", serde_json::json!({}));
    job.max_attempts = Some(2);
    let id = enqueue(&mut conn, job).await;
    let c = claim_one(&mut conn, "dead", Some(me)).await;
    finish(
        &mut conn,
        &c,
        Finish::Snooze {
            delay: Duration::ZERO,
        },
    )
    .await;
    let c = claim_one(&mut conn, "dead", Some(me)).await;
    finish(&mut conn, &c, Finish::Release).await;
    let c = claim_one(&mut conn, "dead", None).await;
    finish(
        &mut conn,
        &c,
        Finish::Rescue {
            reason: "worker stopped heartbeating".into(),
        },
    )
    .await;
    let c = claim_one(&mut conn, "dead", Some(me)).await;
    finish(
        &mut conn,
        &c,
        Finish::Fail {
            error: "gave up".into(),
        },
    )
    .await;
    let job = view(&mut conn, id).await;
    assert_eq!(job.state, JobState::DeadLettered);
    let attempts = job.attempts.unwrap();
    let seen: Vec<(i32, &str)> = attempts
        .iter()
        .map(|a| (a.attempt, a.outcome.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (1, "snoozed"),
            (1, "released"),
            (1, "rescued"),
            (2, "dead_lettered")
        ]
    );
    assert_eq!(
        attempts[2].error.as_deref(),
        Some("worker stopped heartbeating")
    );
    assert_eq!(attempts[2].runtime, None, "claimed without an instance");

    // A DLQ retry keeps the history; the next run is attempt 1 again.
    awa_dlq::PgDlqPlane::new(schema())
        .retry(&mut conn, &awa_dlq::Selection::One(id))
        .await
        .unwrap();
    let c = claim_one(&mut conn, "dead", Some(me)).await;
    assert_eq!(c.attempt, 1);
    finish(
        &mut conn,
        &c,
        Finish::Cancel {
            reason: "not needed".into(),
        },
    )
    .await;
    let job = view(&mut conn, id).await;
    assert_eq!(job.state, JobState::Cancelled);
    let last = job.attempts.unwrap().pop().unwrap();
    assert_eq!(
        (last.attempt, last.outcome.as_str()),
        (1, "cancelled"),
        "{last:?}"
    );
    assert_eq!(last.error.as_deref(), Some("not needed"));

    // Thirty retries keep the latest 25 records, each error bounded.
    let mut job = NewJob::new(q("long"), "k", serde_json::json!({}));
    job.max_attempts = Some(100);
    let id = enqueue(&mut conn, job).await;
    let huge = "x".repeat(20_000);
    for _ in 0..30 {
        let c = claim_one(&mut conn, "long", Some(me)).await;
        finish(&mut conn, &c, retry(&huge)).await;
    }
    let attempts = view(&mut conn, id).await.attempts.unwrap();
    assert_eq!(attempts.len(), awa_core::bounds::ATTEMPT_HISTORY);
    let numbers: Vec<i32> = attempts.iter().map(|a| a.attempt).collect();
    assert_eq!(numbers, (6..=30).collect::<Vec<_>>());
    assert!(
        attempts
            .iter()
            .all(|a| a.error.as_ref().unwrap().len() <= awa_core::bounds::MAX_ERROR_BYTES)
    );
}

#[tokio::test]
async fn a_failure_is_retried_on_demand_from_a_queue_without_the_dlq() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let history = PgHistoryPlane::new(schema());
    let mut job = NewJob::new(q("r"), "k", serde_json::json!({"user": 7}));
    job.max_attempts = Some(1);
    job.unique_key = Some("u-7".into());
    let id = enqueue(&mut conn, job).await;
    let c = claim_one(&mut conn, "r", None).await;
    finish(&mut conn, &c, retry("broken")).await;
    assert_eq!(view(&mut conn, id).await.state, JobState::Failed);

    // The key was released: another job takes it; the retry keeps the
    // failure and names the holder.
    let holder = {
        let mut other = NewJob::new(q("other"), "k", serde_json::json!({}));
        other.unique_key = Some("u-7".into());
        enqueue(&mut conn, other).await
    };
    let kept = history.retry(&mut conn, &[id]).await.unwrap();
    assert_eq!(kept.matched, 1);
    assert!(kept.retried.is_empty());
    assert_eq!(kept.kept[0].held_by, holder);
    assert_eq!(view(&mut conn, id).await.state, JobState::Failed);
    let c = claim_one(&mut conn, "other", None).await;
    finish(&mut conn, &c, Finish::Complete).await;

    // Now it goes back: same id, attempt 0, history kept, key held again.
    let done = history.retry(&mut conn, &[id]).await.unwrap();
    assert_eq!(done.retried, vec![id]);
    let job = view(&mut conn, id).await;
    assert_eq!((job.state, job.attempt), (JobState::Available, 0));
    assert_eq!(job.attempts.as_ref().unwrap().len(), 1);
    let mut dup = NewJob::new(q("r"), "k", serde_json::json!({}));
    dup.unique_key = Some("u-7".into());
    let again = PgReadyPlane::new(schema())
        .enqueue(&mut conn, &[dup])
        .await
        .unwrap();
    assert_eq!(again[0].job_id, id, "the retried job holds its key again");
    assert!(!again[0].inserted);
    // A second retry finds nothing to retry.
    assert_eq!(history.retry(&mut conn, &[id]).await.unwrap().matched, 0);

    let c = claim_one(&mut conn, "r", None).await;
    assert_eq!((c.token.job_id, c.attempt), (id, 1));
    finish(&mut conn, &c, Finish::Complete).await;
    let job = view(&mut conn, id).await;
    assert_eq!(job.state, JobState::Completed);
    let outcomes: Vec<String> = job
        .attempts
        .unwrap()
        .into_iter()
        .map(|a| a.outcome)
        .collect();
    assert_eq!(outcomes, ["failed", "completed"]);
}

#[tokio::test]
async fn retry_and_cancel_by_selection_with_a_dry_run() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let reads = [schema()];
    // Six jobs: kinds a/b, users 1/2; fail the four of kind a or user 1,
    // cancel one waiting job, leave one waiting.
    let mut ids = Vec::new();
    for (kind, user) in [("a", 1), ("a", 2), ("b", 1), ("b", 2), ("a", 1), ("b", 2)] {
        let mut job = NewJob::new(
            q("bulk"),
            kind,
            serde_json::json!({"user": user, "n": ids.len()}),
        );
        job.max_attempts = Some(1);
        ids.push(enqueue(&mut conn, job).await);
    }
    for _ in 0..4 {
        let c = claim_one(&mut conn, "bulk", None).await;
        finish(&mut conn, &c, retry("no")).await;
    }
    // ids[0..4] failed; ids[4] cancelled while waiting; ids[5] waits.
    assert_eq!(
        PgExecPlane::new(schema())
            .cancel_job(&mut conn, ids[4])
            .await
            .unwrap()
            .as_deref(),
        Some("available")
    );
    let cancelled = view(&mut conn, ids[4]).await;
    assert_eq!(cancelled.state, JobState::Cancelled);

    let sel = |state, kind: Option<&str>, args: Option<serde_json::Value>| JobSelection {
        queue: q("bulk"),
        state: Some(state),
        kind: kind.map(str::to_string),
        args_contains: args,
    };
    let failed_a_user_1 = sel(
        JobState::Failed,
        Some("a"),
        Some(serde_json::json!({"user": 1})),
    );
    let dry = awa_history::retry_matching(&mut conn, &reads, &failed_a_user_1, true)
        .await
        .unwrap();
    assert_eq!((dry.matched, dry.retried.len()), (1, 0));
    assert_eq!(view(&mut conn, ids[0]).await.state, JobState::Failed);
    let done = awa_history::retry_matching(&mut conn, &reads, &failed_a_user_1, false)
        .await
        .unwrap();
    assert_eq!(done.retried, vec![ids[0]]);
    let all_failed = sel(JobState::Failed, None, None);
    let dry = awa_history::retry_matching(&mut conn, &reads, &all_failed, true)
        .await
        .unwrap();
    assert_eq!(dry.matched, 3);
    let done = awa_history::retry_matching(
        &mut conn,
        &reads,
        &sel(JobState::Cancelled, None, None),
        false,
    )
    .await
    .unwrap();
    assert_eq!(done.retried, vec![ids[4]]);
    // A retry names failed or cancelled jobs only.
    assert!(
        awa_history::retry_matching(
            &mut conn,
            &reads,
            &sel(JobState::Available, None, None),
            true
        )
        .await
        .is_err()
    );

    // Bulk cancel of what waits now (ids 0, 4, 5), kind b only, dry first.
    let waiting_b = JobSelection {
        queue: q("bulk"),
        state: Some(JobState::Available),
        kind: Some("b".into()),
        args_contains: None,
    };
    let dry = awa_exec::cancel_matching(&mut conn, &reads, &waiting_b, true)
        .await
        .unwrap();
    assert_eq!((dry.matched, dry.cancelled.len()), (1, 0));
    let done = awa_exec::cancel_matching(&mut conn, &reads, &waiting_b, false)
        .await
        .unwrap();
    assert_eq!(done.cancelled.len(), 1);
    assert_eq!(done.cancelled[0].id, ids[5]);
    assert_eq!(done.cancelled[0].cancelled_from, "available");
    let everything = JobSelection {
        state: None,
        kind: None,
        ..waiting_b
    };
    let done = awa_exec::cancel_matching(&mut conn, &reads, &everything, false)
        .await
        .unwrap();
    let mut gone: Vec<JobId> = done.cancelled.iter().map(|c| c.id).collect();
    gone.sort();
    assert_eq!(gone, vec![ids[0], ids[4]]);

    // The list filters by kind and args containment.
    let listed = PgHistoryPlane::new(schema())
        .list_page(
            &mut conn,
            &JobFilter {
                kind: Some("b".into()),
                args_contains: Some(serde_json::json!({"user": 2})),
                ..Default::default()
            },
            10,
        )
        .await
        .unwrap();
    let mut found: Vec<JobId> = listed.iter().map(|j| j.id).collect();
    found.sort();
    assert_eq!(found, vec![ids[3], ids[5]]);
}

#[tokio::test]
async fn failures_outlive_the_ring_for_their_own_retention() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let history = PgHistoryPlane::new(schema());
    let mut job = NewJob::new(q("keep"), "k", serde_json::json!({}));
    job.max_attempts = Some(1);
    let id = enqueue(&mut conn, job).await;
    let c = claim_one(&mut conn, "keep", None).await;
    finish(&mut conn, &c, retry("bad input")).await;

    // Within the retention (7 days by default) the pass keeps it.
    assert_eq!(history.prune_failures(&mut conn, 100).await.unwrap(), 0);
    assert_eq!(view(&mut conn, id).await.state, JobState::Failed);
    let applied = awa_control::substrate::SubstrateSettings {
        failure_retention: Some(Duration::from_secs(1)),
        ..Default::default()
    }
    .apply(&mut conn, &schema())
    .await
    .unwrap();
    assert_eq!(applied.failure_retention_secs, 1.0);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(history.prune_failures(&mut conn, 100).await.unwrap(), 1);
    assert!(history.job(&mut conn, id).await.unwrap().is_none());
    // Its count outlives it.
    let stats = history
        .queue_stats(&mut conn, Some(&q("keep")))
        .await
        .unwrap();
    assert_eq!(stats["keep"]["failed"], 1);
    // Out of range, refused before any write.
    for bad in [Duration::ZERO, Duration::from_secs(3651 * 86_400)] {
        assert!(
            awa_control::substrate::SubstrateSettings {
                failure_retention: Some(bad),
                ..Default::default()
            }
            .validate()
            .is_err()
        );
    }
}

//! Middleware around enqueue and execution, through a started client and
//! a real database: the order layers run in, a tenant carried from the
//! producer to the handler (metadata in, a task-local out), logging and
//! metrics around each attempt, an authorization check whose refusal
//! writes nothing, and what the retry policy makes of a middleware's
//! error.

use awa::middleware::{EnqueueNext, ExecuteNext, Middleware};
use awa::{
    Client, HandlerResult, Inserted, JobContext, JobError, JobState, NewJob, Outcome, RetryPolicy,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;
use common::wait_for;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(kind = "mw_report", queue = "mw", max_attempts = 3)]
struct Report {
    n: i64,
}

type Log = Arc<Mutex<Vec<String>>>;

/// Logs its name on the way in and out of both sides.
struct Logging {
    name: &'static str,
    log: Log,
}

#[async_trait::async_trait]
impl Middleware for Logging {
    async fn enqueue(
        &self,
        jobs: Vec<NewJob>,
        next: EnqueueNext<'_>,
    ) -> Result<Vec<Inserted>, awa::Error> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{} enqueue in", self.name));
        let done = next.run(jobs).await;
        self.log
            .lock()
            .unwrap()
            .push(format!("{} enqueue out", self.name));
        done
    }

    async fn execute(&self, ctx: JobContext, next: ExecuteNext<'_>) -> HandlerResult {
        self.log
            .lock()
            .unwrap()
            .push(format!("{} execute in", self.name));
        let result = next.run(ctx).await;
        self.log
            .lock()
            .unwrap()
            .push(format!("{} execute out", self.name));
        result
    }
}

tokio::task_local! {
    static TENANT: String;
}

/// The producer's tenant goes into each job's metadata; the worker sets
/// it as a task-local around the handler.
struct Tenant;

#[async_trait::async_trait]
impl Middleware for Tenant {
    async fn enqueue(
        &self,
        mut jobs: Vec<NewJob>,
        next: EnqueueNext<'_>,
    ) -> Result<Vec<Inserted>, awa::Error> {
        if let Ok(tenant) = TENANT.try_with(Clone::clone) {
            for job in &mut jobs {
                job.metadata
                    .get_or_insert_with(|| serde_json::json!({}))
                    .as_object_mut()
                    .expect("an object")
                    .insert("tenant".into(), tenant.clone().into());
            }
        }
        next.run(jobs).await
    }

    async fn execute(&self, ctx: JobContext, next: ExecuteNext<'_>) -> HandlerResult {
        let tenant = ctx
            .metadata()
            .and_then(|m| m.get("tenant"))
            .and_then(|t| t.as_str())
            .unwrap_or("none")
            .to_string();
        TENANT.scope(tenant, next.run(ctx)).await
    }
}

/// Attempts by outcome, as a metrics middleware would count them.
#[derive(Default)]
struct Metrics {
    outcomes: Mutex<BTreeMap<String, u32>>,
}

struct Counting(Arc<Metrics>);

#[async_trait::async_trait]
impl Middleware for Counting {
    async fn execute(&self, ctx: JobContext, next: ExecuteNext<'_>) -> HandlerResult {
        let result = next.run(ctx).await;
        let outcome = match &result {
            Ok(Outcome::Complete) => "completed",
            Ok(_) => "other",
            Err(JobError::Permanent(_)) => "failed",
            Err(_) => "retry",
        };
        *self
            .0
            .outcomes
            .lock()
            .unwrap()
            .entry(outcome.into())
            .or_default() += 1;
        result
    }
}

/// Only callers holding the "reports" permission may enqueue reports.
struct Authorize;

tokio::task_local! {
    static PERMISSIONS: Vec<&'static str>;
}

#[async_trait::async_trait]
impl Middleware for Authorize {
    async fn enqueue(
        &self,
        jobs: Vec<NewJob>,
        next: EnqueueNext<'_>,
    ) -> Result<Vec<Inserted>, awa::Error> {
        let allowed = PERMISSIONS
            .try_with(|p| p.contains(&"reports"))
            .unwrap_or(false);
        if !allowed {
            return Err(awa::Error::Refused(
                "the caller may not enqueue reports".into(),
            ));
        }
        next.run(jobs).await
    }
}

#[tokio::test]
async fn layers_run_outermost_first_and_carry_the_tenant_to_the_handler() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let log: Log = Arc::default();
    let metrics = Arc::new(Metrics::default());
    let seen: Arc<Mutex<Vec<(i64, String)>>> = Arc::default();
    let client = Client::builder(pool.clone())
        .queue("mw", 2)
        .without_maintenance()
        .middleware(Logging {
            name: "outer",
            log: log.clone(),
        })
        .middleware(Counting(metrics.clone()))
        .middleware(Tenant)
        .middleware(Logging {
            name: "inner",
            log: log.clone(),
        })
        .register::<Report>({
            let (seen, log) = (seen.clone(), log.clone());
            move |job: Report, _ctx: JobContext| {
                let (seen, log) = (seen.clone(), log.clone());
                async move {
                    let tenant = TENANT.try_with(Clone::clone).unwrap_or_default();
                    log.lock().unwrap().push("handler".into());
                    seen.lock().unwrap().push((job.n, tenant));
                    if job.n == 2 {
                        return Err(JobError::Permanent("report 2 cannot be built".into()));
                    }
                    Ok(Outcome::Complete)
                }
            }
        })
        .start()
        .await
        .unwrap();

    let one = TENANT
        .scope("acme".into(), client.insert(&pool, &Report { n: 1 }))
        .await
        .unwrap();
    // The tenant went into the stored metadata, before anything ran.
    let view = client.job(one.id).await.unwrap().expect("inserted");
    assert_eq!(view.metadata, Some(serde_json::json!({ "tenant": "acme" })));
    wait_for(&client, one.id, JobState::Completed).await;
    assert_eq!(
        log.lock().unwrap().drain(..).collect::<Vec<_>>(),
        [
            "outer enqueue in",
            "inner enqueue in",
            "inner enqueue out",
            "outer enqueue out",
            "outer execute in",
            "inner execute in",
            "handler",
            "inner execute out",
            "outer execute out"
        ]
    );

    // A batch goes through once, and every job carries the tenant.
    let two = TENANT
        .scope(
            "globex".into(),
            client.insert_many(&pool, &[Report { n: 2 }, Report { n: 3 }]),
        )
        .await
        .unwrap();
    assert_eq!(two.len(), 2);
    wait_for(&client, two[0].id, JobState::Failed).await;
    wait_for(&client, two[1].id, JobState::Completed).await;
    client.shutdown(Duration::from_secs(5)).await.unwrap();

    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        [
            (1, "acme".to_string()),
            (2, "globex".into()),
            (3, "globex".into())
        ]
    );
    assert_eq!(
        *metrics.outcomes.lock().unwrap(),
        BTreeMap::from([("completed".to_string(), 2), ("failed".to_string(), 1)])
    );
}

#[tokio::test]
async fn a_refused_enqueue_writes_nothing_and_the_caller_sees_why() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone()).with_middleware(Authorize);

    // Refused on every path: one job, a batch, COPY, untyped; in a
    // transaction that goes on and commits its other work.
    let mut tx = pool.begin().await.unwrap();
    let err = client.insert(&mut *tx, &Report { n: 1 }).await.unwrap_err();
    assert!(matches!(err, awa::Error::Refused(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "enqueue refused: the caller may not enqueue reports"
    );
    let err = client
        .insert_many(&mut *tx, &[Report { n: 2 }, Report { n: 3 }])
        .await
        .unwrap_err();
    assert!(matches!(err, awa::Error::Refused(_)), "{err:?}");
    let err = client
        .insert_many_copy(&mut *tx, &[Report { n: 4 }])
        .await
        .unwrap_err();
    assert!(matches!(err, awa::Error::Refused(_)), "{err:?}");
    let raw = awa::new_job(&Report { n: 5 }, awa::InsertOpts::default()).unwrap();
    let err = client.insert_raw(&mut *tx, &[raw]).await.unwrap_err();
    assert!(matches!(err, awa::Error::Refused(_)), "{err:?}");
    tx.commit().await.unwrap();

    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(jobs, 0, "a refused enqueue wrote a job");
    let ids: i64 = sqlx::query_scalar("SELECT last_value FROM awa.job_id_seq WHERE is_called")
        .fetch_optional(&pool)
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(ids, 0, "a refused enqueue drew an id");

    // With the permission, the same insert goes through.
    let ok = PERMISSIONS
        .scope(vec!["reports"], client.insert(&pool, &Report { n: 6 }))
        .await
        .unwrap();
    assert!(ok.inserted);
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(jobs, 1);
}

/// Fails every attempt before the handler runs, as a middleware may.
struct Gate {
    error: JobError,
}

#[async_trait::async_trait]
impl Middleware for Gate {
    async fn execute(&self, _ctx: JobContext, _next: ExecuteNext<'_>) -> HandlerResult {
        Err(self.error.clone())
    }
}

#[tokio::test]
async fn a_middleware_error_is_the_attempts_result_and_meets_the_retry_policy() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());
    let handler_ran = Arc::new(Mutex::new(0));

    for (error, state) in [
        (
            JobError::Retry("quota exceeded".into()),
            JobState::Retryable,
        ),
        (
            JobError::Permanent("tenant suspended".into()),
            JobState::Failed,
        ),
    ] {
        let worker = Client::builder(pool.clone())
            .retry_policy::<Report>(RetryPolicy::fixed(Duration::from_secs(3600)))
            .middleware(Gate {
                error: error.clone(),
            })
            .register::<Report>({
                let handler_ran = handler_ran.clone();
                move |_job: Report, _ctx: JobContext| {
                    let handler_ran = handler_ran.clone();
                    async move {
                        *handler_ran.lock().unwrap() += 1;
                        Ok(Outcome::Complete)
                    }
                }
            });
        let job = client.insert(&pool, &Report { n: 1 }).await.unwrap();
        let before = chrono::Utc::now();
        let worked = worker.work_one("mw").await.unwrap().expect("runnable");
        assert_eq!(worked.job.token.job_id, job.id);
        assert_eq!(worked.finished.next_state, Some(state));
        let view = client.job(job.id).await.unwrap().expect("kept");
        assert_eq!(view.last_error.as_deref(), Some(error.to_string().as_str()));
        if state == JobState::Retryable {
            // The kind's policy gave the middleware's Retry its delay.
            assert!(
                view.at.time().unwrap() > before + chrono::Duration::minutes(50),
                "retry due at {} (policy: 1 hour)",
                view.at
            );
        }
    }
    assert_eq!(
        *handler_ran.lock().unwrap(),
        0,
        "the gate let a handler run"
    );
}

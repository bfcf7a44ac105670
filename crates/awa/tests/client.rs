//! The client against real PostgreSQL: typed inserts in the caller's
//! transaction, unique keys and key specs, the array and COPY paths, `work_one`, retry
//! policies, typed args that no longer match, and builder mistakes.

use awa::{
    Client, Error, HandlerResult, InsertOpts, Job, JobContext, JobError, JobState, Outcome,
    RetryPolicy,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(kind = "send_welcome", queue = "email", priority = 1, max_attempts = 3)]
struct SendWelcome {
    user_id: i64,
    name: String,
    tags: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, awa::Job)]
struct ResizeImage {
    url: String,
    width: u32,
}

/// One refresh per account every 10 minutes, completed ones included.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(queue = "refresh", unique(by_args, period = "10m"))]
struct RefreshAccount {
    account: i64,
}

/// One unfinished sync per tenant and queue, failed ones kept for an hour.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(unique(
    by_queue,
    fields("tenant"),
    period = "1h",
    states("failed", "completed")
))]
struct SyncTenant {
    tenant: String,
    page: u32,
}

fn welcome(user_id: i64) -> SendWelcome {
    SendWelcome {
        user_id,
        name: format!("user \"{user_id}\"\t\u{e9}"),
        tags: vec!["a".into(), "b\\c".into()],
    }
}

#[test]
fn the_derive_takes_the_attributes_and_defaults_the_rest() {
    assert_eq!(SendWelcome::KIND, "send_welcome");
    assert_eq!(SendWelcome::QUEUE, "email");
    assert_eq!(SendWelcome::PRIORITY, Some(1));
    assert_eq!(SendWelcome::MAX_ATTEMPTS, Some(3));
    assert_eq!(ResizeImage::KIND, "resize_image");
    assert_eq!(ResizeImage::QUEUE, "default");
    assert_eq!(ResizeImage::PRIORITY, None);
}

#[tokio::test]
async fn a_rolled_back_insert_leaves_nothing_and_a_committed_one_runs_with_its_typed_args() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());

    let mut tx = pool.begin().await.unwrap();
    client.insert(&mut *tx, &welcome(1)).await.unwrap();
    tx.rollback().await.unwrap();
    assert!(
        awa::testing::enqueued::<_, SendWelcome>(&pool, 100)
            .await
            .unwrap()
            .is_empty()
    );

    let mut tx = pool.begin().await.unwrap();
    let done = client.insert(&mut *tx, &welcome(2)).await.unwrap();
    tx.commit().await.unwrap();
    assert!(done.inserted && !done.scheduled);
    let listed = awa::testing::enqueued::<_, SendWelcome>(&pool, 100)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].1, welcome(2));
    assert_eq!(listed[0].0.priority, 1);
    assert_eq!(listed[0].0.max_attempts, 3);
    assert_eq!(listed[0].0.queue, "email");

    let seen = Arc::new(Mutex::new(Vec::new()));
    let builder = Client::builder(pool.clone()).register::<SendWelcome>({
        let seen = seen.clone();
        move |job: SendWelcome, ctx: JobContext| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push((job, ctx.attempt()));
                Ok(Outcome::Complete)
            }
        }
    });
    let worked = builder.work_one("email").await.unwrap().expect("a job");
    assert_eq!(worked.job.token.job_id, done.id);
    assert!(worked.finished.accepted);
    assert_eq!(worked.finished.next_state, Some(JobState::Completed));
    assert_eq!(*seen.lock().unwrap(), vec![(welcome(2), 1)]);
    assert!(builder.work_one("email").await.unwrap().is_none());
    let job = client.job(done.id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Completed);
}

#[tokio::test]
async fn a_taken_unique_key_returns_the_holder_and_inserts_nothing() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());
    let opts = InsertOpts::new().unique_key("welcome:7");
    let first = client
        .insert_with(&pool, &welcome(7), opts.clone())
        .await
        .unwrap();
    let second = client.insert_with(&pool, &welcome(7), opts).await.unwrap();
    assert!(first.inserted);
    assert!(!second.inserted);
    assert_eq!(second.id, first.id);
    assert_eq!(
        awa::testing::enqueued::<_, SendWelcome>(&pool, 100)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn the_derive_says_the_unique_spec() {
    assert_eq!(
        RefreshAccount::unique(),
        Some(awa::Unique::by_args().period(Duration::from_secs(600)))
    );
    assert_eq!(
        SyncTenant::unique(),
        Some(
            awa::Unique::by_fields(["tenant"])
                .with_queue()
                .period(Duration::from_secs(3600))
                .states([JobState::Failed, JobState::Completed])
        )
    );
    assert_eq!(SendWelcome::unique(), None);
}

#[tokio::test]
async fn a_duplicate_by_the_type_or_the_options_spec_returns_the_existing_job() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());
    // The type's spec, on every insert path.
    let first = client
        .insert(&pool, &RefreshAccount { account: 1 })
        .await
        .unwrap();
    let again = client
        .insert(&pool, &RefreshAccount { account: 1 })
        .await
        .unwrap();
    let other = client
        .insert(&pool, &RefreshAccount { account: 2 })
        .await
        .unwrap();
    assert!(first.inserted && other.inserted && !again.inserted);
    assert_eq!(again.id, first.id);
    let many = client
        .insert_many(
            &pool,
            &[RefreshAccount { account: 2 }, RefreshAccount { account: 3 }],
        )
        .await
        .unwrap();
    assert_eq!((many[0].id, many[0].inserted), (other.id, false));
    assert!(many[1].inserted);
    let copied = client
        .insert_many_copy(&pool, &[RefreshAccount { account: 3 }])
        .await
        .unwrap();
    assert_eq!((copied[0].id, copied[0].inserted), (many[1].id, false));
    // By fields: the page does not matter, the queue does.
    let sync = |page| SyncTenant {
        tenant: "acme".into(),
        page,
    };
    let s1 = client.insert(&pool, &sync(1)).await.unwrap();
    let s2 = client.insert(&pool, &sync(2)).await.unwrap();
    let s3 = client
        .insert_with(&pool, &sync(3), InsertOpts::new().queue("other"))
        .await
        .unwrap();
    assert_eq!((s2.id, s2.inserted), (s1.id, false));
    assert!(s3.inserted);
    // The options' spec over the type's (none for SendWelcome).
    let by_kind = InsertOpts::new().unique(awa::Unique::by_kind());
    let w1 = client
        .insert_with(&pool, &welcome(1), by_kind.clone())
        .await
        .unwrap();
    let w2 = client
        .insert_with(&pool, &welcome(2), by_kind)
        .await
        .unwrap();
    assert_eq!((w2.id, w2.inserted), (w1.id, false));
    // A bad spec is refused before anything is sent.
    let err = client
        .insert_with(
            &pool,
            &welcome(3),
            InsertOpts::new().unique(awa::Unique::by_args().states([JobState::Completed])),
        )
        .await
        .expect_err("states without a period");
    assert!(matches!(err, Error::Invalid(_)), "{err}");
}

#[tokio::test]
async fn the_array_and_copy_paths_insert_the_same_jobs_in_order() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());
    let jobs: Vec<SendWelcome> = (0..50).map(welcome).collect();
    let mut tx = pool.begin().await.unwrap();
    let by_array = client.insert_many(&mut *tx, &jobs).await.unwrap();
    let by_copy = client.insert_many_copy(&mut *tx, &jobs).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(by_array.len(), 50);
    assert_eq!(by_copy.len(), 50);
    let ids: Vec<i64> = by_array.iter().chain(&by_copy).map(|i| i.id.0).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids in input order: {ids:?}"
    );
    let listed = awa::testing::enqueued::<_, SendWelcome>(&pool, 1000)
        .await
        .unwrap();
    assert_eq!(listed.len(), 100);
    // Newest first: the copy batch, last job first.
    let args: Vec<SendWelcome> = listed.iter().rev().map(|(_, a)| a.clone()).collect();
    let want: Vec<SendWelcome> = jobs.iter().chain(&jobs).cloned().collect();
    assert_eq!(args, want);
}

#[tokio::test]
async fn bad_options_are_refused_before_anything_is_written() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());
    for opts in [
        InsertOpts::new().queue("no spaces allowed"),
        InsertOpts::new().priority(9),
        InsertOpts::new().max_attempts(0),
        InsertOpts::new().unique_key("k".repeat(10_000)),
    ] {
        let err = client
            .insert_with(&pool, &welcome(1), opts.clone())
            .await
            .expect_err("refused");
        assert!(matches!(err, Error::Invalid(_)), "{opts:?}: {err}");
    }
    assert!(
        awa::testing::enqueued::<_, SendWelcome>(&pool, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// The next run time of a retried job, in seconds from now.
async fn retry_in(client: &Client, id: awa::JobId) -> f64 {
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Retryable, "{job:?}");
    (job.at.time().unwrap() - chrono::Utc::now()).num_milliseconds() as f64 / 1000.0
}

async fn failing(_: ResizeImage, _: JobContext) -> HandlerResult {
    Err(JobError::Retry("upstream is down".into()))
}

#[tokio::test]
async fn retry_policies_apply_by_kind_then_by_queue() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());
    let resize = ResizeImage {
        url: "https://example.invalid/a.png".into(),
        width: 64,
    };

    // The queue's policy, when the kind has none.
    let by_queue = Client::builder(pool.clone())
        .register::<ResizeImage>(failing)
        .queue_retry_policy("default", RetryPolicy::fixed(Duration::from_secs(600)));
    let a = client.insert(&pool, &resize).await.unwrap();
    by_queue.work_one("default").await.unwrap().unwrap();
    let secs = retry_in(&client, a.id).await;
    assert!((590.0..=601.0).contains(&secs), "queue policy: {secs}");

    // The kind's policy wins over the queue's.
    let by_kind = Client::builder(pool.clone())
        .register::<ResizeImage>(failing)
        .queue_retry_policy("default", RetryPolicy::fixed(Duration::from_secs(600)))
        .retry_policy::<ResizeImage>(RetryPolicy::custom(|attempt| {
            Duration::from_secs(1000 + attempt as u64)
        }));
    let b = client.insert(&pool, &resize).await.unwrap();
    by_kind.work_one("default").await.unwrap().unwrap();
    let secs = retry_in(&client, b.id).await;
    assert!((990.0..=1002.0).contains(&secs), "kind policy: {secs}");

    // A handler's own RetryAfter wins over any policy.
    let own = Client::builder(pool.clone())
        .register::<ResizeImage>(|_: ResizeImage, _: JobContext| async {
            Err(JobError::RetryAfter(
                Duration::from_secs(3000),
                "later".into(),
            ))
        })
        .retry_policy::<ResizeImage>(RetryPolicy::fixed(Duration::from_secs(5)));
    let c = client.insert(&pool, &resize).await.unwrap();
    own.work_one("default").await.unwrap().unwrap();
    let secs = retry_in(&client, c.id).await;
    assert!((2990.0..=3001.0).contains(&secs), "handler's delay: {secs}");
}

#[tokio::test]
async fn args_that_no_longer_match_the_type_fail_the_job_with_a_reason() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());
    let mut raw = awa::NewJob::new(
        awa::QueueName::new("default").unwrap(),
        ResizeImage::KIND,
        serde_json::json!({"url": 5}),
    );
    raw.max_attempts = Some(5);
    let id = client.insert_raw(&pool, &[raw]).await.unwrap()[0].id;
    let builder = Client::builder(pool.clone())
        .register::<ResizeImage>(|_: ResizeImage, _: JobContext| async { Ok(Outcome::Complete) });
    let worked = builder.work_one("default").await.unwrap().unwrap();
    assert_eq!(worked.finished.next_state, Some(JobState::Failed));
    let job = client.job(id).await.unwrap().unwrap();
    let error = job.last_error.unwrap_or_default();
    assert!(
        error.contains("resize_image") && error.contains("ResizeImage"),
        "{error}"
    );
}

#[tokio::test]
async fn builder_mistakes_are_reported_by_start() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let noop = |_: ResizeImage, _: JobContext| async { Ok(Outcome::Complete) };
    let twice = Client::builder(pool.clone())
        .queue("default", 4)
        .register::<ResizeImage>(noop)
        .register::<ResizeImage>(noop)
        .start()
        .await;
    assert!(matches!(twice, Err(Error::DuplicateKind(k)) if k == "resize_image"));
    let no_queue = Client::builder(pool.clone())
        .register::<ResizeImage>(noop)
        .start()
        .await;
    assert!(matches!(no_queue, Err(Error::NoQueues)));
    let bad_queue = Client::builder(pool.clone())
        .queue("Bad Queue!", 4)
        .register::<ResizeImage>(noop)
        .start()
        .await;
    assert!(matches!(bad_queue, Err(Error::Invalid(_))));
    let zero = Client::builder(pool.clone())
        .queue("default", 0)
        .register::<ResizeImage>(noop)
        .start()
        .await;
    assert!(
        matches!(zero, Err(Error::Exec(_)) | Err(Error::Invalid(_))),
        "{zero:?}"
    );
}

#[tokio::test]
async fn an_unmigrated_database_is_a_clear_error() {
    let db = awa_harness::TestDb::empty().await.unwrap();
    let err = Client::connect(db.url(), 2)
        .await
        .expect_err("not migrated");
    let text = err.to_string();
    assert!(text.contains("migrate"), "{text}");
}

#[tokio::test]
async fn a_connect_error_never_shows_the_password() {
    for url in [
        "postgres://awa_user:s3cretpw@127.0.0.1:1/app",
        "postgres://awa_user@127.0.0.1:1/app?password=s3cretpw",
    ] {
        let err = Client::connect(url, 1)
            .await
            .expect_err("nothing listens on port 1");
        let shown = format!("{err} / {err:?}");
        assert!(!shown.contains("s3cretpw"), "{shown}");
        assert!(shown.contains("127.0.0.1"), "says where it tried: {shown}");
    }
    let err = Client::connect("mysql://u:s3cretpw@127.0.0.1/app", 1)
        .await
        .expect_err("not a postgres URL")
        .to_string();
    assert!(
        err.contains("postgres://") && !err.contains("s3cretpw"),
        "{err}"
    );
}

//! The staged storage transition against real PostgreSQL, step by step:
//! each step's refusals (state unchanged), the routing each state gives,
//! producers routed in SQL, unique keys across the boundary, deferred work
//! moved at finalize, the draining fence, and racing operators.

use awa_control::ControlError;
use awa_control::routing;
use awa_control::transition::{self, Step};
use awa_core::{Phase, SchemaName};
use sqlx::{Connection, PgConnection, Row};

fn s(name: &str) -> SchemaName {
    SchemaName::new(name).unwrap()
}

async fn setup() -> (awa_harness::TestDb, PgConnection) {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let mut conn = PgConnection::connect(db.url()).await.unwrap();
    for name in ["next", "third"] {
        let shape = awa_core::SubstrateShape {
            schema: s(name),
            slots: awa_core::SlotCounts::new(32, 16, 8).unwrap(),
        };
        awa_maint::substrate::prepare(&mut conn, &shape, false)
            .await
            .unwrap();
    }
    (db, conn)
}

/// One job through the public SQL producer function, `awa.enqueue`.
async fn enqueue(
    conn: &mut PgConnection,
    n: i64,
    key: Option<&str>,
    run_at: Option<&str>,
) -> (i64, bool) {
    let row = sqlx::query(
        "SELECT job_id, inserted FROM awa.enqueue(ARRAY['q'], ARRAY['k'],
                ARRAY[jsonb_build_object('n', $1::bigint)], ARRAY[2::smallint],
                ARRAY[$3::timestamptz], ARRAY[NULL::integer], ARRAY[$2::text], ARRAY[NULL::jsonb])",
    )
    .bind(n)
    .bind(key)
    .bind(run_at)
    .fetch_one(conn)
    .await
    .unwrap();
    (row.get("job_id"), row.get("inserted"))
}

/// Where job `id` is: (schema, state) for every substrate that knows it.
async fn whereabouts(conn: &mut PgConnection, id: i64) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for schema in ["awa", "next", "third"] {
        let q = format!("SELECT state FROM {schema}.jobs WHERE id = $1");
        let states: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(q))
            .bind(id)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        out.extend(states.into_iter().map(|st| (schema.to_string(), st)));
    }
    out
}

async fn state_row(conn: &mut PgConnection) -> (String, String, Option<String>, i64) {
    let row = sqlx::query(
        "SELECT state, active_schema, target_schema, epoch FROM awa.storage_transition_state",
    )
    .fetch_one(conn)
    .await
    .unwrap();
    (
        row.get("state"),
        row.get("active_schema"),
        row.get("target_schema"),
        row.get("epoch"),
    )
}

fn refused(result: Result<transition::StepOutcome, ControlError>, needle: &str) {
    match result {
        Err(ControlError::Refused { message, hint, .. }) => {
            assert!(
                message.contains(needle),
                "refusal {message:?} should mention {needle:?}"
            );
            assert!(hint.is_some(), "a refusal says what to do: {message}");
        }
        other => panic!("expected a refusal mentioning {needle:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn each_step_refuses_what_is_not_allowed_now_and_changes_nothing() {
    let (_db, mut conn) = setup().await;
    let before = state_row(&mut conn).await;
    refused(transition::abort(&mut conn).await, "nothing to abort");
    refused(
        transition::enter_mixed(&mut conn).await,
        "no transition is prepared",
    );
    refused(
        transition::finalize(&mut conn).await,
        "no transition is in progress",
    );
    refused(
        transition::prepare(&mut conn, &s("awa")).await,
        "already the active",
    );
    refused(
        transition::prepare(&mut conn, &s("nosuch")).await,
        "not a prepared substrate",
    );
    sqlx::query("CREATE SCHEMA plain")
        .execute(&mut conn)
        .await
        .unwrap();
    refused(
        transition::prepare(&mut conn, &s("plain")).await,
        "not a prepared substrate",
    );
    assert_eq!(
        state_row(&mut conn).await,
        before,
        "refusals change nothing"
    );

    let prepared = transition::prepare(&mut conn, &s("next")).await.unwrap();
    assert_eq!(
        (prepared.step, prepared.state),
        (Step::Prepare, Phase::Prepared)
    );
    let after_prepare = state_row(&mut conn).await;
    refused(
        transition::prepare(&mut conn, &s("third")).await,
        "already prepared",
    );
    refused(
        transition::finalize(&mut conn).await,
        "prepared but not mixed",
    );
    assert_eq!(state_row(&mut conn).await, after_prepare);

    transition::enter_mixed(&mut conn).await.unwrap();
    let after_mixed = state_row(&mut conn).await;
    refused(transition::enter_mixed(&mut conn).await, "already mixed");
    refused(
        transition::prepare(&mut conn, &s("third")).await,
        "already mixed",
    );
    assert_eq!(state_row(&mut conn).await, after_mixed);
    assert!(
        after_mixed.3 > after_prepare.3 && after_prepare.3 > before.3,
        "epoch grows"
    );
}

#[tokio::test]
async fn routing_follows_each_state_and_producers_are_routed_in_sql() {
    let (_db, mut conn) = setup().await;
    let r = routing::read(&mut conn).await.unwrap();
    assert_eq!(
        (r.phase, r.write(), r.reads()),
        (Phase::Steady, &s("awa"), vec![s("awa")])
    );
    let (before, _) = enqueue(&mut conn, 1, None, None).await;
    assert_eq!(
        whereabouts(&mut conn, before).await,
        [("awa".into(), "available".into())]
    );

    transition::prepare(&mut conn, &s("next")).await.unwrap();
    let r = routing::read(&mut conn).await.unwrap();
    assert_eq!(r.write(), &s("awa"), "prepared: nothing moves yet");
    assert_eq!(r.reads(), vec![s("awa"), s("next")]);
    let (prepared, _) = enqueue(&mut conn, 2, None, None).await;
    assert_eq!(whereabouts(&mut conn, prepared).await[0].0, "awa");

    transition::enter_mixed(&mut conn).await.unwrap();
    let r = routing::read(&mut conn).await.unwrap();
    assert_eq!((r.phase, r.write()), (Phase::Mixed, &s("next")));
    assert!(r.drains(&s("awa")));
    // awa.enqueue forwards; so does every other substrate's enqueue.
    let (mixed, _) = enqueue(&mut conn, 3, None, None).await;
    assert_eq!(
        whereabouts(&mut conn, mixed).await,
        [("next".into(), "available".into())]
    );
    let via_third: i64 = sqlx::query_scalar(
        "SELECT job_id FROM third.enqueue(ARRAY['q'], ARRAY['k'], ARRAY['{}'::jsonb],
                ARRAY[2::smallint], ARRAY[NULL::timestamptz], ARRAY[NULL::integer],
                ARRAY[NULL::text], ARRAY[NULL::jsonb])",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(whereabouts(&mut conn, via_third).await[0].0, "next");
    // The Rust producer: routed goes where the state says, whatever it
    // expected; pinned goes exactly where it was told.
    use awa_ready::ReadyPlane;
    let job = awa_core::NewJob::new(
        awa_core::QueueName::new("q").unwrap(),
        "k",
        serde_json::json!({}),
    );
    let routed = awa_ready::PgReadyPlane::routed(s("awa"))
        .enqueue(&mut conn, std::slice::from_ref(&job))
        .await
        .unwrap();
    assert_eq!(
        whereabouts(&mut conn, routed[0].job_id.0).await[0].0,
        "next"
    );
    let pinned = awa_ready::PgReadyPlane::new(s("third"))
        .enqueue(&mut conn, std::slice::from_ref(&job))
        .await
        .unwrap();
    assert_eq!(
        whereabouts(&mut conn, pinned[0].job_id.0).await[0].0,
        "third"
    );
    // The routed read view sees both sides of the move.
    let routed_ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM awa.routed_jobs() ORDER BY id")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    for id in [before, prepared, mixed, via_third, routed[0].job_id.0] {
        assert!(routed_ids.contains(&id), "{id} in {routed_ids:?}");
    }
    assert!(
        !routed_ids.contains(&pinned[0].job_id.0),
        "third is not routed, so its jobs are not in the routed view"
    );
    // Ids are database-wide: no two substrates hand out the same one.
    let ids = [
        before,
        prepared,
        mixed,
        via_third,
        routed[0].job_id.0,
        pinned[0].job_id.0,
    ];
    let mut sorted = ids.to_vec();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len());
}

#[tokio::test]
async fn a_unique_key_live_in_the_old_substrate_blocks_a_duplicate_in_the_target() {
    let (_db, mut conn) = setup().await;
    let (old, inserted) = enqueue(&mut conn, 1, Some("k1"), None).await;
    assert!(inserted);
    transition::prepare(&mut conn, &s("next")).await.unwrap();
    transition::enter_mixed(&mut conn).await.unwrap();
    let (dup, inserted) = enqueue(&mut conn, 2, Some("k1"), None).await;
    assert_eq!((dup, inserted), (old, false), "the old job holds the key");
    // Once the holder is terminal, the key is free in the target.
    let cancelled: Option<String> = sqlx::query_scalar("SELECT awa.cancel_job($1)")
        .bind(old)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert!(cancelled.is_some());
    let (fresh, inserted) = enqueue(&mut conn, 3, Some("k1"), None).await;
    assert!(inserted && fresh != old);
    assert_eq!(whereabouts(&mut conn, fresh).await[0].0, "next");
}

#[tokio::test]
async fn finalize_waits_for_the_old_substrate_to_drain_and_moves_deferred_work() {
    let (_db, mut conn) = setup().await;
    let (waiting, _) = enqueue(&mut conn, 1, None, None).await;
    let (later, _) = enqueue(&mut conn, 2, Some("later"), Some("2100-01-01T00:00:00Z")).await;
    let dead: i64 = {
        // A dead letter in the old substrate, as finish leaves one.
        sqlx::query_scalar(
            "INSERT INTO awa.dlq_entries (job_id, queue, priority, kind, args, attempt, max_attempts,
                                          run_lease, created_at, last_error)
             VALUES (nextval('awa.job_id_seq'), 'q', 2, 'k', '{}', 3, 3, 3, now(), 'boom')
             RETURNING job_id",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap()
    };
    transition::prepare(&mut conn, &s("next")).await.unwrap();
    transition::enter_mixed(&mut conn).await.unwrap();
    let mixed = state_row(&mut conn).await;
    refused(
        transition::finalize(&mut conn).await,
        "still holds 1 non-terminal",
    );
    assert_eq!(state_row(&mut conn).await, mixed);

    sqlx::query("SELECT awa.cancel_job($1)")
        .bind(waiting)
        .execute(&mut conn)
        .await
        .unwrap();
    let done = transition::finalize(&mut conn).await.unwrap();
    assert_eq!(
        (done.state, done.active_schema.as_str()),
        (Phase::Steady, "next")
    );
    // The scheduled job and the dead letter moved, with their ids and key.
    assert_eq!(
        whereabouts(&mut conn, later).await,
        [("next".into(), "scheduled".into())]
    );
    assert_eq!(
        whereabouts(&mut conn, dead).await,
        [("next".into(), "dead_lettered".into())]
    );
    let (dup, inserted) = enqueue(&mut conn, 3, Some("later"), None).await;
    assert_eq!(
        (dup, inserted),
        (later, false),
        "the moved job still holds its key"
    );
    // The old substrate keeps its history, read-only, and drains out of
    // the routing once no transaction from before mixed is open.
    assert_eq!(
        whereabouts(&mut conn, waiting).await,
        [("awa".into(), "cancelled".into())]
    );
    let r = routing::read(&mut conn).await.unwrap();
    assert_eq!(r.write(), &s("next"));
    assert_eq!(
        r.reads(),
        vec![s("next"), s("awa")],
        "the old substrate drains"
    );
    released(&mut conn, &s("awa")).await;
    assert_eq!(
        routing::read(&mut conn).await.unwrap().reads(),
        vec![s("next")]
    );
}

/// A REPEATABLE READ transaction whose snapshot is taken now.
async fn snapshot_now(conn: &mut PgConnection) -> sqlx::Transaction<'_, sqlx::Postgres> {
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("SELECT 1 FROM awa.storage_transition_state")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx
}

#[tokio::test]
async fn a_transaction_open_when_writes_moved_keeps_the_old_substrate_routed() {
    let (db, mut conn) = setup().await;
    transition::prepare(&mut conn, &s("next")).await.unwrap();
    // A REPEATABLE READ transaction that has its snapshot before mixed.
    let mut stale = PgConnection::connect(db.url()).await.unwrap();
    let mut tx = snapshot_now(&mut stale).await;
    transition::enter_mixed(&mut conn).await.unwrap();
    // Its snapshot still routes to the old substrate: the job lands there.
    let (id, _) = enqueue(&mut tx, 1, None, None).await;
    tx.commit().await.unwrap();
    assert_eq!(whereabouts(&mut conn, id).await[0].0, "awa");
    sqlx::query("SELECT awa.cancel_job($1)")
        .bind(id)
        .execute(&mut conn)
        .await
        .unwrap();
    transition::finalize(&mut conn).await.unwrap();

    // A second stale transaction, open across an abort from mixed.
    transition::prepare(&mut conn, &s("third")).await.unwrap();
    transition::enter_mixed(&mut conn).await.unwrap();
    let mut tx = snapshot_now(&mut stale).await;
    transition::abort(&mut conn).await.unwrap();
    let r = routing::read(&mut conn).await.unwrap();
    assert_eq!(r.write(), &s("next"));
    assert!(r.reads().contains(&s("third")), "the aborted target drains");
    assert!(
        !routing::release_drained(&mut conn, &s("third"))
            .await
            .unwrap(),
        "not while a transaction that may still write to it is open"
    );
    let (late, _) = enqueue(&mut tx, 2, None, None).await;
    tx.commit().await.unwrap();
    assert_eq!(whereabouts(&mut conn, late).await[0].0, "third");
    assert!(
        !routing::release_drained(&mut conn, &s("third"))
            .await
            .unwrap(),
        "it holds a job"
    );
    sqlx::query("SELECT third.cancel_job($1)")
        .bind(late)
        .execute(&mut conn)
        .await
        .unwrap();
    released(&mut conn, &s("third")).await;
    assert!(
        !routing::read(&mut conn)
            .await
            .unwrap()
            .reads()
            .contains(&s("third"))
    );
}

async fn run_step(url: String, step: Step) -> Result<transition::StepOutcome, ControlError> {
    let mut c = PgConnection::connect(&url).await.unwrap();
    match step {
        Step::Prepare => transition::prepare(&mut c, &s("next")).await,
        Step::EnterMixed => transition::enter_mixed(&mut c).await,
        Step::Finalize => transition::finalize(&mut c).await,
        Step::Abort => transition::abort(&mut c).await,
    }
}

#[tokio::test]
async fn two_operators_racing_a_step_get_one_success_and_one_refusal() {
    let (db, mut conn) = setup().await;
    for step in [Step::Prepare, Step::EnterMixed, Step::Finalize] {
        let a = tokio::spawn(run_step(db.url().to_string(), step));
        let b = tokio::spawn(run_step(db.url().to_string(), step));
        let (x, y) = (a.await.unwrap(), b.await.unwrap());
        let ok = [&x, &y].iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1, "{step:?}: {x:?} / {y:?}");
        for r in [x, y] {
            if let Err(err) = r {
                assert!(
                    matches!(err, ControlError::Refused { .. }),
                    "{step:?}: {err}"
                );
            }
        }
    }
    assert_eq!(state_row(&mut conn).await.1, "next");
}

/// Release `schema` from draining, waiting out transactions of other
/// sessions (autovacuum, say) that were open when writes moved.
async fn released(conn: &mut PgConnection, schema: &SchemaName) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !routing::release_drained(conn, schema).await.unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "{schema} never drained"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn finalize_waits_for_a_live_runtime_that_has_not_registered_the_target() {
    let (_db, mut conn) = setup().await;
    let stale = uuid::Uuid::new_v4();
    awa_control::runtimes::register(
        &mut conn,
        &awa_control::runtimes::RuntimeInfo {
            instance_id: stale,
            role: "worker",
            queues: vec!["q".into()],
        },
    )
    .await
    .unwrap();
    // One pinned to an unrelated substrate does not hold the move back.
    let elsewhere = uuid::Uuid::new_v4();
    awa_control::runtimes::register(
        &mut conn,
        &awa_control::runtimes::RuntimeInfo {
            instance_id: elsewhere,
            role: "worker",
            queues: vec!["q".into()],
        },
    )
    .await
    .unwrap();
    routing::register_backends(&mut conn, elsewhere, &awa_core::Routing::fixed(s("third")))
        .await
        .unwrap();
    transition::prepare(&mut conn, &s("next")).await.unwrap();
    transition::enter_mixed(&mut conn).await.unwrap();
    refused(transition::finalize(&mut conn).await, &stale.to_string());
    // Once it has read the routing (as `routing::follow` does), it may go.
    let r = routing::read(&mut conn).await.unwrap();
    routing::register_backends(&mut conn, stale, &r)
        .await
        .unwrap();
    transition::finalize(&mut conn).await.unwrap();
}

/// storage_transfer_in copies each table by the columns the catalog lists,
/// so every column, the optional ones included, must arrive unchanged: a
/// column the move forgot would come through as NULL here.
#[tokio::test]
async fn a_transfer_moves_every_column_of_deferred_jobs_and_dead_letters_unchanged() {
    let (_db, mut conn) = setup().await;
    let (later, _) = enqueue(&mut conn, 2, Some("later"), Some("2100-01-01T00:00:00Z")).await;
    sqlx::query(
        "UPDATE awa.deferred_jobs
            SET metadata = '{\"m\": 1}', last_error = 'earlier failure',
                attempts = '[{\"attempt\": 1, \"error\": \"x\"}]', attempt = 1
          WHERE job_id = $1",
    )
    .bind(later)
    .execute(&mut conn)
    .await
    .unwrap();
    let dead: i64 = sqlx::query_scalar(
        "INSERT INTO awa.dlq_entries (job_id, queue, priority, kind, args, attempt, max_attempts,
                                      run_lease, created_at, last_error, metadata, unique_key, attempts)
         VALUES (nextval('awa.job_id_seq'), 'q', 2, 'k', '{\"a\": [1]}', 3, 3, 3, now() - interval '1 hour',
                 'boom', '{\"trace\": \"t\"}', 'dead-key', '[{\"attempt\": 3}]')
         RETURNING job_id",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    // Every column set: the comparison below would not notice a column
    // lost as NULL if it were NULL to begin with.
    let mut before = Vec::new();
    for (table, id) in [("deferred_jobs", later), ("dlq_entries", dead)] {
        let v = row_json(&mut conn, "awa", table, id)
            .await
            .expect("the row");
        let nulls: Vec<&String> = v
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, x)| x.is_null())
            .map(|(k, _)| k)
            .collect();
        assert!(
            nulls.is_empty(),
            "{table}: set every column, {nulls:?} are NULL"
        );
        before.push(v);
    }

    transition::prepare(&mut conn, &s("next")).await.unwrap();
    transition::enter_mixed(&mut conn).await.unwrap();
    let moved: i32 = sqlx::query_scalar("SELECT next.storage_transfer_in('awa', 100)")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(moved, 2);
    for ((table, id), want) in [("deferred_jobs", later), ("dlq_entries", dead)]
        .into_iter()
        .zip(before)
    {
        let got = row_json(&mut conn, "next", table, id).await;
        assert_eq!(got, Some(want), "{table} row changed in the move");
        assert_eq!(
            row_json(&mut conn, "awa", table, id).await,
            None,
            "{table}: the old copy is deleted in the same statement"
        );
    }
}

/// One row of `schema.table` as JSON, by job id.
async fn row_json(
    conn: &mut PgConnection,
    schema: &str,
    table: &str,
    id: i64,
) -> Option<serde_json::Value> {
    // Names from this file only (the two substrates, the two tables).
    assert!(["awa", "next"].contains(&schema) && ["deferred_jobs", "dlq_entries"].contains(&table));
    let sql = format!("SELECT to_jsonb(t)::text FROM {schema}.{table} t WHERE job_id = $1");
    let text: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(conn)
        .await
        .unwrap();
    text.map(|t| serde_json::from_str(&t).unwrap())
}

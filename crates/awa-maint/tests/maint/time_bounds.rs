//! Issue 36, item 1, as a property over the producer contract's timestamp
//! argument: for any `run_at` PostgreSQL can hold (infinities, the
//! extremes of its range, the edges of Awa's 1970..10000, anything in
//! between), `awa.enqueue` called as the runtime role either refuses it
//! with SQLSTATE 23514, a message naming run_at and a hint, writing
//! nothing (a fingerprint of every row and sequence is unchanged), or
//! accepts it, and then every reader shows the job with that time: the
//! job read, the list, pending by state; the time is a real one, never a
//! raw value.

use crate::common::{fingerprint, login_role};
use awa_core::{DbTime, JobId, QueueName, SchemaName};
use awa_history::{HistoryPlane, PgHistoryPlane};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sqlx::{ConnectOptions, Connection, PgConnection};

/// Microseconds since 2000-01-01 of PostgreSQL's earliest and latest
/// timestamptz, and of Awa's bounds.
const PG_MIN: i64 = -211_813_488_000_000_000;
const PG_MAX: i64 = 9_223_371_331_199_999_999;
const AWA_START: i64 = -946_684_800_000_000;
const AWA_END: i64 = 252_455_616_000_000_000;

/// What the caller sends: the SQL text of a timestamptz.
fn run_at() -> impl Strategy<Value = String> {
    let micros =
        |m: i64| format!("(timestamptz '2000-01-01 00:00:00+00' + interval '{m} microseconds')");
    prop_oneof![
        Just("'infinity'".to_string()),
        Just("'-infinity'".to_string()),
        Just("'294276-12-31 23:59:59.999999+00'".to_string()),
        Just("'4714-11-24 00:00:00+00 BC'".to_string()),
        (-3i64..3).prop_map(move |d| micros(AWA_START + d)),
        (-3i64..3).prop_map(move |d| micros(AWA_END + d)),
        (AWA_START..AWA_END).prop_map(micros),
        (PG_MIN / 2..PG_MAX / 2).prop_map(micros),
        // Around now, past and future.
        (-86_400i64..86_400).prop_map(|s| format!("(now() + make_interval(secs => {s}))")),
    ]
}

async fn case(rt: &mut PgConnection, admin: &mut PgConnection, at: &str) -> Result<(), String> {
    let before = fingerprint(admin, &["awa"]).await;
    let sql = format!(
        "SELECT job_id, ({at})::timestamptz AS sent FROM awa.enqueue(ARRAY['q'], ARRAY['k'], \
         ARRAY['{{}}'::jsonb], ARRAY[3::smallint], ARRAY[({at})::timestamptz], ARRAY[NULL::int], \
         ARRAY[NULL::text], ARRAY[NULL::jsonb])"
    );
    let result: Result<(i64, DbTime), sqlx::Error> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_one(&mut *rt)
        .await;
    let (id, sent) = match result {
        Err(err) => {
            let db = err.as_database_error().ok_or(format!("{at}: {err}"))?;
            let hint = db
                .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                .and_then(|e| e.hint().map(str::to_string));
            if db.code().as_deref() != Some("23514")
                || !db.message().contains("run_at")
                || !hint.is_some_and(|h| h.contains("9999"))
            {
                return Err(format!("{at}: refused, but not clearly: {err}"));
            }
            if fingerprint(admin, &["awa"]).await != before {
                return Err(format!("{at}: refused, yet something was written"));
            }
            return Ok(());
        }
        Ok(row) => row,
    };
    let Some(sent) = sent.time() else {
        return Err(format!("{at}: accepted {sent}, a time no reader can show"));
    };
    let history = PgHistoryPlane::new(SchemaName::default_schema());
    let job = history
        .job(&mut *admin, JobId(id))
        .await
        .map_err(|e| format!("{at}: job: {e}"))?
        .ok_or(format!("{at}: job {id} not found"))?;
    if !job.warnings.is_empty() || job.created_at.time().is_none() {
        return Err(format!("{at}: job {id} read with warnings: {job:?}"));
    }
    // A scheduled job's `at` is its run_at; a runnable one's when it
    // became runnable (now, for a run_at in the past).
    let shown = job.at.time().ok_or(format!("{at}: at is raw: {job:?}"))?;
    if job.state.as_str() == "scheduled" && shown != sent {
        return Err(format!("{at}: scheduled at {shown}, sent {sent}"));
    }
    let listed = history
        .list(&mut *admin, None, None, 1000)
        .await
        .map_err(|e| format!("{at}: list: {e}"))?;
    if !listed.iter().any(|j| j.id.0 == id && j.warnings.is_empty()) {
        return Err(format!("{at}: job {id} not listed as it is"));
    }
    history
        .pending_by_state(&mut *admin, &[QueueName::new("q").unwrap()], None)
        .await
        .map_err(|e| format!("{at}: pending: {e}"))?;
    Ok(())
}

#[test]
fn enqueue_refuses_clearly_or_every_reader_shows_the_job() {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let db = tokio.block_on(awa_maint::migrated_test_db()).unwrap();
    let (admin, rt, role) = tokio.block_on(async {
        let mut admin = PgConnection::connect(db.url()).await.unwrap();
        let (role, options) = login_role(&db, "rt").await;
        awa_maint::substrate::grant_runtime_role(&mut admin, &role, &SchemaName::default_schema())
            .await
            .unwrap();
        let rt = options.connect().await.unwrap();
        (admin, rt, role)
    });
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let conns = std::cell::RefCell::new((admin, rt));
    let result = runner.run(&run_at(), |at| {
        let mut conns = conns.borrow_mut();
        let (admin, rt) = &mut *conns;
        tokio
            .block_on(case(rt, admin, &at))
            .map_err(TestCaseError::fail)
    });
    let (mut admin, rt) = conns.into_inner();
    tokio.block_on(async {
        rt.close().await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP OWNED BY {role}; DROP ROLE {role}"
        )))
        .execute(&mut admin)
        .await
        .unwrap();
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

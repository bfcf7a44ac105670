//! The runtime works under a role with DML and ring TRUNCATE only: no DDL.

use awa_control::rings::{PgRings, PruneOutcome, Ring, RotateOutcome};
use awa_core::{NewJob, QueueName, SchemaName};
use awa_exec::{ExecPlane, Finish, Frontier, PgExecPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};
use std::str::FromStr;
use std::time::Duration;

#[tokio::test]
async fn the_job_path_and_reclamation_run_under_the_runtime_role() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let role = format!("{}_rt", db.name());
    let mut admin = PgConnection::connect(db.url()).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE ROLE {role} LOGIN PASSWORD 'runtime'"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    awa_maint::substrate::grant_runtime_role(&mut admin, &role, &SchemaName::default_schema())
        .await
        .unwrap();
    let err = awa_maint::substrate::grant_runtime_role(
        &mut admin,
        "no_such_role_anywhere",
        &SchemaName::default_schema(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");

    let options = PgConnectOptions::from_str(db.url())
        .unwrap()
        .username(&role)
        .password("runtime");
    let mut rt = options.connect().await.unwrap();
    let schema = SchemaName::default_schema();
    let q = QueueName::new("roles").unwrap();
    let jobs: Vec<NewJob> = (0..5)
        .map(|i| NewJob::new(q.clone(), "t", serde_json::json!({ "i": i })))
        .collect();
    PgReadyPlane::new(schema.clone())
        .enqueue(&mut rt, &jobs)
        .await
        .unwrap();
    let exec = PgExecPlane::new(schema.clone());
    let mut frontier = Frontier::default();
    let mut claimed = Vec::new();
    for _ in 0..200 {
        claimed.extend(
            exec.claim(&mut rt, &q, 10, &mut frontier, None)
                .await
                .unwrap(),
        );
        if claimed.len() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(claimed.len(), 5);
    let batch: Vec<_> = claimed
        .iter()
        .map(|c| (c.token, Finish::Complete))
        .collect();
    assert!(
        exec.finish(&mut rt, &batch)
            .await
            .unwrap()
            .iter()
            .all(|f| f.accepted)
    );

    let rings = PgRings::new(schema.clone());
    assert!(matches!(
        rings.rotate(&mut rt, Ring::Queue, "rt").await.unwrap(),
        RotateOutcome::Rotated { .. }
    ));
    assert_eq!(
        rings
            .prune(
                &mut rt,
                Ring::Queue,
                Duration::from_millis(200),
                Duration::ZERO
            )
            .await
            .unwrap(),
        PruneOutcome::Retired { slot: 0 }
    );
    // Without pg_read_all_stats the snapshot horizon cannot be proven.
    assert!(matches!(
        rings
            .prune(
                &mut rt,
                Ring::Queue,
                Duration::from_millis(200),
                Duration::ZERO
            )
            .await
            .unwrap(),
        PruneOutcome::HorizonUnknown { slot: 0, .. }
    ));
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "GRANT pg_read_all_stats TO {role}"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    assert_eq!(
        rings
            .prune(
                &mut rt,
                Ring::Queue,
                Duration::from_millis(200),
                Duration::ZERO
            )
            .await
            .unwrap(),
        PruneOutcome::Pruned { slot: 0 }
    );

    // And no DDL.
    let denied = sqlx::raw_sql("CREATE TABLE awa.sneaky (x int)")
        .execute(&mut rt)
        .await
        .unwrap_err();
    assert_eq!(
        denied.as_database_error().and_then(|e| e.code()).as_deref(),
        Some("42501"),
        "{denied}"
    );
    rt.close().await.unwrap();

    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP OWNED BY {role}; REVOKE pg_read_all_stats FROM {role}; DROP ROLE {role}"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    drop(admin);
    drop(db);
}

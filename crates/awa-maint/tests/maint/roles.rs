//! The runtime works under a role granted exactly the privileges matrix of
//! `sql/grant_runtime_role.sql`: every runtime path works, every other
//! operation on every relation and function is refused, and no DDL.

use crate::common::login_role;
use awa_control::rings::{PgRings, PruneOutcome, Ring, RotateOutcome};
use awa_core::{NewJob, QueueName, SchemaName};
use awa_exec::{ExecPlane, Finish, Frontier, PgExecPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};
use std::str::FromStr;
use std::time::Duration;

/// The shortest rotate interval prune accepts; the tests that prune at
/// once also keep no history (`keep_no_history`).
const ROTATE: Duration = awa_core::bounds::ROTATE_INTERVAL.min;

/// As the owner: keep no terminal history in substrate `awa`, so a sealed
/// queue slot may be retired as soon as it is sealed.
async fn keep_no_history(admin: &mut PgConnection) {
    sqlx::query("UPDATE awa.substrate_info SET history_retention = interval '0'")
        .execute(admin)
        .await
        .unwrap();
}

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
    keep_no_history(&mut admin).await;
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
            .prune(&mut rt, Ring::Queue, Duration::from_millis(200), ROTATE)
            .await
            .unwrap(),
        PruneOutcome::Retired { slot: 0 }
    );
    // Without pg_read_all_stats the snapshot horizon cannot be proven.
    assert!(matches!(
        rings
            .prune(&mut rt, Ring::Queue, Duration::from_millis(200), ROTATE)
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
            .prune(&mut rt, Ring::Queue, Duration::from_millis(200), ROTATE)
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

// ---------------------------------------------------------------------------
// Least privilege: the privileges matrix of grant_runtime_role.sql.
// ---------------------------------------------------------------------------

async fn drop_role(admin: &mut PgConnection, role: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP OWNED BY {role}; DROP ROLE {role}"
    )))
    .execute(admin)
    .await
    .unwrap();
}

fn sqlstate(err: &sqlx::Error) -> Option<String> {
    err.as_database_error()
        .and_then(|e| e.code())
        .map(|c| c.into_owned())
}

/// Run `sql` as `conn` inside a transaction that is rolled back, and
/// insist it is refused for lack of privilege.
async fn assert_refused(conn: &mut PgConnection, sql: &str) {
    let mut tx = conn.begin().await.unwrap();
    let result = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(&mut *tx)
        .await;
    tx.rollback().await.unwrap();
    match result {
        Ok(_) => panic!("the runtime role was allowed: {sql}"),
        Err(err) => assert_eq!(
            sqlstate(&err).as_deref(),
            Some("42501"),
            "expected insufficient_privilege for {sql}, got {err}"
        ),
    }
}

fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn custom_shape(name: &str) -> awa_core::SubstrateShape {
    awa_core::SubstrateShape {
        schema: SchemaName::new(name).unwrap(),
        slots: awa_core::SlotCounts::new(4, 4, 4).unwrap(),
    }
}

#[tokio::test]
async fn regression_the_runtime_role_cannot_plant_code_the_migrator_runs() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let (role, options) = login_role(&db, "rt").await;
    let mut admin = PgConnection::connect(db.url()).await.unwrap();
    awa_maint::substrate::grant_runtime_role(&mut admin, &role, &SchemaName::default_schema())
        .await
        .unwrap();
    let mut rt = options.connect().await.unwrap();

    // The reported attack: add a template; the installer executes every
    // template as whoever prepares the next substrate.
    let planted = sqlx::raw_sql(
        "INSERT INTO awa.substrate_functions (name, ord, body) \
         VALUES ('zz_planted', 1000000, 'CREATE TABLE awa.planted (x int)')",
    )
    .execute(&mut rt)
    .await;
    awa_maint::substrate::prepare(&mut admin, &custom_shape("side"), false)
        .await
        .unwrap();
    let ran: bool = sqlx::query_scalar("SELECT to_regclass('awa.planted') IS NOT NULL")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert!(
        !ran,
        "SQL planted by the runtime role ran as the migrator ({planted:?})"
    );
    assert_eq!(
        planted.as_ref().err().and_then(sqlstate).as_deref(),
        Some("42501"),
        "{planted:?}"
    );
    // Nor may it change or remove the templates that are there.
    assert_refused(&mut rt, "UPDATE awa.substrate_functions SET body = body").await;
    assert_refused(&mut rt, "DELETE FROM awa.substrate_functions").await;
    assert_refused(&mut rt, "TRUNCATE awa.substrate_functions").await;
    rt.close().await.unwrap();
    drop_role(&mut admin, &role).await;
}

#[tokio::test]
async fn regression_the_runtime_role_cannot_lock_everyone_out() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let (role, options) = login_role(&db, "rt").await;
    let mut admin = PgConnection::connect(db.url()).await.unwrap();
    awa_maint::substrate::grant_runtime_role(&mut admin, &role, &SchemaName::default_schema())
        .await
        .unwrap();
    let mut rt = options.connect().await.unwrap();

    // The reported attack: a version newer than any binary makes every
    // command refuse to run.
    let bumped = sqlx::raw_sql(
        "INSERT INTO awa.schema_version (version, description, checksum) VALUES (999, 'x', 'x')",
    )
    .execute(&mut rt)
    .await;
    let compatible = awa_maint::migrate::check_compatible(&mut admin).await;
    assert!(
        compatible.is_ok(),
        "the runtime role locked everyone out: {compatible:?}"
    );
    assert_eq!(
        bumped.as_ref().err().and_then(sqlstate).as_deref(),
        Some("42501"),
        "{bumped:?}"
    );
    assert_refused(&mut rt, "UPDATE awa.schema_version SET version = 999").await;
    assert_refused(&mut rt, "DELETE FROM awa.schema_version").await;
    // Nor shrink a ring: every slot computation trusts substrate_info.
    assert_refused(
        &mut rt,
        "UPDATE awa.substrate_info SET queue_slot_count = 4",
    )
    .await;
    // Nor rewrite ring history: the ledger is append-only.
    assert_refused(&mut rt, "UPDATE awa.ring_ledger SET slot = 0").await;
    assert_refused(&mut rt, "DELETE FROM awa.ring_ledger").await;
    // Appending is allowed (rotation), but only the next link of the chain.
    for bogus in [
        "INSERT INTO awa.ring_ledger (ring, generation, slot) VALUES ('queue', 1, 999)",
        "INSERT INTO awa.ring_ledger (ring, generation, slot) VALUES ('queue', 5, 1)",
        "INSERT INTO awa.ring_ledger (ring, generation, slot) VALUES ('claim', 1, 0)",
    ] {
        let err = sqlx::query(sqlx::AssertSqlSafe(bogus))
            .execute(&mut rt)
            .await
            .expect_err(bogus);
        assert_eq!(sqlstate(&err).as_deref(), Some("23514"), "{bogus}: {err}");
    }
    rt.close().await.unwrap();
    drop_role(&mut admin, &role).await;
}

/// The ledger as it stands: (ring, generation, slot, rotated_at).
async fn ledger(
    conn: &mut PgConnection,
    schema: &str,
) -> Vec<(String, i64, i32, chrono::DateTime<chrono::Utc>)> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT ring, generation, slot, rotated_at FROM {} ORDER BY 1, 2",
        ident(schema) + ".ring_ledger"
    )))
    .fetch_all(conn)
    .await
    .unwrap()
}

#[tokio::test]
async fn regression_the_runtime_role_cannot_forge_a_rotation() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let (role, options) = login_role(&db, "rt").await;
    let mut admin = PgConnection::connect(db.url()).await.unwrap();
    let shape = custom_shape("side");
    awa_maint::substrate::prepare(&mut admin, &shape, false)
        .await
        .unwrap();
    awa_maint::substrate::grant_runtime_role(&mut admin, &role, &shape.schema)
        .await
        .unwrap();
    let mut rt = options.connect().await.unwrap();
    let ready = PgReadyPlane::new(shape.schema.clone());
    let rings = PgRings::new(shape.schema.clone());
    let q = QueueName::new("forge").unwrap();
    let forged = |generation: i64, slot: i32, at: &str| {
        format!(
            "INSERT INTO side.ring_ledger (ring, generation, slot, rotated_at, rotated_by)
             VALUES ('queue', {generation}, {slot}, {at}, 'forger')"
        )
    };
    let refused = async |rt: &mut PgConnection, sql: &str, why: &str| {
        let before = ledger(&mut admin_conn(db.url()).await, "side").await;
        let err = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
            .execute(&mut *rt)
            .await
            .expect_err(sql);
        assert!(
            matches!(sqlstate(&err).as_deref(), Some("23514" | "42501")),
            "{why}: {sql}: {err}"
        );
        assert_eq!(
            ledger(&mut admin_conn(db.url()).await, "side").await,
            before,
            "{why}: the ledger changed"
        );
    };
    // Something written in the current slot, so a rotation is due.
    ready
        .enqueue(
            &mut rt,
            &[NewJob::new(q.clone(), "t", serde_json::json!({}))],
        )
        .await
        .unwrap();
    // The reported attack: the right next slot, sealed in 1970, which
    // ends the sealed slot's history retention at once.
    refused(
        &mut rt,
        &forged(1, 1, "'1970-01-01'"),
        "a rotation in the past",
    )
    .await;
    refused(
        &mut rt,
        &forged(1, 1, "now() + interval '1 day'"),
        "a rotation in the future",
    )
    .await;
    // Walk the ring round (through ring_rotate) until the next slot is the
    // first one, which still holds a waiting job.
    for _ in 0..3 {
        assert!(matches!(
            rings.rotate(&mut rt, Ring::Queue, "rt").await.unwrap(),
            RotateOutcome::Rotated { .. }
        ));
        ready
            .enqueue(
                &mut rt,
                &[NewJob::new(q.clone(), "t", serde_json::json!({}))],
            )
            .await
            .unwrap();
    }
    assert!(matches!(
        rings.rotate(&mut rt, Ring::Queue, "rt").await.unwrap(),
        RotateOutcome::IncomingNotEmpty { .. }
    ));
    // Rotating onto live data, at the right time, is refused as
    // ring_rotate refuses it.
    refused(
        &mut rt,
        &forged(4, 0, "now()"),
        "a rotation onto a live slot",
    )
    .await;
    rt.close().await.unwrap();
    drop_role(&mut admin, &role).await;
}

async fn admin_conn(url: &str) -> PgConnection {
    PgConnection::connect(url).await.unwrap()
}

/// What the runtime role may do, relation by relation: the specification
/// the grants are checked against (crates/awa-maint/sql/grant_runtime_role.sql
/// says which runtime path needs each). Letters: S(ELECT), I(NSERT),
/// U(PDATE), D(ELETE), T(RUNCATE); sequences: G (USAGE), S (SELECT).
/// A relation missing here fails the test: classify it.
const CONTROL: &[(&str, &str)] = &[
    ("schema_version", "S"),
    ("substrate_functions", ""),
    ("queue_meta", "S"),
    ("queue_limits", "S"),
    ("runtimes", "SIUD"),
    ("maintenance_leader", "SIU"),
    ("cron_jobs", "SIUD"),
    ("storage_transition_state", "S"),
    ("storage_draining", "SD"),
    ("runtime_storage_backends", "SIUD"),
    ("queue_health", "SIU"),
    ("queue_minutes", "SIUD"),
    ("job_uniques", "SIUD"),
    ("job_id_seq", "G"),
];
const SUBSTRATE: &[(&str, &str)] = &[
    ("substrate_info", "S"),
    ("ring_ledger", "SI"),
    ("ring_retirements", "SID"),
    ("ring_outcomes", "SIU"),
    ("lane_heads", "SIU"),
    ("ready_sealed", "SU"),
    ("deferred_jobs", "SIUD"),
    ("attempt_state", "SIUD"),
    ("parked_attempts", "SIUD"),
    ("worker_buffers", "SIUD"),
    ("limit_holds", "SID"),
    ("limit_rates", "SIU"),
    ("exec_settings", "SIU"),
    ("history_horizon", "SIU"),
    ("dlq_entries", "SIUD"),
    ("failure_entries", "SIUD"),
    ("count_rollups", "SIU"),
    ("ready_entries", "SI"),
    ("ready_tombstones", "SI"),
    ("ready_relocated", "SIU"),
    ("done_entries", "SI"),
    ("done_batches", "SI"),
    ("count_deltas", "SID"),
    ("claim_batches", "SI"),
    ("claim_closures", "SI"),
    ("claim_floor", "SU"),
    ("leases", "SIU"),
    ("terminal_jobs", "S"),
    ("live_jobs", "S"),
    ("jobs", "S"),
    ("live_job_states", "S"),
    ("lane_entries", "S"),
    ("open_batch_items", "S"),
    ("claim_batch_seq", "GS"),
    ("ready_seq", "GS"),
];
/// Ring families: their slot partitions `<family>_<n>` are read directly
/// and truncated by prune, and written only through the parent.
const SLOT_FAMILIES: &[&str] = &[
    "ready_entries",
    "ready_tombstones",
    "done_entries",
    "done_batches",
    "count_deltas",
    "claim_batches",
    "claim_closures",
    "leases",
];
/// Functions the runtime must never run, named so the check below cannot
/// pass by finding none.
const MIGRATOR_FUNCTIONS: &[&str] = &[
    "install_control_plane",
    "install_ready_plane",
    "install_deferred_plane",
    "install_exec_plane",
    "install_history_plane",
    "install_dlq_plane",
    "install_queue_storage_substrate",
    "grant_runtime_role",
];

fn expected(schema: &str, relname: &str) -> Option<&'static str> {
    let control = CONTROL
        .iter()
        .find(|(n, _)| schema == "awa" && *n == relname)
        .map(|(_, p)| *p);
    let substrate = SUBSTRATE
        .iter()
        .find(|(n, _)| *n == relname)
        .map(|(_, p)| *p);
    let slot = SLOT_FAMILIES
        .iter()
        .find(|f| {
            relname
                .strip_prefix(**f)
                .and_then(|rest| rest.strip_prefix('_'))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|_| "ST");
    control.or(substrate).or(slot)
}

/// Every relation of `schemas`, its kind and its first column.
async fn relations(
    admin: &mut PgConnection,
    schemas: &[&str],
) -> Vec<(String, String, String, String)> {
    sqlx::query_as(
        "SELECT n.nspname::text, c.relname::text, c.relkind::text,
                coalesce((SELECT a.attname::text FROM pg_attribute a
                           WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                           ORDER BY a.attnum LIMIT 1), '')
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = ANY($1) AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
          ORDER BY 1, 2",
    )
    .bind(schemas)
    .fetch_all(admin)
    .await
    .unwrap()
}

/// Check every relation and function of `schemas` against the matrix as
/// `role` (connected as `rt`): granted exactly what is listed, and every
/// other operation tried and refused.
async fn check_matrix(
    admin: &mut PgConnection,
    rt: &mut PgConnection,
    role: &str,
    schemas: &[&str],
) {
    let rels = relations(admin, schemas).await;
    assert!(rels.len() > 50, "too few relations found: {rels:?}");
    let mut unclassified = Vec::new();
    for (schema, rel, kind, first_col) in &rels {
        let Some(allowed) = expected(schema, rel) else {
            unclassified.push(format!("{schema}.{rel}"));
            continue;
        };
        let qualified = format!("{}.{}", ident(schema), ident(rel));
        if kind == "S" {
            for (letter, privilege) in [('G', "USAGE"), ('S', "SELECT"), ('U', "UPDATE")] {
                let has: bool = sqlx::query_scalar("SELECT has_sequence_privilege($1, $2, $3)")
                    .bind(role)
                    .bind(&qualified)
                    .bind(privilege)
                    .fetch_one(&mut *admin)
                    .await
                    .unwrap();
                assert_eq!(
                    has,
                    allowed.contains(letter),
                    "{privilege} on sequence {qualified}"
                );
            }
            assert_refused(rt, &format!("SELECT setval('{qualified}', 1)")).await;
            if !allowed.contains('S') {
                assert_refused(rt, &format!("SELECT last_value FROM {qualified}")).await;
            }
            continue;
        }
        for (letter, privilege) in [
            ('S', "SELECT"),
            ('I', "INSERT"),
            ('U', "UPDATE"),
            ('D', "DELETE"),
            ('T', "TRUNCATE"),
            ('R', "REFERENCES"),
            ('X', "TRIGGER"),
        ] {
            let has: bool = sqlx::query_scalar("SELECT has_table_privilege($1, $2, $3)")
                .bind(role)
                .bind(&qualified)
                .bind(privilege)
                .fetch_one(&mut *admin)
                .await
                .unwrap();
            assert_eq!(has, allowed.contains(letter), "{privilege} on {qualified}");
        }
        if kind == "v" {
            continue; // a view's writes fail in the rewriter before any privilege check
        }
        let col = ident(first_col);
        for (letter, sql) in [
            ('S', format!("SELECT 1 FROM {qualified} WHERE false")),
            ('I', format!("INSERT INTO {qualified} DEFAULT VALUES")),
            (
                'U',
                format!("UPDATE {qualified} SET {col} = {col} WHERE false"),
            ),
            ('D', format!("DELETE FROM {qualified} WHERE false")),
            ('T', format!("TRUNCATE {qualified}")),
        ] {
            if !allowed.contains(letter) {
                assert_refused(rt, &sql).await;
            }
        }
    }
    assert!(
        unclassified.is_empty(),
        "relations the privileges matrix does not classify (add them to \
         crates/awa-maint/sql/grant_runtime_role.sql and to this test): {unclassified:?}"
    );

    // Functions: the runtime functions the templates define, nothing else.
    let bodies: Vec<String> = sqlx::query_scalar("SELECT body FROM awa.substrate_functions")
        .fetch_all(&mut *admin)
        .await
        .unwrap();
    let runtime: Vec<String> = bodies
        .iter()
        .flat_map(|b| b.split("CREATE OR REPLACE FUNCTION {schema}.").skip(1))
        .map(|rest| rest.split('(').next().unwrap().trim().to_string())
        .collect();
    assert!(runtime.iter().any(|f| f == "enqueue"), "{runtime:?}");
    let functions: Vec<(String, String, String, Vec<String>)> = sqlx::query_as(
        "SELECT n.nspname::text, p.proname::text, p.oid::regprocedure::text,
                ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) t)
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = ANY($1)
          ORDER BY 1, 2",
    )
    .bind(schemas)
    .fetch_all(&mut *admin)
    .await
    .unwrap();
    let mut forbidden_seen = Vec::new();
    for (schema, name, signature, args) in &functions {
        let is_runtime = runtime.contains(name);
        let has: bool = sqlx::query_scalar("SELECT has_function_privilege($1, $2, 'EXECUTE')")
            .bind(role)
            .bind(signature)
            .fetch_one(&mut *admin)
            .await
            .unwrap();
        assert_eq!(has, is_runtime, "EXECUTE on {signature}");
        if !is_runtime {
            forbidden_seen.push(name.clone());
            let nulls: Vec<String> = args.iter().map(|t| format!("NULL::{t}")).collect();
            assert_refused(
                rt,
                &format!(
                    "SELECT {}.{}({})",
                    ident(schema),
                    ident(name),
                    nulls.join(", ")
                ),
            )
            .await;
        }
    }
    for f in MIGRATOR_FUNCTIONS {
        assert!(
            forbidden_seen.iter().any(|s| s == f),
            "{f} not found among {forbidden_seen:?}"
        );
    }

    // Schemas: usage, never CREATE.
    for schema in schemas {
        let create: bool = sqlx::query_scalar("SELECT has_schema_privilege($1, $2, 'CREATE')")
            .bind(role)
            .bind(schema)
            .fetch_one(&mut *admin)
            .await
            .unwrap();
        assert!(!create, "CREATE on schema {schema}");
        assert_refused(
            rt,
            &format!("CREATE TABLE {}.sneaky (x int)", ident(schema)),
        )
        .await;
        assert_refused(
            rt,
            &format!(
                "CREATE FUNCTION {}.sneaky() RETURNS int LANGUAGE sql AS 'SELECT 1'",
                ident(schema)
            ),
        )
        .await;
    }
}

#[tokio::test]
async fn the_runtime_role_gets_exactly_the_privileges_matrix_on_every_substrate() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let (role, options) = login_role(&db, "rt").await;
    let (nobody, _) = login_role(&db, "nobody").await;
    let mut admin = PgConnection::connect(db.url()).await.unwrap();
    awa_maint::substrate::prepare(&mut admin, &custom_shape("side"), false)
        .await
        .unwrap();

    // Before any grant, PUBLIC (any role of the cluster) runs none of our
    // functions: PostgreSQL's default would let it run the installers.
    let public_exec: Vec<String> = sqlx::query_scalar(
        "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname IN ('awa', 'side') AND has_function_privilege($1, p.oid, 'EXECUTE')",
    )
    .bind(&nobody)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert!(
        public_exec.is_empty(),
        "executable by any role: {public_exec:?}"
    );

    // A role that had the old, broad grants converges to the matrix.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "GRANT ALL ON ALL TABLES IN SCHEMA awa TO {role}; \
         GRANT ALL ON ALL SEQUENCES IN SCHEMA awa TO {role}; \
         GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA awa TO {role}; \
         GRANT CREATE ON SCHEMA awa TO {role}"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    for schema in ["awa", "side"] {
        awa_maint::substrate::grant_runtime_role(
            &mut admin,
            &role,
            &SchemaName::new(schema).unwrap(),
        )
        .await
        .unwrap();
    }
    // Idempotent.
    awa_maint::substrate::grant_runtime_role(&mut admin, &role, &SchemaName::new("side").unwrap())
        .await
        .unwrap();

    let mut rt = options.connect().await.unwrap();
    check_matrix(&mut admin, &mut rt, &role, &["awa", "side"]).await;
    rt.close().await.unwrap();
    drop_role(&mut admin, &role).await;
    drop_role(&mut admin, &nobody).await;
}

#[tokio::test]
async fn a_relation_the_matrix_does_not_classify_makes_the_grant_refuse() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let (role, _) = login_role(&db, "rt").await;
    let mut admin = PgConnection::connect(db.url()).await.unwrap();
    // What a new plane table would look like before anyone classified it.
    for ddl in [
        "CREATE TABLE awa.future_table (job_id bigint)",
        "CREATE SEQUENCE awa.parked_seq",
        "CREATE TABLE awa.future_table_0 (job_id bigint)",
    ] {
        let mut tx = admin.begin().await.unwrap();
        sqlx::raw_sql(ddl).execute(&mut *tx).await.unwrap();
        let err =
            awa_maint::substrate::grant_runtime_role(&mut tx, &role, &SchemaName::default_schema())
                .await
                .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("not classified"), "{ddl}: {text}");
        assert!(
            text.contains("future_table") || text.contains("parked_seq"),
            "{ddl}: {text}"
        );
        tx.rollback().await.unwrap();
    }
    drop_role(&mut admin, &role).await;
}

/// Claim until `n` jobs of `q` are in hand.
async fn claim_n(conn: &mut PgConnection, q: &QueueName, n: usize) -> Vec<awa_core::ClaimedJob> {
    let exec = PgExecPlane::new(SchemaName::default_schema());
    let mut frontier = Frontier::default();
    let mut out = Vec::new();
    for _ in 0..500 {
        out.extend(exec.claim(conn, q, 10, &mut frontier, None).await.unwrap());
        if out.len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(out.len(), n, "claimed {out:?}");
    out
}

#[tokio::test]
async fn every_runtime_path_works_under_the_runtime_role() {
    use awa_control::{ControlPlane, PgControlPlane, queues::QueueConfig, runtimes};
    use awa_deferred::{DeferredPlane, PgDeferredPlane};
    use awa_dlq::{DlqPlane, PgDlqPlane, Selection};
    use awa_history::{HistoryPlane, PgHistoryPlane};

    let db = awa_maint::migrated_test_db().await.unwrap();
    let (role, options) = login_role(&db, "rt").await;
    let mut admin = PgConnection::connect(db.url()).await.unwrap();
    awa_maint::substrate::grant_runtime_role(&mut admin, &role, &SchemaName::default_schema())
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "GRANT pg_read_all_stats TO {role}"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    keep_no_history(&mut admin).await;
    let q = QueueName::new("paths").unwrap();
    // Queue settings are the owner's to change.
    PgControlPlane
        .configure_queue(
            &mut admin,
            &q,
            &QueueConfig {
                dlq_enabled: Some(true),
                max_attempts: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();

    let schema = SchemaName::default_schema();
    let ready = PgReadyPlane::new(schema.clone());
    let exec = PgExecPlane::new(schema.clone());
    let mut rt = options.connect().await.unwrap();

    // Runtime registry.
    let me = uuid::Uuid::new_v4();
    let info = runtimes::RuntimeInfo {
        instance_id: me,
        role: "worker",
        queues: vec![q.as_str().to_string()],
    };
    runtimes::register(&mut rt, &info).await.unwrap();
    runtimes::register(&mut rt, &info).await.unwrap();
    runtimes::touch(&mut rt, me).await.unwrap();

    // Enqueue: plain, unique, scheduled far away, scheduled soon.
    let mut unique = NewJob::new(q.clone(), "t", serde_json::json!({ "u": 1 }));
    unique.unique_key = Some("k1".into());
    let mut far = NewJob::new(q.clone(), "t", serde_json::json!({ "far": 1 }));
    far.run_at = Some(chrono::Utc::now() + chrono::Duration::hours(1));
    let mut soon = NewJob::new(q.clone(), "t", serde_json::json!({ "soon": 1 }));
    soon.run_at = Some(chrono::Utc::now() + chrono::Duration::milliseconds(200));
    let mut jobs: Vec<NewJob> = (0..6)
        .map(|i| NewJob::new(q.clone(), "t", serde_json::json!({ "i": i })))
        .collect();
    jobs.extend([unique.clone(), far, soon]);
    let ids = ready.enqueue(&mut rt, &jobs).await.unwrap();
    assert_eq!(ids.len(), 9);
    assert!(!ready.enqueue(&mut rt, &[unique]).await.unwrap()[0].inserted);

    // Cancel while waiting and while scheduled.
    let waiting = ids[0].job_id;
    let scheduled = ids[7].job_id;
    assert_eq!(
        exec.cancel_job(&mut rt, waiting).await.unwrap().as_deref(),
        Some("available")
    );
    assert_eq!(
        exec.cancel_job(&mut rt, scheduled)
            .await
            .unwrap()
            .as_deref(),
        Some("scheduled")
    );

    // Claim the other six (five plain + unique); finish each a different way.
    let claimed = claim_n(&mut rt, &q, 6).await;
    assert!(
        exec.heartbeat(
            &mut rt,
            &claimed[0].token,
            &awa_exec::Progress {
                percent: Some(50),
                message: Some("half".into()),
                checkpoint: Some(serde_json::json!({ "at": 1 })),
            }
        )
        .await
        .unwrap()
    );
    assert!(
        exec.heartbeat(&mut rt, &claimed[0].token, &Default::default())
            .await
            .unwrap()
    );
    let batch = vec![
        (claimed[0].token, awa_exec::Finish::Complete),
        (
            claimed[1].token,
            awa_exec::Finish::Retry {
                delay: Some(Duration::ZERO),
                error: "again".into(),
            },
        ),
        (
            claimed[2].token,
            awa_exec::Finish::Snooze {
                delay: Duration::ZERO,
            },
        ),
        (
            claimed[3].token,
            awa_exec::Finish::Fail {
                error: "dead".into(),
            },
        ),
    ];
    assert!(
        exec.finish(&mut rt, &batch)
            .await
            .unwrap()
            .iter()
            .all(|f| f.accepted)
    );
    // Cancel while running; rescue an abandoned attempt.
    assert_eq!(
        exec.cancel_job(&mut rt, claimed[4].token.job_id)
            .await
            .unwrap()
            .as_deref(),
        Some("running")
    );
    // (Abandoned a day ago, as far as rescue can tell: the owner moves
    // its claim back; rescue refuses a bound under RESCUE_AFTER's 1 s.)
    sqlx::query("UPDATE awa.claim_batches SET claimed_at = claimed_at - interval '1 day'")
        .execute(&mut admin)
        .await
        .unwrap();
    assert_eq!(
        exec.rescue_stale(&mut rt, awa_core::bounds::RESCUE_AFTER.min, 10)
            .await
            .unwrap(),
        1
    );

    // Promote the retried, snoozed and soon-scheduled jobs (the rescued one
    // waits out its backoff).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let promoted = PgDeferredPlane::new(schema.clone())
        .promote_due(&mut rt, 100)
        .await
        .unwrap();
    assert_eq!(promoted, 3);

    // DLQ: list, retry, fail again, purge, retention.
    let dlq = PgDlqPlane::new(schema.clone());
    assert_eq!(dlq.list(&mut rt, Some(&q), 10).await.unwrap().len(), 1);
    assert_eq!(
        dlq.retry(&mut rt, &Selection::One(claimed[3].token.job_id))
            .await
            .unwrap()
            .retried
            .len(),
        1
    );
    let again = claim_n(&mut rt, &q, 4).await;
    let fail_all: Vec<_> = again
        .iter()
        .map(|c| {
            (
                c.token,
                awa_exec::Finish::Fail {
                    error: "dead".into(),
                },
            )
        })
        .collect();
    assert!(
        exec.finish(&mut rt, &fail_all)
            .await
            .unwrap()
            .iter()
            .all(|f| f.accepted)
    );
    assert_eq!(
        dlq.purge(&mut rt, &Selection::One(claimed[3].token.job_id))
            .await
            .unwrap()
            .len(),
        1
    );
    dlq.prune_expired(&mut rt, 100).await.unwrap();

    // Kept failures (ADR 11): retry one on demand, retry and cancel by
    // selection (dry run first), the retention pass.
    let kept = PgHistoryPlane::new(schema.clone());
    assert_eq!(
        kept.retry(&mut rt, &[waiting]).await.unwrap().retried,
        vec![waiting]
    );
    let cancelled_far = awa_core::JobSelection {
        queue: q.clone(),
        state: Some(awa_core::JobState::Cancelled),
        kind: Some("t".into()),
        args_contains: Some(serde_json::json!({ "far": 1 })),
    };
    let reads = [schema.clone()];
    assert_eq!(
        awa_history::retry_matching(&mut rt, &reads, &cancelled_far, true)
            .await
            .unwrap()
            .matched,
        1
    );
    assert_eq!(
        awa_history::retry_matching(&mut rt, &reads, &cancelled_far, false)
            .await
            .unwrap()
            .retried,
        vec![scheduled]
    );
    let first = awa_core::JobSelection {
        queue: q.clone(),
        state: Some(awa_core::JobState::Available),
        kind: None,
        args_contains: Some(serde_json::json!({ "i": 0 })),
    };
    assert_eq!(
        awa_exec::cancel_matching(&mut rt, &reads, &first, true)
            .await
            .unwrap()
            .matched,
        1
    );
    assert_eq!(
        awa_exec::cancel_matching(&mut rt, &reads, &first, false)
            .await
            .unwrap()
            .cancelled[0]
            .id,
        waiting
    );
    assert_eq!(kept.prune_failures(&mut rt, 100).await.unwrap(), 0);
    let job = kept.job(&mut rt, waiting).await.unwrap().unwrap();
    assert_eq!(job.state, awa_core::JobState::Cancelled);
    assert!(job.attempts.is_some());

    // Reads: dump, list, stats, health, pending, storage status.
    let history = PgHistoryPlane::new(schema.clone());
    assert!(
        history
            .job(&mut rt, claimed[0].token.job_id)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        !history
            .list(&mut rt, Some(&q), None, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !history
            .queue_stats(&mut rt, Some(&q))
            .await
            .unwrap()
            .is_empty()
    );
    history.publish_health(&mut rt).await.unwrap();
    history
        .pending(&mut rt, std::slice::from_ref(&q))
        .await
        .unwrap();
    history
        .pending_by_state(
            &mut rt,
            std::slice::from_ref(&q),
            Some(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    PgControlPlane.storage_status(&mut rt).await.unwrap();

    // Key specs: a completed job keeps its key (finish marks its row), a
    // duplicate is told the job, a row past its period is taken over by
    // the next enqueue, and another is deleted by the unique_prune task
    // below.
    let kq = QueueName::new("kept").unwrap();
    let spec_job = |a: i64| {
        let mut j = NewJob::new(kq.clone(), "kept", serde_json::json!({ "a": a }));
        j.unique = Some(awa_core::Unique::by_args().period(Duration::from_secs(3600)));
        j
    };
    let made = ready
        .enqueue(&mut rt, &[spec_job(1), spec_job(2)])
        .await
        .unwrap();
    let claimed = claim_n(&mut rt, &kq, 2).await;
    let batch: Vec<_> = claimed
        .iter()
        .map(|c| (c.token, awa_exec::Finish::Complete))
        .collect();
    assert!(
        exec.finish(&mut rt, &batch)
            .await
            .unwrap()
            .iter()
            .all(|f| f.accepted)
    );
    let dup = ready.enqueue(&mut rt, &[spec_job(1)]).await.unwrap()[0];
    assert_eq!((dup.job_id, dup.inserted), (made[0].job_id, false));
    // The end of the period, set by the owner (the window is unchanged,
    // so only the row's expiry decides).
    sqlx::query(
        "UPDATE awa.job_uniques SET hold_until = now() - interval '2 minutes'
          WHERE finished_at IS NOT NULL",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    assert!(ready.enqueue(&mut rt, &[spec_job(1)]).await.unwrap()[0].inserted);

    // Every maintenance task, one pass each, on a pool of the role; then
    // the leader itself (lock, leader record) on the role's connections.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect_with(options.clone())
        .await
        .unwrap();
    let settings = awa_maint::tasks::MaintSettings {
        rescue_stale: Duration::from_secs(1),
        ..Default::default()
    };
    for task in awa_maint::tasks::standard(&schema, &settings, "roles") {
        let outcome = task.run_once(&pool).await;
        assert!(
            outcome.is_ok(),
            "task {} under the runtime role: {outcome:?}",
            task.name()
        );
    }
    let kept: i64 =
        sqlx::query_scalar("SELECT count(*) FROM awa.job_uniques WHERE finished_at IS NOT NULL")
            .fetch_one(&mut admin)
            .await
            .unwrap();
    assert_eq!(kept, 0, "unique_prune deleted the row past its period");
    let mut config = awa_maint::leader::LeaderConfig::new();
    config.retry_interval = Duration::from_millis(100);
    config.check_interval = Duration::from_millis(100);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (role_tx, mut role_rx) = tokio::sync::watch::channel(awa_maint::leader::Role::Candidate);
    let leader = tokio::spawn(awa_maint::leader::run(
        config,
        pool.clone(),
        Vec::new(),
        stop_rx,
        Some(role_tx),
    ));
    tokio::time::timeout(
        Duration::from_secs(10),
        role_rx.wait_for(|r| *r == awa_maint::leader::Role::Leader),
    )
    .await
    .expect("the runtime role never became leader")
    .unwrap();
    let recorded: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.maintenance_leader")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(recorded, 1);
    stop_tx.send(true).unwrap();
    leader.await.unwrap().unwrap();

    // Reclamation end to end: rotate, retire, truncate.
    let rings = PgRings::new(schema.clone());
    for ring in [Ring::Queue, Ring::Claim, Ring::Lease] {
        rings.rotate(&mut rt, ring, "rt").await.unwrap();
        rings
            .prune(&mut rt, ring, Duration::from_millis(200), ROTATE)
            .await
            .unwrap();
    }

    // The COPY enqueue path (a session temporary table, then one
    // statement) under the role: plain jobs by COPY, a keyed one through
    // enqueue.
    let copied: Vec<NewJob> = (0..20)
        .map(|i| NewJob::new(q.clone(), "t", serde_json::json!({ "copied": i })))
        .collect();
    let done = ready.enqueue_copy(&mut rt, &copied).await.unwrap();
    assert_eq!(done.len(), 20);
    assert!(done.iter().all(|e| e.inserted && !e.scheduled));
    let mut keyed = NewJob::new(q.clone(), "t", serde_json::json!({}));
    keyed.unique_key = Some("k-copy".into());
    assert!(ready.enqueue_copy(&mut rt, &[keyed]).await.unwrap()[0].inserted);

    runtimes::deregister(&mut rt, me).await.unwrap();
    runtimes::gc(&mut rt, Duration::ZERO).await.unwrap();
    rt.close().await.unwrap();
    pool.close().await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "REVOKE pg_read_all_stats FROM {role}"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    drop_role(&mut admin, &role).await;
}

/// Evacuation under the runtime role: a waiting job relocated, a running
/// attempt parked, heartbeated and finished, history retired with its
/// horizon, all as the leader and a worker would run them.
#[tokio::test]
async fn evacuation_runs_under_the_runtime_role() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let (role, options) = login_role(&db, "ev").await;
    let schema = SchemaName::default_schema();
    let mut admin = PgConnection::connect(db.url()).await.unwrap();
    awa_maint::substrate::grant_runtime_role(&mut admin, &role, &schema)
        .await
        .unwrap();
    keep_no_history(&mut admin).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "GRANT pg_read_all_stats TO {role}"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    let mut rt = options.connect().await.unwrap();
    let ready = PgReadyPlane::new(schema.clone());
    let exec = PgExecPlane::new(schema.clone());
    let rings = PgRings::new(schema.clone());
    let (waiting, running) = (
        QueueName::new("waits").unwrap(),
        QueueName::new("runs").unwrap(),
    );
    ready
        .enqueue(
            &mut rt,
            &[NewJob::new(waiting.clone(), "t", serde_json::json!({}))],
        )
        .await
        .unwrap();
    ready
        .enqueue(
            &mut rt,
            &[NewJob::new(running.clone(), "t", serde_json::json!({}))],
        )
        .await
        .unwrap();
    let long = claim_n(&mut rt, &running, 1).await.remove(0);
    let busy = QueueName::new("busy").unwrap();
    let mut outcomes = Vec::new();
    for round in 0..40 {
        ready
            .enqueue(
                &mut rt,
                &[NewJob::new(
                    busy.clone(),
                    "t",
                    serde_json::json!({ "r": round }),
                )],
            )
            .await
            .unwrap();
        let got = claim_n(&mut rt, &busy, 1).await;
        let batch: Vec<_> = got.iter().map(|c| (c.token, Finish::Complete)).collect();
        exec.finish(&mut rt, &batch).await.unwrap();
        for ring in Ring::ALL {
            rings.rotate(&mut rt, ring, "rt").await.unwrap();
            for _ in 0..4 {
                outcomes.push(
                    rings
                        .prune(&mut rt, ring, Duration::from_millis(200), ROTATE)
                        .await
                        .unwrap(),
                );
            }
        }
        assert!(
            exec.heartbeat(&mut rt, &long.token, &awa_exec::Progress::default())
                .await
                .unwrap()
        );
    }
    let parked: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.parked_attempts")
        .fetch_one(&mut rt)
        .await
        .unwrap();
    assert_eq!(parked, 1, "{outcomes:?}");
    let moved: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM awa.ready_entries WHERE queue = 'waits' AND slot <> 0",
    )
    .fetch_one(&mut rt)
    .await
    .unwrap();
    assert_eq!(moved, 1, "the waiting job was relocated: {outcomes:?}");
    let done = exec
        .finish(&mut rt, &[(long.token, Finish::Complete)])
        .await
        .unwrap();
    assert!(done[0].accepted);
    use awa_history::HistoryPlane;
    let horizon = awa_history::PgHistoryPlane::new(schema.clone())
        .horizon(&mut rt)
        .await
        .unwrap();
    assert!(horizon.is_some(), "retirement moved the horizon");
    drop(rt);
    drop_role(&mut admin, &role).await;
}

//! The Rust API on a custom substrate (32 queue / 16 lease slots): pinned
//! with `.schema(...)` beside the active default, and routed after a
//! staged transition has made it active, with a client started before the
//! transition picking up each step without a restart.

use awa::SchemaName;
use awa::{Client, JobContext, JobState, Outcome};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(kind = "hop", queue = "hops")]
struct Hop {
    n: u32,
}

fn next() -> SchemaName {
    SchemaName::new("next").unwrap()
}

/// The substrate that holds job `id` in `state`, if any.
async fn held_in(pool: &sqlx::PgPool, id: awa::JobId, state: JobState) -> Option<&'static str> {
    for schema in ["awa", "next"] {
        let q = format!("SELECT state FROM {schema}.jobs WHERE id = $1");
        let found: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(q))
            .bind(id.0)
            .fetch_optional(pool)
            .await
            .unwrap();
        if found.as_deref() == Some(state.as_str()) {
            return Some(schema);
        }
    }
    None
}

async fn completed_in(pool: &sqlx::PgPool, id: awa::JobId) -> &'static str {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(schema) = held_in(pool, id, JobState::Completed).await {
            return schema;
        }
        assert!(Instant::now() < until, "job {id} never completed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn hop_worker(pool: &sqlx::PgPool) -> awa::ClientBuilder {
    Client::builder(pool.clone())
        .queue("hops", 4)
        .register::<Hop>(|_: Hop, _: JobContext| async { Ok(Outcome::Complete) })
}

#[tokio::test]
async fn a_custom_substrate_serves_pinned_clients_and_routed_ones_after_a_transition() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let shape = awa_core::SubstrateShape {
        schema: next(),
        slots: awa_core::SlotCounts::new(32, 16, 8).unwrap(),
    };
    awa_maint::substrate::prepare(&mut conn, &shape, false)
        .await
        .unwrap();

    // Pinned: producer, worker and maintenance all on `next`, while the
    // routing still sends everything else to `awa`.
    let pinned = hop_worker(&pool).schema(next()).start().await.unwrap();
    let id = pinned.insert(&pool, &Hop { n: 1 }).await.unwrap().id;
    assert_eq!(completed_in(&pool, id).await, "next");
    pinned.shutdown(Duration::from_secs(5)).await.unwrap();

    // Routed: a client started in steady state on `awa` ...
    let routed = hop_worker(&pool).start().await.unwrap();
    let before = routed.insert(&pool, &Hop { n: 2 }).await.unwrap().id;
    assert_eq!(completed_in(&pool, before).await, "awa");
    // ... follows the move without a restart: mixed sends new work to
    // `next` (the SQL routes every insert; the client's own hint catches up
    // within routing::REFRESH), and finalize makes it the active one.
    awa_control::transition::prepare(&mut conn, &next())
        .await
        .unwrap();
    tokio::time::sleep(awa_control::routing::REFRESH * 2).await;
    awa_control::transition::enter_mixed(&mut conn)
        .await
        .unwrap();
    let during = routed.insert(&pool, &Hop { n: 3 }).await.unwrap().id;
    assert_eq!(completed_in(&pool, during).await, "next");
    let until = Instant::now() + Duration::from_secs(30);
    while let Err(err) = awa_control::transition::finalize(&mut conn).await {
        assert!(Instant::now() < until, "finalize kept being refused: {err}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(awa_control::routing::REFRESH * 2).await;
    assert_eq!(routed.schema(), next());
    let after = routed.insert(&pool, &Hop { n: 4 }).await.unwrap().id;
    assert_eq!(completed_in(&pool, after).await, "next");
    // Reads follow the routing too: a job of the old substrate is still
    // found while it drains, and the new ones always.
    assert!(routed.job(after).await.unwrap().is_some());
    // Scheduled work on the new substrate is promoted by the leader the
    // client runs (maintenance follows the routing).
    let later = routed
        .insert_with(
            &pool,
            &Hop { n: 5 },
            awa::InsertOpts {
                run_at: Some(chrono::Utc::now() + chrono::Duration::milliseconds(300)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(later.scheduled);
    assert_eq!(completed_in(&pool, later.id).await, "next");
    routed.shutdown(Duration::from_secs(5)).await.unwrap();
}

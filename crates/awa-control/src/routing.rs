//! Routing: which substrates a runtime writes to and reads from, as the
//! storage-transition state in the database decides (one row,
//! `awa.storage_transition_state`, plus `awa.storage_draining`). No
//! process keeps a flag of its own that could disagree with it: producers
//! are routed again inside SQL on every call (`{schema}.enqueue` forwards),
//! and workers and the leader follow the state with [`follow`], which
//! picks up a change at once through `NOTIFY awa_storage` and, without
//! it, within [`REFRESH`].

use crate::ControlError;
use awa_core::{Phase, Routing, SchemaName};
use sqlx::{PgConnection, Row};
use std::time::Duration;
use tokio::sync::watch;

/// The longest a following runtime goes without re-reading the routing:
/// the bound on picking up a transition step when its notification is
/// missed (a LISTEN connection being re-established, say).
pub const REFRESH: Duration = Duration::from_secs(1);

/// The routing now.
pub async fn read(conn: &mut PgConnection) -> Result<Routing, ControlError> {
    let row = sqlx::query(include_str!("../sql/routing_read.sql"))
        .fetch_one(conn)
        .await?;
    let phase: String = row.get("state");
    let name = |value: String| {
        SchemaName::new(value.clone())
            .map_err(|_| ControlError::Corrupt(format!("invalid schema name {value:?} in routing")))
    };
    let target: Option<String> = row.get("target_schema");
    Ok(Routing {
        epoch: row.get("epoch"),
        phase: Phase::parse(&phase)
            .ok_or_else(|| ControlError::Corrupt(format!("unknown transition state {phase:?}")))?,
        active: name(row.get("active_schema"))?,
        target: target.map(name).transpose()?,
        draining: row
            .get::<Vec<String>, _>("draining")
            .into_iter()
            .map(name)
            .collect::<Result<_, _>>()?,
        fixed: false,
    })
}

/// Record in `runtime_storage_backends` which substrates runtime
/// `instance_id` uses under `routing`.
pub async fn register_backends(
    conn: &mut PgConnection,
    instance_id: uuid::Uuid,
    routing: &Routing,
) -> Result<(), ControlError> {
    let reads = routing.reads();
    let modes: Vec<&str> = reads
        .iter()
        .map(|s| {
            if s == routing.write() {
                "read_write"
            } else {
                "drain"
            }
        })
        .collect();
    let names: Vec<&str> = reads.iter().map(|s| s.as_str()).collect();
    sqlx::query(include_str!("../sql/runtime_backends_sync.sql"))
        .bind(instance_id)
        .bind(names)
        .bind(modes)
        .execute(conn)
        .await?;
    Ok(())
}

/// Follow the routing: the receiver always holds the latest routing read,
/// updated on `NOTIFY awa_storage` and at least every [`REFRESH`]. With
/// `instance_id`, the runtime's backends are registered after every change
/// and at every [`crate::runtimes::TOUCH_INTERVAL`]. Fails only when the
/// first read does; later failures are logged and the last routing kept.
/// The task stops when every receiver is gone.
pub async fn follow(
    pool: &sqlx::PgPool,
    instance_id: Option<uuid::Uuid>,
) -> Result<watch::Receiver<Routing>, ControlError> {
    let first = {
        let mut conn = pool.acquire().await?;
        let routing = read(&mut conn).await?;
        if let Some(id) = instance_id {
            register_backends(&mut conn, id, &routing).await?;
        }
        routing
    };
    let (tx, rx) = watch::channel(first);
    tokio::spawn(run_follow(pool.clone(), instance_id, tx));
    Ok(rx)
}

async fn run_follow(
    pool: sqlx::PgPool,
    instance_id: Option<uuid::Uuid>,
    tx: watch::Sender<Routing>,
) {
    let mut listener: Option<sqlx::postgres::PgListener> = None;
    let mut registered_at = tokio::time::Instant::now();
    loop {
        // Nobody reads the routing any more, or the pool was closed under
        // us (a process shutting down closes it while this task may still
        // be between two reads): either way there is nothing to do, and
        // nothing worth a warning.
        if tx.is_closed() || pool.is_closed() {
            return;
        }
        if listener.is_none() {
            listener = match sqlx::postgres::PgListener::connect_with(&pool).await {
                Ok(mut l) => match l.listen("awa_storage").await {
                    Ok(()) => Some(l),
                    Err(err) => {
                        tracing::debug!(error = %err, "LISTEN awa_storage failed; polling the routing");
                        None
                    }
                },
                Err(err) => {
                    tracing::debug!(error = %err, "LISTEN connection failed; polling the routing");
                    None
                }
            };
        }
        // Wait for a notification or the refresh, whichever comes first;
        // stop at once when the last receiver goes.
        if let Some(l) = listener.as_mut() {
            tokio::select! {
                got = tokio::time::timeout(REFRESH, l.recv()) => match got {
                    Ok(Ok(_)) | Err(_) => {}
                    Ok(Err(err)) => {
                        tracing::debug!(error = %err, "LISTEN awa_storage lost; reconnecting");
                        listener = None;
                    }
                },
                _ = tx.closed() => return,
            }
        } else {
            tokio::select! {
                _ = tokio::time::sleep(REFRESH) => {}
                _ = tx.closed() => return,
            }
        }
        if pool.is_closed() {
            return;
        }
        let read_now = async {
            let mut conn = pool.acquire().await?;
            let routing = read(&mut conn).await?;
            let changed = *tx.borrow() != routing;
            if let Some(id) = instance_id
                && (changed || registered_at.elapsed() >= crate::runtimes::TOUCH_INTERVAL)
            {
                register_backends(&mut conn, id, &routing).await?;
                registered_at = tokio::time::Instant::now();
            }
            Ok::<_, ControlError>((routing, changed))
        }
        .await;
        match read_now {
            Ok((routing, true)) => {
                tracing::info!(epoch = routing.epoch, phase = %routing.phase,
                    write = %routing.write(), reads = ?routing.reads().iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                    "storage routing changed");
                let _ = tx.send(routing);
            }
            Ok((_, false)) => {}
            // Closed while we read: the shutdown the check above races with.
            Err(_) if pool.is_closed() || tx.is_closed() => return,
            Err(err) => {
                tracing::warn!(error = %err, "could not read the storage routing; keeping the last one")
            }
        }
    }
}

/// A routing that never changes (an explicit `--schema`), as a receiver
/// like [`follow`]'s. Its sender is gone: `changed()` fails at once, which
/// followers read as "no change will come".
pub fn fixed(schema: SchemaName) -> watch::Receiver<Routing> {
    watch::channel(Routing::fixed(schema)).1
}

/// Move up to `limit` deferred and `limit` dead-lettered jobs from `from`,
/// a substrate that only drains, into `to`, the write substrate. How many
/// moved.
pub async fn transfer(
    conn: &mut PgConnection,
    from: &SchemaName,
    to: &SchemaName,
    limit: i32,
) -> Result<u64, ControlError> {
    let moved: i32 = sqlx::query_scalar(awa_core::sql::statement(
        include_str!("../sql/call_storage_transfer.sql"),
        to,
    ))
    .bind(from.as_str())
    .bind(limit)
    .fetch_one(conn)
    .await?;
    Ok(moved.max(0) as u64)
}

/// Stop routing to `schema`, which is draining, if it holds nothing live
/// and no transaction that could still write to it is open. Whether it was
/// released.
pub async fn release_drained(
    conn: &mut PgConnection,
    schema: &SchemaName,
) -> Result<bool, ControlError> {
    let empty: bool = sqlx::query_scalar(awa_core::sql::statement(
        include_str!("../sql/drain_empty.sql"),
        schema,
    ))
    .fetch_one(&mut *conn)
    .await?;
    if !empty {
        return Ok(false);
    }
    let released = sqlx::query(include_str!("../sql/drain_release.sql"))
        .bind(schema.as_str())
        .fetch_optional(conn)
        .await?;
    Ok(released.is_some())
}

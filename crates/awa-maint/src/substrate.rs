//! Preparing queue-storage substrates (`awa storage prepare-queue-storage-schema`).

use crate::{MaintError, migrate::check_compatible};
use awa_core::{SubstrateShape, sql::statement};
use sqlx::{Connection, PgConnection};

/// What preparing did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PrepareOutcome {
    Installed,
    Unchanged,
    Reset,
}

/// Install (or confirm) a substrate. With `reset`, drop and re-create a
/// custom substrate that is not in use. All in one transaction: on any
/// error the database is left as it was.
pub async fn prepare(
    conn: &mut PgConnection,
    shape: &SubstrateShape,
    reset: bool,
) -> Result<PrepareOutcome, MaintError> {
    if reset && shape.schema.is_default() {
        return Err(MaintError::DefaultSchemaReset);
    }
    if check_compatible(conn).await?.is_none() {
        return Err(MaintError::NotMigrated);
    }
    let mut tx = conn.begin().await?;
    let name = shape.schema.as_str();
    let mut did_reset = false;
    if reset {
        let schema_exists: bool = sqlx::query_scalar(include_str!("../sql/schema_exists.sql"))
            .bind(name)
            .fetch_one(&mut *tx)
            .await?;
        let is_substrate = unused_substrate(&mut tx, name, schema_exists).await?;
        if is_substrate {
            sqlx::query(statement(
                include_str!("../sql/drop_substrate.sql"),
                &shape.schema,
            ))
            .execute(&mut *tx)
            .await?;
            did_reset = true;
        }
    }
    let result: String = sqlx::query_scalar(include_str!("../sql/prepare_substrate.sql"))
        .bind(name)
        .bind(shape.slots.queue)
        .bind(shape.slots.lease)
        .bind(shape.slots.claim)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(match (did_reset, result.as_str()) {
        (true, _) => PrepareOutcome::Reset,
        (false, "unchanged") => PrepareOutcome::Unchanged,
        _ => PrepareOutcome::Installed,
    })
}

/// Grant `role` exactly what a worker, the maintenance leader and the
/// job/dlq commands need on a substrate: the per-table, per-operation
/// matrix of `sql/grant_runtime_role.sql`, the runtime functions, no DDL.
/// Earlier, broader grants to the role are revoked. Refuses while a
/// relation of the schema is not classified in the matrix. Run as the
/// migrator; `pg_read_all_stats` membership is left to an administrator.
pub async fn grant_runtime_role(
    conn: &mut PgConnection,
    role: &str,
    schema: &awa_core::SchemaName,
) -> Result<(), MaintError> {
    if check_compatible(conn).await?.is_none() {
        return Err(MaintError::NotMigrated);
    }
    sqlx::query(include_str!("../sql/call_grant_runtime_role.sql"))
        .bind(role)
        .bind(schema.as_str())
        .execute(conn)
        .await?;
    Ok(())
}

/// Whether `schema` holds a prepared substrate.
pub async fn is_substrate(
    conn: &mut PgConnection,
    schema: &awa_core::SchemaName,
) -> Result<bool, MaintError> {
    Ok(sqlx::query_scalar(include_str!("../sql/is_substrate.sql"))
        .bind(schema.as_str())
        .fetch_one(conn)
        .await?)
}

/// Drop custom substrate `schema`, with its retained history: refused for
/// `awa`, for a schema that is not a substrate, one the routing uses
/// (active, target, draining, or registered by a runtime) and one that
/// still holds an unfinished job or a dead letter. One transaction under
/// the migration lock, so no transition step interleaves.
pub async fn drop_unused(
    conn: &mut PgConnection,
    schema: &awa_core::SchemaName,
) -> Result<(), MaintError> {
    if schema.is_default() {
        return Err(MaintError::DefaultSchemaReset);
    }
    if check_compatible(conn).await?.is_none() {
        return Err(MaintError::NotMigrated);
    }
    let mut tx = conn.begin().await?;
    sqlx::query(include_str!("../sql/migration_xact_lock.sql"))
        .execute(&mut *tx)
        .await?;
    let name = schema.as_str();
    unused_substrate(&mut tx, name, true).await?;
    let holds: bool = sqlx::query_scalar(statement(
        include_str!("../sql/substrate_holds_work.sql"),
        schema,
    ))
    .fetch_one(&mut *tx)
    .await?;
    if holds {
        return Err(MaintError::SubstrateHoldsWork(name.to_string()));
    }
    sqlx::query(statement(include_str!("../sql/drop_substrate.sql"), schema))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Whether `name` is a substrate, refusing a schema that routing uses, and
/// (when `must_be` says it exists) one that exists but is not a substrate.
async fn unused_substrate(
    conn: &mut PgConnection,
    name: &str,
    must_be: bool,
) -> Result<bool, MaintError> {
    let is_substrate: bool = sqlx::query_scalar(include_str!("../sql/is_substrate.sql"))
        .bind(name)
        .fetch_one(&mut *conn)
        .await?;
    if must_be && !is_substrate {
        return Err(MaintError::NotASubstrate(name.to_string()));
    }
    let in_use: bool = sqlx::query_scalar(include_str!("../sql/substrate_in_use.sql"))
        .bind(name)
        .fetch_one(&mut *conn)
        .await?;
    if in_use {
        return Err(MaintError::SchemaInUse(name.to_string()));
    }
    Ok(is_substrate)
}

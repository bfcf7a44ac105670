//! Promotion of due deferred work.

use crate::DeferredError;
use async_trait::async_trait;
use awa_core::{SchemaName, sql::statement};
use sqlx::PgConnection;

#[async_trait]
pub trait DeferredPlane: Send + Sync + std::fmt::Debug {
    /// Move up to `limit` due jobs into the ready ring; how many moved.
    /// Safe to run from several processes at once.
    async fn promote_due(&self, conn: &mut PgConnection, limit: i32) -> Result<u64, DeferredError>;
}

#[derive(Debug, Clone)]
pub struct PgDeferredPlane {
    schema: SchemaName,
}

impl PgDeferredPlane {
    pub fn new(schema: SchemaName) -> Self {
        Self { schema }
    }
}

#[async_trait]
impl DeferredPlane for PgDeferredPlane {
    async fn promote_due(&self, conn: &mut PgConnection, limit: i32) -> Result<u64, DeferredError> {
        let moved: i32 = sqlx::query_scalar(statement(
            include_str!("../sql/call_promote.sql"),
            &self.schema,
        ))
        .bind(limit)
        .fetch_one(conn)
        .await?;
        Ok(moved as u64)
    }
}

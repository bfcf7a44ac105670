//! The control plane's operations behind one trait, like every plane.

use crate::ControlError;
use crate::queues::{QueueConfig, QueueSettings};
use crate::status::StorageStatus;
use async_trait::async_trait;
use awa_core::QueueName;
use sqlx::PgConnection;

#[async_trait]
pub trait ControlPlane: Send + Sync + std::fmt::Debug {
    /// The applied schema version; `None` before the first migration.
    async fn schema_version(&self, conn: &mut PgConnection) -> Result<Option<i32>, ControlError>;
    /// Schema version, substrates with their rings, transition state.
    async fn storage_status(&self, conn: &mut PgConnection) -> Result<StorageStatus, ControlError>;
    /// Create or change a queue's settings.
    async fn configure_queue(
        &self,
        conn: &mut PgConnection,
        queue: &QueueName,
        config: &QueueConfig,
    ) -> Result<QueueSettings, ControlError>;
}

/// The PostgreSQL control plane (database-wide objects in schema `awa`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PgControlPlane;

#[async_trait]
impl ControlPlane for PgControlPlane {
    async fn schema_version(&self, conn: &mut PgConnection) -> Result<Option<i32>, ControlError> {
        crate::status::schema_version(conn).await
    }

    async fn storage_status(&self, conn: &mut PgConnection) -> Result<StorageStatus, ControlError> {
        crate::status::storage_status(conn).await
    }

    async fn configure_queue(
        &self,
        conn: &mut PgConnection,
        queue: &QueueName,
        config: &QueueConfig,
    ) -> Result<QueueSettings, ControlError> {
        config.apply(conn, queue).await
    }
}

//! The control plane against real PostgreSQL.

use awa_control::queues::QueueConfig;
use awa_control::{ControlPlane, PgControlPlane};
use awa_core::QueueName;
use std::time::Duration;

#[tokio::test]
async fn status_of_a_fresh_and_of_a_migrated_database() {
    let empty = awa_harness::TestDb::empty().await.unwrap();
    let pool = empty.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let status = PgControlPlane.storage_status(&mut conn).await.unwrap();
    assert_eq!(status.schema_version, None);
    assert!(status.substrates.is_empty());

    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let status = PgControlPlane.storage_status(&mut conn).await.unwrap();
    assert_eq!(status.schema_version, Some(1));
    assert_eq!(status.substrates.len(), 1);
    let awa = &status.substrates[0];
    assert!(awa.active);
    assert_eq!(
        (awa.slots.queue, awa.slots.lease, awa.slots.claim),
        (16, 8, 8)
    );
    assert_eq!(awa.rings.len(), 3);
    assert!(status.maintenance.leader.is_none());
}

#[tokio::test]
async fn queue_settings_are_validated_and_kept() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let q = QueueName::new("mail").unwrap();
    for bad in [
        QueueConfig {
            max_attempts: Some(0),
            ..Default::default()
        },
        QueueConfig {
            max_attempts: Some(1001),
            ..Default::default()
        },
        QueueConfig {
            shard_count: Some(0),
            ..Default::default()
        },
        QueueConfig {
            shard_count: Some(65),
            ..Default::default()
        },
    ] {
        assert!(
            PgControlPlane
                .configure_queue(&mut conn, &q, &bad)
                .await
                .is_err()
        );
    }
    let set = QueueConfig {
        dlq_enabled: Some(true),
        max_attempts: Some(3),
        priority_aging: Some(Duration::from_secs(30)),
        ..Default::default()
    };
    let s = PgControlPlane
        .configure_queue(&mut conn, &q, &set)
        .await
        .unwrap();
    assert!(s.dlq_enabled);
    assert_eq!(s.max_attempts, 3);
    assert_eq!(s.priority_aging_secs, Some(30.0));
    // Unset fields keep their values; aging zero turns it off.
    let off = QueueConfig {
        priority_aging: Some(Duration::ZERO),
        ..Default::default()
    };
    let s = PgControlPlane
        .configure_queue(&mut conn, &q, &off)
        .await
        .unwrap();
    assert_eq!(
        (s.dlq_enabled, s.max_attempts, s.priority_aging_secs),
        (true, 3, None)
    );
}

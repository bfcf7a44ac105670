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
    assert_eq!(status.schema_version, Some(awa_maint::LATEST_VERSION));
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

#[tokio::test]
async fn operator_reads_list_runtimes_queue_settings_and_a_pinned_snapshot() {
    use awa_control::runtimes::{RuntimeInfo, list, register};
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    assert!(list(&mut conn).await.unwrap().is_empty());
    let id = uuid::Uuid::new_v4();
    register(
        &mut conn,
        &RuntimeInfo {
            instance_id: id,
            role: "worker",
            queues: vec!["a".into(), "b".into()],
        },
    )
    .await
    .unwrap();
    let listed = list(&mut conn).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].instance_id, id);
    assert_eq!(listed[0].queues, vec!["a".to_string(), "b".to_string()]);
    assert_eq!(listed[0].pid, std::process::id() as i32);
    assert!(listed[0].seen_secs_ago < 60.0);

    assert!(
        awa_control::queues::list(&mut conn)
            .await
            .unwrap()
            .is_empty()
    );
    for (name, paused) in [("zeta", true), ("alpha", false)] {
        QueueConfig {
            paused: Some(paused),
            ..Default::default()
        }
        .apply(&mut conn, &QueueName::new(name).unwrap())
        .await
        .unwrap();
    }
    let queues = awa_control::queues::list(&mut conn).await.unwrap();
    let names: Vec<(&str, bool)> = queues
        .iter()
        .map(|q| (q.queue.as_str(), q.paused))
        .collect();
    assert_eq!(names, vec![("alpha", false), ("zeta", true)]);

    // A snapshot held open past the report's 5 s floor is named, with its
    // query, and alerts only past the threshold.
    let mut pinning = pool.acquire().await.unwrap();
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *pinning)
        .await
        .unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid() /* pinning */")
        .fetch_one(&mut *pinning)
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let pinned = loop {
        let status = PgControlPlane.storage_status(&mut conn).await.unwrap();
        if let Some(p) = status.maintenance.pinned_snapshot.filter(|p| p.pid == pid) {
            break p;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the snapshot was never reported"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        pinned.query.as_deref().unwrap_or("").contains("pinning"),
        "{pinned:?}"
    );
    assert!(pinned.alert(Duration::from_secs(3600)).is_none());
    let alert = pinned.alert(Duration::from_secs(1)).expect("past 1 s");
    assert!(
        alert.message.contains(&format!("pid {pid}")),
        "{}",
        alert.message
    );
    sqlx::query("ROLLBACK")
        .execute(&mut *pinning)
        .await
        .unwrap();
}

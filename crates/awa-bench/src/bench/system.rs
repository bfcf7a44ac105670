//! The systems a scenario can drive with the same producer and worker
//! shapes: ours (Awa) and the plain jobs table of scenario `baseline`; and,
//! for scenario `cost`, the plain insert (a producer only: nothing runs
//! its rows).

use super::baseline::{self, BaselineFleet, Completion};
use super::payload;
use crate::BoxError;
use crate::fleet::{self, Fleet, FleetConfig, FleetTotals};
use crate::latency::LatencyRecorder;
use awa_core::{NewJob, QueueName};
use awa_ready::{PgReadyPlane, ReadyPlane};
use sqlx::{Connection, PgConnection, PgPool};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    Awa,
    Baseline(Completion),
    /// One plain INSERT per job, no worker (`plain.rs`).
    Plain,
}

impl System {
    /// The schema whose tables the cost figures (dead tuples, size) cover.
    pub fn schema(self) -> &'static str {
        match self {
            System::Awa => "awa",
            System::Baseline(_) => baseline::SCHEMA,
            System::Plain => super::plain::SCHEMA,
        }
    }

    /// What a run's progress line ends with: nothing for ours, else which
    /// system it was.
    pub fn tag(self) -> &'static str {
        match self {
            System::Awa => "",
            System::Baseline(_) => "  [baseline]",
            System::Plain => "  [plain insert]",
        }
    }

    /// The query a pinning session runs inside its snapshot.
    pub fn pin_query(self) -> &'static str {
        match self {
            System::Awa => "SELECT count(*) FROM awa.terminal_jobs",
            System::Baseline(_) => baseline::PIN,
            System::Plain => "SELECT count(*) FROM bench_plain.inserts",
        }
    }

    /// One call's worth of no-op jobs, one per key (the key goes into the
    /// payload), ready to send.
    pub fn batch(self, queue: &QueueName, keys: impl Iterator<Item = u64>) -> Batch {
        match self {
            System::Awa => Batch::Awa(
                keys.map(|i| NewJob::new(queue.clone(), "noop", payload(i)))
                    .collect(),
            ),
            System::Baseline(_) => Batch::Baseline(queue.clone(), keys.map(payload).collect()),
            System::Plain => Batch::Plain(keys.map(payload).collect()),
        }
    }

    /// Builds and sends one batch (see [`Batch::send`]).
    pub async fn enqueue(
        self,
        conn: &mut PgConnection,
        queue: &QueueName,
        keys: impl Iterator<Item = u64>,
    ) -> Result<(), BoxError> {
        self.batch(queue, keys).send(conn).await
    }

    /// Starts the workers of this system (and, for ours, the leader when
    /// the config asks for one).
    pub fn start(
        self,
        pool: &PgPool,
        config: &FleetConfig,
        latency: Arc<LatencyRecorder>,
    ) -> AnyFleet {
        match self {
            System::Awa => AnyFleet::Awa(Fleet::start(pool, config, latency)),
            System::Baseline(completion) => {
                AnyFleet::Baseline(BaselineFleet::start(pool, config, completion, latency))
            }
            System::Plain => AnyFleet::Idle,
        }
    }
}

/// Jobs to enqueue in one call.
#[derive(Debug)]
pub enum Batch {
    Awa(Vec<NewJob>),
    Baseline(QueueName, Vec<serde_json::Value>),
    Plain(Vec<serde_json::Value>),
}

impl Batch {
    /// One call in autocommit: one round trip, one commit. Ours is routed
    /// (the storage-transition state is checked by the statement), as an
    /// application's client is.
    pub async fn send(&self, conn: &mut PgConnection) -> Result<(), BoxError> {
        match self {
            Batch::Awa(jobs) => {
                PgReadyPlane::routed(fleet::schema())
                    .enqueue(conn, jobs)
                    .await?;
            }
            Batch::Baseline(queue, args) => {
                let kinds = vec!["noop"; args.len()];
                baseline::enqueue(conn, queue.as_str(), &kinds, args).await?;
            }
            Batch::Plain(args) => super::plain::insert(conn, args).await?,
        }
        Ok(())
    }
}

impl Batch {
    /// As [`Batch::send`], ours pinned to the substrate (no routing check):
    /// the other side of the routing cost's A/B.
    pub async fn send_pinned(&self, conn: &mut PgConnection) -> Result<(), BoxError> {
        match self {
            Batch::Awa(jobs) => {
                PgReadyPlane::new(fleet::schema())
                    .enqueue(conn, jobs)
                    .await?;
                Ok(())
            }
            Batch::Baseline(..) | Batch::Plain(_) => self.send(conn).await,
        }
    }

    /// As [`Batch::send`], inside an explicit transaction of its own:
    /// `BEGIN`, the call, `COMMIT`. Three round trips and one commit, what
    /// an application pays when it enqueues inside its own transaction.
    pub async fn send_in_tx(&self, conn: &mut PgConnection) -> Result<(), BoxError> {
        let mut tx = conn.begin().await?;
        self.send(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// As [`Batch::send`], but ours goes through the COPY path
    /// (`PgReadyPlane::enqueue_copy`); the baseline has no COPY path of its
    /// own and sends its multi-row insert, what a user would write.
    pub async fn send_copy(&self, conn: &mut PgConnection) -> Result<(), BoxError> {
        match self {
            Batch::Awa(jobs) => {
                PgReadyPlane::routed(fleet::schema())
                    .enqueue_copy(conn, jobs)
                    .await?;
                Ok(())
            }
            Batch::Baseline(..) | Batch::Plain(_) => self.send(conn).await,
        }
    }
}

/// Running workers of either system.
#[derive(Debug)]
pub enum AnyFleet {
    Awa(Fleet),
    Baseline(BaselineFleet),
    /// The plain insert: nothing runs its rows.
    Idle,
}

impl AnyFleet {
    pub fn completed(&self) -> u64 {
        match self {
            AnyFleet::Awa(f) => f.completed(),
            AnyFleet::Baseline(f) => f.completed(),
            AnyFleet::Idle => 0,
        }
    }

    pub fn claimed(&self) -> u64 {
        match self {
            AnyFleet::Awa(f) => f.claimed(),
            AnyFleet::Baseline(f) => f.claimed(),
            AnyFleet::Idle => 0,
        }
    }

    pub async fn stop(self) -> Result<FleetTotals, BoxError> {
        match self {
            AnyFleet::Awa(f) => f.stop().await,
            AnyFleet::Baseline(f) => f.stop().await,
            AnyFleet::Idle => Ok(FleetTotals::default()),
        }
    }
}

//! Real PostgreSQL for Awa's tests, benchmarks, demos and `cargo xtask`.
//!
//! What this crate owns:
//!
//! * **Getting a throwaway PostgreSQL server.** [`PgServer::shared`] finds one
//!   in this order: the server named by `DATABASE_URL`; a temporary cluster
//!   started from local PostgreSQL 14+ server binaries (`initdb`,
//!   `postgres`); a Docker container when the `docker` cargo feature is on
//!   and a Docker engine is reachable. A temporary cluster lives as long as
//!   some [`PgServer`] or [`TestDb`] handle to it does, is stopped and
//!   deleted when the last one drops (also after a panic), and dies with the
//!   process if the process is killed. [`PgServer::start`] gives a benchmark
//!   its own private cluster with its own settings ([`ClusterOptions`]).
//! * **Failover.** [`PgServer::start_standby`] makes a streaming standby of
//!   a temporary cluster with `pg_basebackup` (synchronous if asked),
//!   [`PgServer::kill`] SIGKILLs a postmaster for good and
//!   [`PgServer::promote`] runs `pg_ctl promote`: a primary failover on one
//!   machine, for the chaos suite and failover tests.
//! * **Per-test databases.** [`TestDb::new`] clones a fresh database from a
//!   template database that is prepared once per template key, safely across
//!   concurrent tests and across processes sharing one server. The database
//!   is dropped when the [`TestDb`] drops.
//!
//! What it does not own: any knowledge of Awa's schema. Callers pass their
//! migrations in as the `init` closure of [`TestDb::new`], and should put a
//! schema version or digest into the template key so that a changed schema
//! gets a new template on long-lived servers.
//!
//! The crate targets Unix (it manages server processes and their owners).

mod bins;
mod docker;
mod error;
pub mod extremes;
mod keeper;
mod local;
mod pdeathsig;
mod server;
mod sql;
mod testdb;

pub use error::HarnessError;
pub use server::{ClusterOptions, PgServer, ServerKind, StandbyOptions, TEST_SETTINGS};
pub use sql::quote_ident;
pub use testdb::{TestDb, template_name};

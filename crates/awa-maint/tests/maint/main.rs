//! awa-maint's integration tests, one test binary: each module was a test
//! file of its own, and each of those was a binary that linked all of the
//! planes again. `common` holds the shared fixtures; `ring_model` is the
//! reference model that `ring_props` checks and `ring_pg` compares
//! PostgreSQL with.

mod common;
mod ring_model;

mod batches;
mod claim_items;
mod cron;
mod done_items;
mod failover;
mod job_path;
mod leader;
mod limits;
mod migrate;
mod plan_bounds;
mod poison;
mod rescue_cadence;
mod ring_pg;
mod ring_props;
mod rings;
mod roles;
mod scan_bound;
mod sql_bounds;
mod status_cost;
mod stragglers;
mod tidy;
mod time_bounds;
mod unique_specs;
mod unique_window_end;
mod uniques;
mod upgrade;
mod worker;

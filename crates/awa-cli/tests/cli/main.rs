//! awa-cli's integration tests, one test binary: each module was a test
//! file of its own, and each of those was a binary that linked all of awa
//! again. The `awa` binary under test is `CARGO_BIN_EXE_awa` (see
//! `common`). `cli_limits` and `cli_traces` are still binaries of their
//! own.

#[path = "../common/mod.rs"]
mod common;

mod bounds;
mod cadence;
mod cancel;
mod cron;
mod extremes;
mod history;
mod jobs;
mod maint;
mod names;
mod operator;
mod retry;
mod serve;
mod shutdown;
mod storage;
mod timeout;
mod tls;
mod transition;
mod unique;
mod urls;

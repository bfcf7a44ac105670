//! awa-admin's integration tests, one test binary: each module was a test
//! file of its own, and each of those was a binary that linked all of awa
//! again. `common` holds the seeded database and request helpers,
//! `browser` the dashboard test's DevTools-protocol client.

mod browser;
mod common;

mod api;
mod dashboard;
mod extremes;
mod metrics;
mod openapi;
mod origin;

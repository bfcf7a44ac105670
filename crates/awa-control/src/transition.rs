//! The staged storage transition, step by step: prepare a target, enter
//! the mixed phase, finalize (or abort). Each step is one SQL function of
//! `fn_storage_transition.sql`, one transaction under the migration lock;
//! what a step refuses and why is decided there, and comes back as
//! [`ControlError::Refused`] with the database's message and hint.

use crate::ControlError;
use awa_core::{Phase, SchemaName};
use sqlx::{PgConnection, Row};

/// A step of the transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Prepare,
    EnterMixed,
    Finalize,
    Abort,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prepare => "prepare",
            Self::EnterMixed => "enter_mixed",
            Self::Finalize => "finalize",
            Self::Abort => "abort",
        }
    }
}

/// The state after a step.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StepOutcome {
    pub step: Step,
    pub state: Phase,
    pub active_schema: String,
    pub target_schema: Option<String>,
    pub epoch: i64,
}

/// Name `target` as the substrate to move to (steady -> prepared).
pub async fn prepare(
    conn: &mut PgConnection,
    target: &SchemaName,
) -> Result<StepOutcome, ControlError> {
    let q = sqlx::query(include_str!("../sql/call_storage_prepare.sql")).bind(target.as_str());
    run(conn, Step::Prepare, q).await
}

/// Send new work to the target (prepared -> mixed).
pub async fn enter_mixed(conn: &mut PgConnection) -> Result<StepOutcome, ControlError> {
    let q = sqlx::query(include_str!("../sql/call_storage_enter_mixed.sql"));
    run(conn, Step::EnterMixed, q).await
}

/// Make the target the active substrate (mixed -> steady), once the old
/// one has drained.
pub async fn finalize(conn: &mut PgConnection) -> Result<StepOutcome, ControlError> {
    let q = sqlx::query(include_str!("../sql/call_storage_finalize.sql"));
    run(conn, Step::Finalize, q).await
}

/// Route back to the old substrate (prepared or mixed -> steady).
pub async fn abort(conn: &mut PgConnection) -> Result<StepOutcome, ControlError> {
    let q = sqlx::query(include_str!("../sql/call_storage_abort.sql"));
    run(conn, Step::Abort, q).await
}

async fn run(
    conn: &mut PgConnection,
    step: Step,
    query: sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
) -> Result<StepOutcome, ControlError> {
    let row = query
        .fetch_one(&mut *conn)
        .await
        .map_err(|err| refusal(step, err))?;
    let state: String = row.get("state");
    Ok(StepOutcome {
        step,
        state: Phase::parse(&state)
            .ok_or_else(|| ControlError::Corrupt(format!("unknown transition state {state:?}")))?,
        active_schema: row.get("active_schema"),
        target_schema: row.get("target_schema"),
        epoch: row.get("epoch"),
    })
}

/// A refusal by the step's own checks, or a role without the migrator's
/// rights, as errors that say so; anything else stays a database error.
fn refusal(step: Step, err: sqlx::Error) -> ControlError {
    if let sqlx::Error::Database(db) = &err {
        match db.code().as_deref() {
            Some("55000") => {
                let hint = db
                    .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .and_then(|e| e.hint())
                    .map(str::to_string);
                return ControlError::Refused {
                    step: step.as_str(),
                    message: db.message().to_string(),
                    hint,
                };
            }
            Some("42501") => {
                return ControlError::NeedsMigrator {
                    step: step.as_str(),
                    detail: db.message().to_string(),
                };
            }
            _ => {}
        }
    }
    ControlError::Database(err)
}

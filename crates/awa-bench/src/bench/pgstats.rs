//! What a scenario cost PostgreSQL, from the server's own statistics.
//!
//! * WAL bytes: `pg_current_wal_insert_lsn()` before and after. The LSN is
//!   cluster-wide: on a shared `DATABASE_URL` server other databases' work
//!   is included.
//! * Commits: `pg_stat_database.xact_commit` of the scenario's database.
//! * Dead tuples and size: `pg_stat_user_tables.n_dead_tup` and
//!   `pg_total_relation_size` over schema `awa` (the baseline's schema in
//!   the baseline's runs), at the end of the phase
//!   (the database is fresh, so these are the phase's own). Autovacuum
//!   is on (PostgreSQL's default), so they are what it had not removed by
//!   then; in `drain`'s dead-tuple phase it is off on the database's
//!   tables, and only on-access pruning removed any.
//! * Function calls and times: `pg_stat_user_functions`, with
//!   `track_functions = 'pl'` set on the scenario database.
//! * CPU: for a local cluster, user+system time of the postmaster and its
//!   children (exited backends are folded into the postmaster's children
//!   times when reaped) and of this process, from `/proc`; and the whole
//!   machine's busy time from `/proc/stat`, so that on a shared machine the
//!   CPU other tenants took during a phase is on record.
//!
//! * Statements (with `--explain`, when the cluster preloads
//!   pg_stat_statements): server time, calls and mean per statement of the
//!   scenario's database, top-level and nested (`track = all`), reset at
//!   the start of the run.
//!
//! Statistics delay: since PostgreSQL 15 a backend flushes its counters at
//! transaction end at most once a second, and an idle backend may hold
//! them for up to 10 s (PGSTAT_IDLE_INTERVAL). A backend always flushes
//! when it exits, so a final snapshot first waits until every other
//! connection to the scenario database has gone, then reads with
//! `pg_stat_clear_snapshot()`.

use super::{Ctx, ScenarioDb};
use crate::BoxError;
use sqlx::{Connection, PgConnection};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Counters at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    lsn: u64,
    xact_commit: i64,
    xact_rollback: i64,
    dead_tuples: i64,
    dead_by_table: BTreeMap<String, i64>,
    awa_bytes: i64,
    /// name -> (calls, total ms, self ms)
    functions: BTreeMap<String, (i64, f64, f64)>,
    cpu: Option<Cpu>,
    at: Instant,
}

#[derive(Debug, Clone, Copy)]
struct Cpu {
    client_s: f64,
    postgres_s: f64,
    /// Busy time of every CPU of the machine (/proc/stat), so what other
    /// tenants of a shared machine used shows as the rest.
    machine_s: f64,
}

/// The difference between two snapshots, per job.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Cost {
    pub jobs: u64,
    pub seconds: f64,
    pub wal_bytes: i64,
    pub wal_bytes_per_job: f64,
    pub commits: i64,
    pub commits_per_job: f64,
    pub rollbacks: i64,
    /// `n_dead_tup` summed over schema awa (or the baseline's) at the end.
    pub dead_tuples: i64,
    pub dead_tuples_per_job: f64,
    /// Tables with dead tuples at the end.
    pub dead_by_table: BTreeMap<String, i64>,
    /// Tables + indexes + TOAST of schema awa (or the baseline's) at the end.
    pub awa_bytes: i64,
    pub awa_bytes_growth: i64,
    pub cpu_client_s: Option<f64>,
    pub cpu_postgres_s: Option<f64>,
    pub cpu_client_us_per_job: Option<f64>,
    pub cpu_postgres_us_per_job: Option<f64>,
    /// CPU time the whole machine was busy, and the part neither this
    /// process nor the server used (other tenants), in seconds.
    pub cpu_machine_s: Option<f64>,
    pub cpu_others_s: Option<f64>,
    /// Runtime functions called, busiest first.
    pub functions: Vec<FnCost>,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FnCost {
    pub name: String,
    pub calls: i64,
    pub calls_per_job: f64,
    pub total_ms: f64,
    pub self_ms: f64,
    pub mean_us: f64,
}

/// One statement's share of a run (pg_stat_statements).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StatementCost {
    /// Sent by a client (true) or run inside a function (false).
    pub toplevel: bool,
    pub calls: i64,
    pub calls_per_job: f64,
    pub total_ms: f64,
    pub mean_ms: f64,
    /// Time spent planning it (top-level statements only).
    pub plan_ms: f64,
    pub rows: i64,
    /// The statement's text, whitespace folded, cut at 160 characters.
    pub query: String,
}

/// How many statements `statements_top` lists.
const TOP_STATEMENTS: i64 = 25;

/// Makes pg_stat_statements readable in `db` and empties it (cluster-wide:
/// scenarios run one after another).
pub async fn statements_reset(db: &ScenarioDb) -> Result<(), BoxError> {
    let mut conn = PgConnection::connect(db.url()).await?;
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&mut conn)
        .await?;
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(&mut conn)
        .await?;
    let _ = conn.close().await;
    Ok(())
}

/// The statements of `db` that took the most server time since
/// [`statements_reset`], busiest first.
pub async fn statements_top(db: &ScenarioDb, jobs: u64) -> Result<Vec<StatementCost>, BoxError> {
    let mut conn = PgConnection::connect(db.url()).await?;
    let rows: Vec<(bool, i64, f64, f64, f64, i64, String)> = sqlx::query_as(
        "SELECT s.toplevel, s.calls, s.total_exec_time, s.mean_exec_time, s.total_plan_time, \
                s.rows, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 160) \
           FROM pg_stat_statements s \
          WHERE s.dbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()) \
          ORDER BY s.total_exec_time DESC \
          LIMIT $1",
    )
    .bind(TOP_STATEMENTS)
    .fetch_all(&mut conn)
    .await?;
    let _ = conn.close().await;
    Ok(rows
        .into_iter()
        .map(
            |(toplevel, calls, total, mean, plan, rows, query)| StatementCost {
                toplevel,
                calls,
                calls_per_job: if jobs == 0 {
                    0.0
                } else {
                    calls as f64 / jobs as f64
                },
                total_ms: total,
                mean_ms: mean,
                plan_ms: plan,
                rows,
                query,
            },
        )
        .collect())
}

/// Counters after everything connected to `db` has gone (final figures).
pub async fn settled(ctx: &Ctx, db: &ScenarioDb) -> Result<Snapshot, BoxError> {
    snapshot(ctx, db, true).await
}

/// Counters now, while the scenario runs (may lag; see the module docs).
pub async fn now(ctx: &Ctx, db: &ScenarioDb) -> Result<Snapshot, BoxError> {
    snapshot(ctx, db, false).await
}

async fn snapshot(ctx: &Ctx, db: &ScenarioDb, settle: bool) -> Result<Snapshot, BoxError> {
    let mut conn = PgConnection::connect(db.url()).await?;
    if settle {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let others: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
                  WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .fetch_one(&mut conn)
            .await?;
            if others == 0 {
                break;
            }
            if Instant::now() > deadline {
                ctx.note(format!(
                    "{others} connection(s) to {} were still open when reading statistics; \
                     their unflushed counters are missing",
                    db.name()
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Let the postmaster reap exited backends, folding their CPU time
        // into its own children's times.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut conn)
        .await?;
    let lsn: String = sqlx::query_scalar("SELECT pg_current_wal_insert_lsn()::text")
        .fetch_one(&mut conn)
        .await?;
    let (xact_commit, xact_rollback): (i64, i64) = sqlx::query_as(
        "SELECT coalesce(xact_commit, 0), coalesce(xact_rollback, 0) \
           FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_optional(&mut conn)
    .await?
    .unwrap_or((0, 0));
    let dead: Vec<(String, i64)> = sqlx::query_as(
        "SELECT relname::text, n_dead_tup FROM pg_stat_user_tables \
          WHERE schemaname = $1 AND n_dead_tup > 0",
    )
    .bind(db.schema())
    .fetch_all(&mut conn)
    .await?;
    let dead_tuples = dead.iter().map(|(_, n)| n).sum();
    let dead_by_table = dead.into_iter().collect();
    let awa_bytes: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint \
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
          WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')",
    )
    .bind(db.schema())
    .fetch_one(&mut conn)
    .await?;
    let rows: Vec<(String, i64, f64, f64)> = sqlx::query_as(
        "SELECT funcname::text, calls, total_time, self_time FROM pg_stat_user_functions \
          WHERE schemaname = $1",
    )
    .bind(db.schema())
    .fetch_all(&mut conn)
    .await?;
    let functions = rows
        .into_iter()
        .map(|(name, calls, total, own)| (name, (calls, total, own)))
        .collect();
    let cpu = match ctx.postmaster_pid {
        Some(pid) => cpu(pid),
        None => None,
    };
    let _ = conn.close().await;
    Ok(Snapshot {
        lsn: parse_lsn(&lsn).ok_or_else(|| format!("cannot parse LSN {lsn:?}"))?,
        xact_commit,
        xact_rollback,
        dead_tuples,
        dead_by_table,
        awa_bytes,
        functions,
        cpu,
        at: Instant::now(),
    })
}

impl Snapshot {
    pub fn dead_tuples(&self) -> i64 {
        self.dead_tuples
    }

    pub fn awa_bytes(&self) -> i64 {
        self.awa_bytes
    }
}

/// What happened between `before` and `after`, for `jobs` jobs.
pub fn cost(before: &Snapshot, after: &Snapshot, jobs: u64) -> Cost {
    let per = |x: f64| if jobs == 0 { 0.0 } else { x / jobs as f64 };
    let wal_bytes = after.lsn.saturating_sub(before.lsn) as i64;
    let commits = after.xact_commit - before.xact_commit;
    let (cpu_client_s, cpu_postgres_s, cpu_machine_s) = match (before.cpu, after.cpu) {
        (Some(b), Some(a)) => (
            Some(a.client_s - b.client_s),
            Some(a.postgres_s - b.postgres_s),
            Some(a.machine_s - b.machine_s),
        ),
        _ => (None, None, None),
    };
    let cpu_others_s = match (cpu_machine_s, cpu_client_s, cpu_postgres_s) {
        (Some(m), Some(c), Some(p)) => Some((m - c - p).max(0.0)),
        _ => None,
    };
    let mut functions: Vec<FnCost> = after
        .functions
        .iter()
        .filter_map(|(name, &(calls, total, own))| {
            let (c0, t0, s0) = before.functions.get(name).copied().unwrap_or_default();
            let calls = calls - c0;
            (calls > 0).then(|| FnCost {
                name: name.clone(),
                calls,
                calls_per_job: per(calls as f64),
                total_ms: total - t0,
                self_ms: own - s0,
                mean_us: (total - t0) * 1000.0 / calls as f64,
            })
        })
        .collect();
    functions.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
    Cost {
        jobs,
        seconds: after.at.duration_since(before.at).as_secs_f64(),
        wal_bytes,
        wal_bytes_per_job: per(wal_bytes as f64),
        commits,
        commits_per_job: per(commits as f64),
        rollbacks: after.xact_rollback - before.xact_rollback,
        dead_tuples: after.dead_tuples,
        dead_tuples_per_job: per(after.dead_tuples as f64),
        dead_by_table: after.dead_by_table.clone(),
        awa_bytes: after.awa_bytes,
        awa_bytes_growth: after.awa_bytes - before.awa_bytes,
        cpu_client_s,
        cpu_postgres_s,
        cpu_client_us_per_job: cpu_client_s.map(|s| per(s * 1e6)),
        cpu_postgres_us_per_job: cpu_postgres_s.map(|s| per(s * 1e6)),
        cpu_machine_s,
        cpu_others_s,
        functions,
    }
}

impl Cost {
    /// Counts CPU that processes of ours other than this one used (the
    /// `procs` scenario's producer and worker) as client CPU: without
    /// this it would show as other tenants' CPU.
    pub fn add_client_cpu(&mut self, seconds: f64) {
        let jobs = self.jobs;
        let per = |x: f64| if jobs == 0 { 0.0 } else { x / jobs as f64 };
        if let Some(client) = self.cpu_client_s.as_mut() {
            *client += seconds;
            self.cpu_client_us_per_job = Some(per(*client * 1e6));
        }
        if let Some(others) = self.cpu_others_s.as_mut() {
            *others = (*others - seconds).max(0.0);
        }
    }
}

/// User + system CPU this process has used so far, in seconds.
pub fn own_cpu_s() -> Option<f64> {
    proc_times("self").map(|(_, own, _)| own as f64 / TICKS_PER_S)
}

/// "16/B374D848" -> bytes.
fn parse_lsn(text: &str) -> Option<u64> {
    let (hi, lo) = text.split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

/// Linux reports /proc times in USER_HZ, which is 100 on every platform
/// Rust targets.
const TICKS_PER_S: f64 = 100.0;

/// (ppid, utime + stime, cutime + cstime) of a process, in ticks.
fn proc_times(pid: &str) -> Option<(i64, u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields start
    // after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some((
        f.get(1)?.parse().ok()?,
        num(11)? + num(12)?,
        num(13)? + num(14)?,
    ))
}

fn cpu(postmaster: i64) -> Option<Cpu> {
    let (_, own, reaped) = proc_times(&postmaster.to_string())?;
    let mut postgres = own + reaped;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if let Some((ppid, own, reaped)) = proc_times(pid)
            && ppid == postmaster
        {
            postgres += own + reaped;
        }
    }
    let (_, client, _) = proc_times("self")?;
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and
    // iowait are busy.
    let busy: u64 = [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| fields.get(i))
        .sum();
    Some(Cpu {
        client_s: client as f64 / TICKS_PER_S,
        postgres_s: postgres as f64 / TICKS_PER_S,
        machine_s: busy as f64 / TICKS_PER_S,
    })
}

/// The postmaster of the server `conn` is on, when it runs on this machine
/// (the parent of our backend, visible in /proc).
pub async fn local_postmaster(conn: &mut PgConnection) -> Option<i64> {
    let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .ok()?;
    let (ppid, _, _) = proc_times(&backend.to_string())?;
    let comm = std::fs::read_to_string(format!("/proc/{ppid}/comm")).ok()?;
    comm.trim().starts_with("postgres").then_some(ppid)
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_lsns() {
        assert_eq!(super::parse_lsn("0/0"), Some(0));
        assert_eq!(super::parse_lsn("1/10"), Some((1 << 32) + 16));
        assert_eq!(super::parse_lsn("nope"), None);
    }
}

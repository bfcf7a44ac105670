//! Hot-path statements read what they return, whatever PostgreSQL's
//! statistics say (issue 33). Every figure the bench used to publish came
//! from tables PostgreSQL had never analyzed; once autovacuum had analyzed
//! the ring, a claim's existence check became a bitmap scan of the rest of
//! the lane and its cost grew with the backlog (49 ms per claim at 400,000
//! waiting jobs). A slower bench is easy to miss; this makes a plan
//! regression a red test.
//!
//! Each statement runs after `ANALYZE` over a backlog of 100,000, with
//! generic plans (what a long-lived session settles on), once to warm the
//! session (a PL/pgSQL function plans its statements on first use, reading
//! the catalogs), then under `EXPLAIN (ANALYZE, BUFFERS)`. The
//! top node's shared buffers count every page the call touched, its nested
//! statements included, and must stay within `FIXED + PER_ROW x rows` for
//! the rows it returns or handles.
//!
//! Why these numbers: a lane index page holds a few hundred entries, so a
//! statement that walks a lane from its head touches a handful of index
//! pages plus the heap pages of what it takes (dense: entries are appended
//! in order, so a claim of 128 touches about 3 heap pages); the fixed part
//! is the probes every call makes (ledger, lane heads, settings, the batch
//! row's index). A plan that reads the rest of the lane touches 1 index page
//! per few hundred waiting jobs (over 300 at 100,000), far past the bound.

use sqlx::{Connection, PgConnection, PgPool};
use std::time::Duration;

use crate::common::{self, Explained, explain};

/// Pages any call may touch whatever it returns.
const FIXED: i64 = 80;
/// Pages per row returned or handled (a row's share of its heap page and
/// index page, the tombstone probe of its entry: the probe's root and leaf
/// pages, the rows the call writes for it).
const PER_ROW: i64 = 3;
/// Pages per row an enqueue writes (see `Bounds::check_writes`).
const PER_WRITTEN_ROW: i64 = 12;
/// Pages per tombstoned copy a claim steps over (see
/// `Bounds::check_over_copies`).
const PER_COPY: i64 = 6;
/// The backlog every statement runs over.
const BACKLOG: i64 = 100_000;

/// A read-only statement, explained three times: the cheapest call. A
/// call right after autovacuum touched one of its tables replans, reading
/// the catalogs once (about a hundred pages); a plan that reads the lane
/// pays on every call. Also warms the session.
async fn explain_settled(conn: &mut PgConnection, sql: &str) -> Explained {
    let mut best = explain(conn, sql).await;
    for _ in 0..2 {
        let c = explain(conn, sql).await;
        if c.buffers < best.buffers {
            best = c;
        }
    }
    best
}

/// Checks each explained call against the bound, collecting every breach
/// so one run reports them all.
#[derive(Default)]
struct Bounds {
    lines: Vec<String>,
    breaches: Vec<String>,
}

impl Bounds {
    /// `handled`: the rows the call took or wrote, when its result does not
    /// say (a function returning a count).
    fn check(&mut self, what: &str, cost: &Explained, handled: Option<i64>) {
        self.check_with(what, cost, handled.unwrap_or(cost.rows), PER_ROW);
    }

    fn check_with(&mut self, what: &str, cost: &Explained, rows: i64, per_row: i64) {
        let bound = FIXED + per_row * rows;
        let line = format!(
            "{what:<72} rows {rows:>6}  buffers {:>6}  bound {bound:>6}",
            cost.buffers
        );
        println!("{line}");
        if cost.buffers > bound {
            self.breaches.push(line.clone());
        }
        self.lines.push(line);
    }

    /// A call that writes a row per job (an enqueue): each row costs its
    /// heap page, a descent of the lane index, the BRIN summary and two
    /// sequence draws, about 8 pages; a plan that reads the lane costs its
    /// pages on top.
    fn check_writes(&mut self, what: &str, cost: &Explained) {
        self.check_with(what, cost, cost.rows, PER_WRITTEN_ROW);
    }

    /// A claim that took `cost.rows` jobs and stepped over the tombstoned
    /// copies among the `read` entries it passed: each copy costs its index
    /// entry, its tombstone probe and the live copy's probe in another
    /// partition, about PER_COPY pages; reading the rest of the lane would
    /// cost every page of it.
    fn check_over_copies(&mut self, what: &str, cost: &Explained, read: i64) {
        let copies = (read - cost.rows).max(0);
        let bound = FIXED + PER_ROW * cost.rows + PER_COPY * copies;
        let line = format!(
            "{what:<72} rows {:>6}  buffers {:>6}  bound {bound:>6} ({copies} tombstoned copies passed)",
            cost.rows, cost.buffers
        );
        println!("{line}");
        if cost.buffers > bound {
            self.breaches.push(line.clone());
        }
        self.lines.push(line);
    }

    fn assert_none(&self) {
        assert!(
            self.breaches.is_empty(),
            "statements read more than their bound (FIXED {FIXED} + PER_ROW {PER_ROW} or PER_WRITTEN_ROW {PER_WRITTEN_ROW} x rows) \
             after ANALYZE over a backlog of {BACKLOG}: a plan regressed\n{}",
            self.breaches.join("\n")
        );
    }
}

async fn analyze(pool: &PgPool) {
    sqlx::query("ANALYZE").execute(pool).await.unwrap();
}

/// A claim call of `limit` from `q`, explained; when `expect_jobs`,
/// retried until it takes something (a claim that meets an unsettled
/// frontier takes nothing: other tests' transactions share the cluster),
/// at most 50 times. A call that took jobs drew a claim batch id (only
/// this session claims in this database).
async fn explain_claim(
    conn: &mut PgConnection,
    q: &str,
    limit: i32,
    expect_jobs: bool,
) -> Explained {
    let sql = format!("SELECT * FROM awa.claim('{q}', {limit}, NULL, NULL, NULL)");
    for _ in 0..50 {
        let before = batch_seq(conn).await;
        let cost = explain(conn, &sql).await;
        if !expect_jobs || batch_seq(conn).await != before {
            return cost;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("a claim of {limit} from {q} took nothing in 50 tries");
}

async fn batch_seq(conn: &mut PgConnection) -> i64 {
    sqlx::query_scalar("SELECT last_value FROM awa.claim_batch_seq")
        .fetch_one(&mut *conn)
        .await
        .unwrap()
}

/// A claimed attempt's token: (job_id, run_lease, claim_slot, batch_id,
/// item).
type Token = (i64, i64, i32, i64, i32);

/// Claim `limit` jobs for real (no EXPLAIN) and return their tokens as SQL
/// array literals for finish: (job_ids, run_leases, claim_slots, batch_ids,
/// items).
async fn claim_tokens(conn: &mut PgConnection, q: &str, limit: i32) -> [String; 5] {
    for _ in 0..50 {
        let rows: Vec<Token> = sqlx::query_as(
            "SELECT job_id, run_lease, claim_slot, batch_id, item
               FROM awa.claim($1, $2, NULL, NULL, NULL) WHERE job_id IS NOT NULL",
        )
        .bind(q)
        .bind(limit)
        .fetch_all(&mut *conn)
        .await
        .unwrap();
        if !rows.is_empty() {
            let arr = |f: &dyn Fn(&Token) -> String| {
                format!(
                    "ARRAY[{}]",
                    rows.iter().map(f).collect::<Vec<_>>().join(",")
                )
            };
            return [
                arr(&|r| r.0.to_string()) + "::bigint[]",
                arr(&|r| r.1.to_string()) + "::bigint[]",
                arr(&|r| r.2.to_string()) + "::int[]",
                arr(&|r| r.3.to_string()) + "::bigint[]",
                arr(&|r| r.4.to_string()) + "::int[]",
            ];
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no claim of {q} took anything in 50 tries");
}

fn heartbeat_sql(t: &[String; 5]) -> String {
    format!(
        "SELECT awa.heartbeat(({})[1], ({})[1], ({})[1], ({})[1], ({})[1], 50::smallint, 'half', NULL)",
        t[0], t[1], t[2], t[3], t[4]
    )
}

/// A call of the SQL producer function with `n` keyless runnable jobs of
/// queue `q` (a SQL literal).
fn enqueue_call(q: &str, n: i64) -> String {
    format!(
        "SELECT * FROM awa.enqueue(array_fill({q}::text, ARRAY[{n}]), array_fill('k'::text, ARRAY[{n}]),
             array_fill('{{}}'::jsonb, ARRAY[{n}]), array_fill(3::smallint, ARRAY[{n}]),
             array_fill(NULL::timestamptz, ARRAY[{n}]), array_fill(NULL::int, ARRAY[{n}]),
             array_fill(NULL::text, ARRAY[{n}]), array_fill(NULL::jsonb, ARRAY[{n}]))"
    )
}

async fn enqueue_sql_on(conn: &mut PgConnection, q: &str, n: i64) {
    sqlx::query(sqlx::AssertSqlSafe(enqueue_call(&format!("'{q}'"), n)))
        .execute(&mut *conn)
        .await
        .unwrap();
}

fn finish_sql(t: &[String; 5], n: usize) -> String {
    format!(
        "SELECT * FROM awa.finish({}, {}, {}, {}, {}, array_fill('complete'::text, ARRAY[{n}]),
                                 array_fill(NULL::interval, ARRAY[{n}]), array_fill(NULL::text, ARRAY[{n}]))",
        t[0], t[1], t[2], t[3], t[4]
    )
}

/// The queue-ring slot holding a queue's oldest waiting entry.
async fn backlog_slot(pool: &PgPool, q: &str) -> i32 {
    sqlx::query_scalar(
        "SELECT e.slot FROM awa.ready_entries e JOIN awa.lane_heads h USING (queue, priority, shard)
          WHERE e.queue = $1 AND e.lane_seq > h.head_seq ORDER BY e.lane_seq LIMIT 1",
    )
    .bind(q)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The head of queue `q`'s one lane (every queue here but `multi` has one).
async fn lane_head(conn: &mut PgConnection, q: &str) -> i64 {
    sqlx::query_scalar("SELECT head_seq FROM awa.lane_heads WHERE queue = $1")
        .bind(q)
        .fetch_one(&mut *conn)
        .await
        .unwrap()
}

/// Every entry of `q`'s lane at positions `(from, to]`, in any slot,
/// tombstoned or not: what a claim that moved the head from `from` to `to`
/// had to read. Relocation (ring_prune moving a backlog out of a slot the
/// ring needs back) leaves a tombstoned old copy behind per move, so a job
/// that waited through several rotations has several entries.
async fn entries_between(conn: &mut PgConnection, q: &str, from: i64, to: i64) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM awa.ready_entries WHERE queue = $1 AND lane_seq > $2 AND lane_seq <= $3",
    )
    .bind(q)
    .bind(from)
    .bind(to)
    .fetch_one(&mut *conn)
    .await
    .unwrap()
}

/// A claim of 128 from `q` after relocations, held to the rows it took
/// plus the tombstoned copies it had to step over.
async fn check_claim_over_copies(conn: &mut PgConnection, b: &mut Bounds, q: &str, what: &str) {
    let _ = explain_claim(conn, q, 2, true).await;
    let from = lane_head(conn, q).await;
    let c = explain_claim(conn, q, 128, true).await;
    let to = lane_head(conn, q).await;
    let read = entries_between(conn, q, from, to).await;
    b.check_over_copies(what, &c, read);
}

#[tokio::test]
async fn hot_path_statements_read_what_they_return_after_analyze() {
    let (_db, pool) = common::setup().await;
    // History is kept, for a day: the slots the backlog moves through stay
    // as the leader would leave them, and prune relocates only what the
    // ring must rotate onto next (never the backlog's slot here), so the
    // relocation below is the test's own, whatever the passes it takes the
    // seal to catch up on a loaded machine.
    sqlx::query("UPDATE awa.substrate_info SET history_retention = interval '1 day'")
        .execute(&pool)
        .await
        .unwrap();
    // One lane alone first, as a
    // queue with one backlog is: the statistics then say every entry of
    // the slot is the lane's, and the planner's estimate for `lane_seq >
    // $head` is a third of the whole slot (other queues in the slot make
    // it smaller and hide the plans that read it).
    common::enqueue_sql(&pool, "big", BACKLOG, 3, "NULL").await;
    // Every tenth job of the backlog cancelled while it waits: tombstones
    // the statistics know about, as a queue whose producers cancel some of
    // what they enqueued has. A claim that probes the tombstones per entry
    // reads a page or two for each it passes; one that joins them whole
    // (a hash anti-join over the slot's tombstones, then a sort) reads
    // every one of them and the whole lane on every call.
    sqlx::query(
        "SELECT count(awa.cancel_job(e.job_id)) FROM awa.ready_entries e
          WHERE e.queue = 'big' AND e.lane_seq % 10 = 0",
    )
    .execute(&pool)
    .await
    .unwrap();
    analyze(&pool).await;

    let mut conn = pool.acquire().await.unwrap().detach();
    // Generic plans from the first call: PL/pgSQL plans a statement for
    // its parameters' values for five calls, then keeps a generic plan
    // unless it looks dearer, and a generic plan estimates `lane_seq >
    // $head` at a third of the lane. That is the plan a worker runs all day;
    // a test that measured the first calls would measure another one.
    sqlx::query("SET plan_cache_mode = force_generic_plan")
        .execute(&mut conn)
        .await
        .unwrap();
    let mut b = Bounds::default();

    // Warm the session: every function below plans its statements on its
    // first call.
    let warm = claim_tokens(&mut conn, "big", 2).await;
    sqlx::query(sqlx::AssertSqlSafe(finish_sql(&warm, 2)))
        .execute(&mut conn)
        .await
        .unwrap();
    let t = claim_tokens(&mut conn, "big", 1).await;
    let _ = explain(&mut conn, &heartbeat_sql(&t)).await;
    enqueue_sql_on(&mut conn, "warm", 2).await;
    let _ = explain(&mut conn, "SELECT awa.deferred_promote(1000)").await;
    let _ = explain(
        &mut conn,
        "SELECT awa.rescue_stale(interval '1 hour', 1000)",
    )
    .await;
    let _ = explain(&mut conn, "SELECT awa.ready_slot_live(0)").await;

    // The claim's fast statement: one lane in the newest two slots.
    let c = explain_claim(&mut conn, "big", 1, true).await;
    b.check("claim 1 from a backlog of 100,000", &c, Some(1));
    let c = explain_claim(&mut conn, "big", 128, true).await;
    b.check("claim 128 from a backlog of 100,000", &c, None);
    // The same lane through ready_take's own one-lane statement (what a
    // limited queue's limit_take takes through; the claim's mirrors it),
    // in a transaction rolled back: ready_take writes no batch.
    let mut took = false;
    for _ in 0..50 {
        sqlx::query("BEGIN").execute(&mut conn).await.unwrap();
        let c = explain_settled(
            &mut conn,
            "SELECT * FROM awa.ready_take('big', 128, NULL, NULL, NULL)",
        )
        .await;
        sqlx::query("ROLLBACK").execute(&mut conn).await.unwrap();
        if c.rows == 128 {
            b.check("ready_take 128 from a backlog of 100,000", &c, None);
            took = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(took, "ready_take of 128 took fewer in 50 tries");

    // Finish: completions of one and of 128 claimed attempts.
    let t = claim_tokens(&mut conn, "big", 1).await;
    let c = explain(&mut conn, &finish_sql(&t, 1)).await;
    b.check("finish 1 (complete)", &c, None);
    let t = claim_tokens(&mut conn, "big", 128).await;
    let c = explain(&mut conn, &finish_sql(&t, 128)).await;
    b.check("finish 128 (complete)", &c, None);

    // A heartbeat of a running attempt (materializes its lease).
    let t = claim_tokens(&mut conn, "big", 1).await;
    let c = explain(&mut conn, &heartbeat_sql(&t)).await;
    b.check("heartbeat 1", &c, Some(1));

    // Enqueue into the lane that holds the backlog: one job, and 1,000.
    for n in [1, 1000] {
        let c = explain(&mut conn, &enqueue_call("'big'", n)).await;
        b.check_writes(&format!("enqueue {n} into the backlog's lane"), &c);
    }

    // What the leader leaves: the ring rotated past the backlog's slot and
    // that slot sealed. The claim moves the lane's bound (low_gen) only
    // once the backlog has left the older slot; until then every claim
    // checks, and the check must be one probe.
    common::rotate_and_seal(&pool).await;
    analyze(&pool).await;
    check_claim_over_copies(
        &mut conn,
        &mut b,
        "big",
        "claim 128, backlog one rotation old, sealed",
    )
    .await;

    // The prune predicate of the slot holding the backlog: live.
    let slot = backlog_slot(&pool, "big").await;
    let c = explain_settled(&mut conn, &format!("SELECT awa.ready_slot_live({slot})")).await;
    b.check("ready_slot_live of the backlog's slot", &c, Some(1));

    // Two more rotations: the backlog is older than the newest two slots
    // and the claim takes the general statement.
    common::rotate_and_seal(&pool).await;
    common::rotate_and_seal(&pool).await;
    analyze(&pool).await;
    check_claim_over_copies(
        &mut conn,
        &mut b,
        "big",
        "claim 128, backlog three rotations old (general statement)",
    )
    .await;

    // Relocation, as the leader's prune does to a backlog in a slot past
    // its retention, 1,000 jobs a pass: each job gets a live copy in the
    // current slot and a tombstoned one where it was. Ten passes: the last
    // one must cost what it moves, not step over the 9,000 copies the
    // earlier ones left (it resumes past them: ready_relocated), and so
    // must the slot's liveness check after them.
    // (`slot` still holds the backlog: relocation so far moved only what
    // the claims above reached.)
    let relocate = format!("SELECT awa.ready_relocate({slot}, 1000)");
    for _ in 0..9 {
        let moved: i32 = sqlx::query_scalar(sqlx::AssertSqlSafe(relocate.clone()))
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(moved, 1000, "relocation out of slot {slot}");
    }
    let c = explain(&mut conn, &relocate).await;
    // Each job moved writes its copy and its tombstone.
    b.check_with(
        "relocate 1,000 after 9,000 moved (tenth pass)",
        &c,
        1000,
        PER_WRITTEN_ROW,
    );
    let live = format!("SELECT awa.ready_slot_live({slot})");
    let c = explain_settled(&mut conn, &live).await;
    b.check("ready_slot_live after 10,000 were relocated", &c, Some(1));
    analyze(&pool).await;
    check_claim_over_copies(
        &mut conn,
        &mut b,
        "big",
        "claim 128 over relocated jobs (two copies each)",
    )
    .await;

    // Rescue with every claimed attempt fresh: nothing to rescue among the
    // open attempts left by the claims above. Settled (explain_settled):
    // a rotation truncates a slot's partitions, which invalidates the
    // plans cached for them, and a replan reads the catalogs (once per
    // rotation, as the leader's first pass after it does).
    let c = explain_settled(
        &mut conn,
        "SELECT awa.rescue_stale(interval '1 hour', 1000)",
    )
    .await;
    b.check("rescue_stale: nothing stale", &c, Some(0));

    // Drain the backlog (claims only: the entries stay in their slots,
    // behind the lane head, as a drained queue's do until the slot is
    // retired), then poll: nothing past the head, 100,000 entries before it.
    let mut frontier_rounds = 0;
    loop {
        let got: i64 = sqlx::query_scalar(
            "SELECT count(job_id) FROM awa.claim('big', 1024, NULL, NULL, NULL)",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        if got == 0 {
            let left: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM awa.ready_entries e JOIN awa.lane_heads h USING (queue, priority, shard)
                  WHERE e.queue = 'big' AND e.lane_seq > h.head_seq",
            )
            .fetch_one(&mut conn)
            .await
            .unwrap();
            if left == 0 {
                break;
            }
            frontier_rounds += 1;
            assert!(frontier_rounds < 500, "the drain did not finish");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    analyze(&pool).await;
    let sql = "SELECT * FROM awa.claim('big', 128, NULL, NULL, NULL)";
    let c = explain_settled(&mut conn, sql).await;
    b.check(
        "claim 128 from a drained lane (100,000 entries behind the head)",
        &c,
        Some(0),
    );
    let live = format!("SELECT awa.ready_slot_live({slot})");
    let c = explain_settled(&mut conn, &live).await;
    b.check("ready_slot_live of a drained slot", &c, Some(0));

    // Other queues: a backlog scheduled for tomorrow (promotion finds
    // nothing due) and four lanes (priorities) of one queue (the claim's
    // general statement over every slot).
    common::enqueue_sql(&pool, "later", BACKLOG, 3, "now() + interval '1 day'").await;
    for p in 1..=4 {
        common::enqueue_sql(&pool, "multi", BACKLOG / 4, p, "NULL").await;
    }
    analyze(&pool).await;
    let _ = explain_claim(&mut conn, "multi", 2, true).await;
    let _ = explain(&mut conn, "SELECT awa.deferred_promote(1000)").await;
    // Four lanes: the general statement over every slot.
    let c = explain_claim(&mut conn, "multi", 128, true).await;
    b.check(
        "claim 128 from four lanes of 25,000 (general statement)",
        &c,
        None,
    );

    // Nothing due among 100,000 scheduled jobs.
    let c = explain_settled(&mut conn, "SELECT awa.deferred_promote(1000)").await;
    b.check("promote: none due of 100,000 scheduled", &c, Some(0));

    conn.close().await.unwrap();
    b.assert_none();
}

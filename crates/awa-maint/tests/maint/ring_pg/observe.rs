//! What the PostgreSQL side shows, compared with the model after every step.

use super::Pg;
use super::convert::*;
use super::ring_model::{Model, Ring, State};
use awa_history::{HistoryPlane, PgHistoryPlane};
use sqlx::{PgConnection, Row};
use std::collections::BTreeMap;

impl Pg {
    /// Compare everything observable with the model, then check the model.
    pub(super) async fn observe(&mut self, m: &Model) -> Result<(), String> {
        let mut conn = self.pool.acquire().await.map_err(err)?;
        same("jobs view", m.view(), read_view(&mut conn).await?)?;
        if let Some((tx, first)) = &mut self.snapshot {
            let now = read_view(tx).await?;
            same(
                "the open snapshot's view (then vs now)",
                first.clone(),
                now.clone(),
            )?;
            same(
                "the open snapshot's view",
                m.snapshot_view().unwrap_or_default(),
                now,
            )?;
        }
        let rows = sqlx::query(
            "SELECT DISTINCT ON (ring) ring, slot FROM prop.ring_ledger ORDER BY ring, generation DESC",
        )
        .fetch_all(&mut *conn)
        .await
        .map_err(err)?;
        let current: BTreeMap<String, i32> = rows
            .iter()
            .map(|r| (r.get("ring"), r.get("slot")))
            .collect();
        let retired: BTreeMap<String, i32> =
            sqlx::query("SELECT ring, slot FROM prop.ring_retirements")
                .fetch_all(&mut *conn)
                .await
                .map_err(err)?
                .iter()
                .map(|r| (r.get("ring"), r.get("slot")))
                .collect();
        for ring in Ring::ALL {
            same(
                &format!("current {} slot", ring.as_str()),
                Some(m.current(ring) as i32),
                current.get(ring.as_str()).copied(),
            )?;
            same(
                &format!("retired {} slot", ring.as_str()),
                m.retired(ring).map(|s| s as i32),
                retired.get(ring.as_str()).copied(),
            )?;
        }
        let slot_rows: BTreeMap<(Ring, usize), usize> = sqlx::query(
            "SELECT ring, slot, count(*) AS n FROM (
                 SELECT 'queue' AS ring, slot FROM prop.ready_entries
                 UNION ALL SELECT 'queue', slot FROM prop.ready_tombstones
                 UNION ALL SELECT 'queue', slot FROM prop.done_entries
                 UNION ALL SELECT 'queue', slot FROM prop.done_batches
                 UNION ALL SELECT 'queue', slot FROM prop.count_deltas
                 UNION ALL SELECT 'claim', slot FROM prop.claim_batches
                 UNION ALL SELECT 'claim', slot FROM prop.claim_closures
                 UNION ALL SELECT 'lease', slot FROM prop.leases) r
             GROUP BY ring, slot",
        )
        .fetch_all(&mut *conn)
        .await
        .map_err(err)?
        .iter()
        .map(|r| {
            let ring = match r.get::<String, _>("ring").as_str() {
                "queue" => Ring::Queue,
                "claim" => Ring::Claim,
                _ => Ring::Lease,
            };
            ((ring, slot(r.get("slot"))), r.get::<i64, _>("n") as usize)
        })
        .collect();
        same("rows per ring slot", m.slot_rows(), slot_rows)?;
        self.observe_batches(m, &mut conn).await?;
        let stats = PgHistoryPlane::new(schema())
            .queue_stats(&mut conn, None)
            .await
            .map_err(err)?;
        let totals: BTreeMap<State, i64> = stats
            .get(QUEUE)
            .into_iter()
            .flatten()
            .filter_map(|(s, n)| Some((State::parse(s)?, *n)))
            .filter(|(s, n)| s.is_terminal() && *n != 0)
            .collect();
        same("exact terminal totals", m.totals(), totals)?;
        m.check()?;
        m.check_bounded()
    }

    /// The batch evidence itself: open items, links, done batches, parked
    /// attempts (PostgreSQL's batch ids translated to the model's).
    async fn observe_batches(&self, m: &Model, conn: &mut PgConnection) -> Result<(), String> {
        let batch = |pg: i64| {
            self.batches
                .get(&pg)
                .copied()
                .ok_or_else(|| format!("PostgreSQL has a batch {pg} no claim returned"))
        };
        let mut open = Vec::new();
        for r in sqlx::query(
            "SELECT b.slot, b.batch_id, i AS item, b.job_ids[i] AS job_id,
                    b.run_leases[i] AS run_lease
               FROM prop.claim_batches b
              CROSS JOIN LATERAL generate_subscripts(b.job_ids, 1) AS i
              WHERE NOT EXISTS (SELECT 1 FROM prop.claim_closures c
                                 WHERE c.slot = b.slot AND c.batch_id = b.batch_id
                                   AND i = ANY (c.items))",
        )
        .fetch_all(&mut *conn)
        .await
        .map_err(err)?
        {
            open.push((
                slot(r.get("slot")),
                batch(r.get("batch_id"))?,
                r.get::<i32, _>("item") as u32,
                r.get::<i64, _>("job_id"),
                r.get::<i64, _>("run_lease"),
            ));
        }
        open.sort();
        same("open batch items", m.open_items(), open)?;
        let mut links = Vec::new();
        for r in sqlx::query(
            "SELECT slot, batch_id, link::int AS link, items::int[] AS items FROM prop.claim_closures",
        )
        .fetch_all(&mut *conn)
        .await
        .map_err(err)?
        {
            let mut items: Vec<u32> = r
                .get::<Vec<i32>, _>("items")
                .into_iter()
                .map(|i| i as u32)
                .collect();
            items.sort();
            links.push((
                slot(r.get("slot")),
                batch(r.get("batch_id"))?,
                r.get::<i32, _>("link") as u32,
                items,
            ));
        }
        links.sort();
        same("closure links", m.links(), links)?;
        let mut done: Vec<(usize, Vec<i64>)> =
            sqlx::query("SELECT slot, job_ids::bigint[] AS job_ids FROM prop.done_batches")
                .fetch_all(&mut *conn)
                .await
                .map_err(err)?
                .iter()
                .map(|r| {
                    let mut jobs: Vec<i64> = r.get("job_ids");
                    jobs.sort();
                    (slot(r.get("slot")), jobs)
                })
                .collect();
        done.sort();
        same("done batches", m.done_batches(), done)?;
        let mut parked: Vec<(i64, i64)> =
            sqlx::query("SELECT job_id, run_lease FROM prop.parked_attempts")
                .fetch_all(&mut *conn)
                .await
                .map_err(err)?
                .iter()
                .map(|r| (r.get("job_id"), r.get("run_lease")))
                .collect();
        parked.sort();
        same("parked attempts", m.parked_attempts(), parked)?;
        let mut failures: Vec<(i64, i64, String)> =
            sqlx::query("SELECT job_id, run_lease, state FROM prop.failure_entries")
                .fetch_all(&mut *conn)
                .await
                .map_err(err)?
                .iter()
                .map(|r| (r.get("job_id"), r.get("run_lease"), r.get("state")))
                .collect();
        failures.sort();
        let want: Vec<(i64, i64, String)> = m
            .failures()
            .into_iter()
            .map(|(j, l, s)| (j, l, s.to_string()))
            .collect();
        same("kept failures", want, failures)
    }
}

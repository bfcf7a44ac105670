-- {schema}.limit_record(queue, admitted_at, claim_slot, batch_id, taken):
-- what a limited claim's jobs hold (docs/adr/0015). Called only by
-- {schema}.claim, after it wrote batch (claim_slot, batch_id) for the jobs
-- of `taken` (limit_take's rows, item i = the i-th job), in the same
-- transaction and under limit_take's lock.
--
-- Concurrency: one limit_holds row per job and concurrency limit it
-- counts against (its new run lease and batch item). Rate: per rate limit
-- and partition, one entry (admitted_at, jobs) appended to limit_rates,
-- the entries older than the limit's period dropped in the same write.
--
-- admitted_at must be a finite time from 1970-01-01 00:00:00+00 up to (not
-- including) 10000-01-01 00:00:00+00 (awa_core::time::WRITABLE), else
-- SQLSTATE 22023 before anything is written (the runtime role may call
-- this by hand).
CREATE OR REPLACE FUNCTION {schema}.limit_record(
    p_queue       text,
    p_admitted_at timestamptz,
    p_claim_slot  integer,
    p_batch       bigint,
    p_taken       jsonb
) RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
BEGIN
    IF p_admitted_at IS NULL OR p_admitted_at < '1970-01-01 00:00:00+00'
       OR p_admitted_at >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'limit_record: admitted_at % is not a time from 1970 up to year 9999',
                        coalesce(p_admitted_at::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'claim passes now(); send a finite time from 1970-01-01 up to 9999-12-31 UTC.';
    END IF;
    INSERT INTO {schema}.limit_holds (queue, kind, part, job_id, run_lease, claim_slot, batch_id, item)
    SELECT p_queue, l.kind, coalesce(j.args #>> l.concurrency_by, ''), j.job_id, j.run_lease + 1,
           p_claim_slot, p_batch, j.item
      FROM (SELECT (x.r->>'job_id')::bigint AS job_id, (x.r->>'run_lease')::bigint AS run_lease,
                   x.r->>'kind' AS kind, x.r->'args' AS args,
                   row_number() OVER (ORDER BY x.n)::integer AS item
              FROM jsonb_array_elements(p_taken) WITH ORDINALITY AS x(r, n)
             WHERE x.r->>'job_id' IS NOT NULL) j
      JOIN awa.queue_limits l
        ON l.queue = p_queue AND l.kind IN ('', j.kind) AND l.concurrency_max IS NOT NULL;

    INSERT INTO {schema}.limit_rates AS r (queue, kind, part, at, n)
    SELECT p_queue, g.kind, g.part, ARRAY[p_admitted_at], ARRAY[g.jobs]
      FROM (SELECT l.kind, coalesce(x.r->'args' #>> l.rate_by, '') AS part, count(*)::integer AS jobs
              FROM jsonb_array_elements(p_taken) AS x(r)
              JOIN awa.queue_limits l
                ON l.queue = p_queue AND l.kind IN ('', x.r->>'kind') AND l.rate_max IS NOT NULL
             WHERE x.r->>'job_id' IS NOT NULL
             GROUP BY 1, 2) g
    ON CONFLICT (queue, kind, part) DO UPDATE
       SET at = ARRAY(SELECT e.at FROM unnest(r.at, r.n) WITH ORDINALITY AS e(at, c, o)
                       WHERE e.at > p_admitted_at - (SELECT l.rate_period FROM awa.queue_limits l
                                                      WHERE l.queue = r.queue AND l.kind = r.kind)
                       ORDER BY e.o) || excluded.at,
           n  = ARRAY(SELECT e.c FROM unnest(r.at, r.n) WITH ORDINALITY AS e(at, c, o)
                       WHERE e.at > p_admitted_at - (SELECT l.rate_period FROM awa.queue_limits l
                                                      WHERE l.queue = r.queue AND l.kind = r.kind)
                       ORDER BY e.o) || excluded.n;
END
$fn$;

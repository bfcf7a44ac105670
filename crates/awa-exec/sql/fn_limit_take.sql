-- {schema}.limit_take(queue, limit, cand_seq, cand_xid, aging): the take of
-- a claim of a queue that has a row in awa.queue_limits (docs/adr/0015):
-- ready_take's rows, cut to the longest prefix every limit admits. Called
-- only by {schema}.claim, which then writes the batch and, through
-- limit_record, what the admitted jobs hold.
--
-- Returns admitted_at, the instant the claim admits its jobs at (it
-- becomes the batch's claimed_at, the attempts' start), and taken, the
-- ready_take rows as a JSON array in their order (NULL: nothing is
-- admitted now; the caller returns its old frontier candidate).
--
-- Serialization: one limited claim of a queue at a time, on every
-- substrate (transaction advisory lock (6387556, hashtext(queue)), taken
-- first and held to commit); admitted_at is read under the lock, so the
-- admission instants of a queue increase in commit order (on a clock that
-- does not step back) and each claim sees every earlier one's holds and
-- rate entries (each statement of this READ COMMITTED function takes a
-- new snapshot).
--
-- The bounds, per limit row L and partition P (the text at L's path into
-- the args; '' without a path or field):
--   rate: the entries of limit_rates(L, P) later than admitted_at -
--     rate_period, plus this claim's jobs of (L, P), are at most rate_max.
--     So every half-open window of rate_period holds at most rate_max
--     admissions: take the window's latest admission t; every admission
--     in the window is in (t - period, t] and was counted when t was.
--     (Sliding, not fixed, windows.)
--   concurrency: the open attempts of (L, P) in limit_holds, plus this
--     claim's, are at most concurrency_max. Holds whose attempt is closed
--     are deleted first (finished, rescued after its worker died,
--     cancelled); a parked attempt is open.
-- A job counts against the queue's row (kind '') and its kind's row.
--
-- Order: what is taken is a prefix of ready_take's order, so lane heads
-- move past exactly it: the take runs in a subtransaction; when a job in
-- it is refused, the take is rolled back and taken again with the limit
-- cut to the jobs before it (a prefix of a take is what a smaller take
-- returns), until nothing is refused. A refused job therefore holds back
-- the jobs behind it in its lane (a partition at its limit holds back the
-- other partitions' jobs behind its own: head-of-line). Limits on the
-- whole queue with no partition are applied to the count before the take.
--
-- Bounds (SQLSTATE 22023): limit 1 to 1024 (awa_core::bounds::CLAIM_BATCH).
CREATE OR REPLACE FUNCTION {schema}.limit_take(
    p_queue    text,
    p_limit    integer,
    p_cand_seq bigint,
    p_cand_xid xid8,
    p_aging    interval,
    OUT admitted_at timestamptz,
    OUT taken       jsonb
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_limit integer;
    v_bad   bigint;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'claim limit must be 1 to 1024 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim at most a claim batch (awa_core::bounds::CLAIM_BATCH) per call.';
    END IF;
    PERFORM pg_advisory_xact_lock(6387556, hashtext(p_queue));

    -- Release the shares of closed attempts, and of limits no longer set.
    DELETE FROM {schema}.limit_holds h
     WHERE h.queue = p_queue
       AND (NOT EXISTS (SELECT 1 FROM awa.queue_limits l
                         WHERE l.queue = h.queue AND l.kind = h.kind AND l.concurrency_max IS NOT NULL)
            OR (NOT EXISTS (SELECT 1 FROM {schema}.parked_attempts p
                             WHERE p.job_id = h.job_id AND p.run_lease = h.run_lease)
                AND NOT (EXISTS (SELECT 1 FROM {schema}.claim_batches b
                                  WHERE b.slot = h.claim_slot AND b.batch_id = h.batch_id)
                         AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                          WHERE c.slot = h.claim_slot AND c.batch_id = h.batch_id
                                            AND h.item = ANY (c.items)))));
    -- Read after the statement above, so every attempt it found closed
    -- was closed by a finish that began before this instant (the
    -- evidence: a closure's closed_at is its finish's now()).
    admitted_at := clock_timestamp();

    -- The whole queue's unpartitioned limits bound the count up front.
    SELECT greatest(least(p_limit, min(a.allow)), 0)::integer INTO v_limit
      FROM (SELECT l.rate_max - coalesce((
                     SELECT sum(x.c) FROM {schema}.limit_rates r
                      CROSS JOIN LATERAL unnest(r.at, r.n) AS x(at, c)
                      WHERE r.queue = p_queue AND r.kind = '' AND r.part = ''
                        AND x.at > admitted_at - l.rate_period), 0) AS allow
              FROM awa.queue_limits l
             WHERE l.queue = p_queue AND l.kind = '' AND l.rate_max IS NOT NULL AND l.rate_by IS NULL
            UNION ALL
            SELECT l.concurrency_max - (
                     SELECT count(*) FROM {schema}.limit_holds h
                      WHERE h.queue = p_queue AND h.kind = '' AND h.part = '')
              FROM awa.queue_limits l
             WHERE l.queue = p_queue AND l.kind = '' AND l.concurrency_max IS NOT NULL
               AND l.concurrency_by IS NULL) a;

    LOOP
        IF v_limit = 0 THEN
            taken := NULL;
            RETURN;
        END IF;
        BEGIN
            SELECT jsonb_agg(to_jsonb(r) - 'ordinality' ORDER BY r.ordinality) INTO taken
              FROM {schema}.ready_take(p_queue, v_limit, p_cand_seq, p_cand_xid, p_aging)
                   WITH ORDINALITY r;
            -- The first job some limit refuses (its 1-based place in taken).
            WITH j AS (
                SELECT x.n, x.r->>'kind' AS kind, x.r->'args' AS args
                  FROM jsonb_array_elements(taken) WITH ORDINALITY AS x(r, n)
                 WHERE x.r->>'job_id' IS NOT NULL
            ),
            s AS (
                SELECT j.n, l.kind AS lkind, true AS rate,
                       coalesce(j.args #>> l.rate_by, '') AS part, l.rate_max AS cap, l.rate_period AS period
                  FROM j JOIN awa.queue_limits l
                    ON l.queue = p_queue AND l.kind IN ('', j.kind) AND l.rate_max IS NOT NULL
                UNION ALL
                SELECT j.n, l.kind, false,
                       coalesce(j.args #>> l.concurrency_by, ''), l.concurrency_max, NULL
                  FROM j JOIN awa.queue_limits l
                    ON l.queue = p_queue AND l.kind IN ('', j.kind) AND l.concurrency_max IS NOT NULL
            ),
            u AS (
                SELECT s.n, s.cap,
                       row_number() OVER (PARTITION BY s.lkind, s.rate, s.part ORDER BY s.n) AS k,
                       CASE WHEN s.rate THEN
                              (SELECT coalesce(sum(x.c), 0) FROM {schema}.limit_rates r
                                CROSS JOIN LATERAL unnest(r.at, r.n) AS x(at, c)
                                WHERE r.queue = p_queue AND r.kind = s.lkind AND r.part = s.part
                                  AND x.at > admitted_at - s.period)
                            ELSE
                              (SELECT count(*) FROM {schema}.limit_holds h
                                WHERE h.queue = p_queue AND h.kind = s.lkind AND h.part = s.part)
                       END AS used
                  FROM s
            )
            SELECT min(u.n) INTO v_bad FROM u WHERE u.used + u.k > u.cap;
            IF v_bad IS NULL THEN
                RETURN;
            END IF;
            RAISE EXCEPTION 'a limit refused job % of the take', v_bad USING ERRCODE = 'AWL01';
        EXCEPTION WHEN SQLSTATE 'AWL01' THEN
            -- The take is undone (heads, locks); take the admitted prefix.
            v_limit := v_bad - 1;
        END;
    END LOOP;
END
$fn$;

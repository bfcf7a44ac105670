-- ReadyPlane::enqueue, routed: {schema}.enqueue sends the jobs to the
-- substrate that receives writes now (fn_enqueue_routed.sql). Parallel
-- arrays ($9, the key specs, is NULL when no job has one); see
-- {schema}.enqueue_local for the rest.
SELECT job_id, inserted, scheduled
  FROM {schema}.enqueue($1::text[], $2::text[], $3::jsonb[], $4::smallint[],
                        $5::timestamptz[], $6::integer[], $7::text[], $8::jsonb[],
                        $9::jsonb[])

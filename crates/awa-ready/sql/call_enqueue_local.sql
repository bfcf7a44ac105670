-- ReadyPlane::enqueue pinned to {schema}: exactly this substrate, whatever
-- the routing (see {schema}.enqueue_local). Parallel arrays ($9, the key
-- specs, is NULL when no job has one).
SELECT job_id, inserted, scheduled
  FROM {schema}.enqueue_local($1::text[], $2::text[], $3::jsonb[], $4::smallint[],
                              $5::timestamptz[], $6::integer[], $7::text[], $8::jsonb[],
                              $9::jsonb[])

-- ExecPlane::finish. Delays travel as seconds (NULL: default backoff).
SELECT job_id, run_lease, accepted, next_state
  FROM {schema}.finish($1::bigint[], $2::bigint[], $3::integer[], $4::bigint[], $5::integer[], $6::text[],
                       ARRAY(SELECT make_interval(secs => d) FROM unnest($7::float8[]) WITH ORDINALITY AS u(d, ord) ORDER BY ord),
                       $8::text[])

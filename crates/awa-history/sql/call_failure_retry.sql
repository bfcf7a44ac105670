-- HistoryPlane::retry: $1 the job ids to put back (see fn_failure_retry.sql).
SELECT job_id, unique_key, held_by FROM {schema}.failure_retry($1::bigint[])

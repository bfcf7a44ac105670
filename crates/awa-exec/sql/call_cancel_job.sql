-- ExecPlane::cancel_job.
SELECT {schema}.cancel_job($1)

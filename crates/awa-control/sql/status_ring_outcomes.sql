-- Last rotate and prune outcome per ring.
SELECT ring, task, outcome, detail, at FROM {schema}.ring_outcomes ORDER BY ring, task

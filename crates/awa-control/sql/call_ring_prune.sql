-- Rings::prune.
SELECT outcome, slot, detail FROM {schema}.ring_prune($1, $2, $3)

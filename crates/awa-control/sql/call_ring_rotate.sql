-- Rings::rotate.
SELECT outcome, from_slot, to_slot, generation FROM {schema}.ring_rotate($1, $2)

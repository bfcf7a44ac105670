-- The current slot of each ring: its newest ledger generation.
SELECT DISTINCT ON (ring) ring, generation, slot, rotated_at
  FROM {schema}.ring_ledger
 ORDER BY ring, generation DESC

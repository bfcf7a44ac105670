-- HistoryPlane::horizon: how far terminal history has been reclaimed (one
-- row, or none when nothing was ever retired). See history_retire_slot.
SELECT pruned_through_job_id, pruned_at FROM {schema}.history_horizon

-- Baseline, scenario pinned: the statement the pinning session runs inside
-- its REPEATABLE READ transaction, so its snapshot stays the oldest in the
-- database for the whole run. Models the long report or forgotten session
-- that keeps every dead row version alive; ours reads
-- awa.terminal_jobs the same way.
SELECT count(*) FROM bench_baseline.jobs

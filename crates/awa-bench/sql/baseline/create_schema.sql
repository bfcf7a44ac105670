-- Baseline (cargo xtask bench, scenario `baseline`): the schema the plain
-- jobs table lives in. The baseline models what a user writes instead of
-- adopting a queue: one jobs table, claimed with FOR UPDATE SKIP LOCKED.
-- It gets a fresh database of its own per run, like each of our runs, so
-- the two never share tables, statistics or dead tuples.
CREATE SCHEMA IF NOT EXISTS bench_baseline

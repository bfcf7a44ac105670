-- Plain insert (cargo xtask bench, scenario `cost`): the schema of the
-- reference table. The reference is what one job costs PostgreSQL when it
-- is only written and nothing ever runs it: the floor under any queue.
-- It gets a fresh database of its own per run, like each of ours.
CREATE SCHEMA IF NOT EXISTS bench_plain

-- PgExecPlane::advance_claim_floor: the leader's health task, before it
-- measures (fn_claim_floor_advance.sql).
SELECT {schema}.claim_floor_advance()

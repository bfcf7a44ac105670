-- substrate::grant_runtime_role.
SELECT awa.grant_runtime_role($1, $2)

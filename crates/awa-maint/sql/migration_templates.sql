-- The runtime function templates as stored, for `cargo xtask migration
-- draft`.
SELECT name, ord, body FROM awa.substrate_functions ORDER BY ord

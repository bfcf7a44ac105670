//! A fresh install of the current sources: every plane's `.sql` files
//! composed in install order. This is what an empty database gets, and the
//! reference the numbered steps must reach (`tests/maint/upgrade.rs`).

/// The control objects, every plane's installer, the runtime function
/// templates, the substrate helper and the default substrate in `awa`.
pub(crate) fn sql() -> String {
    let parts = [
        awa_control::CONTROL_SCHEMA_SQL,
        awa_control::TRANSITION_SQL,
        awa_control::INSTALL_SQL,
        awa_ready::INSTALL_SQL,
        awa_deferred::INSTALL_SQL,
        awa_exec::INSTALL_SQL,
        awa_history::INSTALL_SQL,
        awa_dlq::INSTALL_SQL,
        include_str!("../../sql/install_queue_storage_substrate.sql"),
        include_str!("../../sql/grant_runtime_role.sql"),
    ];
    let mut sql = parts.join("\n\n");
    sql.push_str(&function_templates());
    sql.push_str(include_str!("../../sql/install_default_substrate.sql"));
    sql
}

/// Every plane's runtime functions, in install order.
fn all_functions() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    awa_ready::FUNCTIONS
        .iter()
        .chain(awa_deferred::FUNCTIONS)
        .chain(awa_exec::FUNCTIONS)
        .chain(awa_dlq::FUNCTIONS)
        .chain(awa_history::FUNCTIONS)
        .chain(awa_control::FUNCTIONS)
}

/// Statements storing the runtime function templates for the installer.
fn function_templates() -> String {
    const QUOTE: &str = "$awa_template$";
    let mut out = String::from("\n-- Runtime function templates, instantiated per substrate.\n");
    for (ord, (name, body)) in all_functions().enumerate() {
        assert!(
            !body.contains(QUOTE),
            "function template {name} must not contain {QUOTE}"
        );
        out.push_str(&format!(
            "INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('{name}', {ord}, {QUOTE}{body}{QUOTE})\n\
             ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;\n"
        ));
    }
    out.push('\n');
    out
}

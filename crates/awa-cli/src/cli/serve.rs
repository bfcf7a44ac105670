//! `awa serve`

use clap::Args;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. The default is loopback only; to reach it from
    /// elsewhere put it behind a proxy, or listen on another address with
    /// AWA_ADMIN_TOKEN set.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8088")]
    pub listen: std::net::SocketAddr,
    /// Require the token (AWA_ADMIN_TOKEN) for reads too, not only actions.
    #[arg(long)]
    pub require_token_for_reads: bool,
    /// Alert when a snapshot has held reclamation back longer than this
    /// (e.g. 30s, 5m, 1h).
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub pinned_alert_after: String,
}

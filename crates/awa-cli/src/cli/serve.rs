//! `awa serve`

use clap::Args;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. The default is loopback only; to reach it from
    /// elsewhere put it behind a proxy (see --allowed-host), or listen on
    /// another address with AWA_ADMIN_TOKEN set and
    /// --require-token-for-reads (refused otherwise).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8088")]
    pub listen: std::net::SocketAddr,
    /// Require the token (AWA_ADMIN_TOKEN) for reads too, not only actions.
    #[arg(long)]
    pub require_token_for_reads: bool,
    /// Also answer requests whose Host header names HOST (NAME or
    /// NAME:PORT, e.g. a proxy's public name); repeat for more. Without
    /// it only localhost, loopback addresses and the --listen address are
    /// answered (other hosts get 421), which stops DNS rebinding.
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub allowed_hosts: Vec<String>,
    /// Alert when a snapshot has held reclamation back longer than this
    /// (e.g. 30s, 5m, 1h).
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub pinned_alert_after: String,
}

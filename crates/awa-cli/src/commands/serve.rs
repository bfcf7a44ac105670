//! `awa serve`: the admin API, the dashboard and `/metrics`
//! (`awa_admin`), on the substrate the other commands use.
//!
//! The token is read from AWA_ADMIN_TOKEN only (a flag would show in the
//! process list) and never printed; without it the server is read-only and
//! says so.

use crate::cli::{Cli, ServeArgs};
use crate::{db, error::CliError, input};
use awa_admin::{AdminConfig, AllowedHosts, AppState, Token};

/// Connections the server may hold: reads are short, one per request.
const POOL: u32 = 8;

pub async fn run(cli: &Cli, args: &ServeArgs) -> Result<(), CliError> {
    let pinned_alert = input::duration("--pinned-alert-after", &args.pinned_alert_after)?;
    let token = match std::env::var("AWA_ADMIN_TOKEN") {
        Ok(t) if !t.is_empty() => Some(Token::new(&t).map_err(|e| CliError::Usage(e.to_string()))?),
        _ => None,
    };
    if args.require_token_for_reads && token.is_none() {
        return Err(CliError::Usage(
            "--require-token-for-reads needs AWA_ADMIN_TOKEN to be set".into(),
        ));
    }
    // Checked before connecting: a refused server writes nothing.
    let mut config = AdminConfig::new(awa_core::SchemaName::default_schema());
    config.token = token;
    config.token_for_reads = args.require_token_for_reads;
    config.pinned_alert = pinned_alert;
    config.allowed_hosts = allowed_hosts(args.listen, &args.allowed_hosts, "--allowed-host")?;
    awa_admin::origin::check_listen(args.listen, &config)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let url = db::require_url(&cli.database_url)?;
    let pool = db::pool_migrated(url, POOL).await?;
    // The pinned substrate, or the one the routing writes to now (the
    // server does not yet follow a transition while it runs).
    config.schema = {
        let mut conn = pool.acquire().await?;
        db::routing(cli, &mut conn).await?.write().clone()
    };
    let metrics =
        awa_admin::metrics::Metrics::install().map_err(|e| CliError::Refused(e.to_string()))?;
    let listener = awa_admin::bind(args.listen).await.map_err(|e| {
        CliError::Refused(format!(
            "cannot listen on {}: {e} (is another server using it? pick one with --listen)",
            args.listen
        ))
    })?;
    let addr = listener.local_addr().unwrap_or(args.listen);
    // Port 0 binds a free port: the address the server answers to is the
    // one it got.
    config.allowed_hosts = allowed_hosts(addr, &args.allowed_hosts, "--allowed-host")?;
    let mode = match (&config.token, config.token_for_reads) {
        (None, _) => {
            "read-only: AWA_ADMIN_TOKEN is not set, so actions (cancel, retry, purge, pause) are refused"
        }
        (Some(_), false) => "actions need the AWA_ADMIN_TOKEN bearer token; reads are open",
        (Some(_), true) => "reads and actions need the AWA_ADMIN_TOKEN bearer token",
    };
    eprintln!(
        "awa serve: http://{addr}/ on schema {} ({mode})",
        config.schema
    );
    let state = AppState::new(pool, config, Some(metrics.clone()));
    let served = awa_admin::serve(listener, state, awa_maint::shutdown_signal()).await;
    metrics.shutdown();
    served.map_err(|e| CliError::Refused(format!("the admin server stopped: {e}")))
}

/// `awa worker run --metrics-addr ADDR`: this process's metrics at
/// `http://ADDR/metrics`, served until the process ends, to requests
/// naming loopback, ADDR or one of `allowed` (the origin rule of `awa
/// serve`; metrics carry no job data, so any address may be listened on).
pub async fn metrics_endpoint(
    addr: std::net::SocketAddr,
    allowed: &[String],
) -> Result<awa_admin::metrics::Metrics, CliError> {
    let flag = "--metrics-allowed-host";
    allowed_hosts(addr, allowed, flag)?;
    let metrics =
        awa_admin::metrics::Metrics::install().map_err(|e| CliError::Refused(e.to_string()))?;
    let listener = awa_admin::bind(addr).await.map_err(|e| {
        CliError::Refused(format!("cannot listen on {addr} for --metrics-addr: {e}"))
    })?;
    let bound = listener.local_addr().unwrap_or(addr);
    eprintln!("awa worker: metrics at http://{bound}/metrics");
    tokio::spawn(awa_admin::metrics::serve_worker(
        listener,
        metrics.clone(),
        allowed_hosts(bound, allowed, flag)?,
    ));
    Ok(metrics)
}

/// The hosts a server listening on `at` answers to: loopback, `at`, and
/// each of `extra` (given with `flag`).
fn allowed_hosts(
    at: std::net::SocketAddr,
    extra: &[String],
    flag: &str,
) -> Result<AllowedHosts, CliError> {
    let mut hosts = AllowedHosts::for_listen(at);
    for host in extra {
        hosts
            .allow(host)
            .map_err(|e| CliError::Usage(e.to_string().replace("--allowed-host", flag)))?;
    }
    Ok(hosts)
}

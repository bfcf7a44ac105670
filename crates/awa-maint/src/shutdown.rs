//! Waiting for the operator (or a supervisor) to ask us to stop: the one
//! wait every long-running Awa process shares (`awa worker run`, `awa
//! serve`, `awa maint run`, and applications through `awa::shutdown_signal`).

/// Resolves on Ctrl-C or, on Unix, SIGTERM. When neither can be watched it
/// says so and never resolves: the default signal actions still end the
/// process, rather than a shutdown starting at once.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
                return;
            }
            Err(err) => tracing::warn!(error = %err, "cannot watch SIGTERM; only Ctrl-C stops"),
        }
    }
    if let Err(err) = tokio::signal::ctrl_c().await {
        // The default signal actions still end the process; unfinished
        // attempts are then rescued by maintenance, not lost.
        tracing::warn!(error = %err, "cannot watch Ctrl-C; stop with a signal");
        std::future::pending::<()>().await;
    }
}

/// Resolves once `stop` says true, or its sender is gone. Waits for the
/// value, not for a change: a change the caller (or an earlier wait of the
/// same receiver) already saw still counts. A maintenance candidate that
/// waited for a change it had consumed held a stopping process for its
/// whole retry interval.
pub(crate) async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

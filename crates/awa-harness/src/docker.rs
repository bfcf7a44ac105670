//! The last-resort server: the official Postgres image via testcontainers.
//!
//! The container is driven from a thread with its own runtime because the
//! server outlives the test (and runtime) that happened to start it, and the
//! Docker client's connections belong to the runtime that made them.

#[cfg(feature = "docker")]
mod imp {
    use std::thread::JoinHandle;

    use testcontainers_modules::postgres::Postgres;
    use testcontainers_modules::testcontainers::ImageExt as _;
    use testcontainers_modules::testcontainers::core::IntoContainerPort as _;
    use testcontainers_modules::testcontainers::runners::AsyncRunner as _;

    const IMAGE_TAG: &str = "17-alpine";

    pub(crate) struct DockerPg {
        pub(crate) url: String,
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<JoinHandle<()>>,
    }

    pub(crate) async fn start(settings: &[(String, String)]) -> Result<Option<DockerPg>, String> {
        let mut args = Vec::with_capacity(settings.len() * 2);
        for (name, value) in settings {
            args.push("-c".to_owned());
            args.push(format!("{name}={value}"));
        }
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<Result<String, String>>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("awa-pg-docker".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("cannot build a runtime: {e}")));
                        return;
                    }
                };
                rt.block_on(async move {
                    // with_fsync_enabled only stops the module from adding its
                    // own `-c fsync=off`; our settings decide.
                    let started = Postgres::default()
                        .with_fsync_enabled()
                        .with_cmd(args)
                        .with_tag(IMAGE_TAG)
                        .start()
                        .await;
                    let container = match started {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let address = async {
                        let host = container.get_host().await?;
                        let port = container.get_host_port_ipv4(5432.tcp()).await?;
                        Ok::<_, testcontainers_modules::testcontainers::TestcontainersError>(
                            format!("postgres://postgres:postgres@{host}:{port}/postgres"),
                        )
                    }
                    .await;
                    let ok = address.is_ok();
                    let _ = ready_tx.send(address.map_err(|e| e.to_string()));
                    if ok {
                        // Either an explicit stop or the handle being dropped.
                        let _ = stop_rx.await;
                    }
                    if let Err(e) = container.rm().await {
                        tracing::warn!(error = %e, "could not remove the PostgreSQL container");
                    }
                });
            })
            .map_err(|e| format!("cannot start the container thread: {e}"))?;

        let mut pg = DockerPg {
            url: String::new(),
            stop: Some(stop_tx),
            thread: Some(thread),
        };
        match ready_rx.await {
            Ok(Ok(url)) => {
                pg.url = url;
                tracing::info!(url = %crate::sql::redact(&pg.url), "started a PostgreSQL container");
                Ok(Some(pg))
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err("the container thread exited without reporting".into()),
        }
    }

    impl Drop for DockerPg {
        fn drop(&mut self) {
            drop(self.stop.take());
            if let Some(thread) = self.thread.take()
                && thread.join().is_err()
            {
                tracing::error!("the PostgreSQL container thread panicked");
            }
        }
    }
}

#[cfg(not(feature = "docker"))]
mod imp {
    pub(crate) struct DockerPg {
        pub(crate) url: String,
    }

    /// `Ok(None)`: the fallback is compiled out.
    pub(crate) async fn start(_settings: &[(String, String)]) -> Result<Option<DockerPg>, String> {
        Ok(None)
    }
}

pub(crate) use imp::{DockerPg, start};

//! One long-lived thread that spawns every server process.
//!
//! Linux delivers `PR_SET_PDEATHSIG` when the *thread* that forked the child
//! exits, not when the process does. Spawning from whatever tokio worker or
//! test thread happens to call us would kill the server as soon as that
//! thread finished, so all spawns go through a thread that lives as long as
//! the process.

use std::io;
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::sync::mpsc;

type Job = Box<dyn FnOnce() + Send>;

static KEEPER: OnceLock<Result<mpsc::Sender<Job>, String>> = OnceLock::new();

fn keeper() -> io::Result<&'static mpsc::Sender<Job>> {
    KEEPER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("awa-pg-keeper".into())
                .spawn(move || {
                    // The sender lives in a static, so this loop only ends
                    // when the process does.
                    while let Ok(job) = rx.recv() {
                        job();
                    }
                })
                .map(|_| tx)
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| io::Error::other(format!("cannot start the process keeper thread: {e}")))
}

/// Spawns `cmd` on the keeper thread. The command should already carry
/// [`crate::pdeathsig::die_with_parent`] if it must not outlive us.
pub(crate) async fn spawn(mut cmd: Command) -> io::Result<Child> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    keeper()?
        .send(Box::new(move || {
            let _ = tx.send(cmd.spawn());
        }))
        .map_err(|_| io::Error::other("the process keeper thread has stopped"))?;
    rx.await
        .map_err(|_| io::Error::other("the process keeper thread dropped a spawn request"))?
}

//! The count of a worker's Rust-side work that may still call into
//! Python: below both the worker, which waits on it before returning to
//! Python, and the handler context, whose waiters it counts.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Counts one worker's Rust-side work that may still call into Python
/// (a handler's attempt, an async handler's cancel, an `on_cancelled`
/// waiter): `run()` returns to Python only once none is left, so no
/// thread the Rust runtime owns is inside Python, or about to enter it,
/// while the interpreter exits (that was `Fatal Python error:
/// PyGILState_Release`, or a segfault, after a handler outlived the
/// shutdown grace).
#[derive(Default)]
pub(crate) struct InPython {
    count: std::sync::atomic::AtomicUsize,
    idle: Notify,
}

/// One unit of [`InPython`] work, until dropped.
pub(crate) struct InPythonGuard(Arc<InPython>);

impl InPython {
    pub(crate) fn enter(self: &Arc<Self>) -> InPythonGuard {
        self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InPythonGuard(self.clone())
    }

    /// Run `f` (which takes the GIL) on the runtime's blocking pool,
    /// counted.
    pub(crate) fn spawn_blocking(self: &Arc<Self>, f: impl FnOnce() + Send + 'static) {
        let guard = self.enter();
        crate::runtime().spawn_blocking(move || {
            let _guard = guard;
            f()
        });
    }

    /// Wait until no work is left, or `limit` passed; whether none is.
    pub(crate) async fn drained(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, async {
            loop {
                let idle = self.idle.notified();
                if self.count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                    return;
                }
                idle.await;
            }
        })
        .await
        .is_ok()
    }
}

impl Drop for InPythonGuard {
    fn drop(&mut self) {
        if self
            .0
            .count
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst)
            == 1
        {
            self.0.idle.notify_waiters();
        }
    }
}

//! Helpers shared by the `awa` crate's integration tests.

use awa::{Client, JobState};
use std::time::{Duration, Instant};

/// Wait (30 s at most, a hang guard) until job `id` is in `state`.
pub async fn wait_for(client: &Client, id: awa::JobId, state: JobState) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let view = client.job(id).await.unwrap();
        if view.as_ref().is_some_and(|v| v.state == state) {
            return;
        }
        assert!(
            Instant::now() < until,
            "job {id} never reached {state:?}: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

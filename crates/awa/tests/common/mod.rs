//! Helpers shared by the `awa` crate's integration tests.

use awa::planes::history::JobView;
use awa::{Client, JobState};
use std::time::{Duration, Instant};

/// Wait until job `id` is in `state`, and return it as `Client::job` reads
/// it. 60 s at most: a hang guard, not a bound on how fast it gets there.
pub async fn wait_for(client: &Client, id: awa::JobId, state: JobState) -> JobView {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let view = client.job(id).await.unwrap();
        if let Some(v) = view.as_ref().filter(|v| v.state == state) {
            return v.clone();
        }
        assert!(
            Instant::now() < until,
            "hang guard: job {id} never reached {state:?}: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

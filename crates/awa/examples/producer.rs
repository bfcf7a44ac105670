//! Enqueue jobs inside the application's own transaction.
//! Run: DATABASE_URL=postgres://... cargo run -p awa --example producer
#[path = "shared/jobs.rs"]
mod jobs;
use jobs::{ResizeImage, SendWelcome};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL to a postgres:// URL")?;
    let client = awa::Client::connect(&url, 4).await?;

    let mut tx = client.pool().begin().await?;
    // ... the application's own writes on `tx` go here ...
    for user_id in 1..=3 {
        let email = format!("user{user_id}@example.com");
        let job = client
            .insert(&mut *tx, &SendWelcome { user_id, email })
            .await?;
        println!("enqueued send_welcome as job {}", job.id);
    }
    let images = [("a.png", 640), ("b.png", 320)];
    let jobs: Vec<_> = images
        .map(|(p, width)| ResizeImage {
            path: p.into(),
            width,
        })
        .into();
    client.insert_many(&mut *tx, &jobs).await?;
    tx.commit().await?; // the jobs exist exactly when the writes do
    Ok(())
}

//! Run handlers for two typed job kinds until Ctrl-C or SIGTERM.
//! Run: DATABASE_URL=postgres://... cargo run -p awa --example worker
#[path = "shared/jobs.rs"]
mod jobs;
use awa::{HandlerResult, JobContext, Outcome};
use jobs::{ResizeImage, SendWelcome};
use std::time::Duration;

async fn send_welcome(job: SendWelcome, ctx: JobContext) -> HandlerResult {
    println!(
        "welcome {} (user {}, attempt {})",
        job.email,
        job.user_id,
        ctx.attempt()
    );
    Ok(Outcome::Complete)
}

async fn resize_image(job: ResizeImage, _ctx: JobContext) -> HandlerResult {
    println!("resized {} to {} px", job.path, job.width);
    Ok(Outcome::Complete)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL to a postgres:// URL")?;
    let pool = awa::connect(&url, 8).await?;
    let client = awa::Client::builder(pool) // also runs a maintenance-leader candidate
        .queue("email", 16)
        .queue("images", 4)
        .register::<SendWelcome>(send_welcome)
        .register::<ResizeImage>(resize_image)
        .start()
        .await?;
    awa::shutdown_signal().await;
    let stats = client.shutdown(Duration::from_secs(10)).await?;
    println!("stopped after {} completed jobs", stats.completed);
    Ok(())
}

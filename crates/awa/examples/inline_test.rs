//! Testing a handler against a real database: enqueue, run it inline with
//! `work_one`, assert on the result. Run: cargo test -p awa --example inline_test
#[cfg(test)]
#[path = "shared/jobs.rs"]
mod jobs;

fn main() {
    println!("a test: run `cargo test -p awa --example inline_test`");
}

#[cfg(test)]
mod tests {
    use super::jobs::{ResizeImage, SendWelcome};
    use awa::{Client, JobContext, JobError, JobState, Outcome};

    async fn send_welcome(job: SendWelcome, _ctx: JobContext) -> awa::HandlerResult {
        assert!(job.email.contains('@'));
        Ok(Outcome::Complete)
    }

    async fn resize_image(job: ResizeImage, _ctx: JobContext) -> awa::HandlerResult {
        if job.width == 0 {
            return Err(JobError::Permanent(format!(
                "{}: width must be positive",
                job.path
            )));
        }
        Ok(Outcome::Complete)
    }

    #[tokio::test]
    async fn send_welcome_completes() {
        let db = awa::testing::test_db().await.unwrap(); // a throwaway, migrated database
        let pool = db.pool().await.unwrap();
        let worker = Client::builder(pool.clone()).register::<SendWelcome>(send_welcome);
        let client = Client::new(pool.clone());

        let email = "ada@example.com".to_string();
        client
            .insert(&pool, &SendWelcome { user_id: 1, email })
            .await
            .unwrap();
        let queued = awa::testing::enqueued::<_, SendWelcome>(&pool, 10)
            .await
            .unwrap();
        assert_eq!(queued.len(), 1);

        let worked = worker
            .work_one("email")
            .await
            .unwrap()
            .expect("a job to run");
        assert_eq!(worked.finished.next_state, Some(JobState::Completed));
    }

    #[tokio::test]
    async fn a_zero_width_fails_for_good() {
        let db = awa::testing::test_db().await.unwrap();
        let pool = db.pool().await.unwrap();
        let worker = Client::builder(pool.clone()).register::<ResizeImage>(resize_image);
        let job = ResizeImage {
            path: "a.png".into(),
            width: 0,
        };
        Client::new(pool.clone()).insert(&pool, &job).await.unwrap();

        let worked = worker
            .work_one("images")
            .await
            .unwrap()
            .expect("a job to run");
        assert_eq!(worked.finished.next_state, Some(JobState::Failed)); // no retries
    }
}

// The job types the producer and worker examples share.

#[derive(Debug, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(kind = "send_welcome", queue = "email", max_attempts = 5)]
pub struct SendWelcome {
    pub user_id: i64,
    pub email: String,
}

#[derive(Debug, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(kind = "resize_image", queue = "images")]
pub struct ResizeImage {
    pub path: String,
    pub width: u32,
}

//! At most `running` generations at once and `queue` more waiting; beyond that a caller is
//! told to come back rather than queued without bound.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use agentry_domain::agents::ModelError;
use tokio::sync::Semaphore;

pub struct Gate {
    running: Semaphore,
    waiting: AtomicUsize,
    queue: usize,
}

struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Gate {
    pub fn new(running: usize, queue: usize) -> Self {
        Self { running: Semaphore::new(running), waiting: AtomicUsize::new(0), queue }
    }

    /// A turn to generate, waited for until `deadline`.
    pub async fn enter(&self, deadline: Instant) -> Result<tokio::sync::SemaphorePermit<'_>, ModelError> {
        if let Ok(permit) = self.running.try_acquire() {
            return Ok(permit);
        }
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.queue {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(ModelError::Busy { retry_after_secs: 2 });
        }
        let _waiting = Waiting(&self.waiting);
        match tokio::time::timeout_at(deadline.into(), self.running.acquire()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_closed)) => Err(ModelError::Upstream("the language model is shut down".into())),
            Err(_elapsed) => Err(ModelError::Timeout),
        }
    }
}

//! How busy the service is with requests somebody waits on, so that work nobody waits on
//! (memory extraction: see [`crate::events::consumers::EventConsumer::yields`]) leaves the
//! cores to them while they queue, and takes its turn once they are served.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The requests being served right now, counted by the HTTP layer: each holds an
/// [`InRequest`] from its first byte to its response.
#[derive(Debug)]
pub struct RequestLoad {
    in_flight: AtomicUsize,
    busy_above: usize,
}

impl RequestLoad {
    /// Busy while more than `busy_above` requests are in flight (the server passes its
    /// machine's cores: more requests than that wait for a core, and background work would
    /// lengthen their wait).
    pub fn new(busy_above: usize) -> Self {
        Self { in_flight: AtomicUsize::new(0), busy_above }
    }

    /// Counts one request until the guard is dropped (also when its future is dropped).
    pub fn enter(self: &Arc<Self>) -> InRequest {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InRequest(Arc::clone(self))
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Whether requests are queueing for the cores.
    pub fn busy(&self) -> bool {
        self.in_flight() > self.busy_above
    }
}

/// One request in flight; dropping it ends it.
#[derive(Debug)]
pub struct InRequest(Arc<RequestLoad>);

impl Drop for InRequest {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_only_while_more_requests_than_the_threshold_are_in_flight() {
        let load = Arc::new(RequestLoad::new(2));
        let first = load.enter();
        let second = load.enter();
        assert!(!load.busy(), "two requests on two cores wait for nothing");
        let third = load.enter();
        assert!(load.busy());
        assert_eq!(load.in_flight(), 3);
        drop((first, second, third));
        assert!(!load.busy());
        assert_eq!(load.in_flight(), 0);
    }
}

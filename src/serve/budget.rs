//! The byte budget of what answers in flight hold that the cache does not: a file larger than
//! the cache takes (over half of `--cache-mb`) read whole for the requests that use it (a
//! list's entries, a names document; a document served as it is goes from its file instead,
//! see `stream.rs`), and the HTML view's renders and pages (`view.rs`). Each holds a
//! [`Permit`] for its bytes while it is used; taking one waits until the bytes are free (a
//! while, then the request is answered 503), so that many large answers at once never hold
//! more than the budget. One larger than the whole budget is taken alone. Below the cache and
//! the documents it counts, so that both can hold a permit.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Bytes that bodies in flight may hold together.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: usize,
    used: Mutex<usize>,
    freed: Condvar,
}

/// Bytes held from a [`Budget`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Permit {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: usize) -> Arc<Budget> {
        Arc::new(Budget { limit, used: Mutex::new(0), freed: Condvar::new() })
    }

    /// Takes `bytes` (waiting at most `wait` for them to be free): `None` when they are not.
    /// More than the whole budget is taken once nothing else is held.
    pub(crate) fn acquire(self: &Arc<Self>, bytes: usize, wait: Duration) -> Option<Permit> {
        let deadline = Instant::now() + wait;
        let mut used = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while *used > 0 && *used + bytes > self.limit {
            let left = deadline.checked_duration_since(Instant::now())?;
            used = self.freed.wait_timeout(used, left).unwrap_or_else(std::sync::PoisonError::into_inner).0;
        }
        *used += bytes;
        Some(Permit { budget: self.clone(), bytes })
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        *self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Permit {
    /// Gives back all but `bytes` of what is held (nothing when it holds no more).
    pub(crate) fn shrink_to(&mut self, bytes: usize) {
        if bytes < self.bytes {
            let mut used = self.budget.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *used -= self.bytes - bytes;
            self.bytes = bytes;
            self.budget.freed.notify_all();
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *used -= self.bytes;
        self.budget.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_at_most_its_limit_and_one_larger_body_alone() {
        let budget = Budget::new(100);
        let a = budget.acquire(60, Duration::ZERO).unwrap();
        assert!(budget.acquire(60, Duration::from_millis(20)).is_none(), "over the limit: waits, then no");
        let b = budget.acquire(40, Duration::ZERO).unwrap();
        assert_eq!(budget.used(), 100);
        drop(a);
        // a waiter is let in once the bytes are given back
        let waiter = {
            let budget = budget.clone();
            std::thread::spawn(move || budget.acquire(50, Duration::from_secs(10)).map(|p| p.bytes))
        };
        std::thread::sleep(Duration::from_millis(20));
        drop(b);
        assert_eq!(waiter.join().unwrap(), Some(50));
        assert_eq!(budget.used(), 0);
        let mut shrunk = budget.acquire(90, Duration::ZERO).unwrap();
        shrunk.shrink_to(30);
        assert_eq!(budget.used(), 30, "what a permit no longer needs is given back");
        drop(shrunk);
        let huge = budget.acquire(1000, Duration::ZERO).expect("alone, more than the limit");
        assert!(budget.acquire(1, Duration::ZERO).is_none());
        drop(huge);
        assert_eq!(budget.used(), 0);
    }
}

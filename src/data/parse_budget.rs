//! The memory the build's parallel reads may hold at once. A data file parsed takes several
//! times its size (a tape, `crate::json::tape`: up to about 9 times; it was up to 73 times as a
//! `serde_json::Value`), and the build parses a file on every core at once, so
//! `max_document_mb` alone does not bound memory: four records of 25 MB parsed together as
//! values took 2.6 GB. Each parse
//! first holds [`PARSE_FACTOR`] times its file's size from a budget of [`PARSE_BUDGET`] bytes,
//! waiting until that fits; a file whose share is over the whole budget is parsed alone. Parses
//! never wait on one another otherwise, so nothing deadlocks: a holder only parses.

use std::sync::{Condvar, Mutex, PoisonError};

/// Bytes the parses in flight may hold together, as estimated by [`PARSE_FACTOR`]: 1 GiB.
pub(crate) const PARSE_BUDGET: u64 = 1 << 30;

/// The memory a parse is taken to hold, per byte of its file (the text read, the parsed tape
/// and the document rendered from it): kept from the values' time, well over what a tape
/// holds, so that four large records still parse one at a time.
pub(crate) const PARSE_FACTOR: u64 = 64;

/// A budget of bytes that shares are taken from.
pub(crate) struct Budget {
    limit: u64,
    held: Mutex<u64>,
    freed: Condvar,
}

/// The budget of the build's parses.
static PARSES: Budget = Budget::new(PARSE_BUDGET);

/// A share of a budget, given back when dropped.
#[must_use = "the share is held until this is dropped"]
pub(crate) struct Share(&'static Budget, u64);

/// Holds the share of a parse of a file of `file_bytes` bytes from the build's budget (see
/// [`Budget::hold`]).
pub(crate) fn hold(file_bytes: usize) -> Share {
    PARSES.hold(file_bytes)
}

impl Budget {
    const fn new(limit: u64) -> Budget {
        Budget { limit, held: Mutex::new(0), freed: Condvar::new() }
    }

    /// Holds [`PARSE_FACTOR`] times `file_bytes`, waiting until it fits in the budget (or until
    /// nothing else is held, for a share over the whole budget).
    fn hold(&'static self, file_bytes: usize) -> Share {
        let bytes = (file_bytes as u64).saturating_mul(PARSE_FACTOR);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        while *held > 0 && held.saturating_add(bytes) > self.limit {
            held = self.freed.wait(held).unwrap_or_else(PoisonError::into_inner);
        }
        *held += bytes;
        Share(self, bytes)
    }

    #[cfg(test)]
    fn held(&self) -> u64 {
        *self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.0.held.lock().unwrap_or_else(PoisonError::into_inner);
        *held -= self.1;
        self.0.freed.notify_all();
        drop(held);
        if self.1 >= TRIM_FROM {
            give_back_freed_memory();
        }
    }
}

/// A share from which the memory freed is given back to the system when it ends.
const TRIM_FROM: u64 = 256 << 20;

/// Gives the memory freed back to the system. glibc keeps what a thread freed in that thread's
/// own arena, where the next parse, on another thread, does not find it: without this, parses
/// one after another on two threads held twice the memory of one. Small blocks freed in the
/// middle of the heap are kept too, and a large block allocated next (mapped apart) does not
/// use them.
pub(crate) fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system; it touches nothing in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_over_the_budget_wait_and_one_over_the_whole_budget_goes_alone() {
        static BUDGET: Budget = Budget::new(100 * PARSE_FACTOR);
        let a = BUDGET.hold(50);
        let b = BUDGET.hold(50);
        let waiter = std::thread::spawn(|| {
            let _c = BUDGET.hold(100);
            BUDGET.held()
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "a share that does not fit waits");
        drop(a);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "until it fits");
        drop(b);
        assert_eq!(waiter.join().unwrap(), 100 * PARSE_FACTOR, "then it is held");
        let huge = BUDGET.hold(300);
        assert_eq!(BUDGET.held(), 300 * PARSE_FACTOR, "alone, over the whole budget");
        drop(huge);
        assert_eq!(BUDGET.held(), 0);
    }
}

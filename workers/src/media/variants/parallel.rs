//! A scoped-thread job runner: the variant work of one image shared by a
//! few threads, longest job first, results in list order.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use super::error::VariantError;

/// One unit of work for [`run_jobs`].
pub(super) type Job<'s, T> = Box<dyn FnOnce() -> Result<T, VariantError> + Send + 's>;

/// Runs jobs on up to `threads` scoped threads, in list order (put the
/// longest first); returns results in list order or the first error.
pub(super) fn run_jobs<T: Send>(
    jobs: Vec<Job<'_, T>>,
    threads: usize,
) -> Result<Vec<T>, VariantError> {
    let n = jobs.len();
    let workers = threads.min(n);
    if workers <= 1 {
        return jobs.into_iter().map(|job| job()).collect();
    }
    let queue = Mutex::new(jobs.into_iter().enumerate().collect::<VecDeque<_>>());
    let results = Mutex::new((0..n).map(|_| None).collect::<Vec<_>>());
    let work = || loop {
        let next = queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let Some((i, job)) = next else { break };
        let r = job();
        results.lock().unwrap_or_else(PoisonError::into_inner)[i] = Some(r);
    };
    let panicked = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers).map(|_| s.spawn(work)).collect();
        handles
            .into_iter()
            .map(|h| h.join().is_err())
            .fold(false, |a, b| a | b)
    });
    if panicked {
        return Err(VariantError::internal("a worker thread panicked"));
    }
    let results = results.into_inner().unwrap_or_else(PoisonError::into_inner);
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(VariantError::internal("job lost"))))
        .collect()
}

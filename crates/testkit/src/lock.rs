//! Locking a mutex while ignoring poisoning.
//!
//! A mutex is poisoned when a thread panicked while holding it. Every user
//! of [`lock`] guards data that each critical section leaves consistent
//! (it checks before it mutates, or replaces a value whole), so the data
//! is still good and the panic is reported where it happened.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, continuing after a panic of another holder.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mutex poisoned by a panicking holder still locks, with its data.
    #[test]
    fn poisoned_mutex_still_locks() {
        let mutex = Mutex::new(5);
        let poisoner = std::thread::scope(|s| {
            s.spawn(|| {
                let _guard = lock(&mutex);
                panic!("poison the mutex");
            })
            .join()
        });
        assert!(poisoner.is_err());
        assert!(mutex.is_poisoned());
        *lock(&mutex) += 1;
        assert_eq!(*lock(&mutex), 6);
    }
}

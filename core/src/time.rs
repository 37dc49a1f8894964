//! The clock, as portcullis reads it: milliseconds since the Unix epoch.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// The moment `lifetime` after `created_ms`, or the end of time if it lies beyond.
pub(crate) fn expiry_ms(created_ms: u64, lifetime: Duration) -> u64 {
    created_ms.saturating_add(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX))
}

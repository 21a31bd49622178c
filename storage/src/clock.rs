//! Time as the store sees it: a `Timestamp` in integer microseconds and a `Clock`
//! that is the system clock in production and a settable one in tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, SecondsFormat, Utc};

/// Microseconds since the Unix epoch, the one time representation in every table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, sqlx::Type)]
#[sqlx(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// A timestamp from microseconds since the Unix epoch.
    pub const fn from_micros(micros: i64) -> Self {
        Self(micros)
    }

    /// Microseconds since the Unix epoch.
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// Whole seconds since the Unix epoch (rounded down).
    pub const fn as_unix_seconds(self) -> i64 {
        self.0.div_euclid(1_000_000)
    }

    /// The same instant as a chrono value.
    pub fn to_datetime(self) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(self.0).unwrap_or(DateTime::<Utc>::MIN_UTC)
    }

    /// RFC 3339 in UTC with millisecond precision, the form every API response uses.
    pub fn to_rfc3339(self) -> String {
        self.to_datetime()
            .to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    /// This instant moved by `seconds` (negative moves back).
    pub const fn plus_seconds(self, seconds: i64) -> Self {
        Self(self.0.saturating_add(seconds.saturating_mul(1_000_000)))
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(value: DateTime<Utc>) -> Self {
        Self(value.timestamp_micros())
    }
}

/// Where "now" comes from. The system clock in production; tests use a manual
/// clock to step through time-dependent rules (expiry, retention) without sleeping.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// The operating system's wall clock.
    #[default]
    System,
    /// A clock that only moves when told to.
    Manual(Arc<AtomicI64>),
}

impl Clock {
    /// A manual clock starting at `start`.
    pub fn manual(start: Timestamp) -> Self {
        Self::Manual(Arc::new(AtomicI64::new(start.as_micros())))
    }

    /// The current instant.
    pub fn now(&self) -> Timestamp {
        match self {
            Self::System => Timestamp::from(Utc::now()),
            Self::Manual(micros) => Timestamp(micros.load(Ordering::SeqCst)),
        }
    }

    /// Moves a manual clock forward by `seconds`; the system clock ignores this.
    pub fn advance_seconds(&self, seconds: i64) {
        if let Self::Manual(micros) = self {
            micros.fetch_add(seconds.saturating_mul(1_000_000), Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_is_utc_with_milliseconds() {
        let ts = Timestamp::from_micros(1_779_999_999_123_456);
        assert_eq!(ts.to_rfc3339(), "2026-05-28T20:26:39.123Z");
        assert_eq!(ts.as_unix_seconds(), 1_779_999_999);
    }

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let clock = Clock::manual(Timestamp::from_micros(0));
        assert_eq!(clock.now().as_micros(), 0);
        clock.advance_seconds(30);
        assert_eq!(clock.now().as_micros(), 30_000_000);
    }
}

//! The delivery headers' names, and case-insensitive header lookup over the
//! shapes receivers already hold.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

/// Header carrying `sha256=<hex>`; read first.
pub const SIGNATURE_HEADER: &str = "X-Webhook-Signature";
/// The earlier, service-specific name of the signature header; read when the first is absent.
pub const LEGACY_SIGNATURE_HEADER: &str = "X-MediaAgency-Signature";
/// Header carrying the signing time in Unix seconds; its text is what was signed.
pub const TIMESTAMP_HEADER: &str = "X-Webhook-Timestamp";
/// Header carrying the event type (not covered by the signature; use the envelope's).
pub const EVENT_TYPE_HEADER: &str = "X-Webhook-Event-Type";
/// Header carrying the event id, which must equal the envelope's `event_id`.
pub const EVENT_ID_HEADER: &str = "X-Event-Id";

/// Read access to request headers by name, compared ASCII case-insensitively.
///
/// Implemented for slices, arrays and vectors of `(name, value)` pairs and for
/// `HashMap`/`BTreeMap` of names to values. An `http::HeaderMap` (this crate does not
/// depend on `http`) becomes pairs first:
///
/// ```ignore
/// let pairs: Vec<(&str, &str)> = header_map
///     .iter()
///     .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
///     .collect();
/// let verdict = verifier.verify(&pairs, &body, now);
/// ```
pub trait HeaderLookup {
    /// The value of the first header called `name`, whatever its case.
    fn header(&self, name: &str) -> Option<&str>;
}

/// First value whose name matches; shared by every pair-shaped container.
fn find<'a, N, V>(pairs: impl IntoIterator<Item = (&'a N, &'a V)>, name: &str) -> Option<&'a str>
where
    N: AsRef<str> + ?Sized + 'a,
    V: AsRef<str> + ?Sized + 'a,
{
    pairs
        .into_iter()
        .find(|(n, _)| n.as_ref().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_ref())
}

impl<N: AsRef<str>, V: AsRef<str>> HeaderLookup for [(N, V)] {
    fn header(&self, name: &str) -> Option<&str> {
        find(self.iter().map(|(n, v)| (n, v)), name)
    }
}

impl<N: AsRef<str>, V: AsRef<str>, const LEN: usize> HeaderLookup for [(N, V); LEN] {
    fn header(&self, name: &str) -> Option<&str> {
        self.as_slice().header(name)
    }
}

impl<N: AsRef<str>, V: AsRef<str>> HeaderLookup for Vec<(N, V)> {
    fn header(&self, name: &str) -> Option<&str> {
        self.as_slice().header(name)
    }
}

impl<N: AsRef<str>, V: AsRef<str>, S: BuildHasher> HeaderLookup for HashMap<N, V, S> {
    fn header(&self, name: &str) -> Option<&str> {
        find(self, name)
    }
}

impl<N: AsRef<str>, V: AsRef<str>> HeaderLookup for BTreeMap<N, V> {
    fn header(&self, name: &str) -> Option<&str> {
        find(self, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_whatever_their_case() {
        let pairs = [("X-EVENT-ID", "a"), ("x-webhook-timestamp", "1")];
        assert_eq!(pairs.header("X-Event-Id"), Some("a"));
        assert_eq!(pairs.header("X-WEBHOOK-TIMESTAMP"), Some("1"));
        assert_eq!(pairs.header("X-Webhook-Signature"), None);

        let map: HashMap<String, String> = [("x-Event-ID".to_string(), "b".to_string())].into();
        assert_eq!(map.header("X-Event-Id"), Some("b"));
        let map: BTreeMap<&str, &str> = [("X-Event-Id", "c")].into();
        assert_eq!(map.header("x-event-id"), Some("c"));
    }

    #[test]
    fn the_first_of_repeated_headers_wins() {
        let pairs = vec![("X-Event-Id", "first"), ("x-event-id", "second")];
        assert_eq!(pairs.header("X-Event-Id"), Some("first"));
    }
}

//! The receiver rules, one behaviour per test, through the public `verify`.

use std::collections::HashMap;
use std::sync::Arc;

use super::*;
use crate::sign;

const SECRET: &str = "whsec_c2VjcmV0LW9uZQ";
const OTHER_SECRET: &str = "whsec_c2VjcmV0LXR3bw";
const NOW: i64 = 1_780_000_000;
const EVENT: &str = "01JZ8Q4V6S3N2W0H5XKDQF9R7T";
const NONCE: &str = "01JZ8Q4V6TB1C2D3E4F5G6H7J8";

/// A delivery as the sender builds it: both signature headers carry the same value.
struct Delivery {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Delivery {
    fn new(secret: &str, event_id: &str, nonce: &str, signed_at: i64) -> Self {
        let body = envelope(event_id, nonce);
        Self::signed(secret, body, event_id, signed_at)
    }

    fn signed(secret: &str, body: Vec<u8>, event_id: &str, signed_at: i64) -> Self {
        let signature = sign(secret, signed_at, &body);
        let headers = [
            ("Content-Type", "application/json"),
            ("X-Webhook-Signature", &signature),
            ("X-MediaAgency-Signature", &signature),
            ("X-Webhook-Timestamp", &signed_at.to_string()),
            ("X-Webhook-Event-Type", "listing.created"),
            ("X-Event-Id", event_id),
        ]
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .into();
        Self { headers, body }
    }

    fn set(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(n, _)| n != name);
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    fn without(mut self, name: &str) -> Self {
        self.headers.retain(|(n, _)| n != name);
        self
    }

    fn verify_with<S: ReplayStore>(
        &self,
        verifier: &Verifier<S>,
        now: i64,
    ) -> Result<Verdict, VerifyError> {
        verifier.verify(&self.headers, &self.body, now)
    }
}

fn envelope(event_id: &str, nonce: &str) -> Vec<u8> {
    serde_json::json!({
        "event_id": event_id,
        "event_type": "listing.created",
        "api_version": "2026-05-29",
        "timestamp": NOW - 5,
        "nonce": nonce,
        "is_sandbox": true,
        "data": {"listing_number": "L-1001", "status": "draft"},
    })
    .to_string()
    .into_bytes()
}

fn accepted(result: Result<Verdict, VerifyError>) -> VerifiedDelivery {
    match result {
        Ok(Verdict::Accepted(delivery)) => delivery,
        other => panic!("expected Accepted, got {other:?}"),
    }
}

fn rejected(result: Result<Verdict, VerifyError>) -> VerifyError {
    match result {
        Err(error) => error,
        Ok(verdict) => panic!("expected a rejection, got {verdict:?}"),
    }
}

#[test]
fn a_valid_delivery_is_accepted() {
    let verifier = Verifier::new(SECRET);
    let delivery = accepted(Delivery::new(SECRET, EVENT, NONCE, NOW).verify_with(&verifier, NOW));
    assert_eq!(delivery.signed_at, NOW);
    assert_eq!(delivery.secret_index, 0);
    let envelope = delivery.envelope;
    assert_eq!(
        (envelope.event_id.as_str(), envelope.nonce.as_str()),
        (EVENT, NONCE)
    );
    assert_eq!(envelope.event_type, "listing.created");
    assert_eq!(envelope.api_version, "2026-05-29");
    assert_eq!(envelope.timestamp, NOW - 5);
    assert!(envelope.is_sandbox);
    assert_eq!(envelope.data["listing_number"], "L-1001");
}

#[test]
fn either_signature_header_name_is_enough() {
    let verifier = Verifier::new(SECRET);
    let current_only = Delivery::new(SECRET, "e1", "n1", NOW).without("X-MediaAgency-Signature");
    accepted(current_only.verify_with(&verifier, NOW));
    let earlier_only = Delivery::new(SECRET, "e2", "n2", NOW).without("X-Webhook-Signature");
    accepted(earlier_only.verify_with(&verifier, NOW));
}

#[test]
fn the_current_header_name_is_read_first() {
    let verifier = Verifier::new(SECRET);
    let good = Delivery::new(SECRET, EVENT, NONCE, NOW);
    let wrong = sign(OTHER_SECRET, NOW, &good.body);
    let first_wrong = Delivery::new(SECRET, EVENT, NONCE, NOW).set("X-Webhook-Signature", &wrong);
    assert_eq!(
        rejected(first_wrong.verify_with(&verifier, NOW)),
        VerifyError::SignatureMismatch
    );
    // An empty current header counts as absent.
    let first_empty = good.set("X-Webhook-Signature", "");
    accepted(first_empty.verify_with(&verifier, NOW));
}

#[test]
fn a_tampered_body_is_rejected() {
    let verifier = Verifier::new(SECRET);
    let mut delivery = Delivery::new(SECRET, EVENT, NONCE, NOW);
    let position = delivery
        .body
        .iter()
        .position(|&b| b == b'L')
        .expect("listing number");
    delivery.body[position] = b'M';
    assert_eq!(
        rejected(delivery.verify_with(&verifier, NOW)),
        VerifyError::SignatureMismatch
    );
    delivery.body.push(b' ');
    assert_eq!(
        rejected(delivery.verify_with(&verifier, NOW)),
        VerifyError::SignatureMismatch
    );
}

#[test]
fn a_tampered_timestamp_is_rejected() {
    let verifier = Verifier::new(SECRET);
    let delivery =
        Delivery::new(SECRET, EVENT, NONCE, NOW).set("X-Webhook-Timestamp", &(NOW + 1).to_string());
    assert_eq!(
        rejected(delivery.verify_with(&verifier, NOW)),
        VerifyError::SignatureMismatch
    );
}

#[test]
fn a_wrong_secret_is_rejected() {
    let verifier = Verifier::new(SECRET);
    let delivery = Delivery::new(OTHER_SECRET, EVENT, NONCE, NOW);
    assert_eq!(
        rejected(delivery.verify_with(&verifier, NOW)),
        VerifyError::SignatureMismatch
    );
    // The secret is the text as given: its base64url part decoded is a different key.
    let delivery = Delivery::new("secret-one", EVENT, NONCE, NOW);
    assert_eq!(
        rejected(delivery.verify_with(&verifier, NOW)),
        VerifyError::SignatureMismatch
    );
}

#[test]
fn during_a_rotation_both_secrets_verify() {
    let rotating = Verifier::with_secrets(&[SECRET, OTHER_SECRET]);
    let old = accepted(Delivery::new(SECRET, "e1", "n1", NOW).verify_with(&rotating, NOW));
    assert_eq!(old.secret_index, 0);
    let new = accepted(Delivery::new(OTHER_SECRET, "e2", "n2", NOW).verify_with(&rotating, NOW));
    assert_eq!(new.secret_index, 1);

    let rotated = Verifier::with_secrets(vec![OTHER_SECRET.to_owned()]);
    let stale = Delivery::new(SECRET, "e3", "n3", NOW);
    assert_eq!(
        rejected(stale.verify_with(&rotated, NOW)),
        VerifyError::SignatureMismatch
    );

    let none = Verifier::with_secrets(Vec::<String>::new());
    let any = Delivery::new(SECRET, "e4", "n4", NOW);
    assert_eq!(
        rejected(any.verify_with(&none, NOW)),
        VerifyError::SignatureMismatch
    );
}

#[test]
fn a_skew_of_300_seconds_either_way_is_accepted() {
    for now in [NOW - 300, NOW + 300] {
        accepted(Delivery::new(SECRET, EVENT, NONCE, NOW).verify_with(&Verifier::new(SECRET), now));
    }
}

#[test]
fn a_skew_of_301_seconds_either_way_is_rejected() {
    for now in [NOW - 301, NOW + 301] {
        let error = rejected(
            Delivery::new(SECRET, EVENT, NONCE, NOW).verify_with(&Verifier::new(SECRET), now),
        );
        assert_eq!(
            error,
            VerifyError::TimestampOutOfTolerance {
                timestamp: NOW,
                now
            }
        );
    }
}

#[test]
fn the_signature_is_checked_before_the_clock() {
    let delivery = Delivery::new(OTHER_SECRET, EVENT, NONCE, NOW);
    let error = rejected(delivery.verify_with(&Verifier::new(SECRET), NOW + 3600));
    assert_eq!(error, VerifyError::SignatureMismatch);
}

#[test]
fn a_nonce_seen_within_ten_minutes_is_rejected_and_accepted_after() {
    let verifier = Verifier::new(SECRET);
    let original = Delivery::new(SECRET, "e1", NONCE, NOW);
    accepted(original.verify_with(&verifier, NOW));

    // The very same delivery again: a replay.
    assert_eq!(
        rejected(original.verify_with(&verifier, NOW + 10)),
        VerifyError::NonceReplayed
    );
    // Another event reusing the nonce, 600 s later: still within the window.
    let reuse = Delivery::new(SECRET, "e2", NONCE, NOW + 600);
    assert_eq!(
        rejected(reuse.verify_with(&verifier, NOW + 600)),
        VerifyError::NonceReplayed
    );
    // 601 s later the nonce is forgotten.
    let later = Delivery::new(SECRET, "e2", NONCE, NOW + 601);
    accepted(later.verify_with(&verifier, NOW + 601));
}

#[test]
fn an_event_accepted_before_is_a_duplicate_not_a_rejection() {
    let verifier = Verifier::new(SECRET);
    accepted(Delivery::new(SECRET, EVENT, "n1", NOW).verify_with(&verifier, NOW));

    // The sender's retry: same event id, new nonce, new signing time.
    let retry = Delivery::new(SECRET, EVENT, "n2", NOW + 30);
    let verdict = retry.verify_with(&verifier, NOW + 30).expect("authentic");
    assert!(verdict.is_duplicate());
    assert_eq!(verdict.delivery().envelope.nonce, "n2");

    // Processing failed after acceptance: forgetting the event lets the next retry in.
    verifier.forget_event(EVENT).expect("memory store");
    accepted(Delivery::new(SECRET, EVENT, "n3", NOW + 330).verify_with(&verifier, NOW + 330));
}

#[test]
fn the_event_id_header_must_equal_the_body() {
    let verifier = Verifier::new(SECRET);
    let mismatched =
        Delivery::new(SECRET, EVENT, NONCE, NOW).set("X-Event-Id", "01JZ8Q4V6S3N2W0H5XKDQF9R7V");
    assert_eq!(
        rejected(mismatched.verify_with(&verifier, NOW)),
        VerifyError::EventIdMismatch {
            header: "01JZ8Q4V6S3N2W0H5XKDQF9R7V".to_owned(),
            body: EVENT.to_owned(),
        }
    );
    let missing = Delivery::new(SECRET, EVENT, NONCE, NOW).without("X-Event-Id");
    assert_eq!(
        rejected(missing.verify_with(&verifier, NOW)),
        VerifyError::MissingEventId
    );

    // Rejections remember nothing: the genuine delivery is still accepted.
    accepted(Delivery::new(SECRET, EVENT, NONCE, NOW).verify_with(&verifier, NOW));
}

#[test]
fn a_malformed_signature_is_told_apart_from_a_wrong_one() {
    let verifier = Verifier::new(SECRET);
    let good = Delivery::new(SECRET, EVENT, NONCE, NOW);
    let hex = good.headers[1].1.trim_start_matches("sha256=").to_owned();
    for bad in [
        format!("sha256={}", hex.to_uppercase()),
        format!("sha256={}", &hex[..63]),
        format!("sha256={}g", &hex[..63]),
        format!("sha512={hex}"),
        hex.clone(),
        "sha256=".to_owned(),
    ] {
        let delivery = Delivery::new(SECRET, EVENT, NONCE, NOW)
            .set("X-Webhook-Signature", &bad)
            .set("X-MediaAgency-Signature", &bad);
        assert_eq!(
            rejected(delivery.verify_with(&verifier, NOW)),
            VerifyError::MalformedSignature,
            "{bad:?}"
        );
    }
}

#[test]
fn missing_or_malformed_headers_are_named() {
    let verifier = Verifier::new(SECRET);
    let unsigned = Delivery::new(SECRET, EVENT, NONCE, NOW)
        .without("X-Webhook-Signature")
        .without("X-MediaAgency-Signature");
    assert_eq!(
        rejected(unsigned.verify_with(&verifier, NOW)),
        VerifyError::MissingSignature
    );

    let undated = Delivery::new(SECRET, EVENT, NONCE, NOW).without("X-Webhook-Timestamp");
    assert_eq!(
        rejected(undated.verify_with(&verifier, NOW)),
        VerifyError::MissingTimestamp
    );

    for bad in [
        "soon",
        "-1780000000",
        "+1780000000",
        "1780000000.0",
        "1e9",
        "1234567890123456",
    ] {
        let delivery = Delivery::new(SECRET, EVENT, NONCE, NOW).set("X-Webhook-Timestamp", bad);
        assert_eq!(
            rejected(delivery.verify_with(&verifier, NOW)),
            VerifyError::MalformedTimestamp,
            "{bad:?}"
        );
    }
}

#[test]
fn header_names_match_whatever_their_case() {
    let verifier = Verifier::new(SECRET);
    for (i, case) in [str::to_uppercase, str::to_lowercase]
        .into_iter()
        .enumerate()
    {
        let mut delivery = Delivery::new(SECRET, &format!("e{i}"), &format!("n{i}"), NOW);
        delivery.headers = delivery
            .headers
            .iter()
            .map(|(n, v)| (case(n), v.clone()))
            .collect();
        accepted(delivery.verify_with(&verifier, NOW));
    }
    let delivery = Delivery::new(SECRET, "e-map", "n-map", NOW);
    let map: HashMap<String, String> = delivery
        .headers
        .iter()
        .map(|(n, v)| (n.to_uppercase(), v.clone()))
        .collect();
    accepted(verifier.verify(&map, &delivery.body, NOW));
}

#[test]
fn whitespace_around_header_values_is_ignored() {
    let verifier = Verifier::new(SECRET);
    let mut delivery = Delivery::new(SECRET, EVENT, NONCE, NOW);
    for (_, value) in &mut delivery.headers {
        *value = format!(" {value}\t");
    }
    accepted(delivery.verify_with(&verifier, NOW));
}

#[test]
fn an_authentic_body_that_is_no_envelope_is_malformed() {
    let verifier = Verifier::new(SECRET);
    let no_nonce = serde_json::json!({"event_id": EVENT, "event_type": "x", "api_version": "2026-05-29",
        "timestamp": NOW, "is_sandbox": false, "data": {}});
    let empty_nonce = serde_json::json!({"event_id": EVENT, "event_type": "x", "api_version": "2026-05-29",
        "timestamp": NOW, "nonce": "", "is_sandbox": false, "data": {}});
    for body in [
        b"not json".to_vec(),
        b"[]".to_vec(),
        no_nonce.to_string().into_bytes(),
        empty_nonce.to_string().into_bytes(),
    ] {
        let delivery = Delivery::signed(SECRET, body, EVENT, NOW);
        let error = rejected(delivery.verify_with(&verifier, NOW));
        assert!(matches!(error, VerifyError::MalformedBody(_)), "{error:?}");
    }
}

#[test]
fn verify_now_reads_the_system_clock() {
    let now = unix_now();
    let delivery = Delivery::new(SECRET, EVENT, NONCE, now);
    accepted(Verifier::new(SECRET).verify_now(&delivery.headers, &delivery.body));
}

#[test]
fn verifiers_sharing_a_store_share_its_memory() {
    let store = Arc::new(MemoryReplayStore::new());
    let one = Verifier::new(SECRET).with_store(Arc::clone(&store));
    let two = Verifier::with_secrets([OTHER_SECRET, SECRET]).with_store(Arc::clone(&store));
    accepted(Delivery::new(SECRET, EVENT, "n1", NOW).verify_with(&one, NOW));
    let again = Delivery::new(SECRET, EVENT, "n2", NOW).verify_with(&two, NOW);
    assert!(matches!(again, Ok(Verdict::Duplicate(_))));
    assert_eq!(store.len(), (2, 1));
}

#[test]
fn a_failing_store_is_reported_as_such() {
    struct Down;
    impl ReplayStore for Down {
        fn check_and_record(&self, _: &str, _: &str, _: i64) -> Result<Seen, StoreError> {
            Err(StoreError("connection refused".to_owned()))
        }
        fn forget_event(&self, _: &str) -> Result<(), StoreError> {
            Err(StoreError("connection refused".to_owned()))
        }
    }
    let verifier = Verifier::new(SECRET).with_store(Down);
    let error = rejected(Delivery::new(SECRET, EVENT, NONCE, NOW).verify_with(&verifier, NOW));
    assert_eq!(error.code(), "store_unavailable");
    assert!(verifier.forget_event(EVENT).is_err());
}

#[test]
fn debug_output_never_shows_a_secret() {
    let shown = format!("{:?}", Verifier::with_secrets([SECRET, OTHER_SECRET]));
    assert!(shown.contains("secrets: 2"), "{shown}");
    assert!(
        !shown.contains("whsec") && !shown.contains("c2VjcmV0"),
        "{shown}"
    );
}

#[test]
fn error_codes_are_distinct_snake_case() {
    let errors = [
        VerifyError::MissingSignature,
        VerifyError::MalformedSignature,
        VerifyError::SignatureMismatch,
        VerifyError::MissingTimestamp,
        VerifyError::MalformedTimestamp,
        VerifyError::TimestampOutOfTolerance {
            timestamp: 0,
            now: 0,
        },
        VerifyError::MalformedBody(String::new()),
        VerifyError::MissingEventId,
        VerifyError::EventIdMismatch {
            header: String::new(),
            body: String::new(),
        },
        VerifyError::NonceReplayed,
        VerifyError::Store(StoreError(String::new())),
    ];
    let codes: std::collections::BTreeSet<_> = errors.iter().map(VerifyError::code).collect();
    assert_eq!(codes.len(), errors.len());
    assert!(
        codes
            .iter()
            .all(|c| c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
    );
}

#[test]
fn a_verifier_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Verifier>();
    shareable::<Verifier<Arc<MemoryReplayStore>>>();
}

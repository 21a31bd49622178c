//! Typed identifiers: a prefix naming the kind of thing, then a ULID
//! (`agc_01JD…`, `usr_01JD…`). The prefix makes an id self-describing in logs and
//! support tickets, and the type stops a user id from being passed as an agency id.
//! Event ids are the one exception: the specification makes them bare ULIDs.
//!
//! Deserialising an id (a job payload, say) checks it like [`AgencyId::parse`]
//! does; reading one from a database column trusts it, as the column only
//! ever holds ids this service generated.

use std::fmt;

use ulid::Ulid;

/// Text that is not an id of the kind asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not an id of the form {expected}<ULID>")]
pub struct InvalidId {
    /// The prefix the id should have had.
    pub expected: &'static str,
}

macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, sqlx::Type)]
        #[serde(transparent)]
        #[sqlx(transparent)]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// A new, unique id.
            pub fn generate() -> Self {
                Self(format!("{}{}", $prefix, Ulid::generate()))
            }

            /// Parses an id received from outside; `None` when it cannot be one of ours
            /// (wrong prefix or not a ULID). The ULID part is normalised to upper case.
            pub fn parse(text: &str) -> Option<Self> {
                let ulid = text.strip_prefix($prefix)?;
                Ulid::from_string(ulid).ok().map(|u| Self(format!("{}{}", $prefix, u)))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = InvalidId;

            fn from_str(text: &str) -> Result<Self, InvalidId> {
                Self::parse(text).ok_or(InvalidId { expected: $prefix })
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                Self::parse(&text).ok_or_else(|| {
                    serde::de::Error::custom(format!("{text:?} is not a {}… id", $prefix))
                })
            }
        }
    };
}

typed_id!(
    /// Identifies an agency (the tenant).
    AgencyId,
    "agc_"
);
typed_id!(
    /// Identifies a user of an agency.
    UserId,
    "usr_"
);
typed_id!(
    /// Identifies an API key (never the key itself).
    ApiKeyId,
    "key_"
);

typed_id!(
    /// Identifies a listing internally (clients use its listing number).
    ListingId,
    "lst_"
);
typed_id!(
    /// Identifies an order of a listing.
    OrderId,
    "ord_"
);
typed_id!(
    /// Identifies a session of the developer settings (never its cookie secret).
    SessionId,
    "ses_"
);
typed_id!(
    /// Identifies an uploaded media item.
    MediaId,
    "med_"
);
typed_id!(
    /// Identifies an upload or archive operation (its progress stream too).
    OperationId,
    "op_"
);
typed_id!(
    /// Identifies a resumable upload (tus), which becomes a media item.
    UploadId,
    "upl_"
);
typed_id!(
    /// Identifies a shoot appointment.
    AppointmentId,
    "apt_"
);

typed_id!(
    /// Identifies a webhook endpoint of an agency.
    WebhookEndpointId,
    "whe_"
);
typed_id!(
    /// Identifies one delivery of an event (or a replay or test) to an endpoint.
    DeliveryId,
    "whd_"
);
typed_id!(
    /// Identifies a recovery: the re-sending of an endpoint's failed deliveries.
    RecoveryId,
    "whr_"
);
typed_id!(
    /// Identifies a delivery profile: an agency's named set of outputs.
    DeliveryProfileId,
    "dpf_"
);
typed_id!(
    /// Identifies an e-mail notification recorded for an agency's owner.
    NotificationId,
    "ntf_"
);

/// Identifies an event of the outbox: the bare ULID clients see as
/// `event_id` and `X-Event-Id`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, sqlx::Type)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct EventId(String);

impl EventId {
    /// A new, unique id; ULIDs generated later sort later.
    pub fn generate() -> Self {
        Self(Ulid::generate().to_string())
    }

    /// Parses an id received from outside; `None` when it is not a ULID. It
    /// is normalised to upper case.
    pub fn parse(text: &str) -> Option<Self> {
        Ulid::from_string(text).ok().map(|u| Self(u.to_string()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for EventId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("{text:?} is not an event id")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_back() {
        let id = UserId::generate();
        assert!(id.as_str().starts_with("usr_"));
        assert_eq!(UserId::parse(id.as_str()), Some(id));
    }

    #[test]
    fn wrong_prefix_or_garbage_is_not_an_id() {
        let agency = AgencyId::generate();
        assert_eq!(UserId::parse(agency.as_str()), None);
        assert_eq!(UserId::parse("usr_not-a-ulid"), None);
        assert_eq!(UserId::parse(""), None);
    }

    #[test]
    fn deserialising_checks_the_id() {
        let id = DeliveryId::generate();
        let text = serde_json::to_string(&id).unwrap();
        assert_eq!(serde_json::from_str::<DeliveryId>(&text).unwrap(), id);
        assert!(serde_json::from_str::<DeliveryId>("\"whe_01JZ3KE6F7G8H9J0K1M2N3P4Q5\"").is_err());
        let event = EventId::generate();
        let text = serde_json::to_string(&event).unwrap();
        assert_eq!(serde_json::from_str::<EventId>(&text).unwrap(), event);
        assert!(serde_json::from_str::<EventId>("\"evt_1\"").is_err());
    }

    #[test]
    fn lower_case_ulid_is_normalised() {
        let id = ApiKeyId::generate();
        let lower = id.as_str().to_ascii_lowercase();
        assert_eq!(ApiKeyId::parse(&lower), Some(id));
    }
}

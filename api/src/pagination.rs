//! Cursor pagination on the wire: the `{items, next_cursor, total}` envelope, the
//! `limit` bounds, and opaque cursors that are tamper-evident and bound to the
//! collection, tenant and filters they were issued for.
//!
//! A cursor is base64url(tag ‖ position), where tag is the first 16 bytes of
//! HMAC-SHA256 over the collection, agency, environment, filters and position
//! under a key derived from the master key. Changing any byte, or presenting the
//! cursor to another collection, agency or filter set, yields `invalid_cursor`.

use serde::{Deserialize, Serialize};
use storage::Tenant;
use storage::page::{Page, Position};
use storage::secrets::{decode_token, encode_token, hmac_sha256};
use subtle::ConstantTimeEq;
use utoipa::ToSchema;

use crate::error::ApiError;

/// Default page size.
pub const DEFAULT_LIMIT: u32 = 50;
/// Largest page size.
pub const MAX_LIMIT: u32 = 200;
/// Bytes of the truncated HMAC tag.
const TAG_LEN: usize = 16;

/// Checks `limit` against 1–200 and applies the default.
pub fn page_limit(limit: Option<i64>) -> Result<u32, ApiError> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=i64::from(MAX_LIMIT)).contains(&n) => Ok(n as u32),
        Some(_) => Err(ApiError::field(
            "limit",
            format!("must be an integer from 1 to {MAX_LIMIT}"),
        )),
    }
}

/// What a cursor is bound to.
pub struct CursorScope {
    /// The collection, e.g. `users`.
    pub collection: &'static str,
    /// The caller's tenant.
    pub tenant: Tenant,
    /// A canonical rendering of the filters in force.
    pub filters: String,
}

impl CursorScope {
    fn signed_message(&self, position_json: &[u8]) -> Vec<u8> {
        let mut message = format!(
            "{}\n{}\n{}\n{}\n",
            self.collection,
            self.tenant.agency_id,
            self.tenant.environment.as_str(),
            self.filters
        )
        .into_bytes();
        message.extend_from_slice(position_json);
        message
    }
}

/// Seals positions into cursors and opens them again.
#[derive(Clone)]
pub struct CursorCodec {
    key: [u8; 32],
}

impl CursorCodec {
    /// A codec keyed with `key`.
    pub fn new(key: &[u8]) -> Self {
        Self {
            key: hmac_sha256(key, b"cursor"),
        }
    }

    fn tag(&self, scope: &CursorScope, position_json: &[u8]) -> [u8; 32] {
        hmac_sha256(&self.key, &scope.signed_message(position_json))
    }

    /// The cursor for `position` within `scope`.
    pub fn seal(&self, scope: &CursorScope, position: &Position) -> String {
        // Serialising a struct of an integer and a string cannot fail.
        let json = serde_json::to_vec(position).unwrap_or_default();
        let mut token = self.tag(scope, &json)[..TAG_LEN].to_vec();
        token.extend_from_slice(&json);
        encode_token(&token)
    }

    /// The position inside `cursor`, if it was sealed by us for this `scope`.
    pub fn open(&self, scope: &CursorScope, cursor: &str) -> Result<Position, ApiError> {
        let bytes = decode_token(cursor).ok_or(ApiError::InvalidCursor)?;
        if bytes.len() <= TAG_LEN {
            return Err(ApiError::InvalidCursor);
        }
        let (tag, json) = bytes.split_at(TAG_LEN);
        let expected = self.tag(scope, json);
        if !bool::from(expected[..TAG_LEN].ct_eq(tag)) {
            return Err(ApiError::InvalidCursor);
        }
        serde_json::from_slice(json).map_err(|_| ApiError::InvalidCursor)
    }

    /// Opens an optional, possibly empty, cursor parameter.
    pub fn open_param(
        &self,
        scope: &CursorScope,
        cursor: Option<&str>,
    ) -> Result<Option<Position>, ApiError> {
        match cursor {
            None | Some("") => Ok(None),
            Some(cursor) => self.open(scope, cursor).map(Some),
        }
    }

    /// The wire envelope of a page, with items mapped by `to_wire`.
    pub fn envelope<T, W>(
        &self,
        scope: &CursorScope,
        page: Page<T>,
        to_wire: impl Fn(T) -> W,
    ) -> PageOut<W> {
        PageOut {
            next_cursor: page
                .next
                .as_ref()
                .map(|p| self.seal(scope, p))
                .unwrap_or_default(),
            total: page.total,
            items: page.items.into_iter().map(to_wire).collect(),
        }
    }
}

/// A page of a small collection read whole (an agency's keys, the
/// changelog): the items after `after`, in collection order, which must be
/// ascending by `position_of`.
pub fn page_of_all<T>(
    items: Vec<T>,
    position_of: impl Fn(&T) -> Position,
    after: Option<&Position>,
    limit: u32,
) -> Page<T> {
    let total = i64::try_from(items.len()).unwrap_or(i64::MAX);
    let key = |position: &Position| (position.created_at, position.id.clone());
    let mut rest: Vec<T> = match after {
        None => items,
        Some(after) => items
            .into_iter()
            .filter(|item| key(&position_of(item)) > key(after))
            .collect(),
    };
    let limit = limit as usize;
    let next = if rest.len() > limit {
        rest.truncate(limit);
        rest.last().map(&position_of)
    } else {
        None
    };
    Page {
        items: rest,
        next,
        total,
    }
}

/// Query of a paged list: the page size and where to continue.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// 1 to 200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The pagination envelope of every list endpoint.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PageOut<T> {
    /// The page's items.
    pub items: Vec<T>,
    /// Pass as `cursor` to get the next page; `""` at the end of the collection.
    pub next_cursor: String,
    /// How many items the whole filtered collection holds.
    pub total: i64,
}

#[cfg(test)]
mod tests {
    use storage::Environment;
    use storage::ids::AgencyId;

    use super::*;

    fn scope(tenant: &Tenant, filters: &str) -> CursorScope {
        CursorScope {
            collection: "users",
            tenant: tenant.clone(),
            filters: filters.to_owned(),
        }
    }

    #[test]
    fn a_sealed_cursor_opens_in_its_own_scope_only() {
        let codec = CursorCodec::new(b"key material");
        let tenant = Tenant::new(AgencyId::generate(), Environment::Live);
        let position = Position {
            created_at: 42,
            id: "usr_1".into(),
        };
        let cursor = codec.seal(&scope(&tenant, "role=agent"), &position);
        assert_eq!(
            codec.open(&scope(&tenant, "role=agent"), &cursor).unwrap(),
            position
        );

        let other_filters = codec.open(&scope(&tenant, "role=viewer"), &cursor);
        assert!(matches!(other_filters, Err(ApiError::InvalidCursor)));
        let sandbox = Tenant::new(tenant.agency_id.clone(), Environment::Sandbox);
        assert!(codec.open(&scope(&sandbox, "role=agent"), &cursor).is_err());
        let other_agency = Tenant::new(AgencyId::generate(), Environment::Live);
        assert!(
            codec
                .open(&scope(&other_agency, "role=agent"), &cursor)
                .is_err()
        );
        let other_key = CursorCodec::new(b"another key");
        assert!(
            other_key
                .open(&scope(&tenant, "role=agent"), &cursor)
                .is_err()
        );
    }

    #[test]
    fn tampered_or_garbage_cursors_are_invalid() {
        let codec = CursorCodec::new(b"key material");
        let tenant = Tenant::new(AgencyId::generate(), Environment::Live);
        let s = scope(&tenant, "");
        let cursor = codec.seal(
            &s,
            &Position {
                created_at: 1,
                id: "usr_1".into(),
            },
        );
        let mut bytes = decode_token(&cursor).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 1;
        assert!(codec.open(&s, &encode_token(&bytes)).is_err());
        for garbage in ["", "!!!", "AAAA", "eyJ9"] {
            assert!(codec.open(&s, garbage).is_err(), "{garbage}");
        }
    }

    #[test]
    fn a_collection_read_whole_pages_by_position() {
        let items: Vec<(i64, &str)> = vec![(1, "a"), (2, "b"), (2, "c"), (3, "d")];
        let position = |item: &(i64, &str)| Position {
            created_at: item.0,
            id: item.1.to_owned(),
        };
        let first = page_of_all(items.clone(), position, None, 3);
        assert_eq!(first.items, items[..3]);
        assert_eq!(first.total, 4);
        let second = page_of_all(items.clone(), position, first.next.as_ref(), 3);
        assert_eq!(second.items, items[3..]);
        assert!(second.next.is_none());
    }

    #[test]
    fn limits_outside_one_to_two_hundred_are_refused() {
        assert_eq!(page_limit(None).unwrap(), 50);
        assert_eq!(page_limit(Some(1)).unwrap(), 1);
        assert_eq!(page_limit(Some(200)).unwrap(), 200);
        assert!(page_limit(Some(0)).is_err());
        assert!(page_limit(Some(201)).is_err());
        assert!(page_limit(Some(-3)).is_err());
    }
}

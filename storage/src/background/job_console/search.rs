//! What a console search stands for beyond its own text: a listing number
//! stands for its listing, its media, the events about it and their webhook
//! deliveries, whose ids are what jobs carry.

use crate::db::on_pool;
use crate::{Result, Store};

/// Most events (and deliveries) a listing number stands for: the latest.
const RELATED_LIMIT: i64 = 2_000;

/// The latest events about a listing, by its number (`$2`), of its agency
/// (`$1`): the column computed from the events' data, by its index.
pub(crate) const EVENTS_OF_LISTING_SQL: &str = "select event_id from events
     where agency_id = $1 and listing_number = $2
     order by seq desc limit $3";

/// Events whose deliveries one statement looks up.
const DELIVERY_LOOKUP_CHUNK: usize = 200;

/// The deliveries, of any kind, of an agency's (`$1`) events whose ids are
/// the JSON array `$2`, by the index of the event.
pub(crate) fn deliveries_of_events_sql(backend: crate::db::Backend) -> String {
    format!(
        "select id from webhook_deliveries where event_id {} and agency_id = $1",
        backend.in_id_list("$2")
    )
}

/// What a listing number stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelatedIds {
    /// The listing's agency (`agc_…`).
    pub agency_id: String,
    /// The listing's id, its media items', its latest events' and their
    /// deliveries'.
    pub ids: Vec<String>,
}

/// Searches of the job console.
pub struct JobSearch<'a> {
    store: &'a Store,
}

impl Store {
    /// Searches of the job console.
    pub fn job_search(&self) -> JobSearch<'_> {
        JobSearch { store: self }
    }
}

impl JobSearch<'_> {
    /// What `text` stands for when it is a listing number: the listing's
    /// agency, and the ids of the listing, its media items, its latest events
    /// and their deliveries. None when no listing has that number.
    pub async fn listing(&self, text: &str) -> Result<Option<RelatedIds>> {
        let number = text.trim().to_ascii_uppercase();
        if number.is_empty() || number.len() > 32 {
            return Ok(None);
        }
        on_pool!(self.store.db(), pool => {
            let listing: Option<(String, String)> =
                sqlx::query_as("select id, agency_id from listings where listing_number = $1")
                    .bind(&number)
                    .fetch_optional(pool)
                    .await?;
            let Some((listing_id, agency_id)) = listing else {
                return Ok(None);
            };
            let mut ids = vec![listing_id.clone()];
            let media: Vec<String> = sqlx::query_scalar("select id from media_items where listing_id = $1")
                .bind(&listing_id)
                .fetch_all(pool)
                .await?;
            ids.extend(media);
            let events: Vec<String> = sqlx::query_scalar(EVENTS_OF_LISTING_SQL)
                .bind(&agency_id)
                .bind(&number)
                .bind(RELATED_LIMIT)
                .fetch_all(pool)
                .await?;
            for chunk in events.chunks(DELIVERY_LOOKUP_CHUNK) {
                let deliveries: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(deliveries_of_events_sql(
                    self.store.db().backend(),
                )))
                .bind(&agency_id)
                .bind(serde_json::to_string(chunk).map_err(|err| {
                    crate::StorageError::Corrupt(format!("event ids: {err}"))
                })?)
                .fetch_all(pool)
                .await?;
                ids.extend(deliveries);
            }
            ids.extend(events);
            Ok(Some(RelatedIds { agency_id, ids }))
        })
    }
}

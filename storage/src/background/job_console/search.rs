//! What a console search stands for beyond its own text: a listing number
//! stands for its listing, its media, the events about it and their webhook
//! deliveries, whose ids are what jobs carry.

use crate::db::on_pool;
use crate::{Result, Store};

/// Most events (and deliveries) a listing number stands for: the latest.
const RELATED_LIMIT: i64 = 2_000;

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
            let events: Vec<String> = sqlx::query_scalar(
                "select event_id from events where agency_id = $1
                     and (cast(data as text) like $2 or cast(data as text) like $3)
                 order by seq desc limit $4",
            )
            .bind(&agency_id)
            .bind(format!("%\"{number}\"%"))
            .bind(format!("%\"{listing_id}\"%"))
            .bind(RELATED_LIMIT)
            .fetch_all(pool)
            .await?;
            for chunk in events.chunks(200) {
                let placeholders: Vec<String> = (2..chunk.len() + 2).map(|n| format!("${n}")).collect();
                let sql = format!(
                    "select id from webhook_deliveries where agency_id = $1 and event_id in ({})",
                    placeholders.join(", ")
                );
                let mut query = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(&agency_id);
                for event in chunk {
                    query = query.bind(event);
                }
                let deliveries: Vec<String> = query.fetch_all(pool).await?;
                ids.extend(deliveries);
            }
            ids.extend(events);
            Ok(Some(RelatedIds { agency_id, ids }))
        })
    }
}

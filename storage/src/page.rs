//! Keyset pagination: a page of rows, the total, and the position to continue
//! after. Positions are (created_at, id), so rows inserted while a client pages
//! land after the pages it has already read and never shift earlier ones.

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// Where a page ends: the sort key of its last row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The last row's creation time, in microseconds.
    pub created_at: i64,
    /// The last row's id, breaking ties between rows created in the same microsecond.
    pub id: String,
}

impl Position {
    /// The position just after a row with this sort key.
    pub fn after(created_at: Timestamp, id: impl Into<String>) -> Self {
        Self {
            created_at: created_at.as_micros(),
            id: id.into(),
        }
    }
}

/// Most rows a page may hold; the API enforces its own 1–200 bound before this.
pub const MAX_PAGE_SIZE: u32 = 200;

/// One page of a collection.
#[derive(Clone, Debug)]
pub struct Page<T> {
    /// The rows, in collection order.
    pub items: Vec<T>,
    /// Where the next page starts; `None` at the end of the collection.
    pub next: Option<Position>,
    /// How many rows the whole filtered collection holds.
    pub total: i64,
}

impl<T> Page<T> {
    /// Builds a page from up to `limit + 1` fetched rows: the extra row only tells
    /// that more exist.
    pub(crate) fn from_overfetch(
        mut rows: Vec<T>,
        limit: u32,
        total: i64,
        position_of: impl Fn(&T) -> Position,
    ) -> Self {
        let limit = limit as usize;
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(position_of)
        } else {
            None
        };
        Self {
            items: rows,
            next,
            total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extra_row_means_there_is_a_next_page() {
        let page = Page::from_overfetch(vec![1, 2, 3], 2, 3, |n| {
            Position::after(Timestamp::from_micros(*n), n.to_string())
        });
        assert_eq!(page.items, vec![1, 2]);
        assert_eq!(page.next.map(|p| p.id), Some("2".to_owned()));
    }

    #[test]
    fn no_extra_row_means_the_end() {
        let page = Page::from_overfetch(vec![1, 2], 2, 2, |n| {
            Position::after(Timestamp::from_micros(*n), n.to_string())
        });
        assert_eq!(page.items.len(), 2);
        assert!(page.next.is_none());
    }
}

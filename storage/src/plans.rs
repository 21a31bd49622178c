//! The query plans of the lists that grow with an agency's data, read from
//! the database itself (`EXPLAIN QUERY PLAN` on SQLite, `EXPLAIN (FORMAT
//! JSON)` on PostgreSQL) and judged: a plan that scans one of the growing
//! tables instead of seeking an index, or sorts the table's rows instead of
//! reading them in the index's order, is a problem. The suite holds every
//! list to no problem, so a change that loses an index fails a test rather
//! than a customer with a million rows.
//!
//! On PostgreSQL the plan is asked for with sequential and bitmap scans
//! discouraged, so a table of a few test rows is planned as a large one
//! would be: if an index can serve the query in order, the plan shows it.

use serde_json::Value;

use crate::background::job_console::attempts;
use crate::background::job_console::search::{EVENTS_OF_LISTING_SQL, deliveries_of_events_sql};
use crate::background::progress::PURGE_STEPS_SQL;
use crate::db::{Backend, Database};
use crate::listings::read::{ListShape, list_sql};
use crate::media::{
    PHOTOS_AFTER_SQL, UNSWEPT_PROFILES_SQL, UPLOADS_ENDED, UPLOADS_RECEIVING,
    WATERMARK_CANDIDATES_SQL, uploads_due_sql,
};
use crate::people::users::{UserListShape, user_count_sql, user_list_sql};
use crate::requests::idempotency::PURGE_EXPIRED_SQL;
use crate::webhooks::deliveries::{attempts_of_sql, deliveries_page_sql, recent_deliveries_sql};
use crate::webhooks::recoveries::FAILED_SINCE;
use crate::webhooks::sweeps::PURGE_FINISHED_SQL;
use crate::{Result, Store};

/// The tables whose rows grow without bound with an agency's activity.
const GROWING_TABLES: [&str; 9] = [
    "listings",
    "uploads",
    "events",
    "media_items",
    "users",
    "webhook_deliveries",
    "job_attempts",
    "idempotency_records",
    "operation_progress_events",
];

/// Whether an index condition (SQLite's `completed_at<?`, PostgreSQL's
/// `(completed_at < $1)`) bounds `column`, by equality or by a range.
fn bounds(condition: &str, column: &str, spaced: bool) -> bool {
    ["=", "<", ">"].iter().any(|operator| {
        let needle = if spaced {
            format!("{column} {operator}")
        } else {
            format!("{column}{operator}")
        };
        condition.contains(&needle)
    })
}

/// The names a statement reads the growing tables by, as SQLite's plan
/// writes them: the table's own, and its alias (`webhook_deliveries d`).
fn growing_names(sql: &str) -> Vec<String> {
    const NOT_ALIASES: [&str; 9] = [
        "where", "join", "on", "order", "limit", "set", "group", "left", "inner",
    ];
    let words: Vec<&str> = sql
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
        .filter(|word| !word.is_empty())
        .collect();
    let mut names: Vec<String> = GROWING_TABLES.iter().map(|t| (*t).to_owned()).collect();
    for pair in words.windows(3) {
        let reads = matches!(pair[0], "from" | "join" | "FROM" | "JOIN");
        if reads && GROWING_TABLES.contains(&pair[1]) {
            let alias = pair[2];
            if alias.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !NOT_ALIASES.contains(&alias.to_ascii_lowercase().as_str())
                && !names.iter().any(|name| name == alias)
            {
                names.push(alias.to_owned());
            }
        }
    }
    names
}

/// One list query's plan, as the database gives it, and what is wrong with it.
#[derive(Clone, Debug)]
pub struct QueryPlan {
    /// Which query (`listings status agent after`).
    pub name: String,
    /// The plan's text.
    pub plan: String,
    /// Each scan of a growing table, and each sort of one's rows.
    pub problems: Vec<String>,
}

/// A sample value for a placeholder.
#[derive(Clone, Debug)]
enum Bind {
    Text(&'static str),
    Number(i64),
    Flag(bool),
}

/// A query to plan: its name, its statement, sample values for its
/// placeholders in order, and the columns every read of a growing table
/// must seek by (each group: one of its columns), so a filter an index does
/// not serve shows as a read of the whole tenant's rows.
struct Planned {
    name: String,
    sql: String,
    binds: Vec<Bind>,
    seeks: Vec<&'static [&'static str]>,
    /// Whether the rows it sorts are those of a bounded list of keys (a
    /// batch of ids, each with a few rows), not a range of the table.
    sorts_keyed_rows: bool,
}

/// The list queries, each shape with sample values.
fn planned(backend: Backend) -> Vec<Planned> {
    let mut queries = Vec::new();
    for shape in ListShape::all() {
        let mut binds = vec![Bind::Text("agc_0"), Bind::Flag(false)];
        let mut name = "listings".to_owned();
        let mut seeks: Vec<&'static [&'static str]> = vec![&["agency_id"], &["is_sandbox"]];
        if shape.status {
            binds.push(Bind::Text("active"));
            name.push_str(" status");
            seeks.push(&["status"]);
        }
        if shape.agent {
            binds.push(Bind::Text("usr_0"));
            name.push_str(" agent");
            seeks.push(&["agent_one_id", "agent_two_id"]);
        }
        if shape.after {
            binds.push(Bind::Number(1));
            binds.push(Bind::Text("lst_0"));
            name.push_str(" after");
        }
        binds.push(Bind::Number(51));
        queries.push(Planned {
            name,
            sql: list_sql(shape),
            binds,
            seeks,
            sorts_keyed_rows: false,
        });
    }
    for shape in UserListShape::all() {
        let mut binds = vec![Bind::Text("agc_0")];
        let mut seeks: Vec<&'static [&'static str]> = vec![&["agency_id"]];
        let mut name = "users".to_owned();
        if shape.role {
            binds.push(Bind::Text("agent"));
            seeks.push(&["role"]);
            name.push_str(" role");
        }
        if shape.active {
            // Whether to seek by a yes-or-no column or filter the agency's
            // people in order is the planner's call, by its statistics: it
            // is not held here.
            binds.push(Bind::Flag(true));
            name.push_str(" active");
        }
        let count_binds = binds.clone();
        if shape.after {
            binds.extend([Bind::Number(1), Bind::Text("usr_0")]);
            name.push_str(" after");
        } else {
            // The total counts an agency's people (tens to thousands, not a
            // table's millions): it must seek the agency; which of the
            // agency's indexes the planner counts on is its choice.
            queries.push(Planned {
                name: format!("{name} total"),
                sql: user_count_sql(shape),
                binds: count_binds,
                seeks: vec![&["agency_id"]],
                sorts_keyed_rows: false,
            });
        }
        binds.push(Bind::Number(51));
        queries.push(Planned {
            name,
            sql: user_list_sql(shape),
            binds,
            seeks,
            sorts_keyed_rows: false,
        });
    }
    let endpoint = Bind::Text("whe_0");
    for before in [false, true] {
        let mut binds = vec![endpoint.clone()];
        if before {
            binds.extend([Bind::Number(1), Bind::Text("dlv_0")]);
        }
        binds.push(Bind::Number(51));
        queries.push(Planned {
            name: format!("webhook deliveries{}", if before { " before" } else { "" }),
            sql: deliveries_page_sql(before),
            binds,
            seeks: vec![&["endpoint_id"]],
            sorts_keyed_rows: false,
        });
    }
    for (status, event_type) in [(true, false), (false, true), (true, true)] {
        let mut binds = vec![endpoint.clone()];
        let mut seeks: Vec<&'static [&'static str]> = vec![&["endpoint_id"]];
        let mut name = "portal delivery log".to_owned();
        if status {
            binds.push(Bind::Text("failed"));
            seeks.push(&["status"]);
            name.push_str(" status");
        }
        if event_type {
            binds.push(Bind::Text("listing.created"));
            seeks.push(&["event_type"]);
            name.push_str(" event_type");
        }
        binds.push(Bind::Number(50));
        queries.push(Planned {
            name,
            sql: recent_deliveries_sql(status, event_type),
            binds,
            seeks,
            sorts_keyed_rows: false,
        });
    }
    queries.push(Planned {
        name: "portal delivery log attempts".to_owned(),
        sql: attempts_of_sql(backend),
        binds: vec![Bind::Text(r#"["dlv_0", "dlv_1"]"#)],
        seeks: vec![&["delivery_id"]],
        sorts_keyed_rows: true,
    });
    queries.push(Planned {
        name: "recovery count".to_owned(),
        sql: format!("select count(*) from webhook_deliveries d where {FAILED_SINCE}"),
        binds: vec![endpoint, Bind::Number(1), Bind::Number(2)],
        seeks: vec![&["endpoint_id"], &["completed_at"]],
        sorts_keyed_rows: false,
    });
    // The retention purges: each batch finds its rows by the time they are
    // kept by, and deletes them by their key.
    for (name, sql, seek) in [
        (
            "delivery purge",
            PURGE_FINISHED_SQL,
            &["completed_at", "id"][..],
        ),
        (
            "job run purge",
            attempts::PURGE_SQL,
            &["started_at", "job_id"][..],
        ),
        (
            "idempotency purge",
            PURGE_EXPIRED_SQL,
            &["created_at", "idempotency_key"][..],
        ),
        (
            "progress history purge",
            PURGE_STEPS_SQL,
            &["recorded_at", "operation_id"][..],
        ),
    ] {
        queries.push(Planned {
            name: name.to_owned(),
            sql: sql.to_owned(),
            binds: vec![Bind::Number(1), Bind::Number(1_000)],
            seeks: vec![seek],
            sorts_keyed_rows: false,
        });
    }
    // A delivery profile's sweep: the agency's photos in id order, a batch
    // at a time.
    queries.push(Planned {
        name: "profile sweep photos".to_owned(),
        sql: PHOTOS_AFTER_SQL.to_owned(),
        binds: vec![
            Bind::Text("agc_0"),
            Bind::Flag(false),
            Bind::Text("med_0"),
            Bind::Number(4),
        ],
        seeks: vec![&["agency_id"]],
        sorts_keyed_rows: false,
    });
    // The portal's watermark choice: the agency's images of no listing,
    // newest first, through the partial index.
    queries.push(Planned {
        name: "watermark candidates".to_owned(),
        sql: WATERMARK_CANDIDATES_SQL.to_owned(),
        binds: vec![Bind::Text("agc_0"), Bind::Flag(false), Bind::Number(50)],
        seeks: vec![&["agency_id"]],
        sorts_keyed_rows: false,
    });
    // The maintenance's look for sweeps whose first push was lost: only the
    // unswept profiles, through their partial index.
    queries.push(Planned {
        name: "unswept profiles".to_owned(),
        sql: UNSWEPT_PROFILES_SQL.to_owned(),
        binds: vec![Bind::Number(1), Bind::Number(50)],
        seeks: vec![&["updated_at"]],
        sorts_keyed_rows: false,
    });
    // The ops console's search by listing number: the listing's media, its
    // latest events, their deliveries and the runs of all of them.
    queries.extend([
        Planned {
            name: "console listing media".to_owned(),
            sql: "select id from media_items where listing_id = $1".to_owned(),
            binds: vec![Bind::Text("lst_0")],
            seeks: vec![&["listing_id"]],
            sorts_keyed_rows: false,
        },
        Planned {
            name: "console listing events".to_owned(),
            sql: EVENTS_OF_LISTING_SQL.to_owned(),
            binds: vec![
                Bind::Text("agc_0"),
                Bind::Text("K7M3QX9"),
                Bind::Number(2_000),
            ],
            seeks: vec![&["agency_id"], &["listing_number"]],
            sorts_keyed_rows: false,
        },
        Planned {
            name: "uploads expired".to_owned(),
            sql: uploads_due_sql(UPLOADS_RECEIVING),
            binds: vec![Bind::Number(1), Bind::Number(100)],
            seeks: vec![&["state"], &["expires_at"]],
            sorts_keyed_rows: false,
        },
        Planned {
            name: "uploads forgettable".to_owned(),
            sql: uploads_due_sql(UPLOADS_ENDED),
            binds: vec![Bind::Number(1), Bind::Number(100)],
            seeks: vec![&["expires_at"]],
            sorts_keyed_rows: false,
        },
        Planned {
            name: "console listing deliveries".to_owned(),
            sql: deliveries_of_events_sql(backend),
            binds: vec![Bind::Text("agc_0"), Bind::Text(r#"["evt_0", "evt_1"]"#)],
            seeks: vec![&["event_id"]],
            sorts_keyed_rows: false,
        },
        Planned {
            name: "console runs of jobs".to_owned(),
            sql: attempts::of_jobs_sql(backend),
            binds: vec![
                Bind::Text(r#"["evt_0", "dlv_0"]"#),
                Bind::Text("outbox_dispatch"),
                Bind::Number(101),
            ],
            seeks: vec![&["job_id"]],
            sorts_keyed_rows: true,
        },
    ]);
    queries
}

impl Store {
    /// The plan of every list query on this store's database.
    pub async fn list_query_plans(&self) -> Result<Vec<QueryPlan>> {
        let mut plans = Vec::new();
        for query in planned(self.db().backend()) {
            let plan = match self.db() {
                Database::Sqlite(sqlite) => sqlite_plan(sqlite.pool(), &query).await?,
                Database::Postgres(pool) => postgres_plan(pool, &query).await?,
            };
            plans.push(plan);
        }
        Ok(plans)
    }
}

async fn sqlite_plan(pool: &sqlx::SqlitePool, query: &Planned) -> Result<QueryPlan> {
    let sql = format!("explain query plan {}", query.sql);
    let mut explain = sqlx::query_as::<_, (i64, i64, i64, String)>(sqlx::AssertSqlSafe(sql));
    for bind in &query.binds {
        explain = match bind {
            Bind::Text(text) => explain.bind(*text),
            Bind::Number(number) => explain.bind(*number),
            Bind::Flag(flag) => explain.bind(*flag),
        };
    }
    let rows = explain.fetch_all(pool).await?;
    let names = growing_names(&query.sql);
    let mut problems = Vec::new();
    let mut lines = Vec::new();
    for (id, parent, _, detail) in &rows {
        for table in &names {
            if detail.starts_with(&format!("SCAN {table}")) {
                problems.push(format!("scans {table}: {detail}"));
            }
            // A search must seek by every filter, or it reads every row of
            // the range it does seek and filters them.
            if detail.starts_with(&format!("SEARCH {table}")) {
                let constraint = detail.split_once('(').map_or("", |(_, rest)| rest);
                for group in &query.seeks {
                    if !group.iter().any(|column| bounds(constraint, column, false)) {
                        problems.push(format!("does not seek by {}: {detail}", group.join(" or ")));
                    }
                }
            }
        }
        // A sort beside a read of a growing table sorts its rows; beside
        // the scan of a subquery it sorts that subquery's few, limited rows
        // (the two sides of a merge).
        let sorts_growing_rows = detail.contains("USE TEMP B-TREE FOR ORDER BY")
            && rows.iter().any(|(other, other_parent, _, other_detail)| {
                other != id
                    && other_parent == parent
                    && names.iter().any(|table| {
                        other_detail.starts_with(&format!("SCAN {table}"))
                            || other_detail.starts_with(&format!("SEARCH {table}"))
                    })
            });
        if sorts_growing_rows && !query.sorts_keyed_rows {
            problems.push(format!("sorts: {detail}"));
        }
        lines.push(detail.clone());
    }
    Ok(QueryPlan {
        name: query.name.clone(),
        plan: lines.join("\n"),
        problems,
    })
}

async fn postgres_plan(pool: &sqlx::PgPool, query: &Planned) -> Result<QueryPlan> {
    let mut tx = pool.begin().await?;
    // A few test rows planned as millions would be: a whole-range read (a
    // sequential scan, or a bitmap of every index entry in the range) is
    // what the planner of a large table avoids when an index walk in order
    // can stop at the limit, and a batch of a thousand keys meets a large
    // table by a loop of key lookups, not by merging or hashing the table.
    for setting in [
        "enable_seqscan",
        "enable_bitmapscan",
        "enable_mergejoin",
        "enable_hashjoin",
    ] {
        sqlx::query(sqlx::AssertSqlSafe(format!("set local {setting} = off")))
            .execute(&mut *tx)
            .await?;
    }
    let sql = format!("explain (format json) {}", query.sql);
    let mut explain = sqlx::query_scalar::<_, Value>(sqlx::AssertSqlSafe(sql));
    for bind in &query.binds {
        explain = match bind {
            Bind::Text(text) => explain.bind(*text),
            Bind::Number(number) => explain.bind(*number),
            Bind::Flag(flag) => explain.bind(*flag),
        };
    }
    let plan = explain.fetch_one(&mut *tx).await?;
    tx.rollback().await?;
    let mut problems = Vec::new();
    postgres_problems(
        &plan[0]["Plan"],
        &query.seeks,
        query.sorts_keyed_rows,
        &mut problems,
    );
    Ok(QueryPlan {
        name: query.name.clone(),
        plan: serde_json::to_string_pretty(&plan).unwrap_or_default(),
        problems,
    })
}

/// The problems of a PostgreSQL plan node and its children: a sequential
/// scan of a growing table, and a sort of such a table's rows that no limit
/// bounds (a sort of a few rows merged from limited index reads is none).
fn postgres_problems(
    node: &Value,
    seeks: &[&[&str]],
    sorts_keyed_rows: bool,
    problems: &mut Vec<String>,
) {
    let kind = node["Node Type"].as_str().unwrap_or_default();
    let relation = node["Relation Name"].as_str().unwrap_or_default();
    if kind == "Seq Scan" && GROWING_TABLES.contains(&relation) {
        problems.push(format!("scans {relation}"));
    }
    if kind.contains("Index") && GROWING_TABLES.contains(&relation) {
        // Every filter is in the index condition, none left to a filter
        // over the rows read.
        let condition = node["Index Cond"].as_str().unwrap_or_default();
        for group in seeks {
            if !group.iter().any(|column| bounds(condition, column, true)) {
                problems.push(format!(
                    "does not seek {relation} by {}: {condition}",
                    group.join(" or ")
                ));
            }
        }
    }
    let children = node["Plans"].as_array().into_iter().flatten();
    if kind == "Sort" && !sorts_keyed_rows && children.clone().any(reads_a_growing_table_unlimited)
    {
        problems.push("sorts rows of a growing table".to_owned());
    }
    for child in children {
        postgres_problems(child, seeks, sorts_keyed_rows, problems);
    }
}

/// Whether a node reads a growing table with no limit on the way.
fn reads_a_growing_table_unlimited(node: &Value) -> bool {
    let kind = node["Node Type"].as_str().unwrap_or_default();
    if kind == "Limit" {
        return false;
    }
    let relation = node["Relation Name"].as_str().unwrap_or_default();
    GROWING_TABLES.contains(&relation)
        || node["Plans"]
            .as_array()
            .into_iter()
            .flatten()
            .any(reads_a_growing_table_unlimited)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::scratch_sqlite;
    use crate::{Clock, MasterKey};

    /// A filter no index serves is found out: the judge can fail.
    #[tokio::test]
    async fn a_list_no_index_serves_is_a_problem() {
        let (db, _dir) = scratch_sqlite().await;
        db.migrate().await.unwrap();
        let Database::Sqlite(sqlite) = &db else {
            unreachable!("a scratch SQLite database")
        };
        let unserved = Planned {
            name: "listings by notes".to_owned(),
            sql: "select id from listings where agency_id = $1 and is_sandbox = $2
                  and (notes = $3 or $3 is null) order by created_at desc limit $4"
                .to_owned(),
            binds: vec![
                Bind::Text("agc_0"),
                Bind::Flag(false),
                Bind::Text("x"),
                Bind::Number(51),
            ],
            seeks: vec![&["agency_id"], &["is_sandbox"], &["notes"]],
            sorts_keyed_rows: false,
        };
        let plan = sqlite_plan(sqlite.pool(), &unserved).await.unwrap();
        assert!(!plan.problems.is_empty(), "{}", plan.plan);
        let scan = Planned {
            name: "every listing".to_owned(),
            sql: "select id from listings order by address limit $1".to_owned(),
            binds: vec![Bind::Number(51)],
            seeks: Vec::new(),
            sorts_keyed_rows: false,
        };
        let plan = sqlite_plan(sqlite.pool(), &scan).await.unwrap();
        assert!(!plan.problems.is_empty(), "{}", plan.plan);
        let aliased = Planned {
            name: "deliveries by data".to_owned(),
            sql: "select d.id from webhook_deliveries d where d.api_version = $1 limit $2"
                .to_owned(),
            binds: vec![Bind::Text("2026-05-29"), Bind::Number(51)],
            seeks: Vec::new(),
            sorts_keyed_rows: false,
        };
        let aliased_plan = sqlite_plan(sqlite.pool(), &aliased).await.unwrap();
        assert!(
            aliased_plan
                .problems
                .iter()
                .any(|p| p.starts_with("scans d")),
            "{:?}\n{}",
            aliased_plan.problems,
            aliased_plan.plan
        );
        assert!(
            plan.problems
                .iter()
                .any(|problem| problem.starts_with("scans listings")),
            "{:?}\n{}",
            plan.problems,
            plan.plan
        );
    }

    #[tokio::test]
    async fn every_list_query_seeks_an_index_on_sqlite() {
        let (db, _dir) = scratch_sqlite().await;
        db.migrate().await.unwrap();
        let store = Store::open(db, &MasterKey::generate(), Clock::System)
            .await
            .unwrap();
        for plan in store.list_query_plans().await.unwrap() {
            assert!(
                plan.problems.is_empty(),
                "{}: {:?}\n{}",
                plan.name,
                plan.problems,
                plan.plan
            );
        }
    }
}

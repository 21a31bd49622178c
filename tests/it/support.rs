//! Assertions shared by the test modules.

use reqwest::{Response, StatusCode};
use serde_json::Value;

/// Asserts that `response` is the error envelope with `status` and `code`, that
/// `error.request_id` equals the `X-Request-Id` header, and returns the body.
pub async fn expect_error(response: Response, status: StatusCode, code: &str) -> Value {
    let actual = response.status();
    let request_id = response
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .expect("X-Request-Id on every response");
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let text = response.text().await.expect("body");
    assert_eq!(actual, status, "status of {text}");
    assert!(
        content_type.starts_with("application/json"),
        "content type {content_type}"
    );
    let body: Value =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("envelope is JSON: {text}"));
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["error"]["request_id"], request_id.as_str(), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(body["error"]["details"].is_object(), "{body}");
    body
}

/// Asserts a 200 and returns the JSON body.
pub async fn expect_ok(response: Response) -> Value {
    let status = response.status();
    let text = response.text().await.expect("body");
    assert_eq!(status, StatusCode::OK, "{text}");
    serde_json::from_str(&text).expect("JSON body")
}

/// Asserts a 201 and returns its JSON body.
pub async fn expect_created(response: Response) -> Value {
    let status = response.status();
    let text = response.text().await.expect("body");
    assert_eq!(status, StatusCode::CREATED, "{text}");
    serde_json::from_str(&text).expect("JSON body")
}

/// Direct SQL for conditions no route can produce yet (a deactivated user, an
/// expired key) and for inspecting what the database holds.
pub mod sql {
    use storage::Database;
    use tests::TestApp;

    /// Changes the schema of a SQLite database that other connections are
    /// writing to. A lone `create` or `drop` starts as a reader and fails at
    /// once ("database is locked", no busy wait) when another connection
    /// commits before it takes the write lock; `begin immediate` takes the
    /// lock first, waiting its turn as any writer does.
    pub async fn sqlite_schema_change(pool: &sqlx::SqlitePool, sql: &str) {
        let mut tx = pool.begin_with("begin immediate").await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }

    macro_rules! execute {
        ($db:expr, $sql:expr) => {
            match $db {
                Database::Sqlite(sqlite) => {
                    sqlite_schema_change(sqlite.pool(), $sql).await;
                    Ok::<(), sqlx::Error>(())
                }
                Database::Postgres(pool) => sqlx::query($sql).execute(pool).await.map(|_| ()),
            }
            .unwrap()
        };
        ($db:expr, $sql:expr $(, $bind:expr)+) => {
            match $db {
                Database::Sqlite(sqlite) => sqlx::query($sql)$(.bind($bind))*.execute(sqlite.pool()).await.map(|_| ()),
                Database::Postgres(pool) => sqlx::query($sql)$(.bind($bind))*.execute(pool).await.map(|_| ()),
            }
            .unwrap()
        };
    }

    /// When the reservation of an idempotency key runs out (microseconds),
    /// if it is held.
    pub async fn idempotency_lease(db: &Database, key: &str) -> Option<i64> {
        let sql = "select lease_expires_at from idempotency_records
                   where idempotency_key = $1 and state = 'in_flight'";
        match db {
            Database::Sqlite(sqlite) => {
                sqlx::query_scalar(sql)
                    .bind(key)
                    .fetch_optional(sqlite.pool())
                    .await
            }
            Database::Postgres(pool) => {
                sqlx::query_scalar(sql).bind(key).fetch_optional(pool).await
            }
        }
        .unwrap()
        .flatten()
    }

    /// Gives a user an e-mail address.
    pub async fn set_user_email(db: &Database, user_id: &str, email: &str) {
        execute!(
            db,
            "update users set email = $1 where id = $2",
            email,
            user_id
        );
    }

    /// How many times a user signed in.
    pub async fn login_count(db: &Database, user_id: &str) -> i64 {
        let sql = "select cast(login_count as bigint) from users where id = $1";
        match db {
            Database::Sqlite(sqlite) => {
                sqlx::query_scalar(sql)
                    .bind(user_id)
                    .fetch_one(sqlite.pool())
                    .await
            }
            Database::Postgres(pool) => sqlx::query_scalar(sql).bind(user_id).fetch_one(pool).await,
        }
        .unwrap()
    }

    /// Sets a key's expiry (what a finished rotation overlap does).
    pub async fn expire_key(app: &TestApp, key_id: &str, at_micros: i64) {
        execute!(
            app.store.db(),
            "update api_keys set status = 'rotating', expires_at = $1 where id = $2",
            at_micros,
            key_id
        );
    }

    /// How many rows `table` holds for `agency`.
    pub async fn count_for_agency(db: &Database, table: &str, agency_id: &str) -> i64 {
        let sql = sqlx::AssertSqlSafe(format!("select count(*) from {table} where agency_id = $1"));
        match db {
            Database::Sqlite(sqlite) => {
                sqlx::query_scalar(sql)
                    .bind(agency_id)
                    .fetch_one(sqlite.pool())
                    .await
            }
            Database::Postgres(pool) => {
                sqlx::query_scalar(sql)
                    .bind(agency_id)
                    .fetch_one(pool)
                    .await
            }
        }
        .unwrap()
    }

    /// Makes every insert of an event of `event_type` fail, so the transaction
    /// writing it must roll back whole.
    pub async fn fail_inserts_of_event(db: &Database, event_type: &str) {
        match db {
            Database::Sqlite(sqlite) => {
                let pool = sqlite.pool();
                let sql = format!(
                    "create trigger injected_failure before insert on events
                     when new.event_type = '{event_type}'
                     begin select raise(abort, 'injected failure'); end"
                );
                sqlite_schema_change(pool, &sql).await;
                Ok::<(), sqlx::Error>(())
            }
            Database::Postgres(pool) => {
                let function = format!(
                    "create or replace function injected_failure() returns trigger language plpgsql as $$
                     begin
                         if new.event_type = '{event_type}' then raise exception 'injected failure'; end if;
                         return new;
                     end $$"
                );
                sqlx::query(sqlx::AssertSqlSafe(function)).execute(pool).await.unwrap();
                sqlx::query(
                    "create trigger injected_failure before insert on events
                     for each row execute function injected_failure()",
                )
                .execute(pool)
                .await
                .map(|_| ())
            }
        }
        .unwrap();
    }

    /// Removes the trigger `fail_inserts_of_event` created.
    pub async fn drop_injected_failure(db: &Database) {
        match db {
            Database::Sqlite(sqlite) => {
                sqlite_schema_change(sqlite.pool(), "drop trigger injected_failure").await;
                Ok::<(), sqlx::Error>(())
            }
            Database::Postgres(pool) => sqlx::query("drop trigger injected_failure on events")
                .execute(pool)
                .await
                .map(|_| ()),
        }
        .unwrap();
    }

    /// Makes the commit of a transaction that inserted a webhook delivery
    /// fail, as a full disk or a lost connection would: the statements all
    /// pass, the commit does not, and the transaction is undone whole. On
    /// SQLite a deferred foreign key checked at commit fails every such
    /// commit until [`end_commit_fault`]; on PostgreSQL a deferred
    /// constraint trigger fails the first one only (a sequence counts, and
    /// outlives the rollback). SQLite's fault ends with [`end_commit_fault`].
    pub async fn fail_commits_of_deliveries(db: &Database) {
        let statements: &[&str] = match db {
            Database::Sqlite(_) => &[
                "create table injected_commit_fault_target (id integer primary key)",
                "create table injected_commit_fault (target integer
                     references injected_commit_fault_target (id) deferrable initially deferred)",
                "create trigger injected_commit_fault after insert on webhook_deliveries
                 begin insert into injected_commit_fault (target) values (1); end",
            ],
            Database::Postgres(_) => &[
                "create sequence injected_commit_fault",
                "create function injected_commit_fault() returns trigger language plpgsql as $$
                 begin
                     if nextval('injected_commit_fault') = 1 then
                         raise exception 'injected commit fault';
                     end if;
                     return null;
                 end $$",
                "create constraint trigger injected_commit_fault after insert on webhook_deliveries
                 deferrable initially deferred for each row execute function injected_commit_fault()",
            ],
        };
        for statement in statements {
            execute!(db, *statement);
        }
    }

    /// Whether the PostgreSQL commit fault has failed a commit.
    pub async fn commit_fault_fired(db: &Database) -> bool {
        let Database::Postgres(pool) = db else {
            unreachable!("SQLite's fault fails every commit it sees");
        };
        sqlx::query_scalar("select is_called from injected_commit_fault")
            .fetch_one(pool)
            .await
            .unwrap()
    }

    /// Ends the SQLite commit fault in one statement (the key its rows
    /// point at now exists); [`drop_commit_fault`] removes it after.
    pub async fn end_commit_fault(db: &Database) {
        execute!(
            db,
            "insert into injected_commit_fault_target (id) values (1)"
        );
    }

    /// Removes what [`fail_commits_of_deliveries`] made.
    pub async fn drop_commit_fault(db: &Database) {
        let statements: &[&str] = match db {
            Database::Sqlite(_) => &[
                "drop trigger injected_commit_fault",
                "drop table injected_commit_fault",
                "drop table injected_commit_fault_target",
            ],
            Database::Postgres(_) => &[
                "drop trigger injected_commit_fault on webhook_deliveries",
                "drop function injected_commit_fault()",
                "drop sequence injected_commit_fault",
            ],
        };
        for statement in statements {
            execute!(db, *statement);
        }
    }

    /// What the database holds about one listing, its orders and its shoot, one
    /// sorted line per row (`listing status=… tour3d=… …`, `order …`,
    /// `appointment …`), read past every cache: equal snapshots mean nothing
    /// about the listing changed, down to `updated_at`.
    pub async fn listing_rows(db: &Database, listing_number: &str) -> Vec<String> {
        let sql = "select 'listing status=' || status || ' tour3d=' || coalesce(tour3d_url, '-')
                       || ' floorplan=' || cast(floorplan as text)
                       || ' activated_at=' || coalesce(cast(activated_at as text), '-')
                       || ' billed_at=' || coalesce(cast(billed_at as text), '-')
                       || ' updated_at=' || cast(updated_at as text)
                   from listings where listing_number = $1
                   union all
                   select 'order ' || o.id || ' invoice_state=' || o.invoice_state
                       || ' payment_reference=' || coalesce(o.payment_reference, '-')
                       || ' paid_at=' || coalesce(cast(o.paid_at as text), '-')
                       || ' voided_at=' || coalesce(cast(o.voided_at as text), '-')
                       || ' updated_at=' || cast(o.updated_at as text)
                   from orders o join listings l on l.id = o.listing_id where l.listing_number = $1
                   union all
                   select 'appointment ' || a.id || ' status=' || a.status
                       || ' scheduled_at=' || cast(a.scheduled_at as text)
                       || ' updated_at=' || cast(a.updated_at as text)
                   from appointments a join listings l on l.id = a.listing_id where l.listing_number = $1";
        let mut rows: Vec<String> = match db {
            Database::Sqlite(sqlite) => {
                sqlx::query_scalar(sql)
                    .bind(listing_number)
                    .fetch_all(sqlite.pool())
                    .await
            }
            Database::Postgres(pool) => {
                sqlx::query_scalar(sql)
                    .bind(listing_number)
                    .fetch_all(pool)
                    .await
            }
        }
        .unwrap();
        rows.sort();
        rows
    }

    /// Forgets every idempotency record (what a crash before bookkeeping loses).
    pub async fn delete_idempotency_records(db: &Database) {
        execute!(db, "delete from idempotency_records");
    }

    /// Changes a listing's address behind the application's back.
    pub async fn set_listing_address(db: &Database, listing_number: &str, address: &str) {
        execute!(
            db,
            "update listings set address = $1 where listing_number = $2",
            address,
            listing_number
        );
    }

    /// Gives a user another role, past the API's rules (a second
    /// administrator of an agency, say).
    pub async fn set_user_role(db: &Database, user_id: &str, role: &str) {
        execute!(
            db,
            "update users set role = $1 where id = $2",
            role,
            user_id
        );
    }

    /// Deactivates a user.
    pub async fn deactivate_user(db: &Database, user_id: &str) {
        execute!(
            db,
            "update users set is_active = false where id = $1",
            user_id
        );
    }

    /// Everything the database holds about keys, as text: for SQLite the raw
    /// bytes of the database and its write-ahead log; for PostgreSQL every
    /// column of every key row.
    pub async fn everything_stored(app: &TestApp) -> String {
        match app.store.db() {
            Database::Sqlite(_) => {
                let file = app.db.sqlite_file().unwrap();
                let mut bytes = std::fs::read(&file).unwrap();
                let wal = file.with_extension("sqlite3-wal");
                if let Ok(more) = std::fs::read(&wal) {
                    bytes.extend(more);
                }
                String::from_utf8_lossy(&bytes).into_owned()
            }
            Database::Postgres(pool) => {
                let rows: Vec<String> =
                    sqlx::query_scalar("select row_to_json(k)::text from api_keys k")
                        .fetch_all(pool)
                        .await
                        .unwrap();
                rows.join("\n")
            }
        }
    }
}

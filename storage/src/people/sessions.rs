//! Sessions of the in-product developer settings: an email and password buy a
//! cookie whose secret is stored only as a keyed hash. A session lives at most
//! [`SESSION_LIFETIME_SECONDS`], ends after [`SESSION_IDLE_SECONDS`] without
//! use, ends when its user is deactivated, and can be switched to another user
//! (impersonation) with the real user kept beside it.

use std::sync::OnceLock;

use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier};

use crate::db::{on_pool, write_on_pool};
use crate::ids::{SessionId, UserId};
use crate::records::user::{USER_COLUMNS, User, UserRow, normalise_email};
use crate::secrets::encode_token;
use crate::{Entity, Result, StorageError, Store, Timestamp};

/// The longest a session lives, however busy.
pub const SESSION_LIFETIME_SECONDS: i64 = 12 * 3600;
/// A session unused for this long has ended.
pub const SESSION_IDLE_SECONDS: i64 = 2 * 3600;
/// `last_seen_at` is written at most this often, so reads stay reads.
const TOUCH_INTERVAL_SECONDS: i64 = 60;
/// Ended and expired sessions are kept this long for support questions.
pub const SESSION_RETENTION_SECONDS: i64 = 7 * 86_400;
/// Random bytes in a session cookie's secret.
const TOKEN_BYTES: usize = 32;

/// A live session.
#[derive(Clone, Debug)]
pub struct Session {
    /// Its id (not the cookie secret).
    pub id: SessionId,
    /// The user the session acts as (the target while impersonating).
    pub user: User,
    /// The real user while impersonating.
    pub impersonator_id: Option<UserId>,
    /// When it was started.
    pub created_at: Timestamp,
    /// When it ends at the latest.
    pub expires_at: Timestamp,
}

/// A session just started, with the cookie secret (handed out once).
#[derive(Debug)]
pub struct StartedSession {
    /// The session.
    pub session: Session,
    /// The cookie's value; only its keyed hash is stored.
    pub token: String,
}

#[derive(sqlx::FromRow)]
struct SessionRow {
    session_id: SessionId,
    impersonator_id: Option<UserId>,
    session_created_at: Timestamp,
    last_seen_at: Timestamp,
    expires_at: Timestamp,
    #[sqlx(flatten)]
    user: UserRow,
}

impl SessionRow {
    fn into_session(self) -> Result<Session> {
        Ok(Session {
            id: self.session_id,
            user: self.user.try_into()?,
            impersonator_id: self.impersonator_id,
            created_at: self.session_created_at,
            expires_at: self.expires_at,
        })
    }
}

/// The select list of a session joined with the user it acts as (`u`).
fn session_select() -> String {
    let user_columns = USER_COLUMNS
        .split(", ")
        .map(|column| format!("u.{column}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "select s.id as session_id, s.impersonator_id, s.created_at as session_created_at,
                s.last_seen_at, s.expires_at, {user_columns}
         from sessions s join users u on u.id = s.user_id"
    )
}

/// A hash to verify against when the email is unknown or has no password, so
/// a failed login takes as long whether or not the account exists.
fn decoy_hash() -> &'static str {
    static DECOY: OnceLock<String> = OnceLock::new();
    DECOY.get_or_init(|| {
        Argon2::default()
            .hash_password(b"decoy password that matches no account")
            .map(|hash| hash.to_string())
            .unwrap_or_default()
    })
}

/// Checks `password` against a stored argon2 hash (or the decoy) off the
/// async threads.
async fn verify_password(password: String, stored: Option<String>) -> Result<bool> {
    tokio::task::spawn_blocking(move || {
        let decoy = stored.is_none();
        let hash_text = stored.unwrap_or_else(|| decoy_hash().to_owned());
        let matches = PasswordHash::new(&hash_text).is_ok_and(|hash| {
            Argon2::default()
                .verify_password(password.as_bytes(), &hash)
                .is_ok()
        });
        matches && !decoy
    })
    .await
    .map_err(|err| StorageError::Corrupt(format!("password verification: {err}")))
}

/// Sessions repository; see [`Store::sessions`].
pub struct Sessions<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Sessions of the developer settings: login, impersonation, logout.
    pub fn sessions(&self) -> Sessions<'_> {
        Sessions { store: self }
    }
}

impl Sessions<'_> {
    /// Starts a session for the active user with this email and password;
    /// `None` for any mismatch (unknown email, wrong password, no password
    /// set yet, deactivated user), without saying which. Counts the login.
    pub async fn login(&self, email: &str, password: &str) -> Result<Option<StartedSession>> {
        let email = normalise_email(email).unwrap_or_default();
        let account: Option<(UserId, Option<String>, bool)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as("select id, password_hash, is_active from users where email = $1")
                .bind(&email)
                .fetch_optional(pool)
                .await?
        });
        let stored = account.as_ref().and_then(|(_, hash, _)| hash.clone());
        let verified = verify_password(password.to_owned(), stored).await?;
        let Some((user_id, Some(_), true)) = account else {
            return Ok(None);
        };
        if !verified {
            return Ok(None);
        }
        self.start(&user_id).await.map(Some)
    }

    /// Starts a session for a user who just proved who they are (a password
    /// or a password link) and counts the login.
    pub(crate) async fn start(&self, user_id: &UserId) -> Result<StartedSession> {
        let now = self.store.clock().now();
        let id = SessionId::generate();
        let mut secret = [0u8; TOKEN_BYTES];
        rand::fill(&mut secret[..]);
        let token = encode_token(&secret);
        let token_hash = self.store.derived_keys().hash_session_token(&token);
        crate::db::in_transaction!(self.store.db(), |tx| {
            sqlx::query(
                "insert into sessions (id, token_hash, user_id, created_at, last_seen_at, expires_at)
                 values ($1, $2, $3, $4, $4, $5)",
            )
            .bind(&id)
            .bind(&token_hash)
            .bind(user_id)
            .bind(now)
            .bind(now.plus_seconds(SESSION_LIFETIME_SECONDS))
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "update users set login_count = login_count + 1, last_login_at = $2 where id = $1",
            )
            .bind(user_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        });
        let session = self
            .by_id(&id)
            .await?
            .ok_or(StorageError::NotFound(Entity::Session))?;
        Ok(StartedSession { session, token })
    }

    /// The live session whose cookie secret is `token`: not ended, not past
    /// its lifetime or idle limit, its user (and any impersonator) still
    /// active. Marks it used.
    pub async fn authenticate(&self, token: &str) -> Result<Option<Session>> {
        let now = self.store.clock().now();
        let hash = self.store.derived_keys().hash_session_token(token);
        let sql = format!(
            "{} where s.token_hash = $1 and s.ended_at is null and s.expires_at > $2
               and s.last_seen_at > $3 and u.is_active = true
               and (s.impersonator_id is null or exists (
                   select 1 from users i where i.id = s.impersonator_id and i.is_active = true))",
            session_select(),
        );
        let row: Option<SessionRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&hash)
                .bind(now)
                .bind(now.plus_seconds(-SESSION_IDLE_SECONDS))
                .fetch_optional(pool)
                .await?
        });
        let Some(row) = row else { return Ok(None) };
        if now.as_micros() - row.last_seen_at.as_micros() >= TOUCH_INTERVAL_SECONDS * 1_000_000 {
            // At most once a minute per session, so a durable write is cheap.
            write_on_pool!(self.store.db(), pool => {
                sqlx::query("update sessions set last_seen_at = $2 where id = $1")
                    .bind(&row.session_id)
                    .bind(now)
                    .execute(&mut *pool)
                    .await?;
            });
        }
        row.into_session().map(Some)
    }

    /// Ends a session (logout). Ending it twice is not an error.
    pub async fn end(&self, id: &SessionId) -> Result<()> {
        let now = self.store.clock().now();
        write_on_pool!(self.store.db(), pool => {
            sqlx::query("update sessions set ended_at = coalesce(ended_at, $2) where id = $1")
                .bind(id)
                .bind(now)
                .execute(&mut *pool)
                .await?;
        });
        Ok(())
    }

    /// Switches a session to act as `target`, keeping the real user (the
    /// first impersonator, when already impersonating) beside it. The caller
    /// has checked the impersonation rules.
    pub async fn impersonate(&self, session: &Session, target: &UserId) -> Result<Session> {
        let real = session
            .impersonator_id
            .clone()
            .unwrap_or_else(|| session.user.id.clone());
        write_on_pool!(self.store.db(), pool => {
            sqlx::query(
                "update sessions set user_id = $2, impersonator_id = $3
                 where id = $1 and ended_at is null",
            )
            .bind(&session.id)
            .bind(target)
            .bind(&real)
            .execute(&mut *pool)
            .await?;
        });
        self.by_id(&session.id)
            .await?
            .ok_or(StorageError::NotFound(Entity::Session))
    }

    /// Returns a session to its real user; a session not impersonating is
    /// unchanged.
    pub async fn end_impersonation(&self, session: &Session) -> Result<Session> {
        write_on_pool!(self.store.db(), pool => {
            sqlx::query(
                "update sessions set user_id = impersonator_id, impersonator_id = null
                 where id = $1 and impersonator_id is not null and ended_at is null",
            )
            .bind(&session.id)
            .execute(&mut *pool)
            .await?;
        });
        self.by_id(&session.id)
            .await?
            .ok_or(StorageError::NotFound(Entity::Session))
    }

    /// Deletes sessions, and password links, that ended or expired more
    /// than [`SESSION_RETENTION_SECONDS`] ago, and forgets the sealed tokens
    /// of expired password e-mails; returns how many rows changed.
    pub async fn purge(&self) -> Result<u64> {
        let cutoff = self
            .store
            .clock()
            .now()
            .plus_seconds(-SESSION_RETENTION_SECONDS);
        let deleted = write_on_pool!(self.store.db(), pool => {
            sqlx::query(
                "delete from sessions
                 where expires_at < $1 or ended_at < $1 or last_seen_at < $1",
            )
            .bind(cutoff)
            .execute(&mut *pool)
            .await?
            .rows_affected()
        });
        let links = self.store.accounts().purge_password_links(cutoff).await?;
        Ok(deleted + links)
    }

    async fn by_id(&self, id: &SessionId) -> Result<Option<Session>> {
        let sql = format!("{} where s.id = $1", session_select());
        let row: Option<SessionRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        row.map(SessionRow::into_session).transpose()
    }
}

//! One-time password links: a user created without a password, or one who
//! forgot theirs, gets an e-mail with a link whose token sets the password
//! once, within [`PASSWORD_LINK_LIFETIME_SECONDS`]. Only a keyed hash of the
//! token is stored; the e-mail's copy is sealed until the mailer sends it.

use super::{Accounts, hash_password, password_problem};
use crate::db::{in_transaction, on_pool, write_on_pool};
use crate::ids::{AgencyId, NotificationId, UserId};
use crate::secrets::encode_token;
use crate::sessions::StartedSession;
use crate::users::normalise_email;
use crate::webhooks::Notification;
use crate::{Result, StorageError, Timestamp};

/// How long a password link works.
pub const PASSWORD_LINK_LIFETIME_SECONDS: i64 = 3600;
/// Random bytes in a link's token.
const TOKEN_BYTES: usize = 32;
/// Where a password e-mail's body takes the token, filled in at sending.
const TOKEN_PLACEHOLDER: &str = "{token}";
/// Notification kinds that carry a password link.
const LINK_KINDS: [&str; 2] = ["password_first_set", "password_reset"];

/// What a password link is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PasswordLinkPurpose {
    /// An account created without a password chooses its first one.
    FirstPassword,
    /// A user asked for a new password.
    Reset,
}

impl PasswordLinkPurpose {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::FirstPassword => "first_password",
            Self::Reset => "reset",
        }
    }

    pub(super) fn notification_kind(self) -> &'static str {
        match self {
            Self::FirstPassword => LINK_KINDS[0],
            Self::Reset => LINK_KINDS[1],
        }
    }

    pub(super) fn subject(self) -> &'static str {
        match self {
            Self::FirstPassword => "Choose your password",
            Self::Reset => "Reset your password",
        }
    }

    fn body(self, link_base: &str) -> String {
        let opening = match self {
            Self::FirstPassword => {
                "An account was created for you. Choose your password with this link:"
            }
            Self::Reset => {
                "Someone (we hope you) asked to reset your password. Choose a new one \
                 with this link:"
            }
        };
        format!(
            "{opening}\n\n{link_base}#token={TOKEN_PLACEHOLDER}\n\nThe link works once, within \
             an hour. If it has expired, ask for a new one from the sign-in page. If you did \
             not expect this e-mail, ignore it: nothing changes until the link is used."
        )
    }
}

/// A password link recorded for e-mailing.
#[derive(Clone, Debug)]
pub struct PasswordLink {
    /// The notification carrying it; the `notification_email` job sends it.
    pub notification_id: NotificationId,
    /// The user it is for.
    pub user_id: UserId,
    /// When the link stops working.
    pub expires_at: Timestamp,
}

/// A link made ready outside the transaction that records it.
pub(super) struct PreparedLink {
    pub(super) purpose: PasswordLinkPurpose,
    pub(super) token_hash: String,
    pub(super) notification_id: NotificationId,
    pub(super) sealed: String,
    pub(super) body: String,
    pub(super) created_at: Timestamp,
    pub(super) expires_at: Timestamp,
}

impl PreparedLink {
    pub(super) fn into_link(self, user_id: UserId) -> PasswordLink {
        PasswordLink {
            notification_id: self.notification_id,
            user_id,
            expires_at: self.expires_at,
        }
    }
}

/// Records a prepared link (its token's hash and the e-mail carrying it) for
/// a user of an agency, on `$tx`.
macro_rules! record_link {
    ($tx:expr, $link:expr, $user:expr, $agency:expr) => {
        async {
            sqlx::query(
                "insert into password_tokens (token_hash, user_id, purpose, created_at, expires_at)
                 values ($1, $2, $3, $4, $5)",
            )
            .bind(&$link.token_hash)
            .bind($user)
            .bind($link.purpose.as_str())
            .bind($link.created_at)
            .bind($link.expires_at)
            .execute(&mut *$tx)
            .await?;
            sqlx::query(
                "insert into notifications (id, agency_id, user_id, kind, subject, body, created_at,
                     is_sandbox, secret_sealed)
                 values ($1, $2, $3, $4, $5, $6, $7, false, $8)",
            )
            .bind(&$link.notification_id)
            .bind($agency)
            .bind($user)
            .bind($link.purpose.notification_kind())
            .bind($link.purpose.subject())
            .bind(&$link.body)
            .bind($link.created_at)
            .bind(&$link.sealed)
            .execute(&mut *$tx)
            .await?;
            Ok::<(), sqlx::Error>(())
        }
    };
}
pub(super) use record_link;

impl Accounts<'_> {
    /// The stored form of a link's token: its HMAC under the session-token
    /// key, with a prefix of its own so a link never passes as a session.
    fn token_hash(&self, token: &str) -> String {
        self.store
            .derived_keys()
            .hash_session_token(&format!("password-link:{token}"))
    }

    /// A fresh token, its hash, and the e-mail that carries it (the token
    /// sealed beside it), pointing at `link_base`.
    pub(super) fn prepare_link(
        &self,
        purpose: PasswordLinkPurpose,
        link_base: &str,
    ) -> PreparedLink {
        let mut secret = [0u8; TOKEN_BYTES];
        rand::fill(&mut secret[..]);
        let token = encode_token(&secret);
        let notification_id = NotificationId::generate();
        let created_at = self.store.clock().now();
        PreparedLink {
            purpose,
            token_hash: self.token_hash(&token),
            sealed: self
                .store
                .derived_keys()
                .seal(&token, notification_id.as_str()),
            notification_id,
            body: purpose.body(link_base),
            created_at,
            expires_at: created_at.plus_seconds(PASSWORD_LINK_LIFETIME_SECONDS),
        }
    }

    /// Issues a password link for the active user with this email and
    /// records the e-mail carrying it; `None` (and nothing recorded) when no
    /// active user has this email. The caller answers alike either way.
    pub async fn request_password_reset(
        &self,
        email: &str,
        link_base: &str,
    ) -> Result<Option<PasswordLink>> {
        let Some(email) = normalise_email(email) else {
            return Ok(None);
        };
        let user: Option<(UserId, AgencyId)> = on_pool!(self.store.db(), pool => {
            sqlx::query_as("select id, agency_id from users where email = $1 and is_active = true")
                .bind(&email)
                .fetch_optional(pool)
                .await?
        });
        let Some((user_id, agency_id)) = user else {
            return Ok(None);
        };
        let link = self.prepare_link(PasswordLinkPurpose::Reset, link_base);
        in_transaction!(self.store.db(), |tx| {
            record_link!(tx, link, &user_id, &agency_id).await?;
        });
        Ok(Some(link.into_link(user_id)))
    }

    /// The active user a live (unspent, unexpired) token opens.
    async fn token_user(&self, token_hash: &str, now: Timestamp) -> Result<Option<UserId>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_scalar(
                "select t.user_id from password_tokens t join users u on u.id = t.user_id
                 where t.token_hash = $1 and t.used_at is null and t.expires_at > $2
                   and u.is_active = true",
            )
            .bind(token_hash)
            .bind(now)
            .fetch_optional(pool)
            .await?)
        })
    }

    /// Sets a password with a link's token and signs its user in: the token
    /// is spent (with every other live token of the user), the user's other
    /// sessions end, and a session starts as a login would. `None` when the
    /// token is unknown, spent or expired, or its user deactivated; a
    /// password against the rules is [`StorageError::Invalid`] on `password`
    /// and leaves the token unspent.
    pub async fn set_password_with_token(
        &self,
        token: &str,
        password: &str,
    ) -> Result<Option<StartedSession>> {
        let token_hash = self.token_hash(token);
        if self
            .token_user(&token_hash, self.store.clock().now())
            .await?
            .is_none()
        {
            return Ok(None);
        }
        if let Some(problem) = password_problem(password) {
            return Err(StorageError::Invalid {
                field: "password",
                reason: problem.to_owned(),
            });
        }
        let hash = hash_password(password.to_owned()).await?;
        // Hashing took a while: the token is checked again, and spent, in the
        // write itself, so two racing requests cannot both use it.
        let now = self.store.clock().now();
        let spent: Option<UserId> = in_transaction!(self.store.db(), |tx| {
            let user: Option<UserId> = sqlx::query_scalar(
                "update password_tokens set used_at = $2
                 where token_hash = $1 and used_at is null and expires_at > $2
                   and exists (select 1 from users u where u.id = user_id and u.is_active = true)
                 returning user_id",
            )
            .bind(&token_hash)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(user) = &user {
                sqlx::query("update users set password_hash = $2 where id = $1")
                    .bind(user)
                    .bind(&hash)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(
                    "update password_tokens set used_at = $2 where user_id = $1 and used_at is null",
                )
                .bind(user)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                // Whoever held the old password loses their sessions with it.
                sqlx::query(
                    "update sessions set ended_at = $2
                     where (user_id = $1 or impersonator_id = $1) and ended_at is null",
                )
                .bind(user)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "update notifications set secret_sealed = null
                     where user_id = $1 and secret_sealed is not null",
                )
                .bind(user)
                .execute(&mut *tx)
                .await?;
            }
            user
        });
        let Some(user) = spent else {
            return Ok(None);
        };
        self.store.sessions().start(&user).await.map(Some)
    }

    /// The text to e-mail for `notification`: its body, with a password
    /// link's token filled in. `None` for a password e-mail whose link was
    /// spent or expired before it went out: there is nothing left to send.
    pub async fn mail_body(&self, notification: &Notification) -> Result<Option<String>> {
        if !LINK_KINDS.contains(&notification.kind.as_str()) {
            return Ok(Some(notification.body.clone()));
        }
        let sealed: Option<String> = on_pool!(self.store.db(), pool => {
            sqlx::query_scalar::<_, Option<String>>(
                "select secret_sealed from notifications where id = $1",
            )
                .bind(&notification.id)
                .fetch_optional(pool)
                .await?
                .flatten()
        });
        let Some(sealed) = sealed else {
            return Ok(None);
        };
        let token = self
            .store
            .derived_keys()
            .open(&sealed, notification.id.as_str())
            .ok_or_else(|| StorageError::Corrupt("a password link does not open".to_owned()))?;
        Ok(Some(notification.body.replace(TOKEN_PLACEHOLDER, &token)))
    }

    /// Forgets the sealed tokens of password e-mails whose links have
    /// expired, and deletes tokens expired before `before`; returns how many
    /// rows changed.
    pub async fn purge_password_links(&self, before: Timestamp) -> Result<u64> {
        let now = self.store.clock().now();
        let changed = write_on_pool!(self.store.db(), pool => {
            let forgotten = sqlx::query(
                "update notifications set secret_sealed = null
                 where secret_sealed is not null and created_at <= $1",
            )
            .bind(now.plus_seconds(-PASSWORD_LINK_LIFETIME_SECONDS))
            .execute(&mut *pool)
            .await?
            .rows_affected();
            let deleted = sqlx::query("delete from password_tokens where expires_at < $1")
                .bind(before)
                .execute(&mut *pool)
                .await?
                .rows_affected();
            forgotten + deleted
        });
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_carries_the_token_once_in_its_fragment() {
        for purpose in [
            PasswordLinkPurpose::FirstPassword,
            PasswordLinkPurpose::Reset,
        ] {
            let body = purpose.body("https://app.example/set-password");
            assert_eq!(body.matches(TOKEN_PLACEHOLDER).count(), 1, "{body}");
            assert!(body.contains("https://app.example/set-password#token={token}\n"));
            assert!(LINK_KINDS.contains(&purpose.notification_kind()));
        }
    }
}

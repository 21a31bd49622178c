//! One-time password links: a user created without a password, or one who
//! forgot theirs, gets an e-mail with a link whose token sets the password
//! once, within [`PASSWORD_LINK_LIFETIME_SECONDS`]. Only a keyed hash of the
//! token is stored; the e-mail's copy is sealed until the mailer sends it.

use super::Accounts;
use super::link::{
    LINK_KINDS, PASSWORD_LINK_LIFETIME_SECONDS, PasswordLink, PasswordLinkPurpose, PreparedLink,
    TOKEN_BYTES, TOKEN_PLACEHOLDER, record_link,
};
use super::password::hash_password;
use crate::db::{in_transaction, on_pool, write_on_pool};
use crate::ids::{AgencyId, NotificationId, UserId};
use crate::people::sessions::StartedSession;
use crate::records::user::normalise_email;
use crate::rules::passwords::password_problem;
use crate::secrets::encode_token;
use crate::webhooks::Notification;
use crate::{Result, StorageError, Timestamp};

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

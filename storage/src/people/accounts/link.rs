//! A password link as stored: what it is for, the token's keyed hash and
//! the sealed copy its e-mail carries, and the insertion the account
//! creation and a reset request share.

use crate::Timestamp;
use crate::ids::{NotificationId, UserId};

/// How long a password link works.
pub const PASSWORD_LINK_LIFETIME_SECONDS: i64 = 3600;
/// Random bytes in a link's token.
pub(super) const TOKEN_BYTES: usize = 32;
/// Where a password e-mail's body takes the token, filled in at sending.
pub(super) const TOKEN_PLACEHOLDER: &str = "{token}";
/// Notification kinds that carry a password link.
pub(super) const LINK_KINDS: [&str; 2] = ["password_first_set", "password_reset"];

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

    pub(super) fn body(self, link_base: &str) -> String {
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

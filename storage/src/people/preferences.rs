//! Users' display preferences: five fields, each with a default, changed
//! one field at a time. A user who never saved any has the defaults.

use crate::db::{in_transaction, on_pool};
use crate::ids::UserId;
use crate::{Entity, Result, StorageError, Store, Tenant};

/// Date and time display formats.
pub const DATE_TIME_FORMATS: [&str; 3] = ["friendly", "us", "uk"];
/// Measurement units.
pub const MEASUREMENT_UNITS: [&str; 2] = ["imperial", "metric"];
/// Themes.
pub const THEMES: [&str; 3] = ["light", "dark", "system"];

/// A user's preferences, defaults applied.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Preferences {
    /// `friendly`, `us` or `uk`.
    pub date_time_format: String,
    /// An IANA time zone name.
    pub timezone: String,
    /// A BCP 47 language tag.
    pub language: String,
    /// `imperial` or `metric`.
    pub measurement_unit: String,
    /// `light`, `dark` or `system`.
    pub theme: String,
}

impl Default for Preferences {
    fn default() -> Self {
        Self {
            date_time_format: "friendly".into(),
            timezone: "America/Los_Angeles".into(),
            language: "en-US".into(),
            measurement_unit: "imperial".into(),
            theme: "system".into(),
        }
    }
}

/// A partial change (validated by the caller); `None` keeps a field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreferenceChanges {
    /// New date and time format.
    pub date_time_format: Option<String>,
    /// New time zone.
    pub timezone: Option<String>,
    /// New language.
    pub language: Option<String>,
    /// New measurement unit.
    pub measurement_unit: Option<String>,
    /// New theme.
    pub theme: Option<String>,
}

/// Preferences repository; see [`Store::preferences`].
pub struct UserPreferences<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Users' display preferences.
    pub fn preferences(&self) -> UserPreferences<'_> {
        UserPreferences { store: self }
    }
}

const COLUMNS: &str = "date_time_format, timezone, language, measurement_unit, theme";

impl UserPreferences<'_> {
    /// The preferences of the tenant's user (defaults where none were saved).
    pub async fn get(&self, tenant: &Tenant, user: &UserId) -> Result<Preferences> {
        // The user must be the tenant's: another agency's is not found.
        self.store.users().get(tenant, user).await?;
        let sql =
            format!("select {COLUMNS} from user_preferences where user_id = $1 and agency_id = $2");
        let row: Option<Preferences> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(user)
                .bind(&tenant.agency_id)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.unwrap_or_default())
    }

    /// Applies `changes` to the tenant's user's preferences; returns them all.
    pub async fn update(
        &self,
        tenant: &Tenant,
        user: &UserId,
        changes: &PreferenceChanges,
    ) -> Result<Preferences> {
        let now = self.store.clock().now();
        let defaults = Preferences::default();
        let sql = format!(
            "insert into user_preferences (user_id, agency_id, {COLUMNS}, updated_at)
             select u.id, u.agency_id, coalesce($3, $8), coalesce($4, $9), coalesce($5, $10),
                    coalesce($6, $11), coalesce($7, $12), $13
             from users u where u.id = $1 and u.agency_id = $2
             on conflict (user_id) do update set
                 date_time_format = coalesce($3, user_preferences.date_time_format),
                 timezone = coalesce($4, user_preferences.timezone),
                 language = coalesce($5, user_preferences.language),
                 measurement_unit = coalesce($6, user_preferences.measurement_unit),
                 theme = coalesce($7, user_preferences.theme),
                 updated_at = $13
             returning {COLUMNS}"
        );
        let row: Option<Preferences> = in_transaction!(self.store.db(), |tx| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(user)
                .bind(&tenant.agency_id)
                .bind(&changes.date_time_format)
                .bind(&changes.timezone)
                .bind(&changes.language)
                .bind(&changes.measurement_unit)
                .bind(&changes.theme)
                .bind(&defaults.date_time_format)
                .bind(&defaults.timezone)
                .bind(&defaults.language)
                .bind(&defaults.measurement_unit)
                .bind(&defaults.theme)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?
        });
        row.ok_or(StorageError::NotFound(Entity::User))
    }
}

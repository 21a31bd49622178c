//! The people of an agency: roles, the manager hierarchy, and the oldest-first
//! listing. People belong to the agency, not to an environment: the same team
//! works with live and sandbox keys (see docs/decisions.md).

use crate::background::outbox::{insert_event, insert_events};
use crate::db::{in_transaction, on_pool};
use crate::ids::{AgencyId, UserId};
use crate::page::{Page, Position};
use crate::rules::events::{EventType, NewEvent};
use crate::{Entity, Result, StorageError, Store, Tenant};

pub use crate::records::user::{MAX_EMAIL_LEN, Role, User, normalise_email};
use crate::records::user::{MAX_NAME_LEN, USER_COLUMNS, UserRow, insert_user};

/// What to create.
#[derive(Clone, Debug)]
pub struct NewUser {
    /// The role.
    pub role: Role,
    /// Login email; checked and lower-cased here.
    pub email: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// Manager, who must be a user of the same agency.
    pub manager_id: Option<UserId>,
}

/// Filters of the users listing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct UserFilter {
    /// Only this role.
    pub role: Option<Role>,
    /// `Some(true)`: active only; `Some(false)`: deactivated only; `None`: both.
    pub active: Option<bool>,
}

/// User repository; see [`Store::users`].
pub struct Users<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// The people of an agency.
    pub fn users(&self) -> Users<'_> {
        Users { store: self }
    }
}

impl Users<'_> {
    /// Creates a user in `agency`. The email must be unique on the platform and
    /// the manager must be a user of the same agency.
    pub async fn create(&self, agency: &AgencyId, new: NewUser) -> Result<User> {
        let email = match new.email.as_deref() {
            None => None,
            Some(raw) => Some(normalise_email(raw).ok_or_else(|| StorageError::Invalid {
                field: "email",
                reason: "is not a valid email address".to_owned(),
            })?),
        };
        let name = new
            .name
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty());
        if name
            .as_ref()
            .is_some_and(|n| n.chars().count() > MAX_NAME_LEN)
        {
            return Err(StorageError::Invalid {
                field: "name",
                reason: format!("must be at most {MAX_NAME_LEN} characters"),
            });
        }
        let user = User {
            id: UserId::generate(),
            agency_id: agency.clone(),
            role: new.role,
            email,
            name,
            manager_id: new.manager_id,
            is_active: true,
            created_at: self.store.clock().now(),
        };
        let tenant = Tenant::new(agency.clone(), crate::Environment::Live);
        let mut emitted = Vec::new();
        let inserted = in_transaction!(self.store.db(), |tx| {
            let inserted = insert_user!(&mut *tx, &user).await.map(|_| ());
            if inserted.is_ok() {
                let events = joined_events(&user);
                emitted = insert_events(&mut *tx, &tenant, user.created_at, events).await?;
            }
            inserted
        });
        match inserted {
            Ok(_) => {
                self.store.announce(&emitted);
                Ok(user)
            }
            Err(err) if StorageError::is_unique_violation(&err) => {
                Err(StorageError::Conflict { field: "email" })
            }
            Err(err) if StorageError::is_foreign_key_violation(&err) => {
                // Either the agency does not exist or the manager is not one of its users.
                Err(StorageError::Invalid {
                    field: if user.manager_id.is_some() {
                        "manager_id"
                    } else {
                        "agency_id"
                    },
                    reason: "does not name a user of this agency".to_owned(),
                })
            }
            Err(err) => Err(err.into()),
        }
    }

    /// The user with this id in the tenant's agency; another agency's user is
    /// `NotFound`, exactly like a user that does not exist.
    pub async fn get(&self, tenant: &Tenant, id: &UserId) -> Result<User> {
        let sql = format!("select {USER_COLUMNS} from users where agency_id = $1 and id = $2");
        let row: Option<UserRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&tenant.agency_id)
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        row.ok_or(StorageError::NotFound(Entity::User))?.try_into()
    }

    /// The user with this id in any agency: for platform identities, which
    /// serve every agency, and for sessions, which carry their own user.
    pub async fn by_id(&self, id: &UserId) -> Result<User> {
        let sql = format!("select {USER_COLUMNS} from users where id = $1");
        let row: Option<UserRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        row.ok_or(StorageError::NotFound(Entity::User))?.try_into()
    }

    /// Changes the role of the tenant's user; returns the user as changed.
    pub async fn set_role(&self, tenant: &Tenant, id: &UserId, role: Role) -> Result<User> {
        let sql = format!(
            "update users set role = $3 where agency_id = $1 and id = $2 returning {USER_COLUMNS}"
        );
        let row: Option<UserRow> = in_transaction!(self.store.db(), |tx| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&tenant.agency_id)
                .bind(id)
                .bind(role.as_str())
                .fetch_optional(&mut *tx)
                .await?
        });
        row.ok_or(StorageError::NotFound(Entity::User))?.try_into()
    }

    /// Suspends (`active == false`) or reactivates the tenant's user.
    /// Suspending an active user emits `user.deactivated`; setting the state
    /// it already has changes and emits nothing.
    pub async fn set_active(&self, tenant: &Tenant, id: &UserId, active: bool) -> Result<User> {
        let now = self.store.clock().now();
        let sql = format!(
            "update users set is_active = $3 where agency_id = $1 and id = $2 and is_active <> $3
             returning {USER_COLUMNS}"
        );
        let mut emitted = Vec::new();
        let changed: Option<UserRow> = in_transaction!(self.store.db(), |tx| {
            let row: Option<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&tenant.agency_id)
                .bind(id)
                .bind(active)
                .fetch_optional(&mut *tx)
                .await?;
            if let (Some(row), false) = (&row, active) {
                let data = serde_json::json!({
                    "user_id": row.id,
                    "role": row.role,
                    "deactivated_at": now.to_rfc3339(),
                });
                let deactivated = NewEvent::new(EventType::UserDeactivated, data);
                emitted.push(insert_event(&mut *tx, tenant, now, deactivated).await?);
            }
            row
        });
        self.store.announce(&emitted);
        match changed {
            Some(row) => row.try_into(),
            None => self.get(tenant, id).await,
        }
    }

    /// Takes an assistant out of their manager's team: deactivated and
    /// without a manager, emitting `user.hierarchy_changed` and
    /// `user.deactivated` (when it was active). Returns the user as changed.
    pub async fn remove_from_team(&self, tenant: &Tenant, id: &UserId) -> Result<User> {
        let now = self.store.clock().now();
        let sql = format!("select {USER_COLUMNS} from users where agency_id = $1 and id = $2");
        let update = format!(
            "update users set is_active = false, manager_id = null where agency_id = $1 and id = $2
             returning {USER_COLUMNS}"
        );
        let mut emitted = Vec::new();
        let row: UserRow = in_transaction!(self.store.db(), |tx| {
            let before: UserRow = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&tenant.agency_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StorageError::NotFound(Entity::User))?;
            let after: UserRow = sqlx::query_as(sqlx::AssertSqlSafe(update))
                .bind(&tenant.agency_id)
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
            let mut events = Vec::new();
            if before.manager_id.is_some() {
                events.push(NewEvent::new(
                    EventType::UserHierarchyChanged,
                    serde_json::json!({
                        "user_id": after.id,
                        "manager_id": null,
                        "previous_manager_id": before.manager_id,
                        "changed_at": now.to_rfc3339(),
                    }),
                ));
            }
            if before.is_active {
                events.push(NewEvent::new(
                    EventType::UserDeactivated,
                    serde_json::json!({
                        "user_id": after.id,
                        "role": after.role,
                        "deactivated_at": now.to_rfc3339(),
                    }),
                ));
            }
            emitted.extend(insert_events(&mut *tx, tenant, now, events).await?);
            after
        });
        self.store.announce(&emitted);
        row.try_into()
    }

    /// The agency's oldest user with `role`.
    pub(crate) async fn oldest_with_role(
        &self,
        agency: &AgencyId,
        role: Role,
    ) -> Result<Option<User>> {
        let sql = format!(
            "select {USER_COLUMNS} from users where agency_id = $1 and role = $2
             order by created_at, id limit 1"
        );
        let row: Option<UserRow> = on_pool!(self.store.db(), pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(agency)
                .bind(role.as_str())
                .fetch_optional(pool)
                .await?
        });
        row.map(User::try_from).transpose()
    }

    /// A page of the agency's people, oldest first (ties by id), never including
    /// platform roles.
    pub async fn list(
        &self,
        tenant: &Tenant,
        filter: &UserFilter,
        after: Option<&Position>,
        limit: u32,
    ) -> Result<Page<User>> {
        let shape = UserListShape {
            role: filter.role.is_some(),
            active: filter.active.is_some(),
            after: after.is_some(),
        };
        let (list_sql, count_sql) = (user_list_sql(shape), user_count_sql(shape));
        let limit = limit.min(crate::page::MAX_PAGE_SIZE);
        let role = filter.role.map(Role::as_str);
        let (rows, total): (Vec<UserRow>, i64) = on_pool!(self.store.db(), pool => {
            let mut list = sqlx::query_as(sqlx::AssertSqlSafe(list_sql.clone())).bind(&tenant.agency_id);
            let mut count = sqlx::query_scalar(sqlx::AssertSqlSafe(count_sql.clone())).bind(&tenant.agency_id);
            if let Some(role) = role {
                list = list.bind(role);
                count = count.bind(role);
            }
            if let Some(active) = filter.active {
                list = list.bind(active);
                count = count.bind(active);
            }
            if let Some(after) = after {
                list = list.bind(after.created_at).bind(after.id.as_str());
            }
            let rows = list.bind(i64::from(limit) + 1).fetch_all(pool).await?;
            let total = count.fetch_one(pool).await?;
            (rows, total)
        });
        let users = rows
            .into_iter()
            .map(User::try_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::from_overfetch(users, limit, total, |u| {
            Position::after(u.created_at, u.id.as_str())
        }))
    }
}

/// Which filters a users list statement has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UserListShape {
    /// By role.
    pub role: bool,
    /// By active or deactivated.
    pub active: bool,
    /// A later page, after a position.
    pub after: bool,
}

impl UserListShape {
    /// Every shape.
    pub(crate) fn all() -> Vec<Self> {
        let mut shapes = Vec::new();
        for role in [false, true] {
            for active in [false, true] {
                for after in [false, true] {
                    shapes.push(Self {
                        role,
                        active,
                        after,
                    });
                }
            }
        }
        shapes
    }
}

/// The filters of a users statement (`$1` the agency, then the role, then
/// whether active, each only when given, so that the index leading with it
/// serves the statement) and the next placeholder's number.
fn user_filters(shape: UserListShape) -> (String, usize) {
    let mut sql = "agency_id = $1 and role not in ('super_admin', 'admin')".to_owned();
    let mut next = 2;
    if shape.role {
        sql.push_str(&format!(" and role = ${next}"));
        next += 1;
    }
    if shape.active {
        sql.push_str(&format!(" and is_active = ${next}"));
        next += 1;
    }
    (sql, next)
}

/// The statement of a page of the agency's people.
pub(crate) fn user_list_sql(shape: UserListShape) -> String {
    let (filters, mut next) = user_filters(shape);
    let mut sql = format!("select {USER_COLUMNS} from users where {filters}");
    if shape.after {
        sql.push_str(&format!(" and (created_at, id) > (${next}, ${})", next + 1));
        next += 2;
    }
    sql.push_str(&format!(" order by created_at, id limit ${next}"));
    sql
}

/// The statement of the list's total: the matching people, counted on the
/// index that serves the filter (an agency's people, not every user).
pub(crate) fn user_count_sql(shape: UserListShape) -> String {
    let (filters, _) = user_filters(UserListShape {
        after: false,
        ..shape
    });
    format!("select count(*) from users where {filters}")
}

/// The events of a user joining an agency: `user.signed_up`, and
/// `user.agent_created` too for an agent. Users belong to the agency, not
/// to an environment; their events are the live environment's.
pub(crate) fn joined_events(user: &User) -> Vec<NewEvent> {
    let created_at = user.created_at.to_rfc3339();
    let mut events = vec![NewEvent::new(
        EventType::UserSignedUp,
        serde_json::json!({
            "user_id": user.id,
            "role": user.role.as_str(),
            "manager_id": user.manager_id,
            "created_at": created_at,
        }),
    )];
    if user.role == Role::Agent {
        events.push(NewEvent::new(
            EventType::UserAgentCreated,
            serde_json::json!({
                "user_id": user.id,
                "role": user.role.as_str(),
                "manager_id": user.manager_id,
                "created_at": created_at,
            }),
        ));
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip_and_platform_roles_are_marked() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert!(Role::SuperAdmin.is_platform() && Role::Admin.is_platform());
        assert!(!Role::Broker.is_platform());
        assert_eq!(Role::parse("owner"), None);
    }

    #[test]
    fn emails_are_checked_and_lower_cased() {
        assert_eq!(
            normalise_email(" Ana@Example.COM "),
            Some("ana@example.com".to_owned())
        );
        for bad in [
            "",
            "ana",
            "@example.com",
            "ana@",
            "ana@example",
            "a b@example.com",
            "a@b@c.com",
        ] {
            assert_eq!(normalise_email(bad), None, "{bad}");
        }
    }
}

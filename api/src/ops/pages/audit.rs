//! `/ops/audit`: every operator action.

use super::shared::*;

pub(in crate::ops) struct AuditRow {
    pub id: String,
    pub at: String,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub count: i64,
}

#[derive(Template)]
#[template(path = "ops/audit.html")]
struct AuditPage {
    current: &'static str,
    notice: Option<String>,
    problem: Option<String>,
    updated: String,
    entries: Vec<AuditRow>,
}

/// `GET /ops/audit`.
pub(in crate::ops) async fn audit_page(State(state): State<OpsState>) -> Response {
    let app = &state.app;
    let entries = match app.store().ops_audit().recent(200).await {
        Ok(entries) => entries,
        Err(err) => return unavailable(&err.into()),
    };
    render(&AuditPage {
        current: "audit",
        notice: None,
        problem: None,
        updated: when(app.store().clock().now()),
        entries: entries
            .into_iter()
            .map(|entry| AuditRow {
                id: entry.id,
                at: when(entry.at),
                actor: entry.actor,
                action: entry.action,
                target: entry.target,
                count: entry.count,
            })
            .collect(),
    })
}

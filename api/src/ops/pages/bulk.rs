//! Bulk actions: the confirmation page that says how many jobs a filter
//! touches, and the post that acts on every one of them.

use super::shared::*;

#[derive(Template)]
#[template(path = "ops/confirm.html")]
struct ConfirmPage {
    current: &'static str,
    notice: Option<String>,
    problem: Option<String>,
    updated: String,
    action: &'static str,
    label: &'static str,
    verb: &'static str,
    danger: bool,
    count: usize,
    filter: FilterView,
    back: String,
}

/// A bulk action and its filter, as the forms send them.
#[derive(Debug, Default, Deserialize)]
pub(in crate::ops) struct BulkForm {
    action: Option<String>,
    #[serde(flatten)]
    filter: FilterInput,
}

impl BulkForm {
    /// The action and its checked filter, or the way back to the jobs page
    /// saying what is wrong (or the problem page when the platform failed).
    fn read(self) -> Result<(JobAction, JobFilter), Box<Response>> {
        let back = |problem: &str| {
            Box::new(Redirect::to(&with_param("/ops/", "problem", problem)).into_response())
        };
        let action = self
            .action
            .as_deref()
            .and_then(JobAction::parse)
            .ok_or_else(|| back("Choose an action: retry, discard, run now or cancel."))?;
        match self.filter.checked() {
            Ok(filter) => Ok((action, filter)),
            Err(ConsoleError::Invalid(field, reason)) => {
                Err(back(&format!("The filter's {field} {reason}.")))
            }
            Err(err) => Err(Box::new(unavailable(&err))),
        }
    }
}

/// `GET /ops/jobs/confirm`: how many jobs a bulk action would touch, and the
/// button that does it.
pub(in crate::ops) async fn confirm_page(
    State(state): State<OpsState>,
    Query(form): Query<BulkForm>,
) -> Response {
    let app = &state.app;
    let (action, filter) = match form.read() {
        Ok(read) => read,
        Err(response) => return *response,
    };
    let view = FilterView::of(&filter);
    if !action.takes_state(&filter.state) {
        let problem = format!(
            "{} takes {} jobs, not {} ones.",
            action_view(action).label,
            action.takes().join(" or "),
            filter.state
        );
        return Redirect::to(&with_param(&view.link(1), "problem", &problem)).into_response();
    }
    let count = match Console::new(app.store(), &app.platform().queue)
        .count(filter)
        .await
    {
        Ok(count) => usize::try_from(count).unwrap_or(usize::MAX),
        Err(err) => return unavailable(&err),
    };
    let shown = action_view(action);
    let verb = match action {
        JobAction::Retry => "put back in their queues, with fresh attempts,",
        JobAction::Discard => "throw away for good",
        JobAction::RunNow => "make due now",
        JobAction::Cancel => {
            "take out of their queues (they go dead as cancelled, and can be retried)"
        }
    };
    render(&ConfirmPage {
        current: "jobs",
        notice: None,
        problem: None,
        updated: when(app.store().clock().now()),
        action: action.name(),
        label: shown.label,
        verb,
        danger: shown.danger,
        count,
        back: view.link(1),
        filter: view,
    })
}

/// `POST /ops/jobs/bulk`: the confirmed action on every job the filter finds.
pub(in crate::ops) async fn bulk(
    State(state): State<OpsState>,
    Extension(actor): Extension<OpsActor>,
    Form(form): Form<BulkForm>,
) -> Response {
    let app = &state.app;
    let (action, filter) = match form.read() {
        Ok(read) => read,
        Err(response) => return *response,
    };
    let view = FilterView::of(&filter);
    match Console::new(app.store(), &app.platform().queue)
        .act_on_filter(action, filter, &actor.0)
        .await
    {
        Ok(touched) => {
            let notice = format!(
                "{}: {} job{}.",
                action_view(action).label,
                touched.len(),
                if touched.len() == 1 { "" } else { "s" }
            );
            Redirect::to(&with_param(&view.link(1), "notice", &notice)).into_response()
        }
        Err(ConsoleError::Invalid(_, reason)) => Redirect::to(&with_param(
            &view.link(1),
            "problem",
            &format!("Nothing was done: {reason}."),
        ))
        .into_response(),
        Err(err) => unavailable(&err),
    }
}

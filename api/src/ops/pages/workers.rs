//! `/ops/workers`: the worker processes, with quiet and stop.

use super::shared::*;

pub(in crate::ops) struct WorkerRow {
    pub id: String,
    pub host: String,
    pub pid: i64,
    pub version: String,
    pub queues: String,
    pub in_hand: i64,
    pub heartbeat: String,
    pub state: String,
    pub state_class: &'static str,
    pub requested: Option<String>,
    pub can_quiet: bool,
    pub can_stop: bool,
}

#[derive(Template)]
#[template(path = "ops/workers.html")]
struct WorkersPage {
    current: &'static str,
    notice: Option<String>,
    problem: Option<String>,
    updated: String,
    workers: Vec<WorkerRow>,
}

/// A process's state as the console shows it: `lost` once it missed three
/// heartbeats without saying it stopped.
pub(in crate::ops) fn shown_state(
    worker: &storage::background::job_console::WorkerProcess,
    now: Timestamp,
) -> &str {
    if worker.is_lost(now) {
        "lost"
    } else {
        &worker.state
    }
}

/// `GET /ops/workers`.
pub(in crate::ops) async fn workers_page(
    State(state): State<OpsState>,
    Query(query): Query<NoticeQuery>,
) -> Response {
    let app = &state.app;
    let now = app.store().clock().now();
    let processes = match app.store().worker_processes().list().await {
        Ok(processes) => processes,
        Err(err) => return unavailable(&err.into()),
    };
    let workers = processes
        .into_iter()
        .map(|worker| {
            let state = shown_state(&worker, now).to_owned();
            let ago = (now.as_micros() - worker.heartbeat_at.as_micros()) / 1_000_000;
            let queues =
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&worker.queues)
                    .map(|map| {
                        map.iter()
                            .map(|(queue, concurrency)| format!("{queue} ×{concurrency}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or(worker.queues.clone());
            let live = matches!(state.as_str(), "running" | "quiet");
            WorkerRow {
                can_quiet: state == "running" && worker.requested.is_none(),
                can_stop: live && worker.requested.as_deref() != Some("stop"),
                state_class: match state.as_str() {
                    "running" => "ok",
                    "quiet" | "stopping" => "warn",
                    "lost" => "error",
                    _ => "muted",
                },
                heartbeat: format!("{} ({ago} s ago)", when(worker.heartbeat_at)),
                state,
                id: worker.id,
                host: worker.host,
                pid: worker.pid,
                version: worker.version,
                queues,
                in_hand: worker.in_hand,
                requested: worker.requested,
            }
        })
        .collect();
    render(&WorkersPage {
        current: "workers",
        notice: query.notice,
        problem: query.problem,
        updated: when(now),
        workers,
    })
}

/// `POST /ops/workers/{id}/{quiet|stop}`.
pub(in crate::ops) async fn worker_request(
    State(state): State<OpsState>,
    Extension(actor): Extension<OpsActor>,
    Path((id, request)): Path<(String, String)>,
) -> Response {
    let app = &state.app;
    let Some(request) = WorkerRequest::parse(&request) else {
        return Redirect::to(&with_param(
            "/ops/workers",
            "problem",
            "No such request: quiet or stop.",
        ))
        .into_response();
    };
    match Console::new(app.store(), &app.platform().queue)
        .request_worker(&id, request, &actor.0)
        .await
    {
        Ok(()) => Redirect::to(&with_param(
            "/ops/workers",
            "notice",
            &format!(
                "Asked {id} to {}; it does within one heartbeat.",
                request.name()
            ),
        ))
        .into_response(),
        Err(ConsoleError::NotFound) => Redirect::to(&with_param(
            "/ops/workers",
            "problem",
            &format!("{id} is not a running worker process; nothing was asked."),
        ))
        .into_response(),
        Err(err) => unavailable(&err),
    }
}

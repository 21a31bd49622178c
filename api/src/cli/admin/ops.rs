//! `api ops …`: the job console from the terminal. Like the admin commands,
//! each takes the storage settings of `serve`, acts on the database and the
//! queue directly (so it works while the API is down) and prints one JSON
//! object. Retry and discard act on one job (`--job`) or on every dead job
//! a filter finds, never on one page of them.

use clap::{Args, Subcommand};
use jobs::admin::{JOB_STATES, JobFilter, QueueAdmin};
use serde_json::{Value, json};

use super::error::AdminError;
use super::open::open_platform;
use crate::config::StorageArgs;

/// The console's commands.
#[derive(Debug, Subcommand)]
pub enum OpsCommand {
    /// Every queue's jobs by state and whether it is paused → {"items"}.
    Queues(StorageOnly),
    /// The jobs a filter finds, oldest first → {"items", "count"}.
    Jobs(JobsArgs),
    /// Put dead jobs back in their queue with fresh attempts → {"retried", "ids"}.
    Retry(ActionArgs),
    /// Throw dead jobs away → {"discarded", "ids"}.
    Discard(ActionArgs),
    /// Stop every worker taking a queue's jobs → {"queue", "paused"}.
    Pause(QueueArgs),
    /// Let workers take a paused queue's jobs again → {"queue", "paused"}.
    Resume(QueueArgs),
}

/// Only the storage settings.
#[derive(Debug, Args)]
pub struct StorageOnly {
    #[command(flatten)]
    storage: StorageArgs,
}

/// What to look for.
#[derive(Debug, Args)]
pub struct Filter {
    /// queued, scheduled, running, retrying, dead or done.
    #[arg(long)]
    state: Option<String>,
    /// Only this queue.
    #[arg(long)]
    queue: Option<String>,
    /// Only jobs of this agency (agc_…).
    #[arg(long)]
    agency: Option<String>,
    /// Only jobs whose id, payload (event id, listing number, …) or last error contains this text.
    #[arg(long)]
    search: Option<String>,
}

/// `ops jobs`.
#[derive(Debug, Args)]
pub struct JobsArgs {
    #[command(flatten)]
    storage: StorageArgs,
    #[command(flatten)]
    filter: Filter,
    /// At most this many (1 to 1000); `count` is every match.
    #[arg(long, default_value_t = 50)]
    limit: usize,
}

/// `ops retry` and `ops discard`: one job, or every dead job a filter finds.
#[derive(Debug, Args)]
pub struct ActionArgs {
    #[command(flatten)]
    storage: StorageArgs,
    /// The job.
    #[arg(long, conflicts_with_all = ["state", "queue", "agency", "search"])]
    job: Option<String>,
    #[command(flatten)]
    filter: Filter,
}

/// `ops pause` and `ops resume`.
#[derive(Debug, Args)]
pub struct QueueArgs {
    #[command(flatten)]
    storage: StorageArgs,
    /// The queue.
    queue: String,
}

fn known_queue(queue: &str) -> Result<&'static str, AdminError> {
    jobs::kinds::QUEUES
        .iter()
        .copied()
        .find(|known| *known == queue)
        .ok_or_else(|| {
            AdminError::new(
                "validation.failed",
                format!("{queue} is not a queue: {}", jobs::kinds::QUEUES.join(", ")),
            )
        })
}

/// The job filter of `filter`, checked.
fn job_filter(filter: Filter) -> Result<JobFilter, AdminError> {
    let state = filter.state.ok_or_else(|| {
        AdminError::new(
            "validation.failed",
            "--state is required (or --job for one job)",
        )
    })?;
    let state = match state.as_str() {
        "pending" => "queued".to_owned(),
        other if JOB_STATES.contains(&other) => other.to_owned(),
        other => {
            return Err(AdminError::new(
                "validation.failed",
                format!("--state {other}: use one of {}", JOB_STATES.join(", ")),
            ));
        }
    };
    if let Some(queue) = &filter.queue {
        known_queue(queue)?;
    }
    Ok(JobFilter {
        state,
        queue: filter.queue,
        agency: filter.agency,
        search: filter.search.filter(|text| !text.is_empty()),
    })
}

fn queue_error(err: jobs::QueueError) -> AdminError {
    AdminError::new("server.internal", err.to_string())
}

/// Runs one console command.
pub(super) async fn run(command: OpsCommand) -> Result<Value, AdminError> {
    match command {
        OpsCommand::Queues(args) => {
            let platform = open_platform(&args.storage).await?;
            let admin = QueueAdmin::new(platform.queue.clone());
            let depths = admin.depths().await.map_err(queue_error)?;
            let paused = platform.store.schedules().paused_queues().await?;
            let items: Vec<Value> = depths
                .into_iter()
                .map(|depth| {
                    let paused = paused.contains(&depth.queue);
                    let mut item = json!(depth);
                    item["paused"] = json!(paused);
                    item
                })
                .collect();
            Ok(json!({ "items": items }))
        }
        OpsCommand::Jobs(args) => {
            if args.limit == 0 || args.limit > 1000 {
                return Err(AdminError::new(
                    "validation.failed",
                    "--limit must be 1 to 1000",
                ));
            }
            let filter = job_filter(args.filter)?;
            let platform = open_platform(&args.storage).await?;
            let found = QueueAdmin::new(platform.queue.clone())
                .find_jobs(&filter)
                .await
                .map_err(queue_error)?;
            let count = found.len();
            let items: Vec<_> = found.into_iter().take(args.limit).collect();
            Ok(json!({ "items": items, "count": count }))
        }
        OpsCommand::Retry(args) => act(args, Action::Retry).await,
        OpsCommand::Discard(args) => act(args, Action::Discard).await,
        OpsCommand::Pause(args) => set_paused(args, true).await,
        OpsCommand::Resume(args) => set_paused(args, false).await,
    }
}

#[derive(Clone, Copy)]
enum Action {
    Retry,
    Discard,
}

async fn act(args: ActionArgs, action: Action) -> Result<Value, AdminError> {
    let (verb, done) = match action {
        Action::Retry => ("retry", "retried"),
        Action::Discard => ("discard", "discarded"),
    };
    let platform = open_platform(&args.storage).await?;
    let admin = QueueAdmin::new(platform.queue.clone());
    let one_job = args.job.is_some();
    let ids = match args.job {
        Some(id) => vec![id],
        None => {
            let filter = job_filter(args.filter)?;
            if filter.state != "dead" {
                return Err(AdminError::new(
                    "validation.failed",
                    format!("{verb} takes dead jobs: use --state dead"),
                ));
            }
            admin
                .find_jobs(&filter)
                .await
                .map_err(queue_error)?
                .into_iter()
                .map(|job| job.id)
                .collect()
        }
    };
    let mut touched = Vec::new();
    for id in ids {
        let acted = match action {
            Action::Retry => admin.retry(&id).await,
            Action::Discard => admin.discard(&id).await,
        }
        .map_err(queue_error)?;
        if acted {
            touched.push(id);
        }
    }
    if one_job && touched.is_empty() {
        return Err(AdminError::new("not_found", "no dead job has this id"));
    }
    tracing::warn!(
        action = verb,
        count = touched.len(),
        "jobs changed from the command line"
    );
    Ok(json!({ done: touched.len(), "ids": touched }))
}

async fn set_paused(args: QueueArgs, paused: bool) -> Result<Value, AdminError> {
    let queue = known_queue(&args.queue)?;
    let platform = open_platform(&args.storage).await?;
    platform.store.schedules().set_paused(queue, paused).await?;
    Ok(json!({ "queue": queue, "paused": paused }))
}

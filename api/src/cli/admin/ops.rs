//! `api ops …`: the job console from the terminal. Like the admin commands,
//! each takes the storage settings of `serve`, acts on the database and the
//! queue directly (so it works while the API is down) and prints one JSON
//! object. Actions take one job (`--job`) or every job a filter finds, never
//! one page of them, and are recorded in the console's audit log as the
//! terminal's user on this host.

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use storage::background::job_console::WorkerRequest;

use super::error::AdminError;
use super::open::open_platform;
use crate::config::StorageArgs;
use crate::ops::console::{Console, ConsoleError, FilterInput, JobAction};

/// The console's commands.
#[derive(Debug, Subcommand)]
pub enum OpsCommand {
    /// Every queue's jobs by state and whether it is paused → {"items"}.
    Queues(StorageOnly),
    /// The jobs a filter finds, oldest first, and a listing number's runs no
    /// queue holds → {"items", "count", "count_capped", "searched",
    /// "runs_in_process", "more_runs_in_process"} (`count_capped`: more than
    /// `count` match; `searched`: free text on the Redis queue's done jobs
    /// read that many, newest first, and stopped).
    Jobs(JobsArgs),
    /// One job with every attempt → the job, with "attempt_history".
    Job(JobArgs),
    /// Put dead jobs back in their queue with fresh attempts → {"retried", "ids"}.
    Retry(ActionArgs),
    /// Throw dead jobs away → {"discarded", "ids"}.
    Discard(ActionArgs),
    /// Make scheduled or retrying jobs due now → {"run_now", "ids"}.
    RunNow(ActionArgs),
    /// Take queued jobs out of their queue; they go dead as cancelled → {"cancelled", "ids"}.
    Cancel(ActionArgs),
    /// Stop every worker taking a queue's jobs → {"queue", "paused"}.
    Pause(QueueArgs),
    /// Let workers take a paused queue's jobs again → {"queue", "paused"}.
    Resume(QueueArgs),
    /// Every worker process: host, queues, jobs in hand, last heartbeat → {"items"}.
    Workers(StorageOnly),
    /// Ask a worker process to finish its jobs in hand and take no more → {"id", "requested"}.
    Quiet(WorkerArgs),
    /// Ask a worker process to finish its jobs in hand and exit → {"id", "requested"}.
    Stop(WorkerArgs),
    /// The latest operator actions, newest first → {"items"}.
    Audit(StorageOnly),
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
    /// Only jobs whose id, payload (event id, …) or last error contains this text, or of this listing number.
    #[arg(long)]
    search: Option<String>,
}

impl Filter {
    fn input(self) -> FilterInput {
        FilterInput {
            state: self.state,
            queue: self.queue,
            agency: self.agency,
            search: self.search,
        }
    }
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

/// `ops job`.
#[derive(Debug, Args)]
pub struct JobArgs {
    #[command(flatten)]
    storage: StorageArgs,
    /// The job.
    #[arg(long)]
    job: String,
}

/// `ops retry|discard|run-now|cancel`: one job, or every job a filter finds.
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

/// `ops quiet` and `ops stop`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    storage: StorageArgs,
    /// The worker process (wrk_…, as `ops workers` lists it).
    worker: String,
}

impl From<ConsoleError> for AdminError {
    fn from(err: ConsoleError) -> Self {
        match err {
            ConsoleError::Invalid(field, reason) => {
                AdminError::new("validation.failed", format!("--{field} {reason}"))
            }
            ConsoleError::NotFound => AdminError::new(
                "not_found",
                "no job in a state this action takes has this id",
            ),
            ConsoleError::Failed(cause) => AdminError::new("server.internal", cause),
        }
    }
}

/// Who the terminal acts as, for the audit log.
fn actor() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".to_owned());
    let host = platform::telemetry::host_name().unwrap_or_else(|| "localhost".to_owned());
    format!("cli:{user}@{host}")
}

/// Runs one console command.
pub(super) async fn run(command: OpsCommand) -> Result<Value, AdminError> {
    match command {
        OpsCommand::Queues(args) => {
            let platform = open_platform(&args.storage).await?;
            let console = Console::new(&platform.store, &platform.queue);
            let depths = console
                .admin()
                .depths()
                .await
                .map_err(|err| AdminError::new("server.internal", err.to_string()))?;
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
            let filter = args.filter.input().checked()?;
            let platform = open_platform(&args.storage).await?;
            let window = platform::admin::JobWindow {
                offset: 0,
                limit: Some(args.limit as u64),
            };
            let found = Console::new(&platform.store, &platform.queue)
                .search(filter, window)
                .await?;
            Ok(found.into_json())
        }
        OpsCommand::Job(args) => {
            let platform = open_platform(&args.storage).await?;
            Console::new(&platform.store, &platform.queue)
                .job_json(&args.job)
                .await?
                .ok_or_else(|| AdminError::new("not_found", "no queue holds a job with this id"))
        }
        OpsCommand::Retry(args) => act(args, JobAction::Retry).await,
        OpsCommand::Discard(args) => act(args, JobAction::Discard).await,
        OpsCommand::RunNow(args) => act(args, JobAction::RunNow).await,
        OpsCommand::Cancel(args) => act(args, JobAction::Cancel).await,
        OpsCommand::Pause(args) => set_paused(args, true).await,
        OpsCommand::Resume(args) => set_paused(args, false).await,
        OpsCommand::Workers(args) => {
            let platform = open_platform(&args.storage).await?;
            let now = platform.store.clock().now();
            let items: Vec<Value> = platform
                .store
                .worker_processes()
                .list()
                .await?
                .iter()
                .map(|worker| crate::ops::worker_json(worker, now))
                .collect();
            Ok(json!({ "items": items }))
        }
        OpsCommand::Quiet(args) => request_worker(args, WorkerRequest::Quiet).await,
        OpsCommand::Stop(args) => request_worker(args, WorkerRequest::Stop).await,
        OpsCommand::Audit(args) => {
            let platform = open_platform(&args.storage).await?;
            Ok(Console::new(&platform.store, &platform.queue)
                .audit_json()
                .await?)
        }
    }
}

async fn act(args: ActionArgs, action: JobAction) -> Result<Value, AdminError> {
    let filter = match args.job {
        Some(_) => None,
        None => Some(args.filter.input().checked().map_err(|err| match err {
            ConsoleError::Invalid("state", _) => AdminError::new(
                "validation.failed",
                format!(
                    "--state is required (or --job for one job): {} takes {} jobs",
                    action.name(),
                    action.takes().join(" or ")
                ),
            ),
            other => other.into(),
        })?),
    };
    let platform = open_platform(&args.storage).await?;
    let console = Console::new(&platform.store, &platform.queue);
    let ids = match (args.job, filter) {
        (Some(id), _) => {
            console.act_on_job(action, &id, &actor()).await?;
            vec![id]
        }
        (None, Some(filter)) => console.act_on_filter(action, filter, &actor()).await?,
        (None, None) => Vec::new(),
    };
    Ok(json!({ action.done(): ids.len(), "ids": ids }))
}

async fn set_paused(args: QueueArgs, paused: bool) -> Result<Value, AdminError> {
    let platform = open_platform(&args.storage).await?;
    let queue = Console::new(&platform.store, &platform.queue)
        .set_paused(&args.queue, paused, &actor())
        .await?;
    Ok(json!({ "queue": queue, "paused": paused }))
}

async fn request_worker(args: WorkerArgs, request: WorkerRequest) -> Result<Value, AdminError> {
    let platform = open_platform(&args.storage).await?;
    match Console::new(&platform.store, &platform.queue)
        .request_worker(&args.worker, request, &actor())
        .await
    {
        Ok(()) => Ok(json!({ "id": args.worker, "requested": request.name() })),
        Err(ConsoleError::NotFound) => Err(AdminError::new(
            "not_found",
            "no running worker process has this id (see api ops workers)",
        )),
        Err(err) => Err(err.into()),
    }
}

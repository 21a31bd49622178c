//! The job platform: separate worker processes, shutdown and crash recovery,
//! the outbox sweep, schedules on several hosts, progress fan-out, the ops
//! listener (dashboard, queue actions, metrics, a retry clicked in Chromium,
//! the Redis queue's console reads)
//! and compose.yaml.

mod compose;
mod dead_jobs;
mod fairness;
mod fleet;
mod job_history;
mod lost_pushes;
mod ops;
mod ops_cli;
mod ops_console;
mod ops_metrics;
mod ops_sign_in;
mod pickup;
mod priorities;
mod processes;
mod progress;
mod redis_console;
mod retention;
mod shutdown;

use std::time::Duration;

use serde_json::Value;
use storage::{Environment, Store, Tenant};
use tests::deployment::{Deployment, eventually};

/// How long a platform test waits for something that should take a moment.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The latest progress state of an operation.
pub async fn progress_of(store: &Store, tenant: &Tenant, operation_id: &str) -> Option<Value> {
    store
        .progress()
        .latest(tenant, operation_id)
        .await
        .unwrap()
        .map(|record| record.state)
}

/// Waits until an operation's latest state has `status`, and returns it.
pub async fn wait_for_status(
    store: &Store,
    tenant: &Tenant,
    operation_id: &str,
    status: &str,
) -> Value {
    eventually(PATIENCE, &format!("{operation_id} {status}"), || async {
        progress_of(store, tenant, operation_id)
            .await
            .filter(|state| state["status"] == status)
    })
    .await
}

/// An agency of a deployment and a probe it may enqueue.
pub struct Fixture {
    pub agency_id: String,
    pub tenant: Tenant,
}

impl Fixture {
    pub fn new(deployment: &Deployment) -> Self {
        let agency = deployment.admin_ok(&["create-agency", "--name", "Fleet check"]);
        let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
        let tenant = Tenant::new(
            storage::ids::AgencyId::parse(&agency_id).unwrap(),
            Environment::Live,
        );
        Self { agency_id, tenant }
    }

    /// Enqueues a probe of `steps` × `step_ms` and returns its operation id.
    pub fn probe(&self, deployment: &Deployment, steps: u32, step_ms: u64) -> String {
        let pushed = deployment.admin_ok(&[
            "enqueue-probe",
            "--agency",
            &self.agency_id,
            "--steps",
            &steps.to_string(),
            "--step-ms",
            &step_ms.to_string(),
        ]);
        pushed["operation_id"].as_str().unwrap().to_owned()
    }
}

//! Job priorities on the SQLite queue: among due jobs a higher priority runs
//! first, even when it was queued later. (The Redis queue keeps none: it is
//! first in, first out; see docs/decisions.md.)

use std::time::Duration;

use platform::kinds::Probe;
use platform::{JobQueue, PushOptions, QueueTarget};
use tests::Backend;
use tests::deployment::{Deployment, eventually};

use super::{Fixture, PATIENCE, progress_of, wait_for_status};

fn probe(fixture: &Fixture) -> Probe {
    Probe {
        operation_id: storage::ids::OperationId::generate(),
        agency_id: fixture.tenant.agency_id.clone(),
        is_sandbox: false,
        steps: 4,
        step_ms: 250,
        fail: false,
    }
}

#[tokio::test]
async fn a_higher_priority_job_queued_later_runs_first() {
    let deployment = Deployment::new(Backend::Sqlite).await;
    let fixture = Fixture::new(&deployment);
    let store = deployment.store().await;
    let file = deployment.db.data_dir().join(platform::config::QUEUE_FILE);
    let queue = JobQueue::connect(&QueueTarget::SqliteFile(file))
        .await
        .unwrap();
    let earlier = probe(&fixture);
    queue
        .push(earlier.clone(), PushOptions::default())
        .await
        .unwrap();
    // A later second and a later id: without priorities it would run second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let urgent = probe(&fixture);
    let high = PushOptions {
        priority: 10,
        ..PushOptions::default()
    };
    queue.push(urgent.clone(), high).await.unwrap();

    // One job at a time, one claimed per fetch.
    let _workers = deployment.spawn_workers(&[
        "--queue",
        "probe=1",
        "--poll-millis",
        "50",
        "--no-schedules",
    ]);
    let first = eventually(PATIENCE, "a probe started", || async {
        for operation in [&urgent.operation_id, &earlier.operation_id] {
            if progress_of(&store, &fixture.tenant, operation.as_str())
                .await
                .is_some()
            {
                return Some(operation.clone());
            }
        }
        None
    })
    .await;
    assert_eq!(first, urgent.operation_id, "the urgent probe runs first");
    assert!(
        progress_of(&store, &fixture.tenant, earlier.operation_id.as_str())
            .await
            .is_none(),
        "the earlier probe waits for the slot"
    );
    wait_for_status(
        &store,
        &fixture.tenant,
        earlier.operation_id.as_str(),
        "completed",
    )
    .await;
    let urgent_done = progress_of(&store, &fixture.tenant, urgent.operation_id.as_str())
        .await
        .unwrap();
    assert_eq!(urgent_done["status"], "completed");
}

//! Each state's oldest job, and the dead jobs' own indexes.

use super::*;

#[tokio::test]
async fn the_dead_jobs_are_read_by_their_own_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let admin = sqlite_queue(&dir, &[]).await;
    let QueueBackend::Sqlite(pool) = admin.queue.backend() else {
        unreachable!()
    };
    // The console's dead list (with or without a queue) and the most
    // recent dead jobs: the dead jobs' index in the statement's order,
    // no sort of every dead job.
    let dead = sqlite_state("dead").unwrap();
    for (statement, index) in [
        (
            window_statement(&dead, &SqliteText::default()),
            "USING INDEX jobs_dead_by_run_at",
        ),
        (
            crate::admin::dead::recent_dead_statement(),
            "USING INDEX jobs_dead_by_done_at",
        ),
    ] {
        let plan = plan_of(pool, &statement).await;
        assert!(plan.iter().any(|step| step.contains(index)), "{plan:?}");
        assert!(
            !plan.iter().any(|step| step.contains("TEMP B-TREE")),
            "{plan:?}"
        );
    }
    // The oldest dead job of each queue: a seek per queue; the backlog
    // by its ranges; no step reads every job.
    let plan = plan_of(pool, &crate::admin::ages::sqlite_oldest_statement()).await;
    assert!(
        plan.iter()
            .any(|step| step
                .starts_with("SEARCH Jobs USING INDEX jobs_dead_by_queue (job_type=?)")),
        "{plan:?}"
    );
    // The only scan is of the partial index of the jobs still retrying.
    assert!(
        plan.iter()
            .filter(|step| step.starts_with("SCAN Jobs"))
            .all(|step| step == "SCAN Jobs USING INDEX idx_jobs_failed"),
        "{plan:?}"
    );
}

#[tokio::test]
async fn each_state_has_the_age_of_its_oldest_job() {
    let dir = tempfile::tempdir().unwrap();
    let now_ms = chrono::Utc::now().timestamp_millis();
    let pushed = |seconds_ago: i64| {
        ulid::Ulid::from_parts(u64::try_from(now_ms - seconds_ago * 1_000).unwrap(), 1).to_string()
    };
    let (older_dead, dead, killed, retrying, waiting, later) = (
        pushed(500),
        pushed(400),
        pushed(300),
        pushed(200),
        pushed(100),
        pushed(50),
    );
    let far = chrono::Utc::now().timestamp() + 3_600;
    let error = Some(r#"{"Err": "gone"}"#);
    let admin = sqlite_queue(
        &dir,
        &[
            (
                &older_dead,
                "media_variants",
                "Failed",
                3,
                0,
                json!({}),
                error,
            ),
            (&dead, "media_variants", "Failed", 5, 0, json!({}), error),
            (
                &killed,
                "webhook_delivery",
                "Killed",
                1,
                0,
                json!({}),
                error,
            ),
            // Failed with an attempt left: waiting for its retry.
            (
                &retrying,
                "webhook_delivery",
                "Failed",
                1,
                far,
                json!({}),
                error,
            ),
            (&waiting, "media_variants", "Pending", 0, 0, json!({}), None),
            (&later, "media_variants", "Pending", 0, far, json!({}), None),
        ],
    )
    .await;
    let ages = admin.oldest_jobs().await.unwrap();
    let age = |queue: &str, state: &str| {
        ages.iter()
            .find(|age| age.queue == queue && age.state == state)
            .map_or(-1.0, |age| age.age_seconds.round())
    };
    assert_eq!(age("media_variants", "dead"), 500.0);
    assert_eq!(age("webhook_delivery", "dead"), 300.0);
    assert_eq!(age("webhook_delivery", "scheduled"), 200.0);
    assert_eq!(age("media_variants", "pending"), 100.0);
    assert_eq!(age("media_variants", "scheduled"), 50.0);
    assert_eq!(age("media_variants", "running"), 0.0, "none running");
}

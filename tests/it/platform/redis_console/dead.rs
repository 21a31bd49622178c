//! Dead jobs on Redis, walked through their own index.

use super::*;

#[tokio::test]
async fn dead_jobs_on_redis_are_walked_through_a_dead_index_caught_up_when_read() {
    let app = TestApp::builder(Backend::Sqlite).redis().spawn().await;
    let queue = app.state.platform().queue.clone();
    let admin = QueueAdmin::new(queue.clone());
    let (order, recent) = (dead_order_key(Probe::KIND), dead_recent_key(Probe::KIND));
    // Sixty probes of one agency and five of another die, the last three of
    // the sixty an hour after the rest.
    let many = AgencyId::generate();
    let few = AgencyId::generate();
    let jobs: Vec<(Probe, PushOptions)> = (0..60)
        .map(|_| (probe(&many), PushOptions::default()))
        .chain((0..5).map(|_| (probe(&few), PushOptions::default())))
        .collect();
    let pushed = queue.push_many(jobs).await.unwrap();
    let mut redis = redis_of(&queue).await;
    mark_dead(&mut redis, &pushed[..57], 1_800_000_000).await;
    mark_dead(&mut redis, &pushed[60..], 1_800_000_000).await;
    mark_dead(&mut redis, &pushed[57..60], 1_800_003_600).await;
    assert!(members(&mut redis, &order).await.is_empty(), "not yet read");
    let dead = |agency: Option<&AgencyId>, search: Option<&str>| JobFilter {
        state: "dead".into(),
        ..done(agency, search)
    };

    // A page of them, in id order, counted by the dead set's size; the read
    // indexed every one, with the time it died.
    let mut in_order = pushed.clone();
    in_order.sort_unstable();
    let page = admin
        .find_jobs_in(&dead(None, None), window(10, 20))
        .await
        .unwrap();
    assert_eq!((page.total, page.total_capped), (65, false));
    assert_eq!(ids(&page), in_order[10..30].to_vec());
    assert!(page.jobs.iter().all(|job| job.state == "dead"));
    assert_eq!(members(&mut redis, &order).await, in_order);
    let died: f64 = redis::cmd("ZSCORE")
        .arg(&recent)
        .arg(&pushed[58])
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(died, 1_800_003_600.0);

    // An agency's, checked job by job; a search of their error.
    let mut of_few = pushed[60..].to_vec();
    of_few.sort_unstable();
    let few_found = admin
        .find_jobs_in(&dead(Some(&few), None), window(0, 50))
        .await
        .unwrap();
    assert_eq!(
        (few_found.total, ids(&few_found)),
        (5, of_few.iter().map(String::as_str).collect())
    );
    let errors = admin
        .find_jobs_in(&dead(None, Some("answered 503")), window(0, 10))
        .await
        .unwrap();
    assert_eq!(
        (errors.total, ids(&errors)),
        (65, in_order[..10].iter().map(String::as_str).collect())
    );
    assert!(
        admin
            .find_jobs_in(&dead(Some(&few), Some("answered 410")), window(0, 10))
            .await
            .unwrap()
            .jobs
            .is_empty()
    );

    // The ops API's most recent: by the time they died.
    let latest: Vec<String> = admin
        .dead_jobs(3)
        .await
        .unwrap()
        .into_iter()
        .map(|job| job.id)
        .collect();
    let mut later = pushed[57..60].to_vec();
    later.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(latest, later);
    assert_eq!(admin.dead_jobs(100).await.unwrap().len(), 65);

    // A retry and a discard leave the index in the same step.
    assert!(admin.retry(&pushed[0]).await.unwrap());
    assert!(admin.discard(&pushed[1]).await.unwrap());
    let indexed = members(&mut redis, &order).await;
    assert_eq!(indexed.len(), 63);
    assert!(!indexed.contains(&pushed[0]) && !indexed.contains(&pushed[1]));

    // A job taken out of the dead set behind the index's back while another
    // dies leaves the sizes equal: pages never show the one gone, and the
    // purge compares the sets whole.
    let fresh = queue
        .push(probe(&few), PushOptions::default())
        .await
        .unwrap();
    let _: () = redis::cmd("SREM")
        .arg(format!("{}:dead", Probe::KIND))
        .arg(&pushed[2])
        .query_async(&mut redis)
        .await
        .unwrap();
    mark_dead(&mut redis, std::slice::from_ref(&fresh), 1_800_000_000).await;
    let every = admin
        .find_jobs_in(&dead(None, None), JobWindow::ALL)
        .await
        .unwrap();
    assert_eq!(every.total, 63);
    assert!(every.jobs.iter().all(|job| job.id != pushed[2]));
    let now = chrono::Utc::now().timestamp();
    assert_eq!(
        admin.purge_finished(now - 3600, now - 3600).await.unwrap(),
        0
    );
    let indexed = members(&mut redis, &order).await;
    assert!(indexed.contains(&fresh) && !indexed.contains(&pushed[2]));
    assert_eq!(indexed.len(), 63);

    // The purge of the dead takes them out of both sets.
    assert_eq!(
        admin
            .purge_finished(now - 3600, 1_900_000_000)
            .await
            .unwrap(),
        63
    );
    assert!(members(&mut redis, &order).await.is_empty());
    assert!(members(&mut redis, &recent).await.is_empty());
}

//! Searches of the Redis queue from the console: ids, payloads, last
//! errors and related ids, and free text read up to a budget.

use super::*;

#[tokio::test]
async fn a_redis_search_checks_ids_payloads_last_errors_and_related_ids_where_they_are_kept() {
    let app = TestApp::builder(Backend::Sqlite).redis().spawn().await;
    let queue = app.state.platform().queue.clone();
    let admin = QueueAdmin::new(queue.clone());
    let agency = AgencyId::generate();
    let probes: Vec<Probe> = (0..3).map(|_| probe(&agency)).collect();
    let operations: Vec<String> = probes
        .iter()
        .map(|probe| probe.operation_id.to_string())
        .collect();
    let ids = queue
        .push_many(
            probes
                .into_iter()
                .map(|probe| (probe, PushOptions::default()))
                .collect(),
        )
        .await
        .unwrap();
    let mut redis = redis_of(&queue).await;
    mark_done(&mut redis, &ids).await;
    // The last one died instead, of an error its payload does not hold.
    let dead = ids[2].clone();
    let _: () = redis::pipe()
        .srem(format!("{}:done", Probe::KIND), &dead)
        .ignore()
        .sadd(format!("{}:dead", Probe::KIND), &dead)
        .ignore()
        .hset(
            format!("{}:meta:{dead}", Probe::KIND),
            "result",
            r#"{"Err":"Receiver answered 410 Gone"}"#,
        )
        .ignore()
        .query_async(&mut redis)
        .await
        .unwrap();
    let search = |state: &str, text: &str, related: &[&str]| JobFilter {
        state: state.into(),
        queue: None,
        agency: None,
        search: Some(text.to_owned()),
        related: related.iter().map(|id| (*id).to_owned()).collect(),
    };
    let found = |filter: JobFilter| {
        let admin = admin.clone();
        async move {
            let found = admin.find_jobs_in(&filter, window(0, 50)).await.unwrap();
            found.jobs.into_iter().map(|job| job.id).collect::<Vec<_>>()
        }
    };
    // The id, in any case, and the payload.
    assert_eq!(
        found(search("done", &ids[0].to_lowercase(), &[])).await,
        [ids[0].clone()]
    );
    assert_eq!(
        found(search("done", &operations[1].to_uppercase(), &[])).await,
        [ids[1].clone()]
    );
    // The last error, in any case; not the result's own wording.
    assert_eq!(found(search("dead", "answered 410", &[])).await, [dead]);
    assert!(found(search("dead", "err", &[])).await.is_empty());
    // A listing number stands for its related ids, each named whole.
    assert_eq!(
        found(search("done", "QX7ABC", &[&operations[0]])).await,
        [ids[0].clone()]
    );
    let cut_short = &operations[0][..operations[0].len() - 1];
    assert!(
        found(search("done", "QX7ABC", &[cut_short]))
            .await
            .is_empty()
    );
    // The agency, with a search.
    let mut with_agency = search("done", &operations[1], &[]);
    with_agency.agency = Some(agency.to_string());
    assert_eq!(found(with_agency.clone()).await, [ids[1].clone()]);
    with_agency.agency = Some(AgencyId::generate().to_string());
    assert!(found(with_agency).await.is_empty());
}

#[tokio::test]
async fn a_redis_search_for_an_id_reads_the_range_of_the_jobs_naming_it() {
    let app = TestApp::builder(Backend::Sqlite).redis().spawn().await;
    let queue = app.state.platform().queue.clone();
    let admin = QueueAdmin::new(queue.clone());
    // Three dispatches: the first names two events, the second one of them,
    // the third another; ids inside an array are names too.
    let events: Vec<EventId> = (0..3).map(|_| EventId::generate()).collect();
    let jobs = [
        vec![events[0].clone(), events[1].clone()],
        vec![events[1].clone()],
        vec![events[2].clone()],
    ];
    let mut pushed = Vec::new();
    for event_ids in jobs {
        let id = queue
            .push(DispatchEvents { event_ids }, PushOptions::default())
            .await
            .unwrap();
        pushed.push(id);
    }
    let mut redis = redis_of(&queue).await;
    // Every name with its job, in lower case; in the index before the jobs
    // are done, read only once they are.
    let mut expected: Vec<String> = [(0, 0), (1, 0), (1, 1), (2, 2)]
        .iter()
        .map(|&(event, job)| format!("{} {}", events[event].as_str().to_lowercase(), pushed[job]))
        .collect();
    expected.sort_unstable();
    assert_eq!(
        members(&mut redis, &names_key(DispatchEvents::KIND)).await,
        expected
    );
    let search = |text: &str, related: &[&EventId]| JobFilter {
        state: "done".into(),
        queue: None,
        agency: None,
        search: Some(text.to_owned()),
        related: related.iter().map(ToString::to_string).collect(),
    };
    let found = |filter: JobFilter| {
        let admin = admin.clone();
        async move {
            let found = admin.find_jobs_in(&filter, window(0, 50)).await.unwrap();
            let ids: Vec<String> = found.jobs.into_iter().map(|job| job.id).collect();
            (ids, found.total)
        }
    };
    assert_eq!(found(search(events[1].as_str(), &[])).await, (vec![], 0));
    mark_done_in(&mut redis, DispatchEvents::KIND, &pushed).await;
    // An id, in any case: the jobs naming it, in push order.
    let naming_second = (vec![pushed[0].clone(), pushed[1].clone()], 2);
    assert_eq!(found(search(events[1].as_str(), &[])).await, naming_second);
    assert_eq!(
        found(search(&events[1].as_str().to_lowercase(), &[])).await,
        naming_second
    );
    // A listing number's related ids: a job naming two of them is found
    // once.
    assert_eq!(
        found(search("QX7ABC", &[&events[0], &events[1]])).await,
        naming_second
    );
    assert_eq!(
        found(search("QX7ABC", &[&events[2]])).await,
        (vec![pushed[2].clone()], 1)
    );
    // Text that is not an id is looked for in the payloads, newest first:
    // part of an id finds the jobs naming it.
    let part = &events[1].as_str()[..12];
    assert_eq!(
        found(search(part, &[])).await,
        (vec![pushed[1].clone(), pushed[0].clone()], 2)
    );
    // Gone with the jobs.
    let far_future = 4_102_444_800;
    admin.purge_finished(far_future, far_future).await.unwrap();
    assert!(
        members(&mut redis, &names_key(DispatchEvents::KIND))
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn free_text_on_redis_reads_the_newest_done_jobs_up_to_a_budget_and_says_so() {
    let app = TestApp::builder(Backend::Sqlite).redis().spawn().await;
    let queue = app.state.platform().queue.clone();
    let agency = AgencyId::generate();
    let jobs: Vec<(Probe, PushOptions)> = (0..30)
        .map(|_| (probe(&agency), PushOptions::default()))
        .collect();
    let mut pushed = queue.push_many(jobs).await.unwrap();
    let mut redis = redis_of(&queue).await;
    mark_done(&mut redis, &pushed).await;
    pushed.sort_unstable();
    let newest_first: Vec<&str> = pushed.iter().rev().map(String::as_str).collect();
    // Text every probe holds, and that is not an id.
    let text = done(None, Some("step_ms"));
    // A budget of ten: the ten newest read, five shown, and how far it read.
    let budgeted = QueueAdmin::new(queue.clone()).with_search_budget(10);
    let found = budgeted.find_jobs_in(&text, window(0, 5)).await.unwrap();
    assert_eq!(ids(&found), newest_first[..5].to_vec());
    assert_eq!(
        (found.total, found.total_capped, found.searched),
        (10, false, Some(10))
    );
    let next = budgeted.find_jobs_in(&text, window(5, 5)).await.unwrap();
    assert_eq!(ids(&next), newest_first[5..10].to_vec());
    // Text that finds nothing reads the same ten and stops.
    let nothing = budgeted
        .find_jobs_in(&done(None, Some("no such text")), window(0, 5))
        .await
        .unwrap();
    assert_eq!((nothing.total, nothing.searched), (0, Some(10)));
    // A budget that reaches every job says nothing of it.
    let whole = QueueAdmin::new(queue.clone()).with_search_budget(30);
    let found = whole.find_jobs_in(&text, window(0, 5)).await.unwrap();
    assert_eq!((found.total, found.searched), (30, None));
    // An id is read from the names, whatever the budget.
    let operation: String = redis::cmd("HGET")
        .arg(format!("{}:data", Probe::KIND))
        .arg(&pushed[0])
        .query_async::<String>(&mut redis)
        .await
        .map(|data| {
            let job: serde_json::Value = serde_json::from_str(&data).unwrap();
            job["operation_id"].as_str().unwrap().to_owned()
        })
        .unwrap();
    let found = budgeted
        .find_jobs_in(&done(None, Some(&operation)), window(0, 5))
        .await
        .unwrap();
    assert_eq!(
        (ids(&found), found.total, found.searched),
        (vec![pushed[0].as_str()], 1, None)
    );
    // A bulk action reads every job, oldest first, with no budget.
    let every = budgeted.find_jobs_in(&text, JobWindow::ALL).await.unwrap();
    assert_eq!(
        (every.jobs.len(), every.total, every.searched),
        (30, 30, None)
    );
    assert_eq!(every.jobs[0].id, pushed[0]);
}

#[tokio::test]
async fn the_console_says_how_far_a_free_text_search_of_redis_read() {
    let app = TestApp::builder(Backend::Sqlite)
        .redis()
        .with_ops(crate::platform::ops::USER, crate::platform::ops::PASSWORD)
        .spawn()
        .await;
    let queue = app.state.platform().queue.clone();
    // More done jobs than a page of free text reads.
    let agency = AgencyId::generate();
    let total = platform::admin::SEARCH_BUDGET + 10;
    let mut pushed = Vec::new();
    let mut redis = redis_of(&queue).await;
    while (pushed.len() as u64) < total {
        let chunk = (total - pushed.len() as u64).min(5_000);
        let jobs: Vec<(Probe, PushOptions)> = (0..chunk)
            .map(|_| (probe(&agency), PushOptions::default()))
            .collect();
        let ids = queue.push_many(jobs).await.unwrap();
        mark_done(&mut redis, &ids).await;
        pushed.extend(ids);
    }
    pushed.sort_unstable();
    // Text every job holds: counted to the cap long before the budget,
    // newest first.
    let page = crate::platform::ops::ops_get(&app, "/ops/?state=done&search=step_ms")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(
            "More than <strong>1000</strong> done jobs match; showing 1–25, newest first."
        ),
        "{page}"
    );
    assert!(!page.contains(r#"id="search-reach""#), "{page}");
    assert!(
        page.contains(pushed.last().unwrap().as_str()),
        "newest first"
    );
    // Text no job holds: the budget read, and the page says how far.
    let budget = platform::admin::SEARCH_BUDGET;
    let page = crate::platform::ops::ops_get(&app, "/ops/?state=done&search=no%20such%20text")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!(
            "<strong>0</strong> done jobs match among the <strong>{budget}</strong> most recently pushed."
        )),
        "{page}"
    );
    assert!(page.contains(r#"id="search-reach""#), "{page}");
    // Looked at in Chromium, at desktop and phone width.
    let browser = tests::browser::Browser::start().await;
    let credentials = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        crate::platform::ops::USER,
        crate::platform::ops::PASSWORD
    ));
    browser
        .set_header("Authorization", &format!("Basic {credentials}"))
        .await;
    browser
        .open(&crate::platform::ops::ops(
            &app,
            "/ops/?state=done&search=no%20such%20text",
        ))
        .await;
    browser.find("#search-reach", super::PATIENCE).await;
    browser.look_at("ops-search-reach").await;
    let found: serde_json::Value = crate::platform::ops::ops_get(
        &app,
        "/ops/api/jobs?state=done&search=no%20such%20text&limit=50",
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        (
            found["count"].as_u64(),
            found["searched"].as_u64(),
            found["newest_first"].as_bool()
        ),
        (Some(0), Some(budget), Some(true)),
        "{found}"
    );
    // A whole id is indexed: the page says nothing of a budget.
    let page =
        crate::platform::ops::ops_get(&app, &format!("/ops/?state=done&search={}", pushed[0]))
            .await
            .text()
            .await
            .unwrap();
    assert!(
        page.contains("<strong>1</strong> done job matches; showing 1–1."),
        "{page}"
    );
    assert!(!page.contains(r#"id="search-reach""#), "{page}");
}

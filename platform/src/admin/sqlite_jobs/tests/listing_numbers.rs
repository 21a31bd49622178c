//! A listing number's and a job id's searches, read by the ids they stand for.

use super::*;

#[tokio::test]
async fn a_listing_number_s_done_jobs_are_read_by_the_ids_it_stands_for() {
    let listing = "lst_01HQ5ABCDEFGHJKMNPQRSTVWX1";
    let event = "evt_01HQ5ABCDEFGHJKMNPQRSTVWX2";
    let delivery = "whd_01HQ5ABCDEFGHJKMNPQRSTVWX3";
    let other = "evt_01HQ5ABCDEFGHJKMNPQRSTVWX9";
    let dir = tempfile::tempdir().unwrap();
    let done = |id: &'static str, payload: Value| -> Written<'static> {
        (id, "outbox_dispatch", "Done", 1, 10, payload, None)
    };
    let admin = sqlite_queue(
        &dir,
        &[
            done("j1", json!({"agency_id": "agc_1", "event_ids": [event]})),
            // Two of the ids: found once.
            done(
                "j2",
                json!({"agency_id": "agc_1", "listing_id": listing, "event_ids": [event]}),
            ),
            done("j3", json!({"agency_id": "agc_1", "event_ids": [other]})),
            // Inside longer text, or in another case: the same rules as
            // Redis's names (a whole id, any case).
            done("j4", json!({"note": format!("{event}/retried")})),
            done(
                "j5",
                json!({"agency_id": "agc_2", "delivery": {"id": delivery.to_uppercase()}}),
            ),
            // Not done.
            (
                "j6",
                "webhook_delivery",
                "Failed",
                3,
                60,
                json!({"delivery_id": delivery}),
                Some(r#"{"Err": "answered 503"}"#),
            ),
        ],
    )
    .await;
    let QueueBackend::Sqlite(pool) = admin.queue.backend() else {
        unreachable!()
    };
    let search = |agency: Option<&str>| JobFilter {
        state: "done".into(),
        agency: agency.map(Into::into),
        search: Some("QX7ABC".into()),
        related: [listing, event, delivery].map(str::to_owned).to_vec(),
        ..JobFilter::default()
    };
    // The names are indexed by the search's own catch-up.
    let found = admin
        .find_jobs_in(&search(None), JobWindow::ALL)
        .await
        .unwrap();
    assert_eq!((ids(&found), found.total), (vec!["j1", "j2", "j5"], 3));
    let window = JobWindow {
        offset: 1,
        limit: Some(1),
    };
    let found = admin.find_jobs_in(&search(None), window).await.unwrap();
    assert_eq!(
        (ids(&found), found.total, found.total_capped),
        (vec!["j2"], 3, false)
    );
    let found = admin
        .find_jobs_in(&search(Some("agc_2")), JobWindow::ALL)
        .await
        .unwrap();
    assert_eq!((ids(&found), found.total), (vec!["j5"], 1));
    // Each id a seek of the names index, each job then by its row id.
    let filter = search(Some("agc_1"));
    let text = SqliteText::of(&filter);
    assert_eq!(text.source, Source::Names);
    let state = sqlite_state("done").unwrap();
    for statement in [
        window_statement(&state, &text),
        count_statement(&state, &text, true),
    ] {
        let plan = plan_of(pool, &statement).await;
        assert!(
            plan.iter()
                .any(|step| step.starts_with("SEARCH job_names USING PRIMARY KEY (name=?)")),
            "{plan:?}"
        );
        assert!(
            plan.iter()
                .any(|step| step.starts_with("SEARCH Jobs USING INTEGER PRIMARY KEY")),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.starts_with("SCAN Jobs")
                || step.starts_with("SEARCH Jobs USING INDEX")
                || step.starts_with("SCAN job_names")),
            "{plan:?}"
        );
    }
    // An id searched for: the jobs naming it as a whole, any case.
    let by_id = |search: &str| JobFilter {
        state: "done".into(),
        search: Some(search.into()),
        ..JobFilter::default()
    };
    let found = admin
        .find_jobs_in(&by_id(&event.to_lowercase()), JobWindow::ALL)
        .await
        .unwrap();
    assert_eq!((ids(&found), found.total), (vec!["j1", "j2"], 2));
    let found = admin
        .find_jobs_in(&by_id(delivery), JobWindow::ALL)
        .await
        .unwrap();
    assert_eq!(ids(&found), ["j5"]);
    // One id: its jobs streamed from the names index in push order, no
    // sort (an endpoint's id can be named by every delivery of a week).
    let one = SqliteText::of(&by_id(delivery));
    assert_eq!(one.source, Source::Name);
    assert_streams_from(
        pool,
        &state,
        &one,
        "SEARCH job_names USING PRIMARY KEY (name=?)",
    )
    .await;
    // An agency's id: the text index (its jobs may be half the queue).
    assert_eq!(
        SqliteText::of(&by_id("agc_01HQ5ABCDEFGHJKMNPQRSTVWX1")).source,
        Source::Text
    );
    // An id not shaped as ours (as in older tests' fixtures): the text
    // index, as before.
    let unshaped = JobFilter {
        related: vec!["evt_1".into()],
        ..search(None)
    };
    assert_eq!(SqliteText::of(&unshaped).source, Source::Text);
}

#[tokio::test]
async fn a_job_s_own_id_finds_it_and_the_jobs_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let own = "01HQ5ABCDEFGHJKMNPQRSTVWX7";
    let admin = sqlite_queue(
        &dir,
        &[
            (own, "probe", "Done", 1, 10, json!({"steps": 1}), None),
            (
                "01HQ5ABCDEFGHJKMNPQRSTVWX8",
                "probe",
                "Done",
                1,
                20,
                json!({"retry_of": own}),
                None,
            ),
            (
                "01HQ5ABCDEFGHJKMNPQRSTVWX9",
                "probe",
                "Done",
                1,
                30,
                json!({"steps": 2}),
                None,
            ),
        ],
    )
    .await;
    let QueueBackend::Sqlite(pool) = admin.queue.backend() else {
        unreachable!()
    };
    let filter = JobFilter {
        state: "done".into(),
        search: Some(own.to_lowercase()),
        ..JobFilter::default()
    };
    let found = admin.find_jobs_in(&filter, JobWindow::ALL).await.unwrap();
    assert_eq!(
        (ids(&found), found.total),
        (vec![own, "01HQ5ABCDEFGHJKMNPQRSTVWX8"], 2)
    );
    let text = SqliteText::of(&filter);
    let state = sqlite_state("done").unwrap();
    let plan = plan_of(pool, &window_statement(&state, &text)).await;
    assert!(
        !plan.iter().any(|step| step.starts_with("SCAN Jobs")),
        "{plan:?}"
    );
}

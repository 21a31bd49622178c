//! Windows of the console: by state, queue, agency and text, streamed from
//! their index and counted to a cap.

use super::*;

#[tokio::test]
async fn sqlite_finds_a_window_by_state_queue_agency_and_text() {
    let dir = tempfile::tempdir().unwrap();
    let failed = Some(r#"{"Err": "endpoint answered 503"}"#);
    let admin = sqlite_queue(
        &dir,
        &[
            (
                "j1",
                "media",
                "Done",
                1,
                30,
                json!({"agency_id": "agc_1", "listing_number": "QX7ABC1"}),
                None,
            ),
            (
                "j2",
                "media",
                "Done",
                1,
                10,
                json!({"agency_id": "agc_2", "listing_number": "QX7ABC2"}),
                None,
            ),
            (
                "j3",
                "webhook_delivery",
                "Done",
                1,
                20,
                json!({"agency_id": "agc_1", "delivery_id": "dlv_1"}),
                None,
            ),
            (
                "j4",
                "webhook_delivery",
                "Failed",
                3,
                40,
                json!({"agency_id": "agc_1", "delivery_id": "dlv_2"}),
                failed,
            ),
            (
                "j5",
                "outbox_dispatch",
                "Done",
                1,
                50,
                json!({"event_ids": ["evt_10", "evt_1"]}),
                None,
            ),
            (
                "j6",
                "outbox_dispatch",
                "Done",
                1,
                60,
                json!({"event_ids": ["evt_10"]}),
                None,
            ),
        ],
    )
    .await;
    let filter = |state: &str| JobFilter {
        state: state.to_owned(),
        ..JobFilter::default()
    };
    let all = admin
        .find_jobs_in(&filter("done"), JobWindow::ALL)
        .await
        .unwrap();
    // Oldest due first, counted by the queue's kept counts.
    assert_eq!(ids(&all), ["j2", "j3", "j1", "j5", "j6"]);
    assert_eq!(all.total, 5);
    let window = JobWindow {
        offset: 1,
        limit: Some(2),
    };
    let page = admin.find_jobs_in(&filter("done"), window).await.unwrap();
    assert_eq!((ids(&page), page.total), (vec!["j3", "j1"], 5));
    let media = JobFilter {
        queue: Some("media".into()),
        ..filter("done")
    };
    let found = admin.find_jobs_in(&media, JobWindow::ALL).await.unwrap();
    assert_eq!((ids(&found), found.total), (vec!["j2", "j1"], 2));
    // An agency: jobs naming it, by the agencies' index, in push order.
    let agency = JobFilter {
        agency: Some("agc_1".into()),
        ..filter("done")
    };
    let found = admin.find_jobs_in(&agency, JobWindow::ALL).await.unwrap();
    assert_eq!((ids(&found), found.total), (vec!["j1", "j3"], 2));
    // Not the dead one of the same agency; found among the dead row by row.
    let dead_of_agency = JobFilter {
        agency: Some("agc_1".into()),
        ..filter("dead")
    };
    let found = admin
        .find_jobs_in(&dead_of_agency, JobWindow::ALL)
        .await
        .unwrap();
    assert_eq!((ids(&found), found.total), (vec!["j4"], 1));
    // Free text, any case, in the payload, the id or the last error.
    let search = |state: &str, text: &str| JobFilter {
        search: Some(text.to_owned()),
        ..filter(state)
    };
    // By the text index: in push order.
    let found = admin
        .find_jobs_in(&search("done", "qx7abc"), JobWindow::ALL)
        .await
        .unwrap();
    assert_eq!((ids(&found), found.total), (vec!["j1", "j2"], 2));
    let found = admin
        .find_jobs_in(&search("dead", "ANSWERED 503"), JobWindow::ALL)
        .await
        .unwrap();
    assert_eq!(ids(&found), ["j4"]);
    assert_eq!(
        found.jobs[0].last_error.as_deref(),
        Some("endpoint answered 503")
    );
    let with_agency = JobFilter {
        agency: Some("agc_2".into()),
        ..search("done", "QX7ABC")
    };
    assert_eq!(
        ids(&admin
            .find_jobs_in(&with_agency, JobWindow::ALL)
            .await
            .unwrap()),
        ["j2"]
    );
    // Text shorter than the index serves is looked for all the same.
    let found = admin
        .find_jobs_in(&search("done", "J5"), JobWindow::ALL)
        .await
        .unwrap();
    assert_eq!((ids(&found), found.total), (vec!["j5"], 1));
    // A listing number's related ids match as whole JSON strings.
    let related = JobFilter {
        related: vec!["evt_1".into()],
        ..search("done", "NOSUCHNUMBER")
    };
    let found = admin.find_jobs_in(&related, JobWindow::ALL).await.unwrap();
    assert_eq!((ids(&found), found.total), (vec!["j5"], 1));
    let none = admin
        .find_jobs_in(&search("done", "nothing like it"), JobWindow::ALL)
        .await
        .unwrap();
    assert_eq!((ids(&none), none.total), (Vec::<&str>::new(), 0));
    let counted = admin
        .find_jobs_in(
            &filter("done"),
            JobWindow {
                offset: 0,
                limit: Some(0),
            },
        )
        .await
        .unwrap();
    assert_eq!((counted.jobs.len(), counted.total), (0, 5));
}

#[tokio::test]
async fn jobs_by_text_or_agency_stream_from_their_index() {
    let dir = tempfile::tempdir().unwrap();
    let admin = sqlite_queue(&dir, &[]).await;
    let QueueBackend::Sqlite(pool) = admin.queue.backend() else {
        unreachable!()
    };
    let done = |agency: Option<&str>, search: Option<&str>| JobFilter {
        state: "done".into(),
        agency: agency.map(Into::into),
        search: search.map(Into::into),
        ..JobFilter::default()
    };
    let dead_search = JobFilter {
        state: "dead".into(),
        search: Some("answered 503".into()),
        ..JobFilter::default()
    };
    for (filter, driving) in [
        (
            done(Some("agc_1"), Some("QX7ABC")),
            "SCAN job_text VIRTUAL TABLE",
        ),
        (done(None, Some("QX7ABC")), "SCAN job_text VIRTUAL TABLE"),
        // A long one: by its tail, checked whole.
        (
            done(None, Some("op_01HQ5ABCDEFGHJKMNPQRSTVW")),
            "SCAN job_text VIRTUAL TABLE",
        ),
        (
            done(Some("agc_1"), None),
            "SEARCH job_agencies USING COVERING INDEX job_agencies_by_agency (agency_id=?)",
        ),
        // Too short for the text index: the agency's jobs, checked.
        (
            done(Some("agc_1"), Some("J5")),
            "SEARCH job_agencies USING COVERING INDEX job_agencies_by_agency (agency_id=?)",
        ),
        // Dead jobs by their error: the dead jobs' text index.
        (dead_search, "SCAN dead_job_text VIRTUAL TABLE"),
    ] {
        let state = sqlite_state(&filter.state).unwrap();
        let text = SqliteText::of(&filter);
        assert!(text.streams(), "{filter:?}");
        assert_streams_from(pool, &state, &text, driving).await;
    }
}

#[tokio::test]
async fn a_long_search_is_found_by_its_tail_and_checked_whole() {
    // Two operation ids with the same last ten characters (the part the
    // text index looks for), and two related ids alike.
    let operation = "op_01HQ5ABCDEFGHJKMNPQRSTVW";
    let same_tail = "op_99ZZZZZZZZZHJKMNPQRSTVW";
    let event = "evt_01HQ5ABCDEFGHJKMNPQRS";
    let failed = Some(r#"{"Err": "receiver hooks.example/agency-42 answered 503"}"#);
    let failed_elsewhere = Some(r#"{"Err": "receiver other.example/agency-42 answered 503"}"#);
    let dir = tempfile::tempdir().unwrap();
    let admin = sqlite_queue(
        &dir,
        &[
            (
                "j1",
                "probe",
                "Done",
                1,
                10,
                json!({"operation_id": operation}),
                None,
            ),
            (
                "j2",
                "probe",
                "Done",
                1,
                20,
                json!({"operation_id": same_tail}),
                None,
            ),
            (
                "j3",
                "outbox_dispatch",
                "Done",
                1,
                30,
                json!({"event_ids": [event]}),
                None,
            ),
            (
                "j4",
                "outbox_dispatch",
                "Done",
                1,
                40,
                json!({"event_ids": ["evt_99ZZZZZZZZZZJKMNPQRS"]}),
                None,
            ),
            // Named inside a longer string: not the id as a JSON string.
            (
                "j5",
                "outbox_dispatch",
                "Done",
                1,
                50,
                json!({"note": format!("{event}/retried")}),
                None,
            ),
            ("j6", "webhook_delivery", "Failed", 3, 60, json!({}), failed),
            (
                "j7",
                "webhook_delivery",
                "Failed",
                3,
                70,
                json!({}),
                failed_elsewhere,
            ),
            (
                "j8",
                "probe",
                "Done",
                1,
                80,
                json!({"street": "Café de l'Époque, rue Pasteur"}),
                None,
            ),
        ],
    )
    .await;
    let search = |state: &str, text: &str, related: &[&str]| JobFilter {
        state: state.to_owned(),
        search: Some(text.to_owned()),
        related: related.iter().map(|id| (*id).to_owned()).collect(),
        ..JobFilter::default()
    };
    for (filter, expected) in [
        (search("done", operation, &[]), vec!["j1"]),
        (search("done", &operation.to_lowercase(), &[]), vec!["j1"]),
        (search("done", "no such listing", &[event]), vec!["j3"]),
        (search("dead", "hooks.example/agency-42", &[]), vec!["j6"]),
        // Not ASCII: the whole text is looked for, in any case.
        (search("done", "CAFÉ DE L'ÉPOQUE", &[]), vec!["j8"]),
    ] {
        let found = admin.find_jobs_in(&filter, JobWindow::ALL).await.unwrap();
        assert_eq!((ids(&found), found.total), (expected, 1), "{filter:?}");
        // A window counts the same.
        let window = JobWindow {
            offset: 0,
            limit: Some(25),
        };
        let found = admin.find_jobs_in(&filter, window).await.unwrap();
        assert_eq!((found.total, found.total_capped), (1, false), "{filter:?}");
    }
}

#[tokio::test]
async fn a_streamed_count_stops_past_the_window_and_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let admin = sqlite_queue(&dir, &[]).await;
    let QueueBackend::Sqlite(pool) = admin.queue.backend() else {
        unreachable!()
    };
    // COUNT_CAP + 100 done jobs of one agency, each naming a listing.
    let jobs = COUNT_CAP + 100;
    sqlx::query(
        r#"with recursive n(i) as (select 1 union all select i + 1 from n where i < $1)
           insert into Jobs (job, id, job_type, status, attempts, max_attempts, run_at)
           select cast('{"agency_id":"agc_big","listing_number":"QX7' || printf('%05d', i) || '"}' as blob),
                  printf('job%05d', i), 'probe', 'Done', 1, 3, i from n"#,
    )
    .bind(i64::try_from(jobs).unwrap())
    .execute(pool)
    .await
    .unwrap();
    let window = |offset: u64| JobWindow {
        offset,
        limit: Some(25),
    };
    for filter in [
        JobFilter {
            state: "done".into(),
            agency: Some("agc_big".into()),
            ..JobFilter::default()
        },
        JobFilter {
            state: "done".into(),
            search: Some("qx7".into()),
            ..JobFilter::default()
        },
    ] {
        // The first page: counted to the cap, then "more than".
        let first = admin.find_jobs_in(&filter, window(0)).await.unwrap();
        assert_eq!(
            (first.jobs[0].id.as_str(), first.total, first.total_capped),
            ("job00001", COUNT_CAP, true),
            "{filter:?}"
        );
        // A page past the cap: counted past its own window.
        let deep = admin
            .find_jobs_in(&filter, window(COUNT_CAP))
            .await
            .unwrap();
        assert_eq!(
            (deep.jobs.len(), deep.total, deep.total_capped),
            (25, COUNT_CAP + 25, true),
            "{filter:?}"
        );
        // The last page: the window reaches the end, so the count is exact.
        let last = admin
            .find_jobs_in(&filter, window(jobs - 20))
            .await
            .unwrap();
        assert_eq!(
            (last.jobs.len(), last.total, last.total_capped),
            (20, jobs, false),
            "{filter:?}"
        );
        // Every job (a bulk action's read): exact.
        let all = admin.find_jobs_in(&filter, JobWindow::ALL).await.unwrap();
        assert_eq!(
            (all.jobs.len() as u64, all.total, all.total_capped),
            (jobs, jobs, false)
        );
    }
    // A window of nothing is an exact count (a bulk action's
    // confirmation).
    let counted = admin
        .find_jobs_in(
            &JobFilter {
                state: "done".into(),
                agency: Some("agc_big".into()),
                ..JobFilter::default()
            },
            JobWindow {
                offset: 0,
                limit: Some(0),
            },
        )
        .await
        .unwrap();
    assert_eq!((counted.total, counted.total_capped), (jobs, false));
    // A filter that finds fewer than the cap is counted exactly.
    let few = JobFilter {
        state: "done".into(),
        search: Some("qx700012".into()),
        ..JobFilter::default()
    };
    let found = admin.find_jobs_in(&few, window(0)).await.unwrap();
    assert_eq!((found.total, found.total_capped), (1, false));
}

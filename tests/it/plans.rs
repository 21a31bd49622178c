//! Every list query's plan, on both databases, seeks an index by each of
//! its filters and reads in the index's order: none scans a growing table or
//! sorts its rows (`storage::plans`). Planned on the migrated schema, with
//! sequential scans discouraged on PostgreSQL so a few test rows are planned
//! as a large table would be.

use tests::{TestApp, backend_tests};

backend_tests! {
    async fn every_list_query_seeks_an_index(backend) {
        let app = TestApp::spawn(backend).await;
        let plans = app.store.list_query_plans().await.unwrap();
        assert!(!plans.is_empty());
        for plan in plans {
            assert!(
                plan.problems.is_empty(),
                "{}: {:?}\n{}",
                plan.name,
                plan.problems,
                plan.plan
            );
        }
    }
}

//! The ops listener's sign-in throttle: after a few failed sign-ins from one
//! address (or for one user name) it answers 429 with `Retry-After`, even to
//! the right password, and lets the operator in again once that wait is over.

use std::time::Duration;

use reqwest::StatusCode;
use tests::{Backend, TestApp};

use crate::support::expect_error;

const USER: &str = "ops";
const PASSWORD: &str = "correct-horse-battery";

async fn attempt(app: &TestApp, user: &str, password: &str) -> reqwest::Response {
    let ops_url = app.ops_url.as_deref().expect("ops listener");
    app.client
        .get(format!("{ops_url}/ops/api/queues"))
        .basic_auth(user, Some(password))
        .send()
        .await
        .unwrap()
}

fn retry_after(response: &reqwest::Response) -> u64 {
    response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

async fn guessing_is_slowed_and_the_operator_gets_back_in(app: TestApp) {
    let burst = api::ops::FAILED_SIGN_INS_PER_MINUTE;
    for _ in 0..burst {
        let wrong = attempt(&app, USER, "guess").await;
        assert!(wrong.headers().contains_key("www-authenticate"));
        expect_error(wrong, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
    }
    // The guesser is refused before the password is looked at, so a right
    // guess is refused too, and so is another user name from this address.
    for (user, password) in [(USER, "guess"), (USER, PASSWORD), ("root", PASSWORD)] {
        let throttled = attempt(&app, user, password).await;
        let wait = retry_after(&throttled);
        // One failure's worth of budget comes back each 60 / burst seconds.
        assert!(
            (1..=u64::from(60 / burst)).contains(&wait),
            "Retry-After {wait}"
        );
        expect_error(
            throttled,
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit.exceeded",
        )
        .await;
    }
    // Anonymous requests (a browser's first) are still asked to sign in.
    let ops_url = app.ops_url.clone().expect("ops listener");
    let anonymous = app
        .client
        .get(format!("{ops_url}/ops/api/queues"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);

    // Not locked out for good: after the wait the listener names, the right
    // password is let in.
    let throttled = attempt(&app, USER, PASSWORD).await;
    assert_eq!(throttled.status(), StatusCode::TOO_MANY_REQUESTS);
    tokio::time::sleep(Duration::from_secs(retry_after(&throttled))).await;
    let back = attempt(&app, USER, PASSWORD).await;
    assert_eq!(back.status(), StatusCode::OK);
    // Success spends nothing: the operator keeps working.
    for _ in 0..burst + 1 {
        assert_eq!(attempt(&app, USER, PASSWORD).await.status(), StatusCode::OK);
    }
}

#[tokio::test]
async fn failed_ops_sign_ins_are_throttled_in_process() {
    let app = TestApp::builder(Backend::Sqlite)
        .with_ops(USER, PASSWORD)
        .spawn()
        .await;
    guessing_is_slowed_and_the_operator_gets_back_in(app).await;
}

/// In the distributed profile the failures are counted in Redis, so every
/// replica's ops listener refuses the guesser alike.
#[tokio::test]
async fn failed_ops_sign_ins_are_throttled_through_redis() {
    let app = TestApp::builder(Backend::Postgres)
        .redis()
        .with_ops(USER, PASSWORD)
        .spawn()
        .await;
    guessing_is_slowed_and_the_operator_gets_back_in(app).await;
}

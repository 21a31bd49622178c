//! An operator bootstraps a platform login from the command line:
//! `api admin create-user` and `set-password`, then a session with it.

use reqwest::StatusCode;
use serde_json::{Value, json};
use tests::Backend;
use tests::deployment::{Deployment, serve};

use super::{PASSWORD, set_password};

#[tokio::test]
async fn an_operator_bootstraps_a_platform_login_from_the_command_line() {
    let deployment = Deployment::new(Backend::Sqlite).await;
    let client = tests::app::base_client().build().unwrap();
    let agency = deployment.admin_ok(&["create-agency", "--name", "Platform"]);
    let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
    let created = deployment.admin_ok(&[
        "create-user",
        "--agency",
        &agency_id,
        "--role",
        "super_admin",
        "--email",
        "ops@example.com",
    ]);
    let user_id = created["user_id"].as_str().unwrap().to_owned();
    let weak = set_password(&deployment, &agency_id, &user_id, "short");
    assert_eq!(weak.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&weak.stderr).contains("validation.failed"));
    let done = set_password(&deployment, &agency_id, &user_id, PASSWORD);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(!String::from_utf8_lossy(&done.stdout).contains(PASSWORD));

    let mut server = serve(&deployment, &["--no-workers"], &client, "http").await;
    let response = client
        .post(format!("{}/api/v1/session", server.base_url))
        .json(&json!({"email": "OPS@example.com", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["user"]["role"], "super_admin");
    server.process.terminate(std::time::Duration::from_secs(10));
}

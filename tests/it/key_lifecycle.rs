//! Key rotation (30 days of overlap, then the expiry schedule deactivates
//! the old key) and revocation pushed to every API replica through Redis;
//! every step in the audit log.

use std::time::Duration;

use reqwest::StatusCode;
use storage::api_keys::Scope;
use tests::deployment::{Deployment, eventually, serve};
use tests::{Backend, TestApp, backend_tests};

use crate::support::{expect_error, expect_ok};

const USERS: &str = "/api/v1/users";

backend_tests! {
    async fn a_rotated_key_works_for_thirty_days_beside_its_replacement(backend) {
        let clock = storage::Clock::manual(storage::Timestamp::from_micros(1_800_000_000_000_000));
        let app = TestApp::builder(backend).clock(clock.clone()).spawn().await;
        let agency = app.agency().await;
        let old = app.key(&agency, &[Scope::UsersRead]).await;
        let record = app.store.api_keys().find_by_plaintext(&old).await.unwrap().unwrap();
        let (rotated, replacement) = app.store.api_keys().rotate(&agency.id, &record.key.id).await.unwrap();
        assert_eq!(rotated.status.as_str(), "rotating");
        assert_eq!(replacement.key.scopes, record.key.scopes);
        let new = replacement.plaintext.expose().to_owned();
        // A rotating key rotates no further.
        assert!(app.store.api_keys().rotate(&agency.id, &record.key.id).await.is_err());

        for key in [&old, &new] {
            expect_ok(app.get(USERS).header("X-API-Key", key).send().await.unwrap()).await;
        }
        clock.advance_seconds(30 * 86_400 - 60);
        assert_eq!(app.store.api_keys().expire_rotated().await.unwrap(), 0);
        expect_ok(app.get(USERS).header("X-API-Key", &old).send().await.unwrap()).await;
        clock.advance_seconds(61);
        assert_eq!(app.store.api_keys().expire_rotated().await.unwrap(), 1);
        let response = app.get(USERS).header("X-API-Key", &old).send().await.unwrap();
        expect_error(response, StatusCode::UNAUTHORIZED, "auth.invalid_key").await;
        expect_ok(app.get(USERS).header("X-API-Key", &new).send().await.unwrap()).await;

        let audit = app.store.api_keys().audit_log(&agency.id).await.unwrap();
        // (The injected clock stands still, so entries of one instant may come in any order.)
        let mut actions: Vec<(&str, bool)> = audit
            .iter()
            .map(|entry| (entry.action.as_str(), entry.key_id == record.key.id))
            .collect();
        actions.sort_unstable();
        assert_eq!(actions, [("expired", true), ("issued", false), ("issued", true), ("rotated", true)]);
        let rotation = audit.iter().find(|entry| entry.action == "rotated").unwrap();
        assert_eq!(rotation.detail.as_deref(), Some(replacement.key.id.as_str()));
        assert_eq!(audit.last().unwrap().action, "expired");
    }
}

#[tokio::test]
async fn a_revocation_reaches_every_replica_sharing_redis_at_once() {
    let deployment = Deployment::with_redis(Backend::Postgres).await;
    let client = tests::app::base_client().build().unwrap();
    let mut first = serve(&deployment, &["--no-workers"], &client, "http").await;
    let mut second = serve(&deployment, &["--no-workers"], &client, "http").await;
    let agency = deployment.admin_ok(&["create-agency", "--name", "Acme"]);
    let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
    let issued = deployment.admin_ok(&[
        "create-key",
        "--agency",
        &agency_id,
        "--name",
        "CRM",
        "--scopes",
        "users:read",
    ]);
    let key = issued["key"].as_str().unwrap().to_owned();
    let key_id = issued["key_id"].as_str().unwrap().to_owned();
    // Both replicas have the key in their 30-second cache.
    for server in [&first, &second] {
        let response = client
            .get(format!("{}{USERS}", server.base_url))
            .header("X-API-Key", &key)
            .send()
            .await
            .unwrap();
        expect_ok(response).await;
    }
    let revoked = deployment.admin_ok(&["revoke-key", "--agency", &agency_id, "--key", &key_id]);
    assert_eq!(revoked["status"], "revoked");
    // Well inside the cache's 30 seconds, both refuse it.
    for server in [&first, &second] {
        eventually(
            Duration::from_secs(5),
            "the replica refusing the revoked key",
            || async {
                let response = client
                    .get(format!("{}{USERS}", server.base_url))
                    .header("X-API-Key", &key)
                    .send()
                    .await
                    .unwrap();
                (response.status() == StatusCode::UNAUTHORIZED).then_some(())
            },
        )
        .await;
    }
    let listed = deployment.admin_ok(&["list-keys", "--agency", &agency_id]);
    assert_eq!(listed["items"][0]["status"], "revoked");
    assert!(
        !listed.to_string().contains(&key),
        "plaintext is never listed"
    );
    let actions: Vec<&str> = listed["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["issued", "revoked"]);
    // Revoked keys stay revoked: they neither rotate nor come back.
    deployment.admin_err(
        &["rotate-key", "--agency", &agency_id, "--key", &key_id],
        "validation.failed",
    );
    deployment.admin_err(&["revoke-key", "--agency", &agency_id], "validation.failed");
    for server in [&mut first, &mut second] {
        assert!(server.process.terminate(Duration::from_secs(30)).success());
    }
}

#[tokio::test]
async fn rotate_key_prints_the_new_key_once_and_both_work() {
    let deployment = Deployment::new(Backend::Sqlite).await;
    let client = tests::app::base_client().build().unwrap();
    let mut server = serve(&deployment, &["--no-workers"], &client, "http").await;
    let agency = deployment.admin_ok(&["create-agency", "--name", "Acme"]);
    let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
    let issued = deployment.admin_ok(&[
        "create-key",
        "--agency",
        &agency_id,
        "--name",
        "CRM",
        "--scopes",
        "users:read",
    ]);
    let rotated = deployment.admin_ok(&[
        "rotate-key",
        "--agency",
        &agency_id,
        "--key",
        issued["key_id"].as_str().unwrap(),
    ]);
    assert_eq!(rotated["rotated"]["status"], "rotating");
    assert!(rotated["rotated"]["expires_at"].is_string());
    for key in [
        issued["key"].as_str().unwrap(),
        rotated["key"].as_str().unwrap(),
    ] {
        let response = client
            .get(format!("{}{USERS}", server.base_url))
            .header("X-API-Key", key)
            .send()
            .await
            .unwrap();
        expect_ok(response).await;
    }
    assert!(server.process.terminate(Duration::from_secs(30)).success());
}

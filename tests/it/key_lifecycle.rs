//! Key rotation (30 days of overlap, then the expiry schedule deactivates
//! the old key) and revocation pushed to every API replica through Redis,
//! whether made by the operator command or the developer settings' route;
//! every step in the audit log.

use std::time::Duration;

use reqwest::StatusCode;
use storage::api_keys::Scope;
use storage::ids::ApiKeyId;
use tests::deployment::{Deployment, eventually, serve};
use tests::{Backend, TestApp, backend_tests};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::sessions::{PASSWORD, owner_login, set_password, sign_in};
use crate::support::{expect_error, expect_ok};

const USERS: &str = "/api/v1/users";
/// The rotation overlap: thirty days.
const OVERLAP_SECONDS: i64 = 30 * 86_400;

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

backend_tests! {
    async fn a_key_rotated_in_the_settings_is_refused_at_its_expiry_and_then_marked_expired(backend) {
        let start = storage::Timestamp::from_micros(1_800_000_000_000_000);
        let clock = storage::Clock::manual(start);
        let app = TestApp::builder(backend).clock(clock.clone()).spawn().await;
        let agency = app.agency().await;
        let email = owner_login(&app, &agency).await;
        let old = app.key(&agency, &[Scope::UsersRead]).await;
        let old_id = app.store.api_keys().find_by_plaintext(&old).await.unwrap().unwrap().key.id;
        let signed = sign_in(&app, &email).await;
        let response = signed
            .send(app.client.post(app.url(&format!("/api/v1/agency/api-keys/{old_id}/rotate"))))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{}", response.text().await.unwrap());
        let rotation: serde_json::Value = response.json().await.unwrap();
        assert_eq!(rotation["rotated"]["status"], "rotating");
        let expires_at = start.plus_seconds(OVERLAP_SECONDS).to_rfc3339();
        assert_eq!(rotation["rotated"]["expires_at"], expires_at.as_str());
        let new = rotation["secret"].as_str().unwrap().to_owned();

        // A second before the end of the overlap both keys work (and the old
        // one sits in the key cache).
        clock.advance_seconds(OVERLAP_SECONDS - 1);
        for key in [&old, &new] {
            assert_eq!(status_of(&app, key).await, StatusCode::OK);
        }
        // At exactly expires_at the old key is refused, cached or not, before
        // the expiry task has run.
        clock.advance_seconds(1);
        let refused = app.get(USERS).header("X-API-Key", &old).send().await.unwrap();
        expect_error(refused, StatusCode::UNAUTHORIZED, "auth.invalid_key").await;
        assert_eq!(status_of(&app, &new).await, StatusCode::OK);
        let stored = app.store.api_keys().find_by_plaintext(&old).await.unwrap().unwrap().key;
        assert_eq!(stored.status.as_str(), "rotating", "not yet marked");
        let audit = app.store.api_keys().audit_log(&agency.id).await.unwrap();
        assert!(audit.iter().all(|entry| entry.action != "expired"));

        // The scheduled task marks it expired, with an audit entry, once.
        let expiry = workers::handlers::maintenance::Maintenance::ExpireRotatedKeys;
        assert_eq!(expiry.name(), "key_rotation_expiry");
        assert_eq!(expiry.run(app.state.platform()).await.unwrap(), 1);
        assert_eq!(expiry.run(app.state.platform()).await.unwrap(), 0);
        // The session of a month ago has ended; a fresh one reads the result.
        let signed = sign_in(&app, &email).await;
        let keys = expect_ok(signed.cookie_only(app.get("/api/v1/agency/api-keys")).send().await.unwrap()).await;
        let listed = keys["items"].as_array().unwrap();
        let old_listed = listed.iter().find(|k| k["id"] == old_id.as_str()).unwrap();
        assert_eq!(old_listed["status"], "expired");
        let audit = expect_ok(signed.cookie_only(app.get("/api/v1/agency/api-keys/audit")).send().await.unwrap()).await;
        let expired: Vec<&serde_json::Value> = audit["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|entry| entry["action"] == "expired")
            .collect();
        assert_eq!(expired.len(), 1, "{audit}");
        assert_eq!(expired[0]["key_id"], old_id.as_str());
        assert_eq!(expired[0]["at"], expires_at.as_str());
        let refused = app.get(USERS).header("X-API-Key", &old).send().await.unwrap();
        expect_error(refused, StatusCode::UNAUTHORIZED, "auth.invalid_key").await;
        assert_eq!(status_of(&app, &new).await, StatusCode::OK);
    }
}

/// Issues a `users:read` key of `agency_id` and has every one of `servers`
/// accept it once, so each holds it in its 30-second cache; returns the key
/// and its id.
async fn key_cached_by<const N: usize>(
    deployment: &Deployment,
    agency_id: &str,
    client: &reqwest::Client,
    servers: [&tests::deployment::ServerProcess; N],
) -> (String, String) {
    let issued = deployment.admin_ok(&[
        "create-key",
        "--agency",
        agency_id,
        "--name",
        "CRM",
        "--scopes",
        "users:read",
    ]);
    let key = issued["key"].as_str().unwrap().to_owned();
    for server in servers {
        let response = client
            .get(format!("{}{USERS}", server.base_url))
            .header("X-API-Key", &key)
            .send()
            .await
            .unwrap();
        expect_ok(response).await;
    }
    (key, issued["key_id"].as_str().unwrap().to_owned())
}

/// Waits until the API at `base_url` refuses `key`, well inside its cache's
/// 30 seconds.
async fn refused_soon(client: &reqwest::Client, base_url: &str, key: &str) {
    eventually(
        Duration::from_secs(5),
        "the replica refusing the revoked key",
        || async {
            let response = client
                .get(format!("{base_url}{USERS}"))
                .header("X-API-Key", key)
                .send()
                .await
                .unwrap();
            (response.status() == StatusCode::UNAUTHORIZED).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_revocation_in_the_settings_reaches_another_replica_sharing_redis() {
    let deployment = Deployment::with_redis(Backend::Postgres).await;
    let client = tests::app::base_client().build().unwrap();
    let mut first = serve(&deployment, &["--no-workers"], &client, "http").await;
    let mut second = serve(&deployment, &["--no-workers"], &client, "http").await;
    let agency = deployment.admin_ok(&["create-agency", "--name", "Acme"]);
    let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
    // An administrator of the agency who signs in to the settings.
    let admin = deployment.admin_ok(&[
        "create-user",
        "--agency",
        &agency_id,
        "--role",
        "media_agency",
        "--email",
        "admin@acme.example",
    ]);
    let admin_id = admin["user_id"].as_str().unwrap();
    let set = set_password(&deployment, &agency_id, admin_id, PASSWORD);
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let (key, key_id) = key_cached_by(&deployment, &agency_id, &client, [&first, &second]).await;

    // Signed in on the first replica, the administrator revokes the key there.
    let login = client
        .post(format!("{}/api/v1/session", first.base_url))
        .json(&serde_json::json!({"email": "admin@acme.example", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), StatusCode::CREATED);
    let cookie = login.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let session: serde_json::Value = login.json().await.unwrap();
    let csrf = session["csrf_token"].as_str().unwrap().to_owned();
    let revoked = client
        .delete(format!(
            "{}/api/v1/agency/api-keys/{key_id}",
            first.base_url
        ))
        .header("Cookie", &cookie)
        .header("X-CSRF-Token", &csrf)
        .send()
        .await
        .unwrap();
    let revoked = expect_ok(revoked).await;
    assert_eq!(revoked["status"], "revoked");
    assert!(revoked["revoked_at"].is_string());

    // The second replica, which never saw the request, refuses the key well
    // inside its cache's 30 seconds.
    refused_soon(&client, &second.base_url, &key).await;
    let refused = client
        .get(format!("{}{USERS}", second.base_url))
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap();
    expect_error(refused, StatusCode::UNAUTHORIZED, "auth.invalid_key").await;
    // The session is good on either replica; the audit log there names the revocation.
    let audit = client
        .get(format!("{}/api/v1/agency/api-keys/audit", second.base_url))
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap();
    let audit = expect_ok(audit).await;
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["key_id"] == key_id.as_str())
        .map(|entry| entry["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["issued", "revoked"]);
    for server in [&mut first, &mut second] {
        assert!(server.process.terminate(Duration::from_secs(30)).success());
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
    let (key, key_id) = key_cached_by(&deployment, &agency_id, &client, [&first, &second]).await;
    let revoked = deployment.admin_ok(&["revoke-key", "--agency", &agency_id, "--key", &key_id]);
    assert_eq!(revoked["status"], "revoked");
    // Well inside the cache's 30 seconds, both refuse it.
    for server in [&first, &second] {
        refused_soon(&client, &server.base_url, &key).await;
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

/// A TCP relay in front of the test Redis whose connections a test can cut,
/// as a network outage or a Redis restart would, without disturbing the
/// Redis other tests share.
struct Relay {
    /// `redis://127.0.0.1:PORT` of the relay.
    url: String,
    /// Bumped to drop every open connection.
    cut: watch::Sender<u64>,
}

impl Relay {
    async fn to(redis_url: &str) -> Self {
        let upstream = reqwest::Url::parse(redis_url).expect("Redis URL");
        let target = format!(
            "{}:{}",
            upstream.host_str().expect("Redis host"),
            upstream.port().unwrap_or(6379)
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        let mut url = upstream.clone();
        url.set_port(Some(listener.local_addr().expect("relay address").port()))
            .expect("relay port");
        let (cut, _) = watch::channel(0u64);
        let cuts = cut.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                let mut cut = cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(&target).await else {
                        return;
                    };
                    // Either side closing, or a cut, drops both sockets.
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Self {
            url: url.to_string(),
            cut,
        }
    }

    /// Drops every connection open now (new ones are relayed again).
    fn cut(&self) {
        self.cut.send_modify(|generation| *generation += 1);
    }
}

/// The status `key` gets on `GET /users` from `app`.
async fn status_of(app: &TestApp, key: &str) -> StatusCode {
    app.get(USERS)
        .header("X-API-Key", key)
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn a_lost_subscription_forgets_every_cached_key_before_resubscribing() {
    // A standing clock: the cache's 30 seconds never run out by themselves.
    let clock = storage::Clock::manual(storage::Timestamp::from_micros(1_800_000_000_000_000));
    let app = TestApp::builder(Backend::Postgres)
        .clock(clock)
        .spawn()
        .await;
    let agency = app.agency().await;
    let relay = Relay::to(&tests::services::redis_url()).await;
    let (listener, mut subscriptions) =
        api::revocation::spawn_listener(relay.url.clone(), app.state.clone());
    // Subscribed: every announcement from here on is heard.
    subscribed(&mut subscriptions, 1).await;

    // An announced revocation is honoured at once.
    let probe = app.key(&agency, &[Scope::UsersRead]).await;
    assert_eq!(status_of(&app, &probe).await, StatusCode::OK);
    let probe_id = key_id_of(&app, &probe).await;
    app.store
        .api_keys()
        .revoke(&agency.id, &probe_id)
        .await
        .unwrap();
    api::revocation::publish(&tests::services::redis_url(), &probe_id)
        .await
        .unwrap();
    eventually(
        Duration::from_secs(30),
        "the announced key forgotten",
        || async { (status_of(&app, &probe).await == StatusCode::UNAUTHORIZED).then_some(()) },
    )
    .await;

    // A key cached, then revoked while its announcement is lost (the
    // database changes, nothing is published): the cache still accepts it.
    let key = app.key(&agency, &[Scope::UsersRead]).await;
    assert_eq!(status_of(&app, &key).await, StatusCode::OK);
    let key_id = key_id_of(&app, &key).await;
    app.store
        .api_keys()
        .revoke(&agency.id, &key_id)
        .await
        .unwrap();
    assert_eq!(
        status_of(&app, &key).await,
        StatusCode::OK,
        "served from the cache (subscriptions so far: {})",
        *subscriptions.borrow()
    );
    assert_eq!(*subscriptions.borrow(), 1, "one subscription throughout");

    // The connection drops; the message stream just ends. The process may
    // have missed announcements, so it forgets every cached key, and again
    // once subscribed anew.
    relay.cut();
    subscribed(&mut subscriptions, 2).await;
    assert_eq!(
        status_of(&app, &key).await,
        StatusCode::UNAUTHORIZED,
        "the cache cleared after the lost subscription"
    );
    listener.abort();
}

/// Waits for the listener's `count`th subscription; a listener that never
/// makes it fails the test after a minute rather than hanging it.
async fn subscribed(subscriptions: &mut watch::Receiver<u64>, count: u64) {
    tokio::time::timeout(
        Duration::from_secs(60),
        subscriptions.wait_for(|made| *made >= count),
    )
    .await
    .unwrap_or_else(|_| panic!("the listener's subscription {count} never came"))
    .expect("the listener ended");
}

/// The id of the key whose plaintext is `key`.
async fn key_id_of(app: &TestApp, key: &str) -> ApiKeyId {
    app.store
        .api_keys()
        .find_by_plaintext(key)
        .await
        .unwrap()
        .unwrap()
        .key
        .id
}

backend_tests! {
    /// `api admin revoke-key` against a running server, without Redis (the
    /// embedded profile, and PostgreSQL alone): the server hears of it from
    /// the database and refuses the key well inside its cache's 30 seconds,
    /// as at once as a revocation made in the portal.
    async fn the_operators_revocation_reaches_a_running_server_without_redis(backend) {
        let deployment = Deployment::new(backend).await;
        let client = tests::app::base_client().build().unwrap();
        let mut server = serve(&deployment, &["--no-workers"], &client, "http").await;
        let agency = deployment.admin_ok(&["create-agency", "--name", "Acme"]);
        let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
        let (key, key_id) = key_cached_by(&deployment, &agency_id, &client, [&server]).await;
        let revoked = deployment.admin_ok(&["revoke-key", "--agency", &agency_id, "--key", &key_id]);
        assert_eq!(revoked["status"], "revoked");
        refused_soon(&client, &server.base_url, &key).await;
        assert!(server.process.terminate(Duration::from_secs(30)).success());
    }

    /// The database's news of ended keys, as another process commits them:
    /// a revocation, and a rotation's old key expiring. On a standing clock
    /// the cache never runs out by itself, so only that news refuses the key.
    async fn keys_ended_by_another_process_leave_the_cache_at_once(backend) {
        let clock = storage::Clock::manual(storage::Timestamp::from_micros(1_800_000_000_000_000));
        let app = TestApp::builder(backend).clock(clock.clone()).spawn().await;
        let (follower, mut caught_up) = api::revocation::spawn_database_follower(app.state.clone());
        // Following from here on: what is cached next leaves only by the news.
        caught_up.wait_for(|count| *count >= 1).await.unwrap();
        let agency = app.agency().await;
        // Another process: its own connections to the same database.
        let elsewhere = app.db.store(clock.clone()).await;

        let key = app.key(&agency, &[Scope::UsersRead]).await;
        assert_eq!(status_of(&app, &key).await, StatusCode::OK);
        let key_id = app.store.api_keys().find_by_plaintext(&key).await.unwrap().unwrap().key.id;
        elsewhere.api_keys().revoke(&agency.id, &key_id).await.unwrap();
        eventually(Duration::from_secs(10), "the revoked key refused", || async {
            (status_of(&app, &key).await == StatusCode::UNAUTHORIZED).then_some(())
        })
        .await;

        // The news itself, as a follower hears it: a revocation and an expiry.
        let (heard, mut hearing) = tokio::sync::mpsc::unbounded_channel();
        let store = app.store.clone();
        let listening = tokio::spawn(async move {
            store
                .api_keys()
                .follow_ended(Duration::from_millis(20), |ended| {
                    let _ = heard.send(ended);
                })
                .await
        });
        assert_eq!(hearing.recv().await, Some(storage::api_keys::KeyEnded::CatchUp));
        let revoked = app.key(&agency, &[Scope::UsersRead]).await;
        let revoked = app.store.api_keys().find_by_plaintext(&revoked).await.unwrap().unwrap().key.id;
        let rotated = app.key(&agency, &[Scope::UsersRead]).await;
        let rotated = app.store.api_keys().find_by_plaintext(&rotated).await.unwrap().unwrap().key.id;
        elsewhere.api_keys().revoke(&agency.id, &revoked).await.unwrap();
        elsewhere.api_keys().rotate(&agency.id, &rotated).await.unwrap();
        clock.advance_seconds(OVERLAP_SECONDS);
        assert_eq!(elsewhere.api_keys().expire_rotated().await.unwrap(), 1);
        for expected in [revoked, rotated] {
            let next = tokio::time::timeout(Duration::from_secs(10), hearing.recv()).await;
            assert_eq!(next.unwrap(), Some(storage::api_keys::KeyEnded::Key(expected)));
        }
        listening.abort();
        follower.abort();
    }
}

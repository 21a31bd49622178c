//! The `api` binary's command-line contract: `admin` commands print one JSON
//! object, work while `api serve` runs on the same data, and fail with a JSON
//! error and status 1; `migrate`; `serve` with TLS; SIGTERM stops it cleanly.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::ids::AgencyId;
use storage::webhooks::{EndpointEnvironment, NewEndpoint};
use storage::{Environment, Tenant};
use tests::deployment::{Deployment, eventually, serve};
use tests::{Backend, backend_tests};

use crate::support::expect_ok;

backend_tests! {
    async fn admin_commands_work_while_the_server_runs(backend) {
        let deployment = Deployment::new(backend).await;
        let client = tests::app::base_client().build().unwrap();
        let mut server = serve(&deployment, &[], &client, "http").await;

        let agency = deployment.admin_ok(&["create-agency", "--name", "Acme Media"]);
        let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
        let owner_id = agency["owner_user_id"].as_str().unwrap().to_owned();
        assert!(agency_id.starts_with("agc_") && owner_id.starts_with("usr_"));
        assert_eq!(agency.as_object().unwrap().len(), 2);

        let broker = deployment.admin_ok(&["create-agency", "--name", "Bolt Realty", "--kind", "broker"]);
        assert!(broker["agency_id"].as_str().unwrap().starts_with("agc_"));

        let user = deployment.admin_ok(&[
            "create-user", "--agency", &agency_id, "--role", "agent", "--email", "Ana@Example.com",
            "--name", "Ana", "--manager", &owner_id,
        ]);
        let user_id = user["user_id"].as_str().unwrap().to_owned();

        let sk = deployment.admin_ok(&["create-key", "--agency", &agency_id, "--name", "CRM", "--scopes", "users:read,listings:read"]);
        let sk_key = sk["key"].as_str().unwrap().to_owned();
        assert!(sk["key_id"].as_str().unwrap().starts_with("key_"));
        assert!(sk_key.starts_with("sk_live_"));
        let ma = deployment.admin_ok(&["create-key", "--agency", &agency_id, "--name", "Sandbox", "--scopes", "users:read", "--sandbox", "--format", "ma"]);
        let ma_key = ma["key"].as_str().unwrap().to_owned();
        assert!(ma_key.starts_with("ma_test_ak_") && ma_key.len() == 37);
        let default = deployment.admin_ok(&["create-key", "--agency", &agency_id, "--name", "Reader"]);

        // The running server sees what the admin commands wrote.
        for key in [&sk_key, &ma_key] {
            let page = expect_ok(
                client.get(format!("{}/api/v1/users", server.base_url)).header("X-API-Key", key).send().await.unwrap(),
            )
            .await;
            let ids: Vec<&str> = page["items"].as_array().unwrap().iter().map(|u| u["id"].as_str().unwrap()).collect();
            assert_eq!(ids, [owner_id.as_str(), user_id.as_str()]);
            assert_eq!(page["items"][1]["email"], "ana@example.com");
        }
        // The default scope is listings:read only.
        let denied = client
            .get(format!("{}/api/v1/users", server.base_url))
            .bearer_auth(default["key"].as_str().unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(denied.status(), StatusCode::FORBIDDEN);

        let status = server.process.terminate(Duration::from_secs(30));
        assert!(status.success(), "graceful exit on SIGTERM: {status}");

        // Debug logs name the agency and key id of each request, never a key.
        let log = server.process.log_text();
        assert!(log.contains(sk["key_id"].as_str().unwrap()), "requests are logged with their key id");
        for secret in [&sk_key, &ma_key, &deployment.master_key] {
            assert!(!log.contains(secret.as_str()), "a secret was logged");
        }
    }

    async fn admin_failures_are_a_json_error_and_status_1(backend) {
        let deployment = Deployment::new(backend).await;
        let agency = deployment.admin_ok(&["create-agency", "--name", "A"]);
        let agency_id = agency["agency_id"].as_str().unwrap();
        let other = deployment.admin_ok(&["create-agency", "--name", "B"]);
        let other_owner = other["owner_user_id"].as_str().unwrap();

        deployment.admin_err(&["create-user", "--agency", "agc_01JD3Q8W5T7X2Z9Y4V6R1N0M8K", "--role", "agent", "--email", "a@example.com"], "not_found");
        deployment.admin_err(&["create-user", "--agency", "garbage", "--role", "agent", "--email", "a@example.com"], "not_found");
        deployment.admin_err(&["create-user", "--agency", agency_id, "--role", "wizard", "--email", "a@example.com"], "validation.failed");
        deployment.admin_err(&["create-user", "--agency", agency_id, "--role", "agent", "--email", "not-an-email"], "validation.failed");
        deployment.admin_err(&["create-user", "--agency", agency_id, "--role", "agent", "--email", "a@example.com", "--manager", other_owner], "validation.failed");
        deployment.admin_ok(&["create-user", "--agency", agency_id, "--role", "agent", "--email", "a@example.com"]);
        deployment.admin_err(&["create-user", "--agency", agency_id, "--role", "viewer", "--email", "A@example.com"], "conflict");
        deployment.admin_err(&["create-key", "--agency", agency_id, "--name", "k", "--scopes", "listings:read,everything"], "validation.failed");
        deployment.admin_err(&["create-key", "--agency", agency_id, "--name", "   "], "validation.failed");
        deployment.admin_err(&["create-agency", "--name", ""], "validation.failed");

        // Usage errors are clap's: status 2.
        let usage = deployment.admin(&["create-agency", "--name", "C", "--kind", "studio"]);
        assert_eq!(usage.status.code(), Some(2));
    }

    async fn operators_manage_webhook_endpoints_from_the_command_line(backend) {
        let deployment = Deployment::new(backend).await;
        let client = tests::app::base_client().build().unwrap();
        let mut server = serve(&deployment, &["--webhook-allow-private-networks"], &client, "http").await;
        let agency = deployment.admin_ok(&["create-agency", "--name", "Acme"]);
        let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
        let key = deployment.admin_ok(&["create-key", "--agency", &agency_id, "--name", "hooks", "--scopes", "webhooks:read,webhooks:write"]);
        let created: Value = client
            .post(format!("{}/api/v1/webhooks/endpoints", server.base_url))
            .header("X-API-Key", key["key"].as_str().unwrap())
            .header("X-Idempotency-Key", tests::idempotency_key())
            .json(&serde_json::json!({ "url": "https://localhost:9/hooks", "name": "crm" }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = created["id"].as_str().unwrap().to_owned();
        let secret = created["secret"].as_str().unwrap().to_owned();

        let list = deployment.admin_ok(&["webhook-endpoints", "list", "--agency", &agency_id]);
        assert_eq!(list["items"][0]["id"], id.as_str());
        assert_eq!(list["items"][0]["name"], "crm");
        assert!(!list.to_string().contains(&secret), "the secret is never listed");
        let shown: Value = client
            .get(format!("{}/api/v1/webhooks/endpoints/{id}", server.base_url))
            .header("X-API-Key", key["key"].as_str().unwrap())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let got = deployment.admin_ok(&["webhook-endpoints", "get", "--agency", &agency_id, "--endpoint", &id]);
        assert_eq!(got["endpoint"], shown, "the command line shows an endpoint as the API does");
        assert_eq!(list["items"][0], shown);
        let disabled = deployment.admin_ok(&["webhook-endpoints", "disable", "--agency", &agency_id, "--endpoint", &id]);
        assert_eq!(disabled["endpoint"]["status"], "disabled");
        let enabled = deployment.admin_ok(&["webhook-endpoints", "enable", "--agency", &agency_id, "--endpoint", &id]);
        assert_eq!(enabled["endpoint"]["status"], "enabled");
        let rotated = deployment.admin_ok(&["webhook-endpoints", "rotate-secret", "--agency", &agency_id, "--endpoint", &id]);
        assert!(rotated["endpoint"]["previous_secret_expires_at"].is_string(), "a day's overlap by default: {rotated}");
        let at_once = deployment.admin_ok(&["webhook-endpoints", "rotate-secret", "--agency", &agency_id, "--endpoint", &id, "--previous-secret-expires-in", "0"]);
        assert!(at_once["endpoint"]["previous_secret_expires_at"].is_null(), "{at_once}");
        deployment.admin_err(&["webhook-endpoints", "rotate-secret", "--agency", &agency_id, "--endpoint", &id, "--previous-secret-expires-in", "604801"], "validation.failed");
        let new_secret = at_once["secret"].as_str().unwrap();
        assert!(new_secret.starts_with("whsec_") && new_secret != secret);
        let deliveries = deployment.admin_ok(&["webhook-endpoints", "deliveries", "--agency", &agency_id, "--endpoint", &id]);
        assert_eq!(deliveries["total"], 0);
        deployment.admin_err(&["webhook-endpoints", "get", "--agency", &agency_id], "validation.failed");
        deployment.admin_err(&["webhook-endpoints", "get", "--agency", &agency_id, "--endpoint", &id, "--sandbox"], "webhook_endpoint_not_found");
        let other = deployment.admin_ok(&["create-agency", "--name", "Other"]);
        deployment.admin_err(&["webhook-endpoints", "disable", "--agency", other["agency_id"].as_str().unwrap(), "--endpoint", &id], "webhook_endpoint_not_found");
        let deleted = deployment.admin_ok(&["webhook-endpoints", "delete", "--agency", &agency_id, "--endpoint", &id]);
        assert_eq!(deleted["endpoint"]["deleted"], true);
        deployment.admin_err(&["webhook-endpoints", "get", "--agency", &agency_id, "--endpoint", &id], "webhook_endpoint_not_found");
        let status = server.process.terminate(Duration::from_secs(30));
        assert!(status.success());
        assert!(!server.process.log_text().contains(&secret), "a webhook secret was logged");
    }

    async fn operators_update_webhook_endpoints_under_the_routes_checks(backend) {
        let deployment = Deployment::new(backend).await;
        let agency = deployment.admin_ok(&["create-agency", "--name", "Acme"]);
        let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
        let store = deployment.store().await;
        let agency = AgencyId::parse(&agency_id).unwrap();
        let (endpoint, _) = store
            .webhooks()
            .create(
                &Tenant::new(agency.clone(), Environment::Live),
                new_endpoint("https://localhost:9/old", EndpointEnvironment::Live),
            )
            .await
            .unwrap();
        let id = endpoint.id.to_string();
        let get = || deployment.admin_ok(&["webhook-endpoints", "get", "--agency", &agency_id, "--endpoint", &id]);

        // Every field at once; aliases come back canonical, duplicates once.
        let updated = deployment.admin_ok(&update_args(&agency_id, &id, &[
            "--url", "https://localhost:9/new",
            "--event-type", "listing.section_modified",
            "--event-types", "invoice.payment_made,listing.created,listing.section_updated",
            "--name", "  CRM feed ",
            "--environment", "Both",
            "--webhook-allow-private-networks",
        ]));
        assert_eq!(updated.as_object().unwrap().len(), 2, "{updated}");
        assert_eq!(updated["released"], 0, "no budget changed, nothing released");
        let endpoint = &updated["endpoint"];
        assert_eq!(endpoint["id"], id.as_str());
        assert_eq!(endpoint["url"], "https://localhost:9/new");
        assert_eq!(endpoint["event_types"], json!(["listing.section_updated", "invoice.paid", "listing.created"]));
        assert_eq!(endpoint["name"], "CRM feed");
        assert_eq!(endpoint["environment"], "both");
        assert_eq!(get()["endpoint"], updated["endpoint"], "stored as printed");
        let live_only = deployment.admin_ok(&update_args(&agency_id, &id, &["--environment", "Live events only"]));
        assert_eq!(live_only["endpoint"]["environment"], "live");
        let updated = deployment.admin_ok(&update_args(&agency_id, &id, &["--environment", "both"]));

        // Refused values change nothing: the route's checks, as validation.failed.
        let long_name = "x".repeat(201);
        for refused in [
            ["--url", "http://localhost:9/plain"],
            ["--url", "https://user:pw@localhost:9/x"],
            ["--url", "not a url"],
            ["--event-type", "listing.exploded"],
            ["--event-types", "listing.created,listing.exploded"],
            ["--event-type", "webhook.test_fire"],
            ["--event-types", ","],
            ["--environment", "staging"],
            ["--name", long_name.as_str()],
            ["--signature-scheme", "svix"],
            ["--hourly-budget", "0"],
            ["--hourly-budget", "1000001"],
            ["--ordering", "fifo"],
        ] {
            let mut extra = refused.to_vec();
            extra.push("--webhook-allow-private-networks");
            deployment.admin_err(&update_args(&agency_id, &id, &extra), "validation.failed");
        }
        // A valid field beside a refused one is not applied either.
        deployment.admin_err(
            &update_args(&agency_id, &id, &["--name", "half", "--event-type", "listing.exploded"]),
            "validation.failed",
        );
        // Without the development flag the strict address policy of `api
        // serve` applies: loopback, private and link-local hosts are refused.
        for url in ["https://localhost:9/strict", "https://10.0.0.8/hooks", "https://169.254.169.254/latest"] {
            deployment.admin_err(&update_args(&agency_id, &id, &["--url", url]), "validation.failed");
        }
        // Nothing to change, or update flags on another action.
        deployment.admin_err(&update_args(&agency_id, &id, &[]), "validation.failed");
        deployment.admin_err(
            &["webhook-endpoints", "get", "--agency", &agency_id, "--endpoint", &id, "--name", "x"],
            "validation.failed",
        );
        assert_eq!(get()["endpoint"], updated["endpoint"], "nothing changed");

        // The signature scheme and the hourly budget, set and turned off.
        let schemed = deployment.admin_ok(&update_args(&agency_id, &id, &["--signature-scheme", "standard_webhooks", "--hourly-budget", "5000", "--ordering", "listing"]));
        assert_eq!(schemed["endpoint"]["ordering"], "listing");
        assert_eq!(schemed["endpoint"]["signature_scheme"], "standard_webhooks");
        assert_eq!(schemed["endpoint"]["hourly_budget"], 5000);
        assert_eq!(schemed["endpoint"]["held_back"], json!({ "count": 0, "next_release_at": null }));
        assert_eq!(schemed["released"], 0);
        let unbudgeted = deployment.admin_ok(&update_args(&agency_id, &id, &["--no-hourly-budget", "--signature-scheme", "spec"]));
        assert_eq!(unbudgeted["endpoint"]["hourly_budget"], Value::Null);
        assert_eq!(unbudgeted["endpoint"]["signature_scheme"], "spec");

        // An empty name clears it; --all-event-types subscribes to every type.
        let cleared = deployment.admin_ok(&update_args(&agency_id, &id, &["--name", "", "--all-event-types"]));
        assert_eq!(cleared["endpoint"]["name"], Value::Null);
        assert_eq!(cleared["endpoint"]["event_types"], Value::Null);
        assert_eq!(cleared["endpoint"]["url"], "https://localhost:9/new");

        // Unknown endpoints are not found, before their values are judged;
        // so is another environment's or another agency's endpoint.
        let unknown = "whe_01JD3Q8W5T7X2Z9Y4V6R1N0M8K";
        deployment.admin_err(&update_args(&agency_id, unknown, &["--name", "x"]), "webhook_endpoint_not_found");
        deployment.admin_err(&update_args(&agency_id, unknown, &["--url", "http://x"]), "webhook_endpoint_not_found");
        let mut sandboxed = update_args(&agency_id, &id, &["--name", "x"]);
        sandboxed.push("--sandbox");
        deployment.admin_err(&sandboxed, "webhook_endpoint_not_found");
        let other = deployment.admin_ok(&["create-agency", "--name", "Other"]);
        deployment.admin_err(
            &update_args(other["agency_id"].as_str().unwrap(), &id, &["--name", "x"]),
            "webhook_endpoint_not_found",
        );

        // A sandbox endpoint hears sandbox events only, as with a sandbox key.
        let (sandbox_endpoint, _) = store
            .webhooks()
            .create(
                &Tenant::new(agency, Environment::Sandbox),
                new_endpoint("https://localhost:9/sandbox", EndpointEnvironment::Sandbox),
            )
            .await
            .unwrap();
        let mut widen = update_args(&agency_id, sandbox_endpoint.id.as_str(), &["--environment", "both"]);
        widen.push("--sandbox");
        deployment.admin_err(&widen, "validation.failed");
        let mut rename = update_args(&agency_id, sandbox_endpoint.id.as_str(), &["--name", "sandbox feed", "--environment", "Sandbox events only"]);
        rename.push("--sandbox");
        let renamed = deployment.admin_ok(&rename);
        assert_eq!(renamed["endpoint"]["name"], "sandbox feed");
        assert_eq!(renamed["endpoint"]["environment"], "sandbox");

        // Conflicting flags are a usage error: status 2.
        let usage = deployment.admin(&update_args(&agency_id, &id, &["--all-event-types", "--event-type", "listing.created"]));
        assert_eq!(usage.status.code(), Some(2));
    }

    async fn operators_read_the_receivers_answer_in_the_delivery_log(backend) {
        let receiver = tests::receiver::WebhookReceiver::start().await;
        let answer: String = (0..1500u32).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        receiver.answer_with_body(500, answer.clone());
        let deployment = Deployment::new(backend).await;
        let certs = tempfile::tempdir().unwrap();
        let ca = write_pem(certs.path(), "receiver.pem", &receiver.cert_pem);
        let client = tests::app::base_client().build().unwrap();
        let server = serve(
            &deployment,
            &["--webhook-allow-private-networks", "--webhook-ca-cert", ca.to_str().unwrap()],
            &client,
            "http",
        )
        .await;
        let agency = deployment.admin_ok(&["create-agency", "--name", "Acme"]);
        let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
        let owner = agency["owner_user_id"].as_str().unwrap().to_owned();
        let key = deployment.admin_ok(&[
            "create-key", "--agency", &agency_id, "--name", "hooks",
            "--scopes", "listings:read,listings:write,webhooks:read,webhooks:write",
        ]);
        let key = key["key"].as_str().unwrap().to_owned();
        let post = |path: &str, body: Value| {
            client
                .post(format!("{}/api/v1{path}", server.base_url))
                .header("X-API-Key", &key)
                .header("X-Idempotency-Key", tests::idempotency_key())
                .json(&body)
                .send()
        };
        let response = post("/webhooks/endpoints", json!({ "url": receiver.url, "event_types": ["listing.created"] })).await.unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        let created: Value = response.json().await.unwrap();
        let id = created["id"].as_str().unwrap().to_owned();
        let response = post("/listings", json!({"address": "1 Main St", "owner_user_id": owner, "agent_one_id": owner})).await.unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        receiver.wait_for(1, Duration::from_secs(30)).await;

        // The retry is 30 seconds away: the log holds still at one attempt.
        let log = eventually(Duration::from_secs(30), "the first attempt in the admin log", || async {
            let log = deployment.admin_ok(&["webhook-endpoints", "deliveries", "--agency", &agency_id, "--endpoint", &id]);
            // The delivery and its attempts are read one after the other: wait
            // for both to show the recorded attempt.
            let recorded = log["items"][0]["attempts"].as_array().is_some_and(|a| !a.is_empty())
                && log["items"][0]["status"] != "pending";
            recorded.then_some(log)
        })
        .await;
        let delivery = &log["items"][0];
        assert_eq!(delivery["event_type"], "listing.created");
        assert_eq!(delivery["status"], "retrying");
        let attempt = &delivery["attempts"][0];
        assert_eq!(attempt["outcome"], "http_error", "{attempt}");
        assert_eq!(attempt["status_code"], 500);
        assert!(attempt["duration_ms"].as_u64().is_some(), "{attempt}");
        assert_eq!(attempt["response_excerpt"], &answer[..1024], "the first KiB of the answer");

        // The API's delivery read shows the same attempt.
        let read = expect_ok(
            client
                .get(format!("{}/api/v1/webhooks/deliveries/{}", server.base_url, delivery["id"].as_str().unwrap()))
                .header("X-API-Key", &key)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(read["attempt_log"][0]["response_excerpt"], attempt["response_excerpt"]);
        assert_eq!(read["attempt_log"][0]["duration_ms"], attempt["duration_ms"]);
    }

    async fn payment_and_shoot_commands_drive_a_listing(backend) {
        let deployment = Deployment::new(backend).await;
        let agency = deployment.admin_ok(&["create-agency", "--name", "Acme"]);
        let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
        let owner = agency["owner_user_id"].as_str().unwrap().to_owned();
        let key = deployment.admin_ok(&["create-key", "--agency", &agency_id, "--name", "w", "--scopes", "listings:read,listings:write"]);
        let key = key["key"].as_str().unwrap().to_owned();
        let client = tests::app::base_client().build().unwrap();
        let server = serve(&deployment, &[], &client, "http").await;
        let created: Value = client
            .post(format!("{}/api/v1/listings", server.base_url))
            .header("X-Idempotency-Key", tests::idempotency_key())
            .header("X-API-Key", &key)
            .json(&serde_json::json!({"address": "1 Main St", "owner_user_id": owner, "agent_one_id": owner}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let number = created["listing_number"].as_str().unwrap().to_owned();

        let paid = deployment.admin_ok(&["record-payment", "--agency", &agency_id, "--listing", &number]);
        assert_eq!(paid, serde_json::json!({"listing_number": number, "activated": true}));
        let again = deployment.admin_ok(&["record-payment", "--agency", &agency_id, "--listing", &number]);
        assert_eq!(again["activated"], true);

        let shoot = deployment.admin_ok(&["schedule-shoot", "--agency", &agency_id, "--listing", &number, "--at", "2031-03-04T15:30:00+02:00"]);
        assert_eq!(shoot, serde_json::json!({"listing_number": number, "scheduled_at": "2031-03-04T13:30:00.000Z"}));
        let fees = deployment.admin_ok(&["set-cancellation-fees", "--agency", &agency_id, "--owner", &owner, "--tier", "48:7500", "--tier", "24:5000"]);
        assert_eq!(fees["tiers"][0]["hours_before"], 48);

        let listing: Value = client
            .get(format!("{}/api/v1/listings/{number}", server.base_url))
            .header("X-API-Key", &key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(listing["activated"], true);
        assert_eq!(listing["orders"][0]["invoice_state"], "paid");
        assert_eq!(listing["appointment"]["scheduled_at"], "2031-03-04T13:30:00.000Z");
        assert_eq!(listing["cancellation"]["no_fee_cutoff"], "2031-03-02T13:30:00.000Z");

        deployment.admin_err(&["record-payment", "--agency", &agency_id, "--listing", "ZZZZZZZ"], "not_found");
        deployment.admin_err(&["schedule-shoot", "--agency", &agency_id, "--listing", &number, "--at", "tomorrow"], "validation.failed");
        deployment.admin_err(&["set-cancellation-fees", "--agency", &agency_id, "--owner", &owner, "--tier", "soon"], "validation.failed");
    }

    async fn migrate_applies_and_repeats_harmlessly(backend) {
        let deployment = Deployment::new(backend).await;
        for _ in 0..2 {
            let output = deployment.command(&["migrate"]).output().unwrap();
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        }
        deployment.admin_ok(&["create-agency", "--name", "After migrate"]);
    }
}

/// A stored endpoint at `url`, named "old", receiving listing.created.
fn new_endpoint(url: &str, environment: EndpointEnvironment) -> NewEndpoint {
    NewEndpoint {
        name: Some("old".into()),
        url: url.into(),
        event_types: Some(vec!["listing.created".into()]),
        environment,
        created_by: None,
        ..Default::default()
    }
}

/// `webhook-endpoints update` of `endpoint` with `extra` flags.
fn update_args<'a>(agency: &'a str, endpoint: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "webhook-endpoints",
        "update",
        "--agency",
        agency,
        "--endpoint",
        endpoint,
    ];
    args.extend_from_slice(extra);
    args
}

fn write_pem(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn serve_speaks_https_with_the_tls_flags() {
    let deployment = Deployment::new(Backend::Sqlite).await;
    let identity = tests::app::TlsIdentity::self_signed();
    let certs = tempfile::tempdir().unwrap();
    let cert = write_pem(certs.path(), "cert.pem", &identity.cert_pem);
    let key = write_pem(certs.path(), "key.pem", &identity.key_pem);
    let ca = reqwest::Certificate::from_pem(identity.cert_pem.as_bytes()).unwrap();
    let client = tests::app::base_client()
        .tls_certs_only([ca])
        .build()
        .unwrap();
    let server = serve(
        &deployment,
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        &client,
        "https",
    )
    .await;
    let doc: Value = client
        .get(format!("{}/api/openapi.json", server.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        doc["servers"][0]["url"]
            .as_str()
            .unwrap()
            .starts_with("https://")
    );
}

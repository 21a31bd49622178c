//! Ours: the release `api serve` with its workers in process, pinned to
//! core 0, on the embedded profile or with its queue on a throwaway Redis on
//! core 1; an agency, a key and the endpoints set up as a customer would.

use anyhow::{Context, ensure};
use serde_json::{Value, json};

use super::{Target, endpoint_url};
use crate::jobs::Redis;
use crate::media::api_server::{ApiArgs, ApiServer, ServerOptions, admin, start_server_with};
use crate::webhooks::ReceiverProcess;

/// Our API wants a fresh key here on every POST.
const IDEMPOTENCY_HEADER: &str = "X-Idempotency-Key";

/// Budgets so high that the benchmark never meets them.
const UNREACHABLE: u32 = 1_000_000_000;

/// What keeps our system running for one run.
struct Running {
    _server: ApiServer,
    _redis: Option<Redis>,
}

/// Starts `api serve` trusting the receiver, seeds an agency with a key
/// whose budgets are out of the way, registers `endpoints` endpoints for
/// `listing.created` with no hourly budget, and returns where to post.
pub(super) async fn start(
    api: &ApiArgs,
    on_redis: bool,
    receiver: &ReceiverProcess,
    endpoints: u32,
) -> anyhow::Result<Target> {
    let redis = if on_redis {
        Some(tokio::task::block_in_place(|| Redis::start_on(1))?)
    } else {
        None
    };
    let options = ServerOptions {
        workers: true,
        redis_url: redis.as_ref().map(Redis::url),
        agencies: 1,
    };
    // Loopback endpoints are allowed only with the development flag.
    let flags = [
        "--webhook-allow-private-networks".to_owned(),
        "--webhook-ca-cert".into(),
        receiver.cert_file.to_string_lossy().into_owned(),
    ];
    let (server, agencies) = start_server_with(api, &options, &flags).await?;
    let agency = agencies.first().context("a seeded agency")?;
    let bin = api.binary()?;
    let data = server.data.path();
    let agent = admin(
        &bin,
        data,
        &[
            "create-user",
            "--agency",
            &agency.agency_id,
            "--role",
            "agent",
            "--email",
            "agent@webhooks-svix.bench.example",
            "--name",
            "Bench Agent",
        ],
    )?;
    let agent = agent["user_id"].as_str().context("user_id")?.to_owned();
    let mut budgets = vec!["set-agency-budgets", "--agency", &agency.agency_id];
    let agency_budgets: Vec<String> = api::endpoints::AGENCY_BUDGETS
        .iter()
        .map(|budget| format!("{}={UNREACHABLE}", budget.name))
        .collect();
    for budget in &agency_budgets {
        budgets.extend(["--budget", budget]);
    }
    admin(&bin, data, &budgets)?;
    let key_budgets: Vec<String> = api::endpoints::ALL
        .iter()
        .map(|endpoint| format!("{}={UNREACHABLE}", endpoint.name))
        .collect();
    let mut create_key = vec![
        "create-key",
        "--agency",
        &agency.agency_id,
        "--name",
        "webhooks-svix",
        "--scopes",
        "listings:write,webhooks:write",
    ];
    for budget in &key_budgets {
        create_key.extend(["--rate-limit", budget]);
    }
    let key = admin(&bin, data, &create_key)?;
    let key = key["key"].as_str().context("key")?.to_owned();

    let client = reqwest::Client::builder().no_proxy().build()?;
    for n in 0..endpoints {
        let response = client
            .post(format!("{}/api/v1/webhooks/endpoints", server.base_url))
            .bearer_auth(&key)
            .header(IDEMPOTENCY_HEADER, ulid::Ulid::generate().to_string())
            .json(&json!({
                "url": endpoint_url(receiver, n),
                "name": format!("bench {n}"),
                "event_types": ["listing.created"],
                "hourly_budget": Value::Null,
            }))
            .send()
            .await?;
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or_default();
        ensure!(
            status.is_success() && answer["hourly_budget"].is_null(),
            "registering endpoint {n}: {status} {answer}"
        );
    }
    let body = json!({
        "address": "{seq} Delivery Lane, Springfield",
        "owner_user_id": agency.owner_user_id,
        "agent_one_id": agent,
    });
    Ok(Target {
        post_url: format!("{}/api/v1/listings", server.base_url),
        token: key,
        body: body.to_string(),
        idempotency_header: Some(IDEMPOTENCY_HEADER),
        _running: Box::new(Running {
            _server: server,
            _redis: redis,
        }),
    })
}

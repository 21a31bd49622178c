//! Idempotent requests: required keys, replay, conflicts, concurrency, leases,
//! released keys, which outcomes are stored, and scoping per agency.

use futures::future::join_all;
use reqwest::{Method, Response, StatusCode};
use serde_json::{Value, json};
use storage::api_keys::Scope;
use storage::people::users::Role;
use storage::{Clock, Timestamp};
use tests::{TestApp, backend_tests};

use crate::listings::Ctx;
use crate::support::{expect_error, expect_ok, sql};

async fn create_with(ctx: &Ctx, key: &str, body: &Value) -> Response {
    ctx.app
        .client
        .post(ctx.app.url("/api/v1/listings"))
        .header("X-API-Key", &ctx.key)
        .header("X-Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .unwrap()
}

fn replayed(response: &Response) -> bool {
    response
        .headers()
        .get("x-idempotent-replay")
        .is_some_and(|v| v == "true")
}

async fn listings_total(ctx: &Ctx) -> i64 {
    sql::count_for_agency(ctx.app.store.db(), "listings", ctx.agency.id.as_str()).await
}

backend_tests! {
    async fn mutating_requests_need_a_key_of_at_most_128_characters(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        for (method, path, body) in [
            (Method::POST, "/api/v1/listings".to_owned(), ctx.new_listing()),
            (Method::PATCH, format!("/api/v1/listings/{number}/status"), json!({"new_status": "Active"})),
            (Method::POST, format!("/api/v1/listings/{number}/cancel"), Value::Null),
        ] {
            let response = ctx.app.client.request(method, ctx.app.url(&path)).header("X-API-Key", &ctx.key).json(&body).send().await.unwrap();
            expect_error(response, StatusCode::BAD_REQUEST, "idempotency.missing").await;
        }
        let long = create_with(&ctx, &"k".repeat(129), &ctx.new_listing()).await;
        let error = expect_error(long, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        assert!(error["error"]["details"]["fields"]["X-Idempotency-Key"].is_string());
        let longest = create_with(&ctx, &"k".repeat(128), &ctx.new_listing()).await;
        assert_eq!(longest.status(), StatusCode::CREATED);
        // Safe methods never look at it.
        let read = ctx.app.get("/api/v1/listings").header("X-API-Key", &ctx.key).header("X-Idempotency-Key", "x".repeat(500)).send().await.unwrap();
        expect_ok(read).await;
        assert_eq!(listings_total(&ctx).await, 2);
    }

    async fn the_same_request_is_replayed_and_a_different_one_conflicts(backend) {
        let ctx = Ctx::new(backend).await;
        let first = create_with(&ctx, "order-1", &ctx.new_listing()).await;
        assert_eq!(first.status(), StatusCode::CREATED);
        assert!(!replayed(&first));
        let first_id = first.headers()["x-request-id"].clone();
        let first: Value = first.json().await.unwrap();

        // Same body with keys reordered: the same request.
        let reordered = json!({"agent_one_id": ctx.agent, "owner_user_id": ctx.agency.owner_id, "address": "12 Elm Street, Springfield"});
        let again = create_with(&ctx, "order-1", &reordered).await;
        assert_eq!(again.status(), StatusCode::CREATED);
        assert!(replayed(&again));
        assert_ne!(again.headers()["x-request-id"], first_id, "a replay is a new request");
        assert_eq!(again.headers()["content-type"], "application/json");
        let again: Value = again.json().await.unwrap();
        assert_eq!(again, first);

        let mut other = ctx.new_listing();
        other["address"] = json!("99 Other Road");
        expect_error(create_with(&ctx, "order-1", &other).await, StatusCode::CONFLICT, "idempotency_key_conflict").await;
        // The same key on another route is another request too.
        let number = first["listing_number"].as_str().unwrap();
        let patch = ctx.app.client.patch(ctx.app.url(&format!("/api/v1/listings/{number}/status"))).header("X-API-Key", &ctx.key).header("X-Idempotency-Key", "order-1").json(&json!({"new_status": "Active"})).send().await.unwrap();
        expect_error(patch, StatusCode::CONFLICT, "idempotency_key_conflict").await;
        assert_eq!(listings_total(&ctx).await, 1);
    }

    async fn concurrent_requests_with_one_key_create_one_listing(backend) {
        let ctx = Ctx::new(backend).await;
        let body = ctx.new_listing();
        let responses = join_all((0..32).map(|_| create_with(&ctx, "burst-key", &body))).await;
        let mut created = 0;
        let mut numbers = std::collections::HashSet::new();
        for response in responses {
            match response.status() {
                StatusCode::CREATED => {
                    if !replayed(&response) {
                        created += 1;
                    }
                    let listing: Value = response.json().await.unwrap();
                    numbers.insert(listing["listing_number"].as_str().unwrap().to_owned());
                }
                StatusCode::CONFLICT => {
                    assert_eq!(response.headers()["retry-after"], "5");
                    expect_error(response, StatusCode::CONFLICT, "idempotency_key_in_progress").await;
                }
                other => panic!("unexpected {other}"),
            }
        }
        assert_eq!(created, 1, "exactly one request ran");
        assert_eq!(numbers.len(), 1, "every replay shows the same listing");
        assert_eq!(listings_total(&ctx).await, 1);
    }

    async fn a_server_error_releases_the_key(backend) {
        let ctx = Ctx::new(backend).await;
        sql::fail_inserts_of_event(ctx.app.store.db(), "invoice.created").await;
        let failed = create_with(&ctx, "retry-me", &ctx.new_listing()).await;
        expect_error(failed, StatusCode::INTERNAL_SERVER_ERROR, "server.internal").await;
        sql::drop_injected_failure(ctx.app.store.db()).await;
        let retried = create_with(&ctx, "retry-me", &ctx.new_listing()).await;
        assert_eq!(retried.status(), StatusCode::CREATED);
        assert!(!replayed(&retried), "the retry ran");
        assert_eq!(listings_total(&ctx).await, 1);
    }

    async fn refused_requests_release_the_key_and_decided_ones_are_stored(backend) {
        let ctx = Ctx::new(backend).await;
        // An invalid body never ran: the key can be used for the corrected request.
        let mut invalid = ctx.new_listing();
        invalid["address"] = json!("");
        expect_error(create_with(&ctx, "fix-and-retry", &invalid).await, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
        let fixed = create_with(&ctx, "fix-and-retry", &ctx.new_listing()).await;
        assert_eq!(fixed.status(), StatusCode::CREATED);
        let number = fixed.json::<Value>().await.unwrap()["listing_number"].as_str().unwrap().to_owned();

        // A rule the endpoint applied is the request's outcome: replayed as is.
        let patch = |key: &'static str| {
            ctx.app.client.patch(ctx.app.url(&format!("/api/v1/listings/{number}/status"))).header("X-API-Key", &ctx.key).header("X-Idempotency-Key", key).json(&json!({"new_status": "Active"})).send()
        };
        expect_error(patch("activate-1").await.unwrap(), StatusCode::CONFLICT, "listing_not_activated").await;
        ctx.app.store.orders().record_payment(&ctx.live(), &number, None).await.unwrap();
        let replay = patch("activate-1").await.unwrap();
        assert!(replayed(&replay));
        let body = expect_error(replay, StatusCode::CONFLICT, "listing_not_activated").await;
        assert!(body["error"]["request_id"].as_str().is_some());
        let fresh = patch("activate-2").await.unwrap();
        assert_eq!(fresh.status(), StatusCode::OK);
    }

    /// Stripe's rule on every route: a request refused before it did
    /// anything keeps no result under its key, whatever the refusal's code
    /// (`validation.failed`, `invalid_section_payload`,
    /// `validation.invalid_value`), so the corrected request runs under it.
    async fn no_refusal_is_kept_under_its_key(backend) {
        let ctx = Ctx::new(backend).await;
        let number = ctx.listing().await;
        let send = |method: Method, path: String, key: &'static str, body: Value| {
            ctx.app.client.request(method, ctx.app.url(&path)).header("X-API-Key", &ctx.key).header("X-Idempotency-Key", key).json(&body).send()
        };
        let tour = format!("/api/v1/listings/{number}/sections/tour3d");
        let refused = send(Method::PATCH, tour.clone(), "section", json!({"operation": "set"})).await.unwrap();
        expect_error(refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid_section_payload").await;
        let fixed = send(Method::PATCH, tour, "section", json!({"operation": "set", "url": "https://tours.example.com/a"})).await.unwrap();
        assert_eq!(fixed.status(), StatusCode::OK);
        assert!(!replayed(&fixed));

        let users_key = ctx.app.key_acting_for(&ctx.agency, &ctx.agency.owner_id, &[Scope::UsersRead, Scope::UsersWrite]).await;
        let preferences = ctx.app.url(&format!("/api/v1/users/{}/preferences", ctx.agency.owner_id));
        let patch_preferences = |theme: &str| {
            ctx.app.client.patch(&preferences).header("X-API-Key", &users_key).header("X-Idempotency-Key", "preferences").json(&json!({"theme": theme})).send()
        };
        expect_error(patch_preferences("purple").await.unwrap(), StatusCode::BAD_REQUEST, "validation.invalid_value").await;
        let fixed = patch_preferences("dark").await.unwrap();
        assert!(!replayed(&fixed));
        assert_eq!(expect_ok(fixed).await["theme"], "dark");
    }

    async fn keys_belong_to_one_agency(backend) {
        let ctx = Ctx::new(backend).await;
        assert_eq!(create_with(&ctx, "shared-name", &ctx.new_listing()).await.status(), StatusCode::CREATED);
        // Another agency, in the same deployment, uses the same key for its own request.
        let other = ctx.app.agency().await;
        let other_key = ctx.app.key(&other, &[storage::api_keys::Scope::ListingsWrite]).await;
        let body = json!({"address": "1 Other St", "owner_user_id": other.owner_id, "agent_one_id": other.owner_id});
        let theirs = ctx.app.client.post(ctx.app.url("/api/v1/listings")).header("X-API-Key", &other_key).header("X-Idempotency-Key", "shared-name").json(&body).send().await.unwrap();
        assert_eq!(theirs.status(), StatusCode::CREATED);
        assert!(!replayed(&theirs));
    }

    async fn a_creation_remembers_its_key_when_the_record_is_lost(backend) {
        let ctx = Ctx::new(backend).await;
        let first: Value = create_with(&ctx, "crash-window", &ctx.new_listing()).await.json().await.unwrap();
        // As if the process died between the commit and the bookkeeping.
        sql::delete_idempotency_records(ctx.app.store.db()).await;
        let retried = create_with(&ctx, "crash-window", &ctx.new_listing()).await;
        assert_eq!(retried.status(), StatusCode::CREATED);
        let retried: Value = retried.json().await.unwrap();
        assert_eq!(retried["listing_number"], first["listing_number"]);
        assert_eq!(listings_total(&ctx).await, 1);
    }
}

/// A PUT or DELETE by `key`, with `idempotency_key` when given.
async fn send_unsafe(
    app: &TestApp,
    method: Method,
    key: &str,
    path: &str,
    idempotency_key: Option<&str>,
    body: Option<Value>,
) -> Response {
    let mut request = app
        .client
        .request(method, app.url(path))
        .header("X-API-Key", key);
    if let Some(idempotency_key) = idempotency_key {
        request = request.header("X-Idempotency-Key", idempotency_key);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap()
}

backend_tests! {
    /// PUT and DELETE run without a key; given one, a retry is replayed (not
    /// run again) and a different request under it conflicts.
    async fn puts_and_deletes_honour_a_key_when_present(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner = agency.owner_id.clone();
        let agent = app.user_managed_by(&agency, Role::Agent, &owner).await;
        let key = app.key_acting_for(&agency, &owner, &[Scope::UsersRead, Scope::UsersWrite]).await;
        let role_path = format!("/api/v1/users/{agent}/role");
        let set_role = |idempotency_key: Option<&'static str>, role: &'static str| {
            send_unsafe(&app, Method::PUT, &key, &role_path, idempotency_key, Some(json!({ "role": role })))
        };

        let unkeyed = expect_ok(set_role(None, "photographer").await).await;
        assert_eq!(unkeyed["role"], "photographer");
        let first = set_role(Some("put-role"), "viewer").await;
        assert!(!replayed(&first));
        assert_eq!(expect_ok(first).await["role"], "viewer");
        expect_ok(set_role(None, "agent").await).await;
        let retried = set_role(Some("put-role"), "viewer").await;
        assert!(replayed(&retried));
        assert_eq!(expect_ok(retried).await["role"], "viewer");
        let user = app.store.users().by_id(&agent).await.unwrap();
        assert_eq!(user.role, Role::Agent, "the replay ran nothing");
        expect_error(set_role(Some("put-role"), "photographer").await, StatusCode::CONFLICT, "idempotency_key_conflict").await;

        let first_assistant = app.user_managed_by(&agency, Role::Assistant, &owner).await;
        let second_assistant = app.user_managed_by(&agency, Role::Assistant, &owner).await;
        let unkeyed = send_unsafe(&app, Method::DELETE, &key, &format!("/api/v1/users/team/{first_assistant}"), None, None).await;
        assert_eq!(expect_ok(unkeyed).await["is_active"], false);
        let path = format!("/api/v1/users/team/{second_assistant}");
        let removed = expect_ok(send_unsafe(&app, Method::DELETE, &key, &path, Some("delete-assistant"), None).await).await;
        let retried = send_unsafe(&app, Method::DELETE, &key, &path, Some("delete-assistant"), None).await;
        assert!(replayed(&retried));
        assert_eq!(expect_ok(retried).await, removed);
    }
}

backend_tests! {
    /// An orphaned reservation (its request's process died) frees the key after
    /// the lease, not after 24 hours, whatever the next request carries; and
    /// records are purged after 24 hours.
    async fn leases_expire_and_old_records_are_purged(backend) {
        let clock = Clock::manual(Timestamp::from_micros(1_800_000_000_000_000));
        let ctx = Ctx::with_app(TestApp::builder(backend).clock(clock.clone()).spawn().await).await;
        let body = ctx.new_listing();
        let fingerprint = api::middleware::idempotency::fingerprint(
            &Method::POST,
            "/api/v1/listings",
            "live",
            serde_json::to_vec(&body).unwrap().as_slice(),
        );
        let lease = api::middleware::idempotency::LEASE;
        for key in ["orphan", "orphan-other-body"] {
            let reservation = ctx
                .app
                .store
                .idempotency()
                .reserve(&ctx.agency.id, key, &fingerprint, lease)
                .await
                .unwrap();
            assert_eq!(reservation, storage::requests::idempotency::Reservation::Proceed);
        }

        let in_progress = create_with(&ctx, "orphan", &body).await;
        assert_eq!(in_progress.headers()["retry-after"], "5");
        expect_error(in_progress, StatusCode::CONFLICT, "idempotency_key_in_progress").await;
        // Still held a second before the lease ends: an upload may take that long.
        clock.advance_seconds(i64::try_from(lease.as_secs()).unwrap() - 1);
        expect_error(
            create_with(&ctx, "orphan", &body).await,
            StatusCode::CONFLICT,
            "idempotency_key_in_progress",
        )
        .await;
        clock.advance_seconds(2);
        let taken_over = create_with(&ctx, "orphan", &body).await;
        assert_eq!(taken_over.status(), StatusCode::CREATED);
        // The crashed request's body is unknown to the retry: an orphaned key
        // is free for a different request too, not a conflict for 24 hours.
        let mut other = ctx.new_listing();
        other["notes"] = serde_json::json!("a different request");
        let taken_over = create_with(&ctx, "orphan-other-body", &other).await;
        assert_eq!(taken_over.status(), StatusCode::CREATED);
        assert_eq!(listings_total(&ctx).await, 2);

        assert_eq!(ctx.app.store.idempotency().purge_expired(100).await.unwrap().rows, 0);
        clock.advance_seconds(24 * 3600);
        assert_eq!(ctx.app.store.idempotency().purge_expired(100).await.unwrap().rows, 2);
        // After 24 hours the key starts over: a new listing.
        let reused = create_with(&ctx, "orphan", &body).await;
        assert_eq!(reused.status(), StatusCode::CREATED);
        assert!(!replayed(&reused));
        assert_eq!(listings_total(&ctx).await, 3);
    }
}

/// A handler that panics while it holds its idempotency key.
async fn panic_holding_the_key() -> &'static str {
    panic!("forced panic under an idempotency key")
}

/// A request whose handler panics gives its key back before its 500 goes
/// out: a retry the moment the answer arrives runs again instead of meeting
/// `idempotency_key_in_progress`. The probe route runs the idempotency
/// middleware itself and, when the panic comes through it, reserves the key
/// at once, as a retry would, and answers what it found (instead of the
/// panic guard's 500).
#[tokio::test]
async fn a_panicking_request_frees_its_key_before_it_is_answered() {
    use std::panic::AssertUnwindSafe;
    use std::sync::{Arc, OnceLock};

    use axum::extract::Request;
    use axum::middleware::Next;
    use axum::response::{IntoResponse, Response as AxumResponse};
    use futures::FutureExt;
    use storage::ids::AgencyId;
    use storage::requests::idempotency::Reservation;
    use storage::{Environment, Store};

    let slot: Arc<OnceLock<(Store, AgencyId)>> = Arc::default();
    let seen = slot.clone();
    let routes = axum::Router::new()
        .route(
            "/api/v1/probe/panic-under-key",
            axum::routing::post(panic_holding_the_key),
        )
        .route_layer(axum::middleware::from_fn(
            move |request: Request, next: Next| {
                let seen = seen.clone();
                async move {
                    let (store, agency) = seen.get().expect("the store is set").clone();
                    let key = request.headers()["x-idempotency-key"]
                        .to_str()
                        .unwrap()
                        .to_owned();
                    let run = api::middleware::idempotency::run(
                        &store,
                        &agency,
                        Environment::Live,
                        request,
                        next,
                    );
                    let outcome = AssertUnwindSafe(run).catch_unwind().await;
                    match outcome {
                        Ok(response) => response,
                        Err(_) => {
                            let retry = store
                                .idempotency()
                                .reserve(
                                    &agency,
                                    &key,
                                    "a retry",
                                    api::middleware::idempotency::LEASE,
                                )
                                .await
                                .unwrap();
                            let found = if retry == Reservation::Proceed {
                                "free"
                            } else {
                                "held"
                            };
                            // A plain 200: the error envelope renders a 500's body its own way.
                            let response: AxumResponse = found.into_response();
                            response
                        }
                    }
                }
            },
        ));
    let app = TestApp::builder(tests::Backend::Sqlite)
        .extra_routes(routes)
        .spawn()
        .await;
    let agency = app.agency().await;
    slot.set((app.store.clone(), agency.id.clone()))
        .unwrap_or_else(|_| unreachable!());
    let response = app
        .client
        .post(app.url("/api/v1/probe/panic-under-key"))
        .header("X-Idempotency-Key", "panics")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "the probe saw the panic");
    let text = response.text().await.unwrap();
    assert_eq!(
        text, "free",
        "the key was given back before the panic went on"
    );
    // Given back once: the retry's reservation, made after the release,
    // still holds the key.
    let again = app
        .store
        .idempotency()
        .reserve(
            &agency.id,
            "panics",
            "a retry",
            api::middleware::idempotency::LEASE,
        )
        .await
        .unwrap();
    assert_eq!(
        again,
        storage::requests::idempotency::Reservation::InProgress
    );
}

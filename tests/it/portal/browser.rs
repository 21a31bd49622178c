//! The portal in headless Chromium, as an agency's developer uses it: sign
//! in (a wrong password first), create a key and use it, run console
//! requests up to the limit, register an endpoint and watch a delivery
//! arrive, replay it, send a test event, revoke the key, read the catalog,
//! usage and changelog, sign out; and choose a password from an e-mailed
//! link. Every page is looked at 1280 and 375 px wide (`Browser::look_at`).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use storage::api_keys::Scope;
use storage::people::accounts::NewAccount;
use storage::people::users::Role;
use tests::browser::Browser;
use tests::receiver::WebhookReceiver;
use tests::{Backend, TestApp, idempotency_key};

use super::PATIENCE;
use crate::sessions::owner_login;

/// Confirms every `confirm()` the page asks (a person clicking OK).
async fn accept_confirmations(browser: &Browser) {
    browser
        .run("window.confirm = () => true; return true;", json!([]))
        .await;
}

/// Clicks the element matching `css`.
async fn click(browser: &Browser, css: &str) {
    let element = browser.find(css, PATIENCE).await;
    browser.click(&element).await;
}

/// Types into the element matching `css`.
async fn type_into(browser: &Browser, css: &str, text: &str) {
    let element = browser.find(css, PATIENCE).await;
    browser.type_into(&element, text).await;
}

/// The text of the element matching `css`.
async fn text(browser: &Browser, css: &str) -> String {
    let element = browser.find(css, PATIENCE).await;
    browser.text(&element).await
}

#[tokio::test]
async fn an_administrator_manages_keys_webhooks_and_the_console_in_the_browser() {
    let receiver = WebhookReceiver::start().await;
    // The rate limits stand still unless moved: the console's budget of
    // sixty runs is spent however slowly a loaded machine runs them, and the
    // page's extra run is refused before any refill.
    let budget_clock =
        storage::Clock::manual(storage::Timestamp::from_micros(1_800_000_000_000_000));
    let app = TestApp::builder(Backend::Sqlite)
        .with_workers()
        .webhooks(receiver.delivery(60))
        .rate_limits_on(budget_clock)
        .spawn()
        .await;
    let agency = app.agency().await;
    let email = owner_login(&app, &agency).await;
    let browser = Browser::start().await;

    // Not signed in: the portal asks for it, and a wrong password says so
    // without telling whether the account exists.
    browser.open(&app.url("/settings/webhooks")).await;
    browser.find("#sign-in", PATIENCE).await;
    browser.look_at("sign-in").await;
    type_into(&browser, "#email", &email).await;
    type_into(&browser, "#password", "Wrong-password-1!").await;
    click(&browser, "#sign-in button[type=submit]").await;
    let refused = text(&browser, "#sign-in-error").await;
    assert!(refused.contains("not right"), "{refused}");
    type_into(&browser, "#password", crate::sessions::PASSWORD).await;
    click(&browser, "#sign-in button[type=submit]").await;
    browser.find("header.top", PATIENCE).await;
    assert!(
        browser.url().await.ends_with("/settings/webhooks"),
        "back where the sign-in started"
    );

    // A key, created with its scopes as checkboxes, shown once, and working.
    browser.open(&app.url("/settings/keys")).await;
    type_into(&browser, "#key-name", "Portal key").await;
    click(&browser, "input[name=scopes][value='webhooks:read']").await;
    click(&browser, "#create-key button[type=submit]").await;
    let plaintext = text(&browser, "#shown-once").await;
    assert!(plaintext.starts_with("sk_live_"), "{plaintext}");
    let listings = app
        .get("/api/v1/listings")
        .header("X-API-Key", &plaintext)
        .send()
        .await
        .unwrap();
    assert_eq!(listings.status(), StatusCode::OK);
    browser.look_at("key-created").await;
    browser.open(&app.url("/settings/keys")).await;
    let rows = text(&browser, "#keys").await;
    assert!(
        rows.contains("Portal key") && rows.contains("listings:read, webhooks:read"),
        "{rows}"
    );
    assert!(
        !rows.contains(&plaintext),
        "the list never shows a plaintext"
    );
    browser.look_at("keys").await;
    // The sandbox checkbox makes a sandbox key, listed under the switch.
    type_into(&browser, "#key-name", "Sandbox trial").await;
    click(&browser, "#key-sandbox").await;
    click(&browser, "#create-key button[type=submit]").await;
    let sandbox_key = text(&browser, "#shown-once").await;
    assert!(sandbox_key.starts_with("sk_test_"), "{sandbox_key}");
    browser.open(&app.url("/settings/keys")).await;
    assert!(!text(&browser, "#keys").await.contains("Sandbox trial"));

    // The console runs requests as the key, through its real limits: 60 a
    // minute for the agency, then a 429 the page explains.
    browser.open(&app.url("/settings/console")).await;
    type_into(&browser, "#console-path", "/api/v1/listings?limit=5").await;
    click(&browser, "#console-run").await;
    browser
        .wait_for_text("#answer-status", "200", PATIENCE)
        .await;
    let headers = text(&browser, "#answer-headers").await;
    assert!(headers.contains("x-ratelimit-limit"), "{headers}");
    // Runs until the agency's budget (60; its clock stands still) refuses,
    // then has the page run one more.
    let statuses = browser
        .run_async(
            "const done = arguments[arguments.length - 1];
             const key = document.getElementById('console-key').value;
             (async () => {
               const statuses = [];
               for (let i = 0; i < 90; i++) {
                 const r = await window.portalApi('POST', '/api/v1/agency/test-console',
                   { key_id: key, method: 'GET', path: '/api/v1/listings?limit=1' });
                 statuses.push(r.status);
                 if (r.status === 429) break;
               }
               document.getElementById('console-run').click();
               done(statuses);
             })();",
            json!([]),
            Duration::from_secs(120),
        )
        .await;
    let statuses: Vec<u64> = statuses
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect();
    let (refused, admitted) = statuses.split_last().unwrap();
    assert_eq!(*refused, 429, "{statuses:?}");
    // The first run above spent one of the sixty.
    assert!(
        admitted.len() == 59 && admitted.iter().all(|status| *status == 200),
        "60 runs a minute are allowed: {statuses:?}"
    );
    let console_runs = admitted.len() + 1;
    let limited = browser
        .wait_for_text("#status", "Try again in", PATIENCE)
        .await;
    assert!(limited.to_lowercase().contains("rate limit"), "{limited}");
    browser.look_at("console").await;

    // An endpoint with its types as checkboxes; its secret shown once.
    browser.open(&app.url("/settings/webhooks")).await;
    type_into(&browser, "#endpoint-url", &receiver.url).await;
    type_into(&browser, "#endpoint-name", "CRM").await;
    click(&browser, "input[name=event_types][value='listing.created']").await;
    click(&browser, "#create-endpoint button[type=submit]").await;
    let secret = text(&browser, "#shown-once").await;
    assert!(
        secret.starts_with("whsec_"),
        "{secret} {}",
        text(&browser, "#status").await
    );
    browser.open(&app.url("/settings/webhooks")).await;
    let link = browser.find("#endpoints a", PATIENCE).await;
    browser.look_at("webhooks").await;
    browser.click(&link).await;
    browser.find("#deliveries", PATIENCE).await;
    let endpoint_page = browser.url().await;

    // A listing's event arrives at the receiver and shows in the log.
    let writer = app
        .key(&agency, &[Scope::ListingsWrite, Scope::ListingsRead])
        .await;
    let created = app
        .client
        .post(app.url("/api/v1/listings"))
        .header("X-API-Key", &writer)
        .header("X-Idempotency-Key", idempotency_key())
        .json(&json!({
            "address": "12 Harbour Street, Portsmouth",
            "owner_user_id": agency.owner_id.as_str(),
            "agent_one_id": agency.owner_id.as_str(),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        created.status(),
        StatusCode::CREATED,
        "{}",
        created.text().await.unwrap_or_default()
    );
    receiver.wait_for(1, PATIENCE).await;
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        browser.open(&endpoint_page).await;
        let log = text(&browser, "#deliveries").await;
        if log.contains("listing.created") && log.contains("succeeded") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{log}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    browser.look_at("endpoint").await;
    click(&browser, "button[id^=replay-]").await;
    browser.wait_for_text("#status", "Replayed", PATIENCE).await;
    receiver.wait_for(2, PATIENCE).await;

    // A test event, and the verdict the spec names.
    browser.open(&endpoint_page).await;
    click(&browser, "#send-test").await;
    browser
        .wait_for_text("#status", "Verdict: Verified", PATIENCE)
        .await;
    browser.open(&endpoint_page).await;
    browser.find("#deliveries", PATIENCE).await;
    browser.look_at("endpoint-log").await;

    // Rotating the secret: the new one is shown once, and the page says how
    // long the old one keeps signing.
    accept_confirmations(&browser).await;
    click(&browser, "#rotate-secret").await;
    browser
        .wait_for_text("#status", "Secret rotated", PATIENCE)
        .await;
    browser.open(&endpoint_page).await;
    browser
        .wait_for_text("#secret-overlap", "still signs deliveries too", PATIENCE)
        .await;
    browser.look_at("endpoint-rotated").await;

    // Standard Webhooks headers and an hourly budget of one, set on the page.
    click(&browser, "details.card > summary").await;
    browser
        .run(
            "document.querySelector('#edit-signature-scheme').value = 'standard_webhooks'; return true;",
            json!([]),
        )
        .await;
    browser
        .run(
            "document.querySelector('#edit-ordering').value = 'listing'; return true;",
            json!([]),
        )
        .await;
    type_into(&browser, "#edit-hourly-budget", "1").await;
    click(&browser, "#edit-endpoint button[type=submit]").await;
    browser.wait_for_text("#status", "Saved", PATIENCE).await;
    browser.open(&endpoint_page).await;
    browser
        .wait_for_text("#signature-scheme-shown", "Standard Webhooks", PATIENCE)
        .await;
    browser
        .wait_for_text("#hourly-budget-shown", "Hourly budget: 1 an hour", PATIENCE)
        .await;
    browser
        .wait_for_text("#ordering-shown", "Ordered per listing", PATIENCE)
        .await;
    // Two listings: the budget delivers the first and holds the second
    // back, which the page shows with its release time.
    let arrived = receiver.arrivals();
    for address in ["1 Budget Row", "2 Budget Row"] {
        let created = app
            .client
            .post(app.url("/api/v1/listings"))
            .header("X-API-Key", &writer)
            .header("X-Idempotency-Key", idempotency_key())
            .json(&json!({
                "address": address,
                "owner_user_id": agency.owner_id.as_str(),
                "agent_one_id": agency.owner_id.as_str(),
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), StatusCode::CREATED);
    }
    let first = receiver.wait_for(arrived + 1, PATIENCE).await;
    assert!(
        first[arrived].header("webhook-signature").is_some(),
        "signed the Standard Webhooks way"
    );
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        browser.open(&endpoint_page).await;
        let shown = browser
            .run(
                "const held = document.querySelector('#held-back'); return held ? held.textContent : '';",
                json!([]),
            )
            .await;
        if shown
            .as_str()
            .unwrap_or_default()
            .contains("1 delivery is held back")
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing shown held back: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(
        receiver.arrivals(),
        arrived + 1,
        "the second waits for its slot"
    );
    browser.look_at("endpoint-held-back").await;
    // Turning the budget off releases it now.
    click(&browser, "details.card > summary").await;
    accept_confirmations(&browser).await;
    click(&browser, "#turn-budget-off").await;
    browser
        .wait_for_text("#status", "Hourly budget off", PATIENCE)
        .await;
    receiver.wait_for(arrived + 2, PATIENCE).await;
    browser.open(&endpoint_page).await;
    browser
        .wait_for_text("#hourly-budget-shown", "No hourly budget", PATIENCE)
        .await;

    // The filter narrows the log to a status and a type.
    browser
        .open(&format!("{endpoint_page}?status=failed"))
        .await;
    browser.find("#no-deliveries", PATIENCE).await;
    browser
        .open(&format!("{endpoint_page}?event_type=listing.created"))
        .await;
    let filtered = text(&browser, "#deliveries tbody").await;
    assert!(
        filtered.contains("listing.created") && !filtered.contains("webhook.test_fire"),
        "{filtered}"
    );

    // Revoking asks first, then the key stops working.
    browser.open(&app.url("/settings/keys")).await;
    accept_confirmations(&browser).await;
    click(&browser, "button[id^=revoke-]").await;
    browser.wait_for_text("#status", "Revoked", PATIENCE).await;
    browser.open(&app.url("/settings/keys")).await;
    assert!(text(&browser, "#keys").await.contains("revoked"));
    let refused = app
        .get("/api/v1/listings")
        .header("X-API-Key", &plaintext)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);

    // The catalog, usage (the console's requests are counted) and changelog.
    browser.open(&app.url("/settings/events")).await;
    let catalog = text(&browser, "#event-listing\\.created").await;
    assert!(catalog.contains("listing.created"), "{catalog}");
    browser.look_at("events").await;
    browser.open(&app.url("/settings/usage")).await;
    let usage = text(&browser, "#usage-routes").await;
    // The console's runs as the key, and the one request with its plaintext.
    let as_key = format!("GET /api/v1/listings 200 {}", console_runs + 1);
    assert!(usage.contains(&as_key), "{as_key} in {usage}");
    assert!(
        usage.contains("POST /api/v1/agency/test-console 429 2"),
        "and the refused runs: {usage}"
    );
    browser.find("#usage-chart rect", PATIENCE).await;
    browser.look_at("usage").await;
    browser.open(&app.url("/settings/changelog")).await;
    browser.find("#changelog", PATIENCE).await;
    browser.look_at("changelog").await;

    // The sandbox switch shows the other environment's keys.
    browser.open(&app.url("/settings/keys")).await;
    click(&browser, "#env-sandbox").await;
    browser
        .wait_for_text("#keys", "Sandbox trial", PATIENCE)
        .await;
    assert!(!text(&browser, "#keys").await.contains("Portal key"));

    click(&browser, "#sign-out").await;
    browser.find("#sign-in", PATIENCE).await;
    browser.open(&app.url("/settings/keys")).await;
    browser.find("#sign-in", PATIENCE).await;
}

#[tokio::test]
async fn a_new_user_chooses_a_password_on_the_page_the_email_links_to() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let email = format!("{}@example.com", ulid::Ulid::generate()).to_lowercase();
    let account = app
        .store
        .accounts()
        .create(
            &agency.id,
            NewAccount {
                email: email.clone(),
                password: None,
                role: Some(Role::Agent),
                manager_id: Some(agency.owner_id.clone()),
                password_link_base: Some(app.url("/set-password")),
                ..NewAccount::default()
            },
        )
        .await
        .unwrap();
    let link = account
        .password_link
        .expect("a link for a user without a password");
    let token = crate::sessions::password_links::recorded_token(&app, &link.notification_id).await;
    let browser = Browser::start().await;

    browser.open(&app.url("/set-password")).await;
    browser
        .wait_for_text("#status", "needs the link", PATIENCE)
        .await;
    browser
        .open(&app.url(&format!("/set-password#token={token}")))
        .await;
    browser.look_at("set-password").await;
    type_into(&browser, "#new_password", "Corr3ct-Horse!").await;
    type_into(&browser, "#confirm_password", "Different-1!").await;
    click(&browser, "#set-password button[type=submit]").await;
    browser.wait_for_text("#status", "differ", PATIENCE).await;
    type_into(&browser, "#new_password", "short").await;
    type_into(&browser, "#confirm_password", "short").await;
    browser
        .run(
            "document.getElementById('new_password').removeAttribute('minlength');
             document.getElementById('confirm_password').removeAttribute('minlength'); return 1;",
            json!([]),
        )
        .await;
    click(&browser, "#set-password button[type=submit]").await;
    browser
        .wait_for_text("#status", "new_password", PATIENCE)
        .await;
    type_into(&browser, "#new_password", "Corr3ct-Horse!").await;
    type_into(&browser, "#confirm_password", "Corr3ct-Horse!").await;
    click(&browser, "#set-password button[type=submit]").await;
    browser.find("header.top", PATIENCE).await;
    // An agent is signed in, and the administrator's pages say whom to ask.
    browser
        .wait_for_text("#not-admin", "administrator", PATIENCE)
        .await;
    let me: Value = app
        .client
        .post(app.url("/api/v1/session"))
        .json(&json!({"email": email, "password": "Corr3ct-Horse!"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["user"]["email"], email.as_str());
}

/// The processes whose command line names `profile` (the session's Chromium).
fn chromium_processes_of(profile: &std::path::Path) -> usize {
    let needle = profile.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|entry| entry.file_name().to_string_lossy().parse::<u32>().is_ok())
                .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
                .filter(|cmdline| String::from_utf8_lossy(cmdline).contains(&needle))
                .count()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_finished_page_test_leaves_no_chromium_running() {
    let browser = Browser::start().await;
    browser.open("about:blank").await;
    let profile = browser.profile_dir().to_path_buf();
    assert!(
        chromium_processes_of(&profile) > 0,
        "the session's Chromium is found by its profile"
    );
    drop(browser);
    tests::deployment::eventually(PATIENCE, "the session's Chromium to quit", || async {
        (chromium_processes_of(&profile) == 0).then_some(())
    })
    .await;
}

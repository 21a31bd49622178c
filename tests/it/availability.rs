//! `GET /scheduling/availability` over HTTP on a fixed clock: working hours
//! sized by the package, booked shoots and their travel buffer, tenancy,
//! validation and scope; and the `admin set-working-hours` command.

use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use storage::api_keys::{KeyFormat, Scope};
use storage::ids::UserId;
use storage::listings::availability::WorkingHours;
use storage::people::users::Role;
use storage::{Clock, Environment, Tenant, Timestamp};
use tests::deployment::Deployment;
use tests::{Backend, TestAgency, TestApp, backend_tests};

use crate::listings::{Ctx, add_user};
use crate::support::{expect_error, expect_ok};

/// Monday 2026-06-01, 00:00 in Los Angeles (PDT): the tests' "now".
const NOW: &str = "2026-06-01T00:00:00-07:00";
/// That Monday as a window.
const MONDAY: &str = "from=2026-06-01T00:00:00-07:00&to=2026-06-02T00:00:00-07:00";

fn at(rfc3339: &str) -> Timestamp {
    Timestamp::from(
        DateTime::parse_from_rfc3339(rfc3339)
            .unwrap()
            .with_timezone(&Utc),
    )
}

async fn app_at_now(backend: Backend) -> TestApp {
    TestApp::builder(backend)
        .clock(Clock::manual(at(NOW)))
        .spawn()
        .await
}

/// Gives `photographer` the blocks `specs` (`mon=09:00-12:00`) in Los Angeles.
async fn set_hours(app: &TestApp, agency: &TestAgency, photographer: &UserId, specs: &[&str]) {
    let blocks: Vec<WorkingHours> = specs
        .iter()
        .map(|s| WorkingHours::parse(s).unwrap())
        .collect();
    app.store
        .availability()
        .set_working_hours(&agency.id, photographer, &blocks, "America/Los_Angeles")
        .await
        .unwrap();
}

async fn availability(app: &TestApp, key: &str, query: &str) -> reqwest::Response {
    app.get(&format!("/api/v1/scheduling/availability?{query}"))
        .header("X-API-Key", key)
        .send()
        .await
        .unwrap()
}

/// The slots of a 200 as (start, end, photographer).
async fn slots(app: &TestApp, key: &str, query: &str) -> Vec<(String, String, String)> {
    let body = expect_ok(availability(app, key, query).await).await;
    body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let field = |name: &str| s[name].as_str().unwrap().to_owned();
            (field("start"), field("end"), field("photographer_id"))
        })
        .collect()
}

/// Local start clock times (`09:30`) of `photographer`'s slots, in Los Angeles.
fn starts_of(slots: &[(String, String, String)], photographer: &UserId) -> Vec<String> {
    slots
        .iter()
        .filter(|(_, _, p)| p == photographer.as_str())
        .map(|(start, _, _)| start[11..16].to_owned())
        .collect()
}

fn hhmm(times: &[&str]) -> Vec<String> {
    times.iter().map(|t| (*t).to_owned()).collect()
}

backend_tests! {
    async fn slots_fill_working_hours_sized_by_the_package(backend) {
        let app = app_at_now(backend).await;
        let agency = app.agency().await;
        let key = app.key(&agency, &[Scope::SchedulingRead]).await;
        let morning = add_user(&app, &agency, Role::Photographer).await;
        set_hours(&app, &agency, &morning, &["mon=09:00-12:00"]).await;
        let default_week = add_user(&app, &agency, Role::Photographer).await;
        let retired = add_user(&app, &agency, Role::Photographer).await;
        let tenant = Tenant::new(agency.id.clone(), Environment::Live);
        app.store.users().set_active(&tenant, &retired, false).await.unwrap();
        add_user(&app, &agency, Role::Agent).await;

        let query = format!("address=1%20Main%20St&package=essentials&{MONDAY}");
        let body = expect_ok(availability(&app, &key, &query).await).await;
        assert_eq!(body["timezone"], "America/Los_Angeles");
        assert_eq!(
            body["items"][0],
            serde_json::json!({
                "start": "2026-06-01T09:00:00.000-07:00",
                "end": "2026-06-01T10:00:00.000-07:00",
                "photographer_id": body["items"][0]["photographer_id"],
            })
        );
        let all = slots(&app, &key, &query).await;
        // 60-minute shoots every 30 minutes, each entirely inside the hours.
        assert_eq!(starts_of(&all, &morning), hhmm(&["09:00", "09:30", "10:00", "10:30", "11:00"]));
        // No hours set: Monday to Friday 09:00-17:00 in Los Angeles.
        assert_eq!(starts_of(&all, &default_week).len(), 15);
        assert_eq!(starts_of(&all, &default_week).last().unwrap(), "16:00");
        // Only active photographers; sorted by start, then photographer.
        assert!(all.iter().all(|(_, _, p)| p == morning.as_str() || p == default_week.as_str()));
        let mut sorted = all.clone();
        sorted.sort_by(|a, b| (&a.0, &a.2).cmp(&(&b.0, &b.2)));
        assert_eq!(all, sorted);

        // A premium shoot is 150 minutes: two fit in the morning.
        let premium = slots(&app, &key, &format!("address=1%20Main%20St&package=premium&{MONDAY}")).await;
        assert_eq!(starts_of(&premium, &morning), hhmm(&["09:00", "09:30"]));
        assert!(premium.iter().any(|(start, end, p)| p == morning.as_str()
            && start == "2026-06-01T09:30:00.000-07:00" && end == "2026-06-01T12:00:00.000-07:00"));

        // Another zone shows the same instants with its own offset.
        let utc = expect_ok(availability(&app, &key, &format!("{query}&timezone=UTC")).await).await;
        assert_eq!(utc["timezone"], "UTC");
        assert_eq!(utc["items"][0]["start"], "2026-06-01T16:00:00.000+00:00");

        // Without from and to: now to 14 days later, two Mondays of the morning hours.
        let fortnight = slots(&app, &key, "address=1%20Main%20St&package=essentials").await;
        assert_eq!(starts_of(&fortnight, &morning).len(), 10);
    }

    async fn a_booked_shoot_removes_slots_with_its_travel_buffer(backend) {
        let ctx = Ctx::with_app(app_at_now(backend).await).await;
        let app = &ctx.app;
        let key = app.key(&ctx.agency, &[Scope::SchedulingRead]).await;
        let photographer = add_user(app, &ctx.agency, Role::Photographer).await;
        // A standard (90 minute) shoot at 12:00 blocks 11:30-14:00 with the buffer.
        let booked = ctx.listing().await;
        app.store.appointments().schedule(&ctx.live(), &booked, at("2026-06-01T12:00:00-07:00")).await.unwrap();
        app.store.appointments().assign_photographer(&ctx.live(), &booked, &photographer).await.unwrap();
        // A shoot nobody is assigned to blocks nobody.
        let unassigned = ctx.listing().await;
        app.store.appointments().schedule(&ctx.live(), &unassigned, at("2026-06-01T15:00:00-07:00")).await.unwrap();

        let query = format!("address=1%20Main%20St&package=essentials&{MONDAY}");
        let all = slots(app, &key, &query).await;
        assert_eq!(
            starts_of(&all, &photographer),
            hhmm(&["09:00", "09:30", "10:00", "10:30", "14:00", "14:30", "15:00", "15:30", "16:00"])
        );

        // The live booking does not block the sandbox.
        let sandbox = app
            .key_with(&ctx.agency, &[Scope::SchedulingRead], Environment::Sandbox, KeyFormat::Ma)
            .await;
        assert_eq!(starts_of(&slots(app, &sandbox, &query).await, &photographer).len(), 15);

        // Past slots are left out: at 10:10 the first one is 10:30.
        app.store.clock().advance_seconds(10 * 3600 + 600);
        let later = slots(app, &key, &query).await;
        assert_eq!(starts_of(&later, &photographer)[0], "10:30");
    }

    async fn other_agencies_photographers_never_appear(backend) {
        let app = app_at_now(backend).await;
        let agency = app.agency().await;
        let key = app.key(&agency, &[Scope::SchedulingRead]).await;
        let ours = add_user(&app, &agency, Role::Photographer).await;
        let other = app.agency().await;
        let theirs = add_user(&app, &other, Role::Photographer).await;
        set_hours(&app, &other, &theirs, &["mon=06:00-20:00"]).await;

        let all = slots(&app, &key, &format!("address=1%20Main%20St&package=standard&{MONDAY}")).await;
        assert!(!all.is_empty());
        assert!(all.iter().all(|(_, _, p)| p == ours.as_str()), "{all:?}");
        // Nor can an agency set another agency's photographer's hours.
        let stolen = app
            .store
            .availability()
            .set_working_hours(&agency.id, &theirs, &[], "America/Los_Angeles")
            .await;
        assert!(matches!(stolen, Err(storage::StorageError::NotFound(_))), "{stolen:?}");
    }

    async fn bad_queries_are_validation_failures_naming_the_field(backend) {
        let app = app_at_now(backend).await;
        let agency = app.agency().await;
        let key = app.key(&agency, &[Scope::SchedulingRead]).await;
        let long_address = "a".repeat(501);
        let cases: Vec<(String, &str)> = vec![
            ("package=standard".into(), "address"),
            ("address=%20%20&package=standard".into(), "address"),
            (format!("address={long_address}&package=standard"), "address"),
            ("address=1%20Main%20St".into(), "package"),
            ("address=1%20Main%20St&package=gold".into(), "package"),
            ("address=1%20Main%20St&package=standard&timezone=Mars%2FOlympus".into(), "timezone"),
            ("address=1%20Main%20St&package=standard&from=tomorrow".into(), "from"),
            ("address=1%20Main%20St&package=standard&to=2026-06-01".into(), "to"),
            // Inverted and empty windows.
            ("address=1%20Main%20St&package=standard&from=2026-06-05T00:00:00Z&to=2026-06-04T00:00:00Z".into(), "to"),
            ("address=1%20Main%20St&package=standard&from=2026-06-05T00:00:00Z&to=2026-06-05T00:00:00Z".into(), "to"),
            // 31 days is the widest window.
            ("address=1%20Main%20St&package=standard&from=2026-06-01T00:00:00Z&to=2026-07-02T00:00:01Z".into(), "to"),
            ("address=1%20Main%20St&package=standard&radius=5".into(), "radius"),
        ];
        for (query, field) in cases {
            let body = expect_error(
                availability(&app, &key, &query).await,
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation.failed",
            )
            .await;
            assert!(body["error"]["details"]["fields"][field].is_string(), "{query}: {body}");
        }
        // Every bad field is reported at once.
        let body = expect_error(
            availability(&app, &key, "package=gold&timezone=Nowhere").await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation.failed",
        )
        .await;
        for field in ["address", "package", "timezone"] {
            assert!(body["error"]["details"]["fields"][field].is_string(), "{body}");
        }
        // Exactly 31 days is accepted.
        expect_ok(
            availability(
                &app,
                &key,
                "address=1%20Main%20St&package=standard&from=2026-06-01T00:00:00Z&to=2026-07-02T00:00:00Z",
            )
            .await,
        )
        .await;
    }

    async fn a_key_without_scheduling_read_is_refused(backend) {
        let app = app_at_now(backend).await;
        let agency = app.agency().await;
        let key = app.key(&agency, &[Scope::ListingsRead, Scope::UsersRead]).await;
        let query = "address=1%20Main%20St&package=standard";
        expect_error(availability(&app, &key, query).await, StatusCode::FORBIDDEN, "auth.scope_denied").await;
        let anonymous = app
            .get(&format!("/api/v1/scheduling/availability?{query}"))
            .send()
            .await
            .unwrap();
        expect_error(anonymous, StatusCode::UNAUTHORIZED, "auth.missing_key").await;
    }

    async fn operators_set_working_hours_from_the_command_line(backend) {
        let deployment = Deployment::new(backend).await;
        let agency = deployment.admin_ok(&["create-agency", "--name", "Acme"]);
        let agency_id = agency["agency_id"].as_str().unwrap().to_owned();
        let owner = agency["owner_user_id"].as_str().unwrap().to_owned();
        let user = deployment.admin_ok(&[
            "create-user", "--agency", &agency_id, "--role", "photographer", "--email", "pat@example.com",
        ]);
        let photographer = user["user_id"].as_str().unwrap().to_owned();

        let set = deployment.admin_ok(&[
            "set-working-hours", "--agency", &agency_id, "--photographer", &photographer,
            "--hours", "tue=13:00-18:00", "--hours", "mon=08:30-12:00", "--hours", "mon=13:00-17:00",
            "--timezone", "America/New_York",
        ]);
        assert_eq!(
            set,
            serde_json::json!({
                "photographer_id": photographer,
                "hours": ["mon=08:30-12:00", "mon=13:00-17:00", "tue=13:00-18:00"],
                "timezone": "America/New_York",
            })
        );
        // No --hours restores the default week.
        let reset = deployment.admin_ok(&["set-working-hours", "--agency", &agency_id, "--photographer", &photographer]);
        assert_eq!(reset["hours"].as_array().unwrap().len(), 5);
        assert_eq!(reset["hours"][0], "mon=09:00-17:00");
        assert_eq!(reset["timezone"], "America/Los_Angeles");

        let hours = |extra: &[&'static str]| {
            let mut args = vec!["set-working-hours", "--agency", agency_id.as_str(), "--photographer", photographer.as_str()];
            args.extend_from_slice(extra);
            deployment.admin_err(&args, "validation.failed");
        };
        hours(&["--hours", "monday=9-5"]);
        hours(&["--hours", "mon=12:00-09:00"]);
        hours(&["--hours", "mon=09:00-12:00", "--hours", "mon=11:00-13:00"]);
        hours(&["--hours", "mon=09:00-12:00", "--timezone", "Mars/Olympus"]);
        hours(&["--timezone", "UTC"]);
        // The owner is not a photographer; unknown people are not found.
        deployment.admin_err(&["set-working-hours", "--agency", &agency_id, "--photographer", &owner], "validation.failed");
        let stranger = UserId::generate().to_string();
        deployment.admin_err(&["set-working-hours", "--agency", &agency_id, "--photographer", &stranger], "not_found");
    }
}

//! `GET /users` and `GET /users/{user_id}` over HTTP: order, fields, filters,
//! pagination and cursors, and tenancy.

use reqwest::StatusCode;
use serde_json::Value;
use storage::api_keys::Scope;
use storage::ids::UserId;
use storage::people::users::{NewUser, Role};
use tests::{TestAgency, TestApp, backend_tests};

use crate::support::{expect_error, expect_ok, sql};

async fn add_user(app: &TestApp, agency: &TestAgency, role: Role, name: &str) -> UserId {
    app.store
        .users()
        .create(
            &agency.id,
            NewUser {
                role,
                email: Some(
                    format!("{name}.{}@example.com", ulid::Ulid::generate()).to_lowercase(),
                ),
                name: Some(name.to_owned()),
                manager_id: Some(agency.owner_id.clone()),
            },
        )
        .await
        .unwrap()
        .id
}

async fn list(app: &TestApp, key: &str, query: &str) -> Value {
    expect_ok(
        app.get(&format!("/api/v1/users{query}"))
            .header("X-API-Key", key)
            .send()
            .await
            .unwrap(),
    )
    .await
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["id"].as_str().unwrap().to_owned())
        .collect()
}

backend_tests! {
    async fn users_are_listed_oldest_first_with_the_spec_fields(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let key = app.key(&agency, &[Scope::UsersRead]).await;
        let ana = add_user(&app, &agency, Role::Agent, "ana").await;
        let bo = add_user(&app, &agency, Role::Photographer, "bo").await;
        add_user(&app, &agency, Role::Admin, "platform").await;
        let other = app.agency().await;
        add_user(&app, &other, Role::Agent, "stranger").await;

        let page = list(&app, &key, "").await;
        assert_eq!(ids(&page), vec![agency.owner_id.to_string(), ana.to_string(), bo.to_string()]);
        assert_eq!(page["total"], 3);
        assert_eq!(page["next_cursor"], "");
        let first = &page["items"][1];
        for field in ["id", "role", "is_active", "createdAt", "managerId", "name", "email"] {
            assert!(first.get(field).is_some(), "{field} in {first}");
        }
        assert_eq!(first["role"], "agent");
        assert_eq!(first["is_active"], true);
        assert_eq!(first["managerId"], agency.owner_id.as_str());
        assert!(!first.to_string().contains("password"));
    }

    async fn role_and_active_filters_apply(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let key = app.key(&agency, &[Scope::UsersRead]).await;
        let ana = add_user(&app, &agency, Role::Agent, "ana").await;
        let cy = add_user(&app, &agency, Role::Agent, "cy").await;
        add_user(&app, &agency, Role::Viewer, "vi").await;
        sql::deactivate_user(app.store.db(), cy.as_str()).await;

        assert_eq!(ids(&list(&app, &key, "?role=agent").await), vec![ana.to_string(), cy.to_string()]);
        assert_eq!(ids(&list(&app, &key, "?role=agent&active=true").await), vec![ana.to_string()]);
        let inactive = list(&app, &key, "?active=false").await;
        assert_eq!(ids(&inactive), vec![cy.to_string()]);
        assert_eq!(inactive["items"][0]["is_active"], false);
        assert_eq!(list(&app, &key, "").await["total"], 4);
    }

    async fn bad_filters_and_limits_are_validation_failures(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let key = app.key(&agency, &[Scope::UsersRead]).await;
        for (query, field) in [
            ("?role=admin", "role"),
            ("?role=super_admin", "role"),
            ("?role=wizard", "role"),
            ("?active=maybe", "active"),
            ("?limit=0", "limit"),
            ("?limit=201", "limit"),
            ("?limit=-1", "limit"),
            ("?limit=ten", "limit"),
            ("?colour=red", "colour"),
        ] {
            let response = app.get(&format!("/api/v1/users{query}")).header("X-API-Key", &key).send().await.unwrap();
            let body = expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "validation.failed").await;
            assert!(body["error"]["details"]["fields"][field].is_string(), "{query}: {body}");
        }
    }

    async fn cursors_page_through_stably_while_users_are_added(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let key = app.key(&agency, &[Scope::UsersRead]).await;
        for n in 0..4 {
            add_user(&app, &agency, Role::Agent, &format!("u{n}")).await;
        }
        let first = list(&app, &key, "?limit=2").await;
        assert_eq!(first["total"], 5);
        let cursor = first["next_cursor"].as_str().unwrap().to_owned();
        assert!(!cursor.is_empty());

        // A user created between pages lands at the end, never shifting pages.
        let late = add_user(&app, &agency, Role::Agent, "late").await;
        let mut seen = ids(&first);
        let mut next = cursor;
        while !next.is_empty() {
            let page = list(&app, &key, &format!("?limit=2&cursor={next}")).await;
            seen.extend(ids(&page));
            next = page["next_cursor"].as_str().unwrap().to_owned();
        }
        assert_eq!(seen.len(), 6);
        assert_eq!(seen.last(), Some(&late.to_string()));
        let mut unique = seen.clone();
        unique.dedup();
        assert_eq!(unique, seen);
    }

    async fn tampered_or_foreign_cursors_are_invalid_cursor(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let key = app.key(&agency, &[Scope::UsersRead]).await;
        for n in 0..3 {
            add_user(&app, &agency, Role::Agent, &format!("u{n}")).await;
        }
        let cursor = list(&app, &key, "?limit=1").await["next_cursor"].as_str().unwrap().to_owned();

        let mut tampered = cursor.clone().into_bytes();
        let last = tampered.len() - 3;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();

        let other = app.agency().await;
        let other_key = app.key(&other, &[Scope::UsersRead]).await;
        for (key, query) in [
            (&key, format!("?limit=1&cursor={tampered}")),
            (&key, "?cursor=not-base64!".to_owned()),
            (&key, "?cursor=AAAA".to_owned()),
            (&key, format!("?limit=1&role=agent&cursor={cursor}")),
            (&other_key, format!("?limit=1&cursor={cursor}")),
        ] {
            let response = app.get(&format!("/api/v1/users{query}")).header("X-API-Key", key).send().await.unwrap();
            expect_error(response, StatusCode::UNPROCESSABLE_ENTITY, "invalid_cursor").await;
        }
    }

    async fn another_agencys_user_is_user_not_found(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let key = app.key(&agency, &[Scope::UsersRead]).await;
        let mine = add_user(&app, &agency, Role::Agent, "mine").await;
        let other = app.agency().await;
        let theirs = add_user(&app, &other, Role::Agent, "theirs").await;
        let platform = add_user(&app, &agency, Role::SuperAdmin, "root").await;

        let own = expect_ok(app.get(&format!("/api/v1/users/{mine}")).header("X-API-Key", &key).send().await.unwrap()).await;
        assert_eq!(own["id"], mine.as_str());

        for id in [theirs.to_string(), other.owner_id.to_string(), platform.to_string(), "usr_nonsense".into(), "42".into()] {
            let response = app.get(&format!("/api/v1/users/{id}")).header("X-API-Key", &key).send().await.unwrap();
            expect_error(response, StatusCode::NOT_FOUND, "user_not_found").await;
        }
    }
}

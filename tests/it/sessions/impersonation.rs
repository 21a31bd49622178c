//! Impersonation: brokers impersonate strictly lower roles of their own
//! agency, keep their own rules while doing so, and never an equal or higher
//! role.

use reqwest::StatusCode;
use storage::ids::UserId;
use storage::people::agencies::AgencyKind;
use storage::people::users::{NewUser, Role};
use tests::{TestApp, backend_tests};

use super::{PASSWORD, account, owner_login, sign_in, unique_email};
use crate::support::{expect_error, expect_ok, sql};

backend_tests! {
    async fn brokers_impersonate_strictly_lower_roles_of_their_own_agency(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency_of_kind(AgencyKind::Broker).await;
        let broker_email = owner_login(&app, &agency).await;
        let (agent, agent_email) = account(&app, &agency, Role::Agent).await;
        let (viewer, _) = account(&app, &agency, Role::Viewer).await;
        let other = app.agency().await;
        let (stranger, _) = account(&app, &other, Role::Viewer).await;
        let broker = sign_in(&app, &broker_email).await;
        let impersonate = |id: &UserId| app.client.post(app.url(&format!("/api/v1/users/{id}/impersonate")));

        let no_token = broker.cookie_only(impersonate(&agent)).send().await.unwrap();
        expect_error(no_token, StatusCode::FORBIDDEN, "auth.csrf_failed").await;
        let foreign = broker.send(impersonate(&stranger)).send().await.unwrap();
        expect_error(foreign, StatusCode::NOT_FOUND, "user_not_found").await;
        let garbage = broker.send(app.client.post(app.url("/api/v1/users/usr_nope/impersonate"))).send().await.unwrap();
        expect_error(garbage, StatusCode::NOT_FOUND, "user_not_found").await;
        let own = broker.send(impersonate(&agency.owner_id)).send().await.unwrap();
        expect_error(own, StatusCode::FORBIDDEN, "permission_denied").await;

        let switched = expect_ok(broker.send(impersonate(&agent)).send().await.unwrap()).await;
        assert_eq!(switched["user"]["id"], agent.as_str());
        assert_eq!(switched["impersonator_id"], agency.owner_id.as_str());
        let current = expect_ok(broker.cookie_only(app.get("/api/v1/session")).send().await.unwrap()).await;
        assert_eq!(current["user"]["id"], agent.as_str());
        // Rules stay those of the real user: a broker moves on to the viewer.
        let onward = expect_ok(broker.send(impersonate(&viewer)).send().await.unwrap()).await;
        assert_eq!(onward["user"]["id"], viewer.as_str());
        assert_eq!(onward["impersonator_id"], agency.owner_id.as_str());
        // Acting as a viewer, the session manages no keys.
        let keys = broker.cookie_only(app.get("/api/v1/agency/api-keys")).send().await.unwrap();
        expect_error(keys, StatusCode::FORBIDDEN, "permission_denied").await;
        let back = expect_ok(
            broker.send(app.client.delete(app.url("/api/v1/session/impersonation"))).send().await.unwrap(),
        )
        .await;
        assert_eq!(back["user"]["id"], agency.owner_id.as_str());
        assert!(back["impersonator_id"].is_null());

        // An agent is below broker: no impersonation at all.
        let agent_session = sign_in(&app, &agent_email).await;
        let refused = agent_session.send(impersonate(&viewer)).send().await.unwrap();
        expect_error(refused, StatusCode::FORBIDDEN, "permission_denied").await;
        // A deactivated target cannot be impersonated.
        sql::deactivate_user(app.store.db(), viewer.as_str()).await;
        let inactive = broker.send(impersonate(&viewer)).send().await.unwrap();
        expect_error(inactive, StatusCode::FORBIDDEN, "permission_denied").await;
    }

    async fn a_broker_cannot_impersonate_an_equal_or_higher_role(backend) {
        let app = TestApp::spawn(backend).await;
        let agency = app.agency().await;
        let owner_email = owner_login(&app, &agency).await;
        let brokers: Vec<UserId> = {
            let mut ids = Vec::new();
            for _ in 0..2 {
                let user = app
                    .store
                    .users()
                    .create(&agency.id, NewUser { role: Role::Broker, email: Some(unique_email()), name: None, manager_id: None })
                    .await
                    .unwrap();
                ids.push(user.id);
            }
            ids
        };
        let email = unique_email();
        sql::set_user_email(app.store.db(), brokers[0].as_str(), &email).await;
        app.store.accounts().set_password(&agency.id, &brokers[0], PASSWORD).await.unwrap();
        let broker = sign_in(&app, &email).await;
        for target in [&brokers[1], &agency.owner_id] {
            let response = broker
                .send(app.client.post(app.url(&format!("/api/v1/users/{target}/impersonate"))))
                .send()
                .await
                .unwrap();
            expect_error(response, StatusCode::FORBIDDEN, "permission_denied").await;
        }
        // The media agency owner is above a broker.
        let owner = sign_in(&app, &owner_email).await;
        let response = owner
            .send(app.client.post(app.url(&format!("/api/v1/users/{}/impersonate", brokers[1]))))
            .send()
            .await
            .unwrap();
        expect_ok(response).await;
    }
}

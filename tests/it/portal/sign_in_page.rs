//! The sign-in form's refusals, each a page saying what to do: missing
//! fields (422), a post from another site (403), a wrong password (401, the
//! same words whether or not the account exists), and too many attempts for
//! one e-mail (429 with Retry-After).

use reqwest::StatusCode;
use tests::{Backend, TestApp};

use crate::sessions::owner_login;

async fn post(app: &TestApp, body: &str, site: Option<&str>) -> reqwest::Response {
    let mut request = app
        .client
        .post(app.url("/settings/sign-in"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body.to_owned());
    if let Some(site) = site {
        request = request.header("Sec-Fetch-Site", site);
    }
    request.send().await.unwrap()
}

async fn page(response: reqwest::Response, status: StatusCode) -> String {
    assert_eq!(response.status(), status);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html"),
        "a page, not the JSON envelope"
    );
    response.text().await.unwrap()
}

#[tokio::test]
async fn the_sign_in_form_refuses_with_a_page_that_says_what_to_do() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let email = owner_login(&app, &agency).await;
    let encoded = email.replace('@', "%40");

    let empty = page(
        post(&app, "email=&password=", None).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert!(
        empty.contains("Enter your email and your password"),
        "{empty}"
    );
    let foreign = page(
        post(
            &app,
            &format!("email={encoded}&password=x"),
            Some("cross-site"),
        )
        .await,
        StatusCode::FORBIDDEN,
    )
    .await;
    assert!(
        foreign.contains("Another site tried to sign you in"),
        "{foreign}"
    );

    let wrong = page(
        post(&app, &format!("email={encoded}&password=Wrong-1!"), None).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    let nobody = page(
        post(&app, "email=nobody%40example.com&password=Wrong-1!", None).await,
        StatusCode::UNAUTHORIZED,
    )
    .await;
    let message = |html: &str| {
        let start = html.find("id=\"sign-in-error\">").unwrap();
        html[start..].split('<').next().unwrap().to_owned()
    };
    assert_eq!(message(&wrong), message(&nobody), "no account enumeration");

    // Ten attempts a minute per e-mail; the first wrong one above was one.
    let mut last = None;
    for _ in 0..10 {
        last = Some(post(&app, &format!("email={encoded}&password=Wrong-1!"), None).await);
    }
    let limited = last.unwrap();
    assert!(limited.headers().contains_key("retry-after"));
    let limited = page(limited, StatusCode::TOO_MANY_REQUESTS).await;
    assert!(limited.contains("Wait a minute"), "{limited}");

    // A signed-in redirect stays on this site whatever `next` says.
    let other = app.agency().await;
    let other_email = owner_login(&app, &other).await.replace('@', "%40");
    let no_redirects = tests::app::base_client()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let signed_in = no_redirects
        .post(app.url("/settings/sign-in"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!(
            "email={other_email}&password={}&next=https%3A%2F%2Felsewhere.example%2F",
            crate::sessions::PASSWORD.replace('!', "%21")
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), StatusCode::SEE_OTHER);
    assert_eq!(signed_in.headers()["location"], "/settings/keys");
    assert!(signed_in.headers().contains_key("set-cookie"));
}

/// Login CSRF: another site's form posting the attacker's own, correct
/// credentials would sign the victim's browser in to the attacker's account.
/// A browser names the page's origin in `Origin` even where it sends no
/// `Sec-Fetch-Site`; either naming another site refuses, with no session.
#[tokio::test]
async fn a_sign_in_posted_from_another_origin_opens_no_session() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agency = app.agency().await;
    let email = owner_login(&app, &agency).await.replace('@', "%40");
    let body = format!(
        "email={email}&password={}",
        crate::sessions::PASSWORD.replace('!', "%21")
    );
    let no_redirects = tests::app::base_client()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let sign_in = |origin: Option<String>, site: Option<&'static str>| {
        let mut request = no_redirects
            .post(app.url("/settings/sign-in"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body.clone());
        if let Some(origin) = origin {
            request = request.header("Origin", origin);
        }
        if let Some(site) = site {
            request = request.header("Sec-Fetch-Site", site);
        }
        request.send()
    };
    for (origin, site) in [
        (Some("https://evil.example".to_owned()), None),
        (Some("null".to_owned()), None),
        (Some("https://evil.example".to_owned()), Some("same-origin")),
        (None, Some("same-site")),
    ] {
        let refused = sign_in(origin.clone(), site).await.unwrap();
        assert!(
            !refused.headers().contains_key("set-cookie"),
            "no session for {origin:?} {site:?}"
        );
        let refused = page(refused, StatusCode::FORBIDDEN).await;
        assert!(
            refused.contains("Another site tried to sign you in"),
            "{refused}"
        );
    }
    // The portal's own form (its origin, or a browser that names none) signs in.
    for (origin, site) in [
        (Some(app.base_url.clone()), Some("same-origin")),
        (Some(app.base_url.clone()), None),
        (None, None),
    ] {
        let signed_in = sign_in(origin, site).await.unwrap();
        assert_eq!(signed_in.status(), StatusCode::SEE_OTHER);
        assert!(signed_in.headers().contains_key("set-cookie"));
    }
}

/// Over HTTPS browsers speak HTTP/2 and send `:authority`, not `Host`: the
/// portal's own form still signs in, and another origin still does not.
#[tokio::test]
async fn the_sign_in_form_works_over_http2() {
    let app = TestApp::builder(Backend::Sqlite).tls().spawn().await;
    let agency = app.agency().await;
    let email = owner_login(&app, &agency).await.replace('@', "%40");
    let body = format!(
        "email={email}&password={}",
        crate::sessions::PASSWORD.replace('!', "%21")
    );
    // The test's own certificate; redirects are looked at, not followed.
    let client = tests::app::base_client()
        .danger_accept_invalid_certs(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let post = |origin: String| {
        client
            .post(app.url("/settings/sign-in"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Origin", origin)
            .body(body.clone())
            .send()
    };
    let own = post(app.base_url.clone()).await.unwrap();
    assert_eq!(own.version(), reqwest::Version::HTTP_2, "browsers' HTTPS");
    assert_eq!(own.status(), StatusCode::SEE_OTHER);
    assert!(own.headers().contains_key("set-cookie"));
    let foreign = post("https://evil.example".to_owned()).await.unwrap();
    page(foreign, StatusCode::FORBIDDEN).await;
}

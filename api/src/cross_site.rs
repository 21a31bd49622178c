//! Refusing requests another site's page made a browser send. A form on any
//! page can post to us, and the browser attaches what it remembers for us
//! (basic credentials on the ops listener) or lets the answer sign it in (a
//! login form posted for the attacker's account). Browsers name the page that
//! started a request in `Sec-Fetch-Site` and `Origin`; both are checked, and
//! either one naming another site refuses the request. Scripts and command-
//! line clients send neither and are not affected: they carry no ambient
//! credentials a page could borrow.

use axum::http::{HeaderMap, Method, header};

/// Whether a request that changes something was started by another site's
/// page. Reads are never refused.
pub fn is_cross_site(method: &Method, headers: &HeaderMap) -> bool {
    if method.is_safe() {
        return false;
    }
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(site) = text("sec-fetch-site")
        && !matches!(site, "same-origin" | "none")
    {
        return true;
    }
    match text(header::ORIGIN.as_str()) {
        None => false,
        Some(origin) => match text(header::HOST.as_str()) {
            Some(host) => !same_authority(origin, host),
            // No Host to compare with: a browser's request always has one.
            None => true,
        },
    }
}

/// Whether `origin` (`https://host:port`, or `null` from an opaque origin)
/// names the authority the request was sent to (`host`), default ports aside.
fn same_authority(origin: &str, host: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        // `null`: a sandboxed frame, a file, a redirect across sites.
        return false;
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "https" => ":443",
        "http" => ":80",
        _ => return false,
    };
    let without_default = |authority: &str| {
        let lower = authority.trim().to_ascii_lowercase();
        lower
            .strip_suffix(default_port)
            .map_or(lower.clone(), str::to_owned)
    };
    without_default(authority) == without_default(host)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn fetch_metadata_naming_another_site_refuses() {
        let post = Method::POST;
        assert!(!is_cross_site(
            &post,
            &headers(&[("sec-fetch-site", "same-origin")])
        ));
        assert!(!is_cross_site(
            &post,
            &headers(&[("sec-fetch-site", "none")])
        ));
        assert!(is_cross_site(
            &post,
            &headers(&[("sec-fetch-site", "cross-site")])
        ));
        assert!(is_cross_site(
            &post,
            &headers(&[("sec-fetch-site", "same-site")])
        ));
    }

    #[test]
    fn an_origin_other_than_the_host_refuses() {
        let post = Method::POST;
        let same = headers(&[
            ("origin", "https://ops.example:8081"),
            ("host", "ops.example:8081"),
        ]);
        assert!(!is_cross_site(&post, &same));
        let default_port = headers(&[
            ("origin", "https://api.example"),
            ("host", "api.example:443"),
        ]);
        assert!(!is_cross_site(&post, &default_port));
        let other = headers(&[("origin", "https://evil.example"), ("host", "api.example")]);
        assert!(is_cross_site(&post, &other));
        let opaque = headers(&[("origin", "null"), ("host", "api.example")]);
        assert!(is_cross_site(&post, &opaque));
        let no_host = headers(&[("origin", "https://api.example")]);
        assert!(is_cross_site(&post, &no_host));
    }

    #[test]
    fn both_headers_are_checked() {
        let post = Method::POST;
        // A same-origin claim does not excuse a foreign Origin, nor the reverse.
        let foreign_origin = headers(&[
            ("sec-fetch-site", "same-origin"),
            ("origin", "https://evil.example"),
            ("host", "api.example"),
        ]);
        assert!(is_cross_site(&post, &foreign_origin));
        let foreign_site = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("origin", "https://api.example"),
            ("host", "api.example"),
        ]);
        assert!(is_cross_site(&post, &foreign_site));
    }

    #[test]
    fn scripts_and_reads_pass() {
        assert!(!is_cross_site(&Method::POST, &HeaderMap::new()));
        let other = headers(&[("origin", "https://evil.example"), ("host", "api.example")]);
        assert!(!is_cross_site(&Method::GET, &other));
    }
}

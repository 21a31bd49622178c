//! Refusing requests another site's page made a browser send. A form on any
//! page can post to us, and the browser attaches what it remembers for us
//! (basic credentials on the ops listener) or lets the answer sign it in (a
//! login form posted for the attacker's account). Browsers name the page that
//! started a request in `Sec-Fetch-Site` and `Origin`; both are checked, and
//! either one naming another site refuses the request. Scripts and command-
//! line clients send neither and are not affected: they carry no ambient
//! credentials a page could borrow.

use axum::http::{HeaderMap, Method, Uri, header};

/// Whether a request that changes something was started by another site's
/// page. Reads are never refused. The request's own origin is the authority
/// it was sent to (`Host`, or over HTTP/2, where browsers send no `Host`, the
/// URI's authority), or one of `own_origins` (the service's public base
/// URLs, for a proxy that rewrites `Host`).
pub fn is_cross_site(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    own_origins: &[&str],
) -> bool {
    if method.is_safe() {
        return false;
    }
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(site) = text("sec-fetch-site")
        && !matches!(site, "same-origin" | "none")
    {
        return true;
    }
    let Some(origin) = text(header::ORIGIN.as_str()) else {
        return false;
    };
    if own_origins
        .iter()
        .any(|own| same_origin(origin, own.trim_end_matches('/')))
    {
        return false;
    }
    match text(header::HOST.as_str()).or_else(|| uri.authority().map(|a| a.as_str())) {
        Some(authority) => !same_authority(origin, authority),
        // Nothing to compare with: a browser's request always names one.
        None => true,
    }
}

/// The scheme and authority of an origin, default port dropped, lower case.
fn normalised(origin: &str) -> Option<(String, String)> {
    let (scheme, authority) = origin.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => ":443",
        "http" => ":80",
        _ => return None,
    };
    let authority = authority.trim().trim_end_matches('/').to_ascii_lowercase();
    let authority = authority
        .strip_suffix(default_port)
        .map_or(authority.clone(), str::to_owned);
    Some((scheme, authority))
}

/// Whether two origins are one.
fn same_origin(origin: &str, own: &str) -> bool {
    matches!((normalised(origin), normalised(own)), (Some(a), Some(b)) if a == b)
}

/// Whether `origin` (`https://host:port`, or `null` from an opaque origin)
/// names the authority the request was sent to, default ports aside.
fn same_authority(origin: &str, authority: &str) -> bool {
    // `null` (a sandboxed frame, a file, a redirect across sites) is no origin.
    let Some((scheme, origin_authority)) = normalised(origin) else {
        return false;
    };
    let target = format!("{scheme}://{authority}");
    matches!(normalised(&target), Some((_, target)) if target == origin_authority)
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

    fn refused(pairs: &[(&'static str, &'static str)]) -> bool {
        is_cross_site(&Method::POST, &Uri::default(), &headers(pairs), &[])
    }

    #[test]
    fn fetch_metadata_naming_another_site_refuses() {
        assert!(!refused(&[("sec-fetch-site", "same-origin")]));
        assert!(!refused(&[("sec-fetch-site", "none")]));
        assert!(refused(&[("sec-fetch-site", "cross-site")]));
        assert!(refused(&[("sec-fetch-site", "same-site")]));
    }

    #[test]
    fn an_origin_other_than_the_host_refuses() {
        assert!(!refused(&[
            ("origin", "https://ops.example:8081"),
            ("host", "ops.example:8081"),
        ]));
        assert!(!refused(&[
            ("origin", "https://api.example"),
            ("host", "api.example:443"),
        ]));
        assert!(!refused(&[
            ("origin", "https://API.example:443"),
            ("host", "api.example"),
        ]));
        assert!(refused(&[
            ("origin", "https://evil.example"),
            ("host", "api.example")
        ]));
        assert!(refused(&[
            ("origin", "http://api.example:443"),
            ("host", "api.example")
        ]));
        assert!(refused(&[("origin", "null"), ("host", "api.example")]));
        assert!(refused(&[("origin", "https://api.example")]));
    }

    #[test]
    fn over_http2_the_authority_stands_for_the_host() {
        // Browsers send `:authority`, not `Host`, over HTTP/2.
        let uri: Uri = "https://api.example:8443/settings/sign-in".parse().unwrap();
        let own = headers(&[("origin", "https://api.example:8443")]);
        assert!(!is_cross_site(&Method::POST, &uri, &own, &[]));
        let other = headers(&[("origin", "https://evil.example")]);
        assert!(is_cross_site(&Method::POST, &uri, &other, &[]));
    }

    #[test]
    fn the_public_base_url_is_the_services_own_origin() {
        // A proxy that rewrites Host to the upstream's address.
        let proxied = headers(&[
            ("origin", "https://api.example.com"),
            ("host", "10.0.0.5:8080"),
        ]);
        let uri = Uri::default();
        assert!(is_cross_site(&Method::POST, &uri, &proxied, &[]));
        assert!(!is_cross_site(
            &Method::POST,
            &uri,
            &proxied,
            &["https://api.example.com/"]
        ));
    }

    #[test]
    fn both_headers_are_checked() {
        // A same-origin claim does not excuse a foreign Origin, nor the reverse.
        assert!(refused(&[
            ("sec-fetch-site", "same-origin"),
            ("origin", "https://evil.example"),
            ("host", "api.example"),
        ]));
        assert!(refused(&[
            ("sec-fetch-site", "cross-site"),
            ("origin", "https://api.example"),
            ("host", "api.example"),
        ]));
    }

    #[test]
    fn scripts_and_reads_pass() {
        assert!(!refused(&[]));
        let other = headers(&[("origin", "https://evil.example"), ("host", "api.example")]);
        assert!(!is_cross_site(&Method::GET, &Uri::default(), &other, &[]));
    }
}

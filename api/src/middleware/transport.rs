//! TLS-only transport. A TLS listener or a loopback listener (local development)
//! serves every request; any other plain-HTTP listener serves only requests that
//! a configured trusted proxy forwarded from HTTPS. Everything else gets an
//! envelope error and never data.
//!
//! What a trusted proxy says is read from the end of its headers: a proxy
//! appends its own entry to `X-Forwarded-Proto`, `X-Forwarded-For` and
//! `Forwarded` after whatever the client sent, so only the last entry (the
//! proxy's) is believed, and every such header present must agree that the
//! client used HTTPS. A header the proxy does not write then cannot be used to
//! claim TLS either: the client's `X-Forwarded-Proto: https` next to the
//! proxy's `Forwarded: proto=http` is refused.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use ipnet::IpNet;

use crate::error::ApiError;

/// What a listener may serve, and whose forwarding headers it believes.
#[derive(Clone, Debug)]
pub struct TransportPolicy {
    /// The listener speaks TLS itself.
    tls: bool,
    /// Plain HTTP is served only when a trusted proxy forwarded it from HTTPS.
    forwarded_https_only: bool,
    /// Peers whose forwarding headers are believed.
    trusted_proxies: Vec<IpNet>,
}

/// What the transport layer learned about one request: who the client is and
/// whether it reached us over HTTPS. Later layers read it from the request's
/// extensions (the ops listener's sign-in throttle keys on the address; the
/// security headers send HSTS only over HTTPS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientConnection {
    /// The client's address: the peer, or, behind a trusted proxy, the
    /// address that proxy says it served.
    pub address: Option<IpAddr>,
    /// The client used HTTPS: to this listener, or to a trusted proxy.
    pub https: bool,
    /// The transport policy lets the request through.
    pub allowed: bool,
}

impl TransportPolicy {
    /// Serve every request, believing no proxy (a plain loopback listener).
    pub fn serve_all() -> Self {
        Self {
            tls: false,
            forwarded_https_only: false,
            trusted_proxies: Vec::new(),
        }
    }

    /// A TLS listener believing no proxy.
    pub fn tls() -> Self {
        Self {
            tls: true,
            ..Self::serve_all()
        }
    }

    /// Plain HTTP on a reachable address: serve only what these proxies
    /// forward from HTTPS.
    pub fn forwarded_https_only(trusted_proxies: Vec<IpNet>) -> Self {
        Self {
            tls: false,
            forwarded_https_only: true,
            trusted_proxies,
        }
    }

    /// The policy of a listener at `listen`, with or without TLS.
    pub fn for_listener(listen: SocketAddr, tls: bool, trusted_proxies: Vec<IpNet>) -> Self {
        Self {
            tls,
            forwarded_https_only: !tls && !listen.ip().is_loopback(),
            trusted_proxies,
        }
    }

    /// The same listener, serving every request whatever its transport (the
    /// health probes, which reveal nothing).
    pub fn serving_any_transport(&self) -> Self {
        Self {
            forwarded_https_only: false,
            ..self.clone()
        }
    }

    /// Whether `peer` is a proxy whose forwarding headers are believed.
    fn trusts(&self, peer: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|net| net.contains(&peer))
    }

    /// Classifies a request from `peer` carrying `headers`.
    pub fn classify(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> ClientConnection {
        // A dual-stack listener sees IPv4 clients as `::ffff:a.b.c.d`.
        let peer = peer.map(|ip| ip.to_canonical());
        let proxied = peer.is_some_and(|ip| self.trusts(ip));
        let forwarded_https = proxied && forwarded_https(headers);
        let address = match peer {
            Some(ip) if proxied => Some(self.forwarded_client(headers).unwrap_or(ip)),
            other => other,
        };
        let https = self.tls || forwarded_https;
        ClientConnection {
            address,
            https,
            allowed: !self.forwarded_https_only || forwarded_https,
        }
    }

    /// The client a trusted proxy names: walking `X-Forwarded-For` and
    /// `Forwarded`'s `for=` from the end, the first address that is not
    /// itself a trusted proxy (entries before it were written by the client
    /// and prove nothing). Where both headers are present they must name the
    /// same client: a proxy writes one of them, and the other may be the
    /// client's own invention, so on disagreement neither is believed.
    fn forwarded_client(&self, headers: &HeaderMap) -> Option<IpAddr> {
        let x_forwarded_for: Vec<Option<IpAddr>> = entries(headers, "x-forwarded-for")
            .iter()
            .map(|entry| parse_address(entry))
            .collect();
        let forwarded: Vec<Option<IpAddr>> = forwarded_elements(headers)
            .iter()
            .map(|element| parameter(element, "for").and_then(|value| parse_address(&value)))
            .collect();
        match (x_forwarded_for.is_empty(), forwarded.is_empty()) {
            (true, true) => None,
            (false, true) => self.nearest_client(x_forwarded_for),
            (true, false) => self.nearest_client(forwarded),
            (false, false) => {
                let named = self.nearest_client(x_forwarded_for);
                (named == self.nearest_client(forwarded))
                    .then_some(named)
                    .flatten()
            }
        }
    }

    /// The last of `hops` that is not a trusted proxy; an entry that did not
    /// parse ends the walk with nothing believed.
    fn nearest_client(&self, hops: Vec<Option<IpAddr>>) -> Option<IpAddr> {
        for hop in hops.into_iter().rev() {
            match hop {
                Some(ip) if self.trusts(ip) => continue,
                other => return other,
            }
        }
        None
    }
}

/// Whether every forwarding header present says, in its last entry (the one
/// the nearest proxy wrote), that the client used HTTPS, and at least one is.
fn forwarded_https(headers: &HeaderMap) -> bool {
    let x_forwarded_proto = entries(headers, "x-forwarded-proto").pop();
    let forwarded_proto = forwarded_elements(headers)
        .pop()
        .map(|last| parameter(&last, "proto"));
    if x_forwarded_proto.is_none() && forwarded_proto.is_none() {
        return false;
    }
    let says_https = |proto: &str| proto.trim().eq_ignore_ascii_case("https");
    x_forwarded_proto.as_deref().is_none_or(says_https)
        // A `Forwarded` element without `proto=` does not say HTTPS.
        && forwarded_proto.is_none_or(|proto| proto.as_deref().is_some_and(says_https))
}

/// The comma-separated entries of every `name` header line, in order.
fn entries(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|value| {
            // A line that is not text cannot be believed: it counts as an
            // entry that says nothing.
            let text = value.to_str().unwrap_or("");
            text.split(',').map(|entry| entry.trim().to_owned())
        })
        .collect()
}

/// The elements of every `Forwarded` header line (RFC 7239), in order.
fn forwarded_elements(headers: &HeaderMap) -> Vec<String> {
    entries(headers, "forwarded")
}

/// A parameter of one `Forwarded` element (`for=…;proto=https`), unquoted.
fn parameter(element: &str, name: &str) -> Option<String> {
    element.split(';').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// An address as proxies write it: `203.0.113.9`, `203.0.113.9:4711`,
/// `2001:db8::1`, `[2001:db8::1]:4711`.
fn parse_address(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    let ip = if let Ok(ip) = text.parse::<IpAddr>() {
        Some(ip)
    } else if let Ok(socket) = text.parse::<SocketAddr>() {
        Some(socket.ip())
    } else {
        text.strip_prefix('[')
            .and_then(|rest| rest.split_once(']'))
            .and_then(|(ip, _)| ip.parse().ok())
    };
    ip.map(|ip: IpAddr| ip.to_canonical())
}

/// The connection of `request`, as the outermost layer classified it (or
/// classified now, for a router served without it).
pub fn connection_of(policy: &TransportPolicy, request: &Request) -> ClientConnection {
    if let Some(connection) = request.extensions().get::<ClientConnection>() {
        return *connection;
    }
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip());
    policy.classify(peer, request.headers())
}

/// Middleware: refuses requests the transport policy does not allow.
pub async fn enforce(
    State(policy): State<TransportPolicy>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if connection_of(&policy, &request).allowed {
        Ok(next.run(request).await)
    } else {
        Err(ApiError::TlsRequired)
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn ip(text: &str) -> Option<IpAddr> {
        text.parse().ok()
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    fn allows(
        policy: &TransportPolicy,
        peer: &str,
        pairs: &[(&'static str, &'static str)],
    ) -> bool {
        policy.classify(ip(peer), &headers(pairs)).allowed
    }

    fn behind_proxy() -> TransportPolicy {
        TransportPolicy::for_listener(
            "0.0.0.0:8080".parse().unwrap(),
            false,
            vec!["10.0.0.0/8".parse().unwrap()],
        )
    }

    #[test]
    fn loopback_and_tls_listeners_serve_everything() {
        let loopback =
            TransportPolicy::for_listener("127.0.0.1:8080".parse().unwrap(), false, vec![]);
        assert!(allows(&loopback, "203.0.113.9", &[]));
        assert!(
            !loopback
                .classify(ip("203.0.113.9"), &HeaderMap::new())
                .https
        );
        let tls = TransportPolicy::for_listener("0.0.0.0:443".parse().unwrap(), true, vec![]);
        let connection = tls.classify(ip("203.0.113.9"), &HeaderMap::new());
        assert!(connection.allowed && connection.https);
    }

    #[test]
    fn public_plain_listener_needs_a_trusted_proxy_saying_https() {
        let policy = behind_proxy();
        assert!(allows(
            &policy,
            "10.1.2.3",
            &[("x-forwarded-proto", "https")]
        ));
        assert!(allows(
            &policy,
            "10.1.2.3",
            &[("x-forwarded-proto", "HTTPS")]
        ));
        assert!(!allows(
            &policy,
            "10.1.2.3",
            &[("x-forwarded-proto", "http")]
        ));
        assert!(!allows(&policy, "10.1.2.3", &[]));
        assert!(!allows(
            &policy,
            "198.51.100.7",
            &[("x-forwarded-proto", "https")]
        ));
        let unknown_peer = policy.classify(None, &headers(&[("x-forwarded-proto", "https")]));
        assert!(!unknown_peer.allowed);
    }

    #[test]
    fn only_the_last_entry_the_proxy_wrote_is_believed() {
        let policy = behind_proxy();
        // The client claimed https; the proxy appended what it saw: http.
        assert!(!allows(
            &policy,
            "10.1.2.3",
            &[("x-forwarded-proto", "https, http")]
        ));
        assert!(!allows(
            &policy,
            "10.1.2.3",
            &[
                ("x-forwarded-proto", "https"),
                ("x-forwarded-proto", "http")
            ]
        ));
        assert!(allows(
            &policy,
            "10.1.2.3",
            &[("x-forwarded-proto", "http, https")]
        ));
        assert!(!allows(
            &policy,
            "10.1.2.3",
            &[("forwarded", "proto=https, for=203.0.113.9;proto=http")]
        ));
        assert!(allows(
            &policy,
            "10.1.2.3",
            &[("forwarded", "for=203.0.113.9;proto=https")]
        ));
        assert!(allows(
            &policy,
            "10.1.2.3",
            &[("forwarded", "for=\"[2001:db8::1]:4711\";proto=\"https\"")]
        ));
        // An element without proto says nothing.
        assert!(!allows(
            &policy,
            "10.1.2.3",
            &[("forwarded", "for=203.0.113.9")]
        ));
    }

    #[test]
    fn every_forwarding_header_present_must_say_https() {
        let policy = behind_proxy();
        // A proxy writing only `Forwarded` leaves the client's own
        // `X-Forwarded-Proto` in place: the two disagree, so no.
        assert!(!allows(
            &policy,
            "10.1.2.3",
            &[
                ("x-forwarded-proto", "https"),
                ("forwarded", "for=203.0.113.9;proto=http")
            ]
        ));
        assert!(!allows(
            &policy,
            "10.1.2.3",
            &[
                ("x-forwarded-proto", "http"),
                ("forwarded", "for=203.0.113.9;proto=https")
            ]
        ));
        assert!(allows(
            &policy,
            "10.1.2.3",
            &[
                ("x-forwarded-proto", "https"),
                ("forwarded", "for=203.0.113.9;proto=https")
            ]
        ));
    }

    #[test]
    fn the_client_address_is_the_last_one_no_trusted_proxy_wrote() {
        let policy = behind_proxy();
        let connection = policy.classify(
            ip("10.1.2.3"),
            &headers(&[
                ("x-forwarded-for", "192.0.2.1, 203.0.113.9, 10.9.9.9"),
                ("x-forwarded-proto", "https"),
            ]),
        );
        assert_eq!(connection.address, ip("203.0.113.9"));
        assert!(connection.https);
        let connection = policy.classify(
            ip("10.1.2.3"),
            &headers(&[("forwarded", "for=\"[2001:db8::1]:4711\";proto=https")]),
        );
        assert_eq!(connection.address, ip("2001:db8::1"));
        // An untrusted peer's headers are ignored altogether.
        let connection = policy.classify(
            ip("198.51.100.7"),
            &headers(&[("x-forwarded-for", "203.0.113.9")]),
        );
        assert_eq!(connection.address, ip("198.51.100.7"));
        assert!(!connection.https);
        // A trusted proxy that names no client leaves its own address.
        let connection = policy.classify(ip("10.1.2.3"), &HeaderMap::new());
        assert_eq!(connection.address, ip("10.1.2.3"));
        // Two headers naming different clients: one is the client's own
        // invention, so the proxy's address stands.
        let connection = policy.classify(
            ip("10.1.2.3"),
            &headers(&[
                ("x-forwarded-for", "198.51.100.1"),
                ("forwarded", "for=203.0.113.9;proto=https"),
            ]),
        );
        assert_eq!(connection.address, ip("10.1.2.3"));
        let agreeing = policy.classify(
            ip("10.1.2.3"),
            &headers(&[
                ("x-forwarded-for", "203.0.113.9"),
                ("forwarded", "for=203.0.113.9;proto=https"),
            ]),
        );
        assert_eq!(agreeing.address, ip("203.0.113.9"));
    }

    #[test]
    fn ipv4_clients_of_a_dual_stack_listener_are_ipv4() {
        let policy = behind_proxy();
        // The proxy 10.1.2.3 seen through a dual-stack socket.
        let connection = policy.classify(
            ip("::ffff:10.1.2.3"),
            &headers(&[
                ("x-forwarded-for", "::ffff:203.0.113.9"),
                ("x-forwarded-proto", "https"),
            ]),
        );
        assert!(connection.allowed, "the mapped proxy address is trusted");
        assert_eq!(connection.address, ip("203.0.113.9"));
        let direct =
            TransportPolicy::serve_all().classify(ip("::ffff:192.0.2.7"), &HeaderMap::new());
        assert_eq!(direct.address, ip("192.0.2.7"));
    }
}

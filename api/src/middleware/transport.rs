//! TLS-only transport. A TLS listener or a loopback listener (local development)
//! serves every request; any other plain-HTTP listener serves only requests that
//! a configured trusted proxy forwarded from HTTPS (`X-Forwarded-Proto: https`).
//! Everything else gets an envelope error and never data.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use ipnet::IpNet;

use crate::error::ApiError;

/// What a listener may serve over plain HTTP.
#[derive(Clone, Debug)]
pub enum TransportPolicy {
    /// TLS listener, or plain HTTP on loopback: serve every request.
    ServeAll,
    /// Plain HTTP on a reachable address: serve only what these proxies forward
    /// from HTTPS.
    ForwardedHttpsOnly {
        /// Peers whose `X-Forwarded-Proto` is believed.
        trusted_proxies: Vec<IpNet>,
    },
}

impl TransportPolicy {
    /// The policy of a listener at `listen`, with or without TLS.
    pub fn for_listener(listen: SocketAddr, tls: bool, trusted_proxies: Vec<IpNet>) -> Self {
        if tls || listen.ip().is_loopback() {
            Self::ServeAll
        } else {
            Self::ForwardedHttpsOnly { trusted_proxies }
        }
    }

    /// Whether a plain-HTTP request from `peer` with this `X-Forwarded-Proto` may be served.
    pub fn allows(&self, peer: Option<IpAddr>, forwarded_proto: Option<&str>) -> bool {
        match self {
            Self::ServeAll => true,
            Self::ForwardedHttpsOnly { trusted_proxies } => {
                let trusted =
                    peer.is_some_and(|ip| trusted_proxies.iter().any(|net| net.contains(&ip)));
                // A chain of proxies appends; the first entry is what the client used.
                let https = forwarded_proto
                    .and_then(|value| value.split(',').next())
                    .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"));
                trusted && https
            }
        }
    }
}

/// Middleware: refuses requests the transport policy does not allow.
pub async fn enforce(
    State(policy): State<TransportPolicy>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip());
    let forwarded_proto = request
        .headers()
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok());
    if policy.allows(peer, forwarded_proto) {
        Ok(next.run(request).await)
    } else {
        Err(ApiError::TlsRequired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Option<IpAddr> {
        text.parse().ok()
    }

    #[test]
    fn loopback_and_tls_listeners_serve_everything() {
        let loopback =
            TransportPolicy::for_listener("127.0.0.1:8080".parse().unwrap(), false, vec![]);
        assert!(loopback.allows(ip("203.0.113.9"), None));
        let tls = TransportPolicy::for_listener("0.0.0.0:443".parse().unwrap(), true, vec![]);
        assert!(tls.allows(ip("203.0.113.9"), None));
    }

    #[test]
    fn public_plain_listener_needs_a_trusted_proxy_saying_https() {
        let policy = TransportPolicy::for_listener(
            "0.0.0.0:8080".parse().unwrap(),
            false,
            vec!["10.0.0.0/8".parse().unwrap()],
        );
        assert!(policy.allows(ip("10.1.2.3"), Some("https")));
        assert!(policy.allows(ip("10.1.2.3"), Some("HTTPS, http")));
        assert!(!policy.allows(ip("10.1.2.3"), Some("http")));
        assert!(!policy.allows(ip("10.1.2.3"), None));
        assert!(!policy.allows(ip("198.51.100.7"), Some("https")));
        assert!(!policy.allows(None, Some("https")));
    }
}

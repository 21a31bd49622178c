//! Which addresses deliveries may reach. A webhook URL is chosen by a
//! customer, so without a check it could make our workers call our own
//! network (a metadata service, a database, the ops listener). Every address
//! a host resolves to is checked, at registration and at each connection: the
//! resolver hands the HTTP client only the addresses it checked, so a DNS
//! answer that changes between the check and the connection (DNS rebinding)
//! changes nothing.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why an address is refused, for the attempt record and the 422 reason.
pub fn refusal(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => refusal_v6(v6),
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    if ip.is_unspecified() || a == 0 {
        Some("an unspecified address")
    } else if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() {
        Some("a private address")
    } else if ip.is_link_local() {
        // 169.254.0.0/16 holds the cloud metadata services (169.254.169.254).
        Some("a link-local or cloud metadata address")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a carrier-grade NAT address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if ip.is_broadcast()
        || a >= 240
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
    {
        Some("a reserved address")
    } else if (a == 192 && b == 0 && c == 2)
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
    {
        Some("a documentation address")
    } else {
        None
    }
}

fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return refusal_v4(v4);
    }
    let segments = ip.segments();
    if segments[..4] == [0, 0, 0, 0] && segments[4] == 0xffff && segments[5] == 0 {
        // IPv4-translated (::ffff:0:a.b.c.d, RFC 2765).
        return Some("a reserved address");
    }
    if ip.is_unspecified() {
        Some("an unspecified address")
    } else if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if segments[0] & 0xffc0 == 0xfe80 {
        Some("a link-local address")
    } else if segments[0] & 0xfe00 == 0xfc00 {
        // Unique local, which includes cloud metadata endpoints (fd00:ec2::254).
        Some("a private (unique local) address")
    } else if segments[0] & 0xffc0 == 0xfec0 {
        Some("a site-local address")
    } else if segments[..6] == [0, 0, 0, 0, 0, 0] {
        // IPv4-compatible (deprecated): judge the embedded IPv4 address.
        let [a, b] = [segments[6], segments[7]];
        let v4 = Ipv4Addr::new((a >> 8) as u8, a as u8, (b >> 8) as u8, b as u8);
        refusal_v4(v4).or(Some("a reserved address"))
    } else if segments[0] == 0x64 && segments[1] == 0xff9b {
        // NAT64: the IPv4 address it stands for decides.
        let [a, b] = [segments[6], segments[7]];
        let v4 = Ipv4Addr::new((a >> 8) as u8, a as u8, (b >> 8) as u8, b as u8);
        refusal_v4(v4)
    } else if segments[0] == 0x2002 {
        // 6to4 carries an IPv4 address in its prefix.
        let v4 = Ipv4Addr::new(
            (segments[1] >> 8) as u8,
            segments[1] as u8,
            (segments[2] >> 8) as u8,
            segments[2] as u8,
        );
        refusal_v4(v4)
    } else if segments[0] == 0x2001 && segments[1] == 0x0db8 {
        Some("a documentation address")
    } else if segments[0] == 0x2001 && segments[1] < 0x0200 {
        // Teredo and other IETF protocol assignments.
        Some("a reserved address")
    } else {
        None
    }
}

/// The policy in force: strict in production; development and tests may
/// allow private networks (`--webhook-allow-private-networks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Whether private, loopback and link-local addresses are allowed.
    pub allow_private_networks: bool,
}

impl AddressPolicy {
    /// Why `address` is refused under this policy, if it is.
    pub fn refuses(self, address: IpAddr) -> Option<&'static str> {
        if self.allow_private_networks {
            None
        } else {
            refusal(address)
        }
    }

    /// Resolves `host` with the system resolver and checks every address:
    /// the addresses when all are allowed, else why not.
    pub async fn resolve(self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        self.resolve_with(&SystemLookup, host, port).await
    }

    /// [`Self::resolve`] with names looked up by `lookup`.
    pub async fn resolve_with(
        self,
        lookup: &dyn Lookup,
        host: &str,
        port: u16,
    ) -> Result<Vec<SocketAddr>, String> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addresses: Vec<SocketAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => lookup
                .lookup(host.to_owned(), port)
                .await
                .map_err(|err| format!("{host} does not resolve: {err}"))?,
        };
        if addresses.is_empty() {
            return Err(format!("{host} does not resolve"));
        }
        for address in &addresses {
            if let Some(reason) = self.refuses(address.ip()) {
                // The address itself is not named: callers show this text,
                // and it must not map internal names for them.
                return Err(format!("{host} resolves to {reason}, not a public address"));
            }
        }
        Ok(addresses)
    }
}

/// What a lookup of a name comes to.
pub type Lookedup<'a> = Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send + 'a>>;

/// Turns a host name into addresses. The system resolver in production;
/// tests hand the client one whose answers they choose (to play DNS
/// rebinding, say), since the policy judges whatever comes back.
pub trait Lookup: std::fmt::Debug + Send + Sync {
    /// The addresses of `host`, with `port`.
    fn lookup(&self, host: String, port: u16) -> Lookedup<'_>;
}

/// The operating system's resolver.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: String, port: u16) -> Lookedup<'_> {
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), port))
                .await?
                .collect())
        })
    }
}

/// The HTTP client's resolver: resolves, then refuses the whole name when
/// any address is refused.
#[derive(Clone, Debug)]
pub(crate) struct GuardedResolver {
    pub(crate) policy: AddressPolicy,
    pub(crate) lookup: Arc<dyn Lookup>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        let lookup = Arc::clone(&self.lookup);
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addresses = policy.resolve_with(&*lookup, &host, 0).await.map_err(
                |reason| -> Box<dyn std::error::Error + Send + Sync> { Box::new(Refused(reason)) },
            )?;
            let addrs: Addrs = Box::new(addresses.into_iter());
            Ok(addrs)
        })
    }
}

/// A connection refused by the address policy.
#[derive(Debug, thiserror::Error)]
#[error("refused: {0}")]
pub struct Refused(pub String);

/// Wraps the resolver for the client builder.
pub(crate) fn resolver(policy: AddressPolicy, lookup: Arc<dyn Lookup>) -> Arc<GuardedResolver> {
    Arc::new(GuardedResolver { policy, lookup })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> bool {
        refusal(text.parse().expect("an address")).is_some()
    }

    #[test]
    fn internal_addresses_are_refused() {
        for address in [
            "127.0.0.1",
            "127.255.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.0.1",
            "100.64.0.1",
            "100.127.255.254",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "240.0.0.1",
            "192.0.0.8",
            "198.18.0.1",
            "192.0.2.1",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd00:ec2::254",
            "ff02::1",
            "fec0::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
            "2002:7f00:0001::",
            "2002:a9fe:a9fe::",
            "2001:db8::1",
            "2001::1",
            "::ffff:0:7f00:1",
        ] {
            assert!(refused(address), "{address} must be refused");
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        for address in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "192.169.0.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:0808:0808::",
        ] {
            assert!(!refused(address), "{address} must be allowed");
        }
    }

    #[test]
    fn the_development_policy_allows_private_networks() {
        let open = AddressPolicy {
            allow_private_networks: true,
        };
        let strict = AddressPolicy {
            allow_private_networks: false,
        };
        let loopback: IpAddr = "127.0.0.1".parse().expect("an address");
        assert_eq!(open.refuses(loopback), None);
        assert!(strict.refuses(loopback).is_some());
    }

    /// Answers every name with one address.
    #[derive(Debug)]
    struct Answer(IpAddr);

    impl Lookup for Answer {
        fn lookup(&self, _host: String, port: u16) -> Lookedup<'_> {
            let address = SocketAddr::new(self.0, port);
            Box::pin(async move { Ok(vec![address]) })
        }
    }

    #[tokio::test]
    async fn what_a_lookup_answers_is_judged_like_the_systems() {
        let strict = AddressPolicy {
            allow_private_networks: false,
        };
        let private = Answer("10.0.0.7".parse().expect("an address"));
        let refused = strict
            .resolve_with(&private, "hooks.example.com", 443)
            .await
            .expect_err("a private answer");
        assert!(refused.contains("private"), "{refused}");
        assert!(!refused.contains("10.0.0.7"), "{refused}");
        let public = Answer("93.184.215.14".parse().expect("an address"));
        let allowed = strict
            .resolve_with(&public, "hooks.example.com", 443)
            .await
            .expect("a public answer");
        assert_eq!(allowed, vec![SocketAddr::new(public.0, 443)]);
        // Literal addresses never reach the lookup.
        assert!(
            strict
                .resolve_with(&public, "127.0.0.1", 443)
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn names_are_judged_by_what_they_resolve_to() {
        let strict = AddressPolicy {
            allow_private_networks: false,
        };
        let refused = strict
            .resolve("localhost", 443)
            .await
            .expect_err("localhost is loopback");
        assert!(refused.contains("loopback"), "{refused}");
        let literal = strict
            .resolve("[::1]", 443)
            .await
            .expect_err("a loopback literal");
        assert!(literal.contains("loopback"), "{literal}");
        let open = AddressPolicy {
            allow_private_networks: true,
        };
        assert!(
            !open
                .resolve("127.0.0.1", 443)
                .await
                .expect("allowed")
                .is_empty()
        );
    }
}

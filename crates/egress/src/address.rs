//! Which IP addresses an outbound call may reach.
//!
//! The rule is "publicly routable unicast only": anything that reaches this host, its network,
//! the cloud provider's internal services or nothing sensible at all is refused. IPv4 is judged by
//! a deny-list of the IANA special-purpose ranges; IPv6 by an allow-list (global unicast
//! `2000::/3`) minus its special-purpose ranges, because IPv6 has many more odd corners. IPv6
//! forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4) are judged by that IPv4
//! address, since that is where the packets end up.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ip` may not be contacted by an outbound call, or `None` when it may.
///
/// The reason is a short adjective such as `"loopback"`, `"private"`, `"link-local"`,
/// `"unique-local"`, `"shared (CGNAT)"`, `"multicast"`, `"unspecified"`, `"broadcast"`,
/// `"documentation"`, `"benchmarking"`, `"Teredo"`, `"site-local"` or `"reserved"`, meant to be
/// read as "… is a *reason* address".
pub fn forbidden_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

/// IPv4: the IANA special-purpose registry, plus multicast and the old class E.
fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let reason = match (a, b, c) {
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_broadcast() => "broadcast",
        // 0.0.0.0/8 "this network": Linux connects 0.x.y.z to the local host.
        (0, ..) => "reserved",
        (10, ..) | (172, 16..=31, _) | (192, 168, _) => "private",
        (100, 64..=127, _) => "shared (CGNAT)",
        (127, ..) => "loopback",
        // Includes the cloud metadata service at 169.254.169.254.
        (169, 254, _) => "link-local",
        // IETF protocol assignments (DS-Lite, NAT64 discovery, …).
        (192, 0, 0) => "reserved",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        // The deprecated 6to4 relay anycast.
        (192, 88, 99) => "reserved",
        (198, 18..=19, _) => "benchmarking",
        (224..=239, ..) => "multicast",
        // 240.0.0.0/4, the old class E (255.255.255.255 was caught above).
        (240..=255, ..) => "reserved",
        _ => return None,
    };
    Some(reason)
}

/// IPv6: embedded-IPv4 forms by their IPv4 address, then global unicast minus special ranges.
fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    if let Some(embedded) = embedded_v4(ip) {
        return v4_reason(embedded);
    }
    let s = ip.segments();
    let reason = match (s[0], s[1]) {
        (0xfc00..=0xfdff, _) => "unique-local",
        (0xfe80..=0xfebf, _) => "link-local",
        (0xfec0..=0xfeff, _) => "site-local",
        (0xff00..=0xffff, _) => "multicast",
        (0x2001, 0x0db8) | (0x3fff, 0x0000..=0x0fff) => "documentation",
        // Teredo tunnels the (obfuscated) client's IPv4 address through a relay; no webhook
        // receiver lives there, and judging the tunnel endpoints is not worth the risk.
        (0x2001, 0x0000) => "Teredo",
        (0x2001, 0x0002) if s[2] == 0 => "benchmarking",
        // The rest of 2001::/23: IETF protocol assignments (ORCHID, AMT, AS112, …).
        (0x2001, 0x0000..=0x01ff) => "reserved",
        // SRv6 segment identifiers.
        (0x5f00, _) => "reserved",
        // Everything outside global unicast 2000::/3: the discard prefix 100::/64, local-use
        // NAT64 64:ff9b:1::/48, and unassigned space.
        (first, _) if first & 0xe000 != 0x2000 => "reserved",
        _ => return None,
    };
    Some(reason)
}

/// The IPv4 address an IPv6 address carries, for the forms whose packets end up there:
/// IPv4-mapped `::ffff:a.b.c.d`, the deprecated IPv4-compatible `::a.b.c.d`, the well-known NAT64
/// prefix `64:ff9b::/96`, and 6to4 `2002:aabb:ccdd::/48`.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    let low32 = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0, 0, _, _] | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => {
            Some(low32)
        }
        [0x2002, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(s: &str) -> Option<&'static str> {
        forbidden_reason(s.parse().unwrap_or_else(|e| panic!("{s}: {e}")))
    }

    #[test]
    fn internal_addresses_are_forbidden_with_their_reason() {
        let table = [
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("10.0.0.1", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.64.0.1", "shared (CGNAT)"),
            ("100.127.255.255", "shared (CGNAT)"),
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "reserved"),
            ("255.255.255.255", "broadcast"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("240.0.0.1", "reserved"),
            ("192.0.0.8", "reserved"),
            ("192.0.2.1", "documentation"),
            ("198.51.100.7", "documentation"),
            ("203.0.113.9", "documentation"),
            ("198.18.0.1", "benchmarking"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fc00::1", "unique-local"),
            ("fd12::1", "unique-local"),
            ("fe80::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("2001:db8::1", "documentation"),
            ("2001:0::1", "Teredo"),
            ("100::1", "reserved"),
            ("64:ff9b:1::1", "reserved"),
            // Embedded IPv4: judged by where the packets end up.
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::127.0.0.1", "loopback"),
            ("64:ff9b::7f00:1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("2002:7f00:1::1", "loopback"),
            ("2002:c0a8:101::1", "private"),
        ];
        for (ip, expected) in table {
            assert_eq!(reason(ip), Some(expected), "{ip}");
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "93.184.216.34",
            "172.32.0.1",
            "172.15.255.255",
            "100.128.0.1",
            "100.63.255.255",
            "169.253.0.1",
            "192.169.0.1",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "2a00:1450:4001:80b::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(reason(ip), None, "{ip}");
        }
    }
}

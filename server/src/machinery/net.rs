//! Go's `net` and kube's `utilnet` rules that the API machinery relies on, so that kuberaft
//! reads addresses and `[scheme:]name[:port]` ids exactly as kube-apiserver does: which IP
//! addresses are global unicast (where a proxy may go, what CEL's `isGlobalUnicast` says),
//! how an id splits, how a host and a port join.

use std::net::IpAddr;

/// kube's `SplitSchemeNamePort`: `name`, `name:port` or `scheme:name:port`, with a name and a
/// scheme of `http`, `https` or none.
pub fn split_scheme_name_port(id: &str) -> Option<(&str, &str, &str)> {
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts.as_slice() {
        [name] => ("", *name, ""),
        [name, port] => ("", *name, *port),
        [scheme, name, port] => (*scheme, *name, *port),
        _ => return None,
    };
    (!name.is_empty() && matches!(scheme, "" | "http" | "https")).then_some((scheme, name, port))
}

/// Go's `IP.IsGlobalUnicast`: not unspecified, loopback, multicast, link-local or the IPv4
/// broadcast address.
pub fn is_global_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local()
                || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xffc0) == 0xfe80)
        }
    }
}

/// `host:port` (`[host]:port` for an IPv6 address), or the host alone without a port.
pub fn join_host_port(host: &str, port: &str) -> String {
    match (host.contains(':'), port.is_empty()) {
        (true, true) => format!("[{host}]"),
        (true, false) => format!("[{host}]:{port}"),
        (false, true) => host.to_string(),
        (false, false) => format!("{host}:{port}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_a_scheme_and_a_port_as_kube_splits_them() {
        assert_eq!(split_scheme_name_port("web"), Some(("", "web", "")));
        assert_eq!(split_scheme_name_port("web:8080"), Some(("", "web", "8080")));
        assert_eq!(
            split_scheme_name_port("https:web:443"),
            Some(("https", "web", "443"))
        );
        assert_eq!(split_scheme_name_port("https:web:"), Some(("https", "web", "")));
        assert_eq!(split_scheme_name_port("ftp:web:21"), None);
        assert_eq!(split_scheme_name_port(":80"), None);
        assert_eq!(split_scheme_name_port("a:b:c:d"), None);
    }

    #[test]
    fn only_global_unicast_addresses_are_proxied_to() {
        for ok in ["10.244.1.5", "192.0.2.2", "8.8.8.8", "fd00::2", "2001:db8::1"] {
            assert!(is_global_unicast(ok.parse().unwrap()), "{ok}");
        }
        for refused in [
            "127.0.0.1",
            "0.0.0.0",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "fe80::1",
            "::",
        ] {
            assert!(!is_global_unicast(refused.parse().unwrap()), "{refused}");
        }
        assert_eq!(join_host_port("fd00::2", "80"), "[fd00::2]:80");
        assert_eq!(join_host_port("10.0.0.1", ""), "10.0.0.1");
    }
}

//! Reading a connection string down to its host names, and nothing more.
//!
//! The user name, the password, the path and the query are cut away by
//! position before anything parses the string: the `url` crate only ever sees
//! `http://<host>[:<port>]`, so no parser buffer holds a credential, and no
//! parse error can quote one.

use std::net::IpAddr;

use url::{Host, Url};

use super::kind::ServiceKind;

/// The schemes the probe recognises, and the kind of service each names.
/// `http` and `https` name an HTTP API unless the host's provider says more.
const SCHEMES: &[(&str, ServiceKind)] = &[
    ("postgres", ServiceKind::RelationalDatabase),
    ("postgresql", ServiceKind::RelationalDatabase),
    ("mysql", ServiceKind::RelationalDatabase),
    ("mariadb", ServiceKind::RelationalDatabase),
    ("redis", ServiceKind::Cache),
    ("rediss", ServiceKind::Cache),
    ("valkey", ServiceKind::Cache),
    ("valkeys", ServiceKind::Cache),
    ("memcached", ServiceKind::Cache),
    ("mongodb", ServiceKind::DocumentDatabase),
    ("mongodb+srv", ServiceKind::DocumentDatabase),
    ("neo4j", ServiceKind::GraphDatabase),
    ("neo4j+s", ServiceKind::GraphDatabase),
    ("neo4j+ssc", ServiceKind::GraphDatabase),
    ("bolt", ServiceKind::GraphDatabase),
    ("bolt+s", ServiceKind::GraphDatabase),
    ("bolt+ssc", ServiceKind::GraphDatabase),
    ("http", ServiceKind::HttpApi),
    ("https", ServiceKind::HttpApi),
];

/// What a connection string's scheme says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scheme {
    /// The kind of service the scheme names.
    pub(crate) kind: ServiceKind,
    /// `http` or `https`: the authority follows the WHATWG rules, and the
    /// provider may name a more precise kind.
    pub(crate) http: bool,
}

/// One host of a connection string, reduced to what classification needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostName {
    /// A DNS name, lower-cased, without a trailing dot.
    Domain(String),
    /// A loopback address, `localhost`, or a Unix socket.
    Local,
    /// Any other IP address.
    Ip,
}

/// Splits `value` into its scheme and what follows `://`, if the scheme is one
/// the probe knows. A `jdbc:` prefix is skipped.
pub(crate) fn scheme(value: &str) -> Option<(Scheme, &str)> {
    let value = value.trim();
    let value = strip_prefix_ignore_case(value, "jdbc:").unwrap_or(value);
    let (scheme, rest) = value.split_once("://")?;
    let &(name, kind) = SCHEMES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(scheme))?;
    let http = name.starts_with("http");
    Some((Scheme { kind, http }, rest))
}

/// The hosts named by `rest` (what follows `scheme://`), or `None` when no
/// host can be read from it.
///
/// Where the user information ends is the one ambiguous point, since
/// passwords are often pasted unescaped:
///
/// - for `http` and `https` the WHATWG rule holds: the authority ends at the
///   first `/`, `?`, `#` or `\`, and the host follows its last `@`;
/// - for the database schemes the host follows the last `@` before the first
///   `?`, so a password may hold `/`, `#` or `@`. Should that leave no readable
///   host (a password holding `?`), the last `@` anywhere is tried.
///
/// A list of hosts (`h1:5432,h2:5432`, as libpq and MongoDB allow) gives one
/// entry each; Go's `tcp(host:port)` form is unwrapped.
pub(crate) fn hosts(rest: &str, scheme: Scheme) -> Option<Vec<HostName>> {
    if scheme.http {
        let authority = &rest[..rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len())];
        // An empty host is a Unix socket only for the database schemes.
        return Some(after_last_at(authority))
            .filter(|host| !host.is_empty())
            .and_then(host_list);
    }
    let before_query = &rest[..rest.find('?').unwrap_or(rest.len())];
    host_list(authority_end(after_last_at(before_query)))
        .or_else(|| host_list(authority_end(after_last_at(rest))))
}

/// What follows the last `@` of `s`, or all of `s` if it has none.
fn after_last_at(s: &str) -> &str {
    s.rfind('@').map_or(s, |at| &s[at + 1..])
}

/// `s` up to the first `/`, `?` or `#`, or up to the `)` closing a leading
/// `tcp(` or `unix(` (whose socket path holds `/`).
fn authority_end(s: &str) -> &str {
    let wrapped = ["tcp(", "unix("]
        .iter()
        .any(|prefix| strip_prefix_ignore_case(s, prefix).is_some());
    if let Some(close) = s.find(')').filter(|_| wrapped) {
        return &s[..=close];
    }
    &s[..s.find(['/', '?', '#']).unwrap_or(s.len())]
}

/// Reads every host of a comma-separated list; `None` if any is unreadable.
fn host_list(authority: &str) -> Option<Vec<HostName>> {
    if let Some(inner) = strip_prefix_ignore_case(authority, "unix(") {
        return inner.ends_with(')').then(|| vec![HostName::Local]);
    }
    let authority = strip_prefix_ignore_case(authority, "tcp(")
        .map_or(Some(authority), |inner| inner.strip_suffix(')'))?;
    authority.split(',').map(host).collect()
}

/// Reads one `host[:port]`.
fn host(host_port: &str) -> Option<HostName> {
    let host_port = host_port.trim();
    // An empty host (`postgres:///db`) or a percent-encoded path
    // (`postgres://%2Fvar%2Frun%2Fpostgresql/db`) is a Unix socket.
    if host_port.is_empty() || strip_prefix_ignore_case(host_port, "%2f").is_some() {
        return Some(HostName::Local);
    }
    let allowed = |c: char| {
        !c.is_ascii() || c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']')
    };
    if !host_port.chars().all(allowed) {
        return None;
    }
    // Parsed as `http` whatever the scheme, so that the name is lower-cased,
    // IDNA-mapped and IP literals are recognised; the port is checked and dropped.
    let parsed = Url::parse(&format!("http://{host_port}")).ok()?;
    match parsed.host()? {
        Host::Domain(name) => {
            let name = name.trim_end_matches('.');
            if name == "localhost" || name.ends_with(".localhost") {
                Some(HostName::Local)
            } else {
                Some(HostName::Domain(name.to_owned()))
            }
        }
        Host::Ipv4(ip) => Some(ip_host(IpAddr::V4(ip))),
        Host::Ipv6(ip) => Some(ip_host(IpAddr::V6(ip))),
    }
}

fn ip_host(ip: IpAddr) -> HostName {
    if ip.is_loopback() {
        HostName::Local
    } else {
        HostName::Ip
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(value: &str) -> Option<Vec<HostName>> {
        let (scheme, rest) = scheme(value)?;
        hosts(rest, scheme)
    }

    fn domain(name: &str) -> HostName {
        HostName::Domain(name.to_owned())
    }

    #[test]
    fn schemes() {
        assert_eq!(
            scheme("POSTGRES://h").map(|(s, _)| s.kind),
            Some(ServiceKind::RelationalDatabase)
        );
        assert_eq!(scheme("jdbc:postgresql://h").map(|(_, r)| r), Some("h"));
        assert_eq!(scheme("rediss://h").map(|(s, _)| s.http), Some(false));
        assert!(scheme("ftp://h").is_none());
        assert!(scheme("not a url").is_none());
        assert!(scheme("").is_none());
    }

    #[test]
    fn plain_forms() {
        assert_eq!(
            read("postgres://u:p@Db.Example.COM:5432/app"),
            Some(vec![domain("db.example.com")])
        );
        assert_eq!(
            read("redis://h.example.com"),
            Some(vec![domain("h.example.com")])
        );
        assert_eq!(
            read("https://api.example.com/v1?token=t"),
            Some(vec![domain("api.example.com")])
        );
        assert_eq!(
            read("postgres://u@[::1]:5432/db"),
            Some(vec![HostName::Local])
        );
        assert_eq!(read("mysql://u:p@10.0.0.4/db"), Some(vec![HostName::Ip]));
    }

    #[test]
    fn unescaped_passwords() {
        for value in [
            "postgres://u:pa/ss@db.example.com/app",
            "postgres://u:pa#ss@db.example.com/app",
            "postgres://u:pa@ss@db.example.com/app",
            "postgres://u:pa?ss@db.example.com/app",
            "postgres://u:pa:ss@db.example.com:5432/app?sslmode=require",
            "mysql://u:p@tcp(db.example.com:3306)/app",
        ] {
            assert_eq!(read(value), Some(vec![domain("db.example.com")]), "{value}");
        }
    }

    #[test]
    fn sockets_and_lists() {
        assert_eq!(
            read("postgres:///app?host=/var/run/postgresql"),
            Some(vec![HostName::Local])
        );
        assert_eq!(
            read("postgres://%2Fvar%2Frun%2Fpostgresql/app"),
            Some(vec![HostName::Local])
        );
        assert_eq!(
            read("mysql://u:p@unix(/tmp/mysql.sock)/app"),
            Some(vec![HostName::Local])
        );
        assert_eq!(
            read("postgresql://u:p@a.example.com:5432,b.example.com:5433/app"),
            Some(vec![domain("a.example.com"), domain("b.example.com")])
        );
    }

    #[test]
    fn unreadable() {
        assert_eq!(read("postgres://u:p@db example.com/app"), None);
        assert_eq!(read("postgres://u:p@host:notaport/app"), None);
        assert_eq!(read("https://"), None);
    }
}

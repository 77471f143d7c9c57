//! One server address: `[scheme://]host[:port][/path]`, checked the same way in every store.

use std::fmt;

use super::ConfigError;

/// What a store accepts as one address. Built in a `const`:
/// `AddressRules::new("NATS server").schemes(&["nats", "tls"]).default_port(4222)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressRules {
    what: &'static str,
    schemes: &'static [&'static str],
    default_port: Option<u16>,
    path: bool,
}

impl AddressRules {
    /// Rules for an address called `what` in errors (`etcd endpoint`): no scheme, no
    /// default port, no path.
    pub const fn new(what: &'static str) -> Self {
        Self {
            what,
            schemes: &[],
            default_port: None,
            path: false,
        }
    }

    /// The schemes accepted before `://`; the address may also leave the scheme out.
    pub const fn schemes(mut self, schemes: &'static [&'static str]) -> Self {
        self.schemes = schemes;
        self
    }

    /// The port an address without one gets.
    pub const fn default_port(mut self, port: u16) -> Self {
        self.default_port = Some(port);
        self
    }

    /// Accepts a path after the host (`http://h:1/base`). A lone trailing `/` is always
    /// accepted and dropped.
    pub const fn path(mut self, allowed: bool) -> Self {
        self.path = allowed;
        self
    }

    /// What an address is called in errors.
    pub const fn what(&self) -> &'static str {
        self.what
    }
}

/// A checked address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// The scheme, if one was given (lower case as written).
    pub scheme: Option<String>,
    /// The host: a name, an IPv4 address or an IPv6 address without brackets.
    pub host: String,
    /// The port, or the rules' default port; `None` when neither gives one.
    pub port: Option<u16>,
    /// The path after the host without its trailing `/`, empty when none.
    pub path: String,
}

impl fmt::Display for Address {
    /// `host:port` (`[v6]:port`), or the host alone without a port.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// Parses and checks one address under `rules`: an empty address or one with white space,
/// a scheme the rules do not list, credentials (`user:password@`, refused and masked in the
/// error so the password never reaches a log), no host, an IPv6 address outside brackets, a
/// port that is not 1 to 65535, and a path or query where the rules allow none.
pub fn parse_address(text: &str, rules: &AddressRules) -> Result<Address, ConfigError> {
    let invalid = |address: String, reason| ConfigError::InvalidAddress {
        what: rules.what,
        address,
        reason,
    };
    if text.is_empty() || text.chars().any(char::is_whitespace) {
        return Err(invalid(text.to_owned(), "empty or contains whitespace"));
    }
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) => {
            if !rules.schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme)) {
                let reason = if rules.schemes.is_empty() {
                    "no scheme is accepted here: write host:port"
                } else {
                    "this scheme is not accepted here"
                };
                return Err(invalid(mask(text), reason));
            }
            (Some(scheme.to_owned()), rest)
        }
        None => (None, text),
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(invalid(
            mask(text),
            "credentials in the address; set them with the builder's credentials(user, password)",
        ));
    }
    let path = path.trim_end_matches('/');
    if !path.is_empty() && (!rules.path || path.contains('?')) {
        return Err(invalid(
            text.to_owned(),
            "a path or query is not accepted here",
        ));
    }
    let (host, port) = split_port(authority).map_err(|reason| invalid(text.to_owned(), reason))?;
    if host.is_empty() {
        return Err(invalid(text.to_owned(), "no host"));
    }
    let port = match port {
        Some(port) => match port.parse::<u16>() {
            Ok(port) if port != 0 => Some(port),
            _ => {
                return Err(invalid(
                    text.to_owned(),
                    "the port is not a number from 1 to 65535",
                ))
            }
        },
        None => rules.default_port,
    };
    Ok(Address {
        scheme,
        host: host.to_owned(),
        port,
        path: path.to_owned(),
    })
}

/// Parses every address of `list` under `rules` ([`parse_address`]), refusing an empty list
/// with [`ConfigError::NoAddress`]. Split a comma-separated value with
/// [`address_list`](crate::datasource::address_list) first.
pub fn parse_addresses<S: AsRef<str>>(
    list: &[S],
    rules: &AddressRules,
) -> Result<Vec<Address>, ConfigError> {
    if list.is_empty() {
        return Err(ConfigError::NoAddress { what: rules.what });
    }
    list.iter()
        .map(|text| parse_address(text.as_ref(), rules))
        .collect()
}

/// `host[:port]` or `[v6][:port]` into the host and the port's text.
fn split_port(authority: &str) -> Result<(&str, Option<&str>), &'static str> {
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, tail) = v6.split_once(']').ok_or("unclosed '['")?;
        return match tail.strip_prefix(':') {
            Some(port) => Ok((host, Some(port))),
            None if tail.is_empty() => Ok((host, None)),
            None => Err("unexpected text after ']'"),
        };
    }
    match authority.rsplit_once(':') {
        Some(_) if authority.matches(':').count() > 1 => {
            Err("write an IPv6 address as [addr]:port")
        }
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((authority, None)),
    }
}

/// The address with whatever precedes an `@` in its authority replaced by `***`.
fn mask(text: &str) -> String {
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), text),
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}***@{}", &rest[at + 1..]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: AddressRules = AddressRules::new("test server")
        .schemes(&["http", "https"])
        .default_port(80);

    fn parsed(text: &str) -> (Option<String>, String, Option<u16>, String) {
        let a = parse_address(text, &RULES).expect(text);
        (a.scheme, a.host, a.port, a.path)
    }

    #[test]
    fn host_port_scheme_and_default_port() {
        assert_eq!(
            parsed("https://h.local:8443/"),
            (
                Some("https".into()),
                "h.local".into(),
                Some(8443),
                String::new()
            )
        );
        assert_eq!(
            parsed("10.0.0.1"),
            (None, "10.0.0.1".into(), Some(80), String::new())
        );
        let v6 = parse_address("[::1]:9", &RULES).expect("v6");
        assert_eq!(
            (v6.host.as_str(), v6.to_string()),
            ("::1", "[::1]:9".into())
        );
        let no_default = AddressRules::new("x");
        assert_eq!(parse_address("h", &no_default).expect("h").port, None);
        let with_path = RULES.path(true);
        assert_eq!(
            parse_address("h:1/base/", &with_path).expect("path").path,
            "/base"
        );
    }

    #[test]
    fn bad_addresses_are_refused_naming_what_they_are() {
        for bad in [
            "",
            " h:1",
            "ftp://h:1",
            "http://",
            ":1",
            "h:0",
            "h:x",
            "h:99999",
            "::1",
            "[::1",
            "[::1]x",
            "h:1/path",
            "h:1?x=1",
        ] {
            match parse_address(bad, &RULES) {
                Err(ConfigError::InvalidAddress { what, .. }) => assert_eq!(what, "test server"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        assert_eq!(
            parse_addresses::<&str>(&[], &RULES),
            Err(ConfigError::NoAddress {
                what: "test server"
            })
        );
        let both = parse_addresses(&["a", "b:2"], &RULES).expect("valid");
        assert_eq!(both[1].to_string(), "b:2");
        let bare = AddressRules::new("zk server");
        assert!(parse_address("http://h:1", &bare).is_err());
    }

    #[test]
    fn credentials_in_an_address_are_refused_and_masked() {
        for text in [
            "http://app:s3cret-pw@h:1",
            "app:s3cret-pw@h",
            "https://s3cret-pw@h/x",
        ] {
            let err = parse_address(text, &RULES.path(true)).expect_err(text);
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains("s3cret-pw"), "{shown}");
            assert!(shown.contains("credentials("), "{shown}");
            assert!(shown.contains("***@h"), "{shown}");
        }
    }
}

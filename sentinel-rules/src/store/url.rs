//! A store URL: which backend, where, which key. Its grammar (`file`, `etcd(s)`, `redis(s)`,
//! `nacos`, `nats(s)`, `zk`), default ports and percent-decoded keys, and how a message names
//! it.

use std::path::PathBuf;

use ::url::Url;

use super::login::{PASSWORD_VAR, USER_VAR};
use crate::failure::Failure;

/// How the Redis servers are deployed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Redis {
    /// One server (or a replica set's master), `host:port`.
    Server(String),
    /// The master named `master` of these sentinels (`?master=NAME&sentinels=...`).
    Sentinel {
        sentinels: Vec<String>,
        master: String,
    },
    /// A Redis Cluster reached through any of these nodes (`?cluster&nodes=...`).
    Cluster(Vec<String>),
}

/// What a Nacos URL names: one dataId, or the dashboard dataIds of an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Nacos {
    /// One dataId of a group.
    Config(NacosKey),
    /// `{app}-flow-rules`, `{app}-degrade-rules`, ... of `SENTINEL_GROUP`, as one document.
    App(String),
}

/// One Nacos config: a dataId of a group (the Nacos client's `ConfigKey`, which a build
/// without the `nacos` feature does not have).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NacosKey {
    pub(crate) data_id: String,
    pub(crate) group: String,
}

/// The ACL a ZooKeeper URL gives the znodes a push creates (`?acl=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ZnodeAcl {
    /// `world:anyone` may do everything (`?acl=open`, the default).
    Open,
    /// Only the digest user that created it (`?acl=creator`).
    Creator,
}

/// The group Sentinel's dashboard writes to, and the default of a Nacos URL.
pub(crate) const SENTINEL_GROUP: &str = "SENTINEL_GROUP";

/// A parsed store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Store {
    /// `file:///path`, or a bare path.
    File(PathBuf),
    /// `etcd://host:port/key` (`etcds://` for TLS; `?prefix` for every key under it).
    Etcd {
        endpoint: String,
        key: String,
        prefix: bool,
        tls: bool,
    },
    /// `redis://host:port/key?channel=...&db=...` (`rediss://` for TLS).
    Redis {
        servers: Redis,
        key: String,
        channel: String,
        db: i64,
        tls: bool,
    },
    /// `nacos://host:port/dataId?group=...&namespace=...`, or `nacos://host:port/?app=...`.
    Nacos {
        server: String,
        target: Nacos,
        namespace: Option<String>,
    },
    /// `nats://host:port/bucket/key` (`natss://` for TLS; `*` and `>` in the key watch
    /// every matching key).
    Nats {
        server: String,
        bucket: String,
        key: String,
        tls: bool,
    },
    /// `zk://host:2181[,host2:2181]/path/to/znode` (`?chroot=/x`; `?children` for every
    /// child of the znode; `?acl=creator` for the znodes a push creates).
    ZooKeeper {
        servers: Vec<String>,
        path: String,
        chroot: Option<String>,
        children: bool,
        acl: ZnodeAcl,
    },
}

impl Store {
    /// Whether the store keeps a revision per write (etcd, Redis, NATS, ZooKeeper), so a push can
    /// compare and set; a file and Nacos keep none.
    pub(crate) fn keeps_revisions(&self) -> bool {
        !matches!(self, Store::File(_) | Store::Nacos { .. })
    }
    /// Whether the URL names several keys (an etcd prefix, a NATS wildcard, a Nacos app,
    /// a znode's children).
    pub(crate) fn is_many(&self) -> bool {
        match self {
            Store::ZooKeeper { children, .. } => *children,
            Store::Etcd { prefix, .. } => *prefix,
            Store::Nats { key, .. } => is_wildcard(key),
            Store::Nacos { target, .. } => matches!(target, Nacos::App(_)),
            Store::File(_) | Store::Redis { .. } => false,
        }
    }
}

impl std::fmt::Display for Store {
    /// The store and key, for messages: never a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::File(path) => write!(f, "file {}", path.display()),
            Store::Etcd {
                endpoint,
                key,
                prefix,
                ..
            } => {
                let what = if *prefix { "prefix" } else { "key" };
                write!(f, "etcd {endpoint} {what} {key}")
            }
            Store::Redis { servers, key, .. } => match servers {
                Redis::Server(server) => write!(f, "Redis {server} key {key}"),
                Redis::Sentinel { sentinels, master } => write!(
                    f,
                    "Redis master {master} of sentinels {} key {key}",
                    sentinels.join(",")
                ),
                Redis::Cluster(nodes) => {
                    write!(f, "Redis cluster {} key {key}", nodes.join(","))
                }
            },
            Store::Nacos { server, target, .. } => match target {
                Nacos::Config(key) => write!(
                    f,
                    "Nacos {server} dataId {} group {}",
                    key.data_id, key.group
                ),
                Nacos::App(app) => write!(f, "Nacos {server} dashboard dataIds of app {app}"),
            },
            Store::Nats {
                server,
                bucket,
                key,
                ..
            } => write!(f, "NATS {server} bucket {bucket} key {key}"),
            Store::ZooKeeper {
                servers,
                path,
                chroot,
                children,
                ..
            } => {
                let what = if *children {
                    "children of znode"
                } else {
                    "znode"
                };
                let chroot = chroot
                    .as_deref()
                    .map(|c| format!(" chroot {c}"))
                    .unwrap_or_default();
                write!(f, "ZooKeeper {}{chroot} {what} {path}", servers.join(","))
            }
        }
    }
}

pub(super) fn is_wildcard(key: &str) -> bool {
    key.split('.').any(|token| token == "*" || token == ">")
}

/// The ports a store URL without one uses: each server's usual port.
pub(crate) const DEFAULT_PORTS: [(&str, u16); 6] = [
    ("etcd", 2379),
    ("redis", 6379),
    ("redis sentinel", 26379),
    ("nacos", 8848),
    ("nats", 4222),
    ("zookeeper", 2181),
];

fn default_port(server: &str) -> u16 {
    DEFAULT_PORTS
        .iter()
        .find(|(name, _)| *name == server)
        .map_or(0, |(_, port)| *port)
}

impl Store {
    /// Parses a store URL; text without `://` is a file path.
    pub(crate) fn parse(text: &str) -> Result<Self, Failure> {
        if !text.contains("://") {
            if text.trim().is_empty() {
                return Err(Failure::Usage("an empty store URL".into()));
            }
            return Ok(Store::File(PathBuf::from(text)));
        }
        let bad = |why: &str| Failure::Usage(format!("store URL {text:?}: {why}"));
        // A ZooKeeper connect string names several servers in one authority, which a URL
        // parser refuses: the URL is parsed with the first, and the others are kept.
        let (parsed, more_servers) = zookeeper_servers(text);
        let url = Url::parse(&parsed).map_err(|e| bad(&e.to_string()))?;
        if !url.username().is_empty()
            || url.password().is_some()
            || more_servers.iter().any(|server| server.contains('@'))
        {
            // Not echoed: the URL holds the secret.
            return Err(Failure::Usage(format!(
                "a store URL with a user or password ({}://...@{}): credentials do not belong \
                 in the URL (it ends up in shell history and process lists); set {USER_VAR} \
                 and {PASSWORD_VAR}, or pass --ask-password or --password-stdin",
                url.scheme(),
                url.host_str().unwrap_or("")
            )));
        }
        let host = |server: &str| -> Result<String, Failure> {
            let host = url.host_str().ok_or_else(|| bad("no host"))?;
            let port = url.port().unwrap_or_else(|| default_port(server));
            Ok(format!("{host}:{port}"))
        };
        let query = |name: &str| {
            url.query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        };
        let flag = |name: &str| query(name).is_some_and(|v| v != "false" && v != "0");
        let list = |name: &str| -> Vec<String> {
            query(name)
                .map(|v| {
                    v.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let raw_path = url.path().trim_start_matches('/');
        let path = decode(raw_path).map_err(|e| bad(&e))?;
        match url.scheme() {
            "file" => Ok(Store::File(
                url.to_file_path().map_err(|()| bad("not a file path"))?,
            )),
            scheme @ ("etcd" | "etcds") => {
                if path.is_empty() {
                    return Err(bad("no key: etcd://host:port/key"));
                }
                let tls = scheme == "etcds";
                let http = if tls { "https" } else { "http" };
                Ok(Store::Etcd {
                    endpoint: format!("{http}://{}", host("etcd")?),
                    key: format!("/{path}"),
                    prefix: flag("prefix"),
                    tls,
                })
            }
            scheme @ ("redis" | "rediss") => {
                if path.is_empty() {
                    return Err(bad("no key: redis://host:port/key?channel=..."));
                }
                let db = match query("db") {
                    Some(db) => db.parse().map_err(|_| bad("db is not a number"))?,
                    None => 0,
                };
                let servers = match (query("master"), flag("cluster")) {
                    (Some(_), true) => return Err(bad("either ?master= or ?cluster, not both")),
                    (Some(master), false) => {
                        let mut sentinels = vec![host("redis sentinel")?];
                        sentinels.extend(list("sentinels"));
                        Redis::Sentinel { sentinels, master }
                    }
                    (None, true) => {
                        let mut nodes = vec![host("redis")?];
                        nodes.extend(list("nodes"));
                        Redis::Cluster(nodes)
                    }
                    (None, false) => Redis::Server(host("redis")?),
                };
                Ok(Store::Redis {
                    servers,
                    channel: query("channel").unwrap_or_else(|| format!("{path}:changed")),
                    key: path,
                    db,
                    tls: scheme == "rediss",
                })
            }
            "nacos" => {
                let namespace = query("namespace").filter(|n| !n.is_empty());
                let target = match query("app") {
                    Some(app) if !app.is_empty() && path.is_empty() => Nacos::App(app),
                    Some(_) => {
                        return Err(bad(
                            "?app= names every dashboard dataId of an app: nacos://host:port/?app=orders",
                        ))
                    }
                    None if path.is_empty() || path.contains('/') => {
                        return Err(bad(
                            "one dataId (nacos://host:port/dataId?group=...) or an app \
                             (nacos://host:port/?app=...)",
                        ))
                    }
                    None => Nacos::Config(NacosKey {
                        data_id: path,
                        group: query("group").unwrap_or_else(|| SENTINEL_GROUP.to_owned()),
                    }),
                };
                Ok(Store::Nacos {
                    server: host("nacos")?,
                    target,
                    namespace,
                })
            }
            scheme @ ("nats" | "natss" | "tls") => {
                let tls = scheme != "nats";
                match raw_path.split_once('/') {
                    Some((bucket, key)) if !bucket.is_empty() && !key.is_empty() => {
                        Ok(Store::Nats {
                            server: format!(
                                "{}://{}",
                                if tls { "tls" } else { "nats" },
                                host("nats")?
                            ),
                            bucket: decode(bucket).map_err(|e| bad(&e))?,
                            key: decode(key).map_err(|e| bad(&e))?,
                            tls,
                        })
                    }
                    _ => Err(bad("a bucket and a key: nats://host:port/bucket/key")),
                }
            }
            "zk" => {
                if path.is_empty() {
                    return Err(bad("no znode: zk://host:2181/path/to/znode"));
                }
                let mut servers = vec![host("zookeeper")?];
                for server in &more_servers {
                    servers.push(zookeeper_server(server).map_err(|e| bad(&e))?);
                }
                let chroot = match query("chroot") {
                    Some(chroot) if !chroot.starts_with('/') || chroot.len() < 2 => {
                        return Err(bad("?chroot= is an absolute path: ?chroot=/sentinel"))
                    }
                    other => other,
                };
                let acl = match query("acl").as_deref() {
                    None | Some("open") => ZnodeAcl::Open,
                    Some("creator") => ZnodeAcl::Creator,
                    Some(_) => return Err(bad("?acl= is open (the default) or creator")),
                };
                Ok(Store::ZooKeeper {
                    servers,
                    path: format!("/{}", path.trim_end_matches('/')),
                    chroot,
                    children: flag("children"),
                    acl,
                })
            }
            other => Err(bad(&format!(
                "unknown scheme {other}: use file, etcd, etcds, redis, rediss, nacos, nats, \
                 natss or zk"
            ))),
        }
    }
}

/// A `zk://` URL with only the first server of its authority (what a URL parser reads), and
/// the other servers; any other URL as it is.
fn zookeeper_servers(text: &str) -> (String, Vec<String>) {
    let Some(rest) = text.strip_prefix("zk://") else {
        return (text.to_owned(), Vec::new());
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let mut servers = authority.split(',');
    let first = servers.next().unwrap_or_default();
    let more = servers.map(str::to_owned).collect();
    (format!("zk://{first}{tail}"), more)
}

/// One `host[:port]` of a ZooKeeper connect string, with the default port.
fn zookeeper_server(server: &str) -> Result<String, String> {
    let url = Url::parse(&format!("zk://{server}/")).map_err(|e| format!("{server:?}: {e}"))?;
    let host = url
        .host_str()
        .filter(|_| !server.is_empty())
        .ok_or_else(|| "an empty server in the connect string".to_owned())?;
    Ok(format!(
        "{host}:{}",
        url.port().unwrap_or_else(|| default_port("zookeeper"))
    ))
}

/// A percent-decoded key: `%7B` is `{`, `%20` a space, `%2F` a slash.
fn decode(text: &str) -> Result<String, String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| format!("{text:?} does not decode to UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_every_store() {
        let parse = |text: &str| Store::parse(text).ok();
        assert_eq!(
            parse("file:///etc/sentinel/rules.json"),
            Some(Store::File("/etc/sentinel/rules.json".into()))
        );
        assert_eq!(
            parse("etcd://127.0.0.1:2379/sentinel/rules"),
            Some(Store::Etcd {
                endpoint: "http://127.0.0.1:2379".into(),
                key: "/sentinel/rules".into(),
                prefix: false,
                tls: false,
            })
        );
        assert_eq!(
            parse("etcds://etcd.internal/sentinel/?prefix"),
            Some(Store::Etcd {
                endpoint: "https://etcd.internal:2379".into(),
                key: "/sentinel/".into(),
                prefix: true,
                tls: true,
            })
        );
        assert_eq!(
            parse("redis://127.0.0.1:6379/rules:flow?channel=flow-changed&db=2"),
            Some(Store::Redis {
                servers: Redis::Server("127.0.0.1:6379".into()),
                key: "rules:flow".into(),
                channel: "flow-changed".into(),
                db: 2,
                tls: false,
            })
        );
        assert_eq!(
            parse("rediss://s1/rules?master=main&sentinels=s2:26380,s3"),
            Some(Store::Redis {
                servers: Redis::Sentinel {
                    sentinels: vec!["s1:26379".into(), "s2:26380".into(), "s3".into()],
                    master: "main".into()
                },
                key: "rules".into(),
                channel: "rules:changed".into(),
                db: 0,
                tls: true,
            })
        );
        assert!(matches!(
            parse("redis://n1:7000/rules?cluster&nodes=n2:7000"),
            Some(Store::Redis { servers: Redis::Cluster(nodes), .. }) if nodes == ["n1:7000", "n2:7000"]
        ));
        assert_eq!(
            parse("nacos://127.0.0.1/orders-flow-rules?namespace=prod"),
            Some(Store::Nacos {
                server: "127.0.0.1:8848".into(),
                target: Nacos::Config(NacosKey {
                    data_id: "orders-flow-rules".into(),
                    group: "SENTINEL_GROUP".into()
                }),
                namespace: Some("prod".into())
            })
        );
        assert_eq!(
            parse("nacos://127.0.0.1:8848/?app=orders"),
            Some(Store::Nacos {
                server: "127.0.0.1:8848".into(),
                target: Nacos::App("orders".into()),
                namespace: None
            })
        );
        assert_eq!(
            parse("nats://127.0.0.1/sentinel/flow"),
            Some(Store::Nats {
                server: "nats://127.0.0.1:4222".into(),
                bucket: "sentinel".into(),
                key: "flow".into(),
                tls: false,
            })
        );
        assert_eq!(
            parse("zk://10.0.0.1,10.0.0.2:2182/sentinel_rule_config/orders/flow?chroot=/prod&acl=creator"),
            Some(Store::ZooKeeper {
                servers: vec!["10.0.0.1:2181".into(), "10.0.0.2:2182".into()],
                path: "/sentinel_rule_config/orders/flow".into(),
                chroot: Some("/prod".into()),
                children: false,
                acl: ZnodeAcl::Creator,
            })
        );
        assert_eq!(
            parse("zk://127.0.0.1:12181/sentinel/orders/?children"),
            Some(Store::ZooKeeper {
                servers: vec!["127.0.0.1:12181".into()],
                path: "/sentinel/orders".into(),
                chroot: None,
                children: true,
                acl: ZnodeAcl::Open,
            })
        );
        assert!(Store::parse("zk://h/a?children").is_ok_and(|s| s.is_many()));
        // A bare path is a file.
        assert_eq!(
            parse("rules/prod.json"),
            Some(Store::File("rules/prod.json".into()))
        );
        for bad in [
            "etcd://127.0.0.1:2379",
            "nats://127.0.0.1:4222/bucket-only",
            "ftp://x:1/y",
            "nacos://h/?app=",
            "nacos://h/id?app=orders",
            "redis://h/k?master=m&cluster",
            "zk://h:2181",
            "zk://h:2181/",
            "zk://h:2181,/a",
            "zk://h:2181,h2:x/a",
            "zk://h/a?chroot=relative",
            "zk://h/a?acl=everyone",
            "",
        ] {
            assert!(Store::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_are_percent_decoded() {
        let key = |text: &str| match Store::parse(text) {
            Ok(Store::Redis { key, .. } | Store::Etcd { key, .. } | Store::Nats { key, .. }) => key,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(key("redis://h/rules:{orders}:flow"), "rules:{orders}:flow");
        assert_eq!(
            key("redis://h/rules:%7Borders%7D:flow"),
            "rules:{orders}:flow"
        );
        assert_eq!(key("redis://h/my rules*"), "my rules*");
        assert_eq!(key("etcd://h/a/b%2Fc"), "/a/b/c");
        assert_eq!(key("nats://h/bucket/rules.>"), "rules.>");
        assert_eq!(key("nats://h/bucket/rules.*.flow"), "rules.*.flow");
        assert_eq!(key("nats://h/bucket/a/b"), "a/b");
        assert!(matches!(
            Store::parse("zk://h/rules/%7Borders%7D%20flow"),
            Ok(Store::ZooKeeper { path, .. }) if path == "/rules/{orders} flow"
        ));
        assert!(Store::parse("nats://h/bucket/rules.>").is_ok_and(|s| s.is_many()));
    }

    #[test]
    fn credentials_in_a_url_are_refused_naming_the_variables() {
        for url in [
            "redis://:pw@h/k",
            "etcd://ops:pw@h/k",
            "nats://ops@h/b/k",
            "zk://ops:pw@h/k",
            "zk://h1,ops:pw@h2/k",
        ] {
            match Store::parse(url) {
                Err(Failure::Usage(message)) => {
                    assert!(message.contains(USER_VAR), "{message}");
                    assert!(message.contains(PASSWORD_VAR), "{message}");
                    assert!(
                        !message.contains("pw@") || message.contains(url),
                        "{message}"
                    );
                }
                other => panic!("{url}: {other:?}"),
            }
        }
    }
}

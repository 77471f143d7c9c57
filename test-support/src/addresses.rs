//! Where the test servers of `scripts/services.sh` listen, one module a store: the variable
//! `scripts/services.sh env` exports each address in, the address it has by default, and
//! what to run when a server is missing ([`START_HINT`](etcd::START_HINT) in each module).
//! The script is the other place these addresses are written; a change goes to both.

use crate::env_or;

/// The etcd servers.
pub mod etcd {
    use super::env_or;

    /// What to run when an etcd server is missing.
    pub const START_HINT: &str = "start the test servers with `scripts/services.sh start etcd` \
         (from the repository root; `eval \"$(scripts/services.sh env)\"` exports the endpoints)";

    /// The plain etcd most tests share (`SENTINEL_ETCD_ENDPOINTS`).
    pub fn endpoints() -> String {
        env_or("SENTINEL_ETCD_ENDPOINTS", "http://127.0.0.1:23790")
    }

    /// The etcd with auth enabled (`SENTINEL_ETCD_AUTH_ENDPOINTS`): root:rootpw, and app:apppw
    /// who may read and write under `/rules/`.
    pub fn auth_endpoints() -> String {
        env_or("SENTINEL_ETCD_AUTH_ENDPOINTS", "http://127.0.0.1:23791")
    }

    /// The etcd that the fault tests stop and restart (`SENTINEL_ETCD_FAULT_ENDPOINTS`).
    pub fn fault_endpoints() -> String {
        env_or("SENTINEL_ETCD_FAULT_ENDPOINTS", "http://127.0.0.1:23792")
    }

    /// The etcd the frozen-server tests freeze and thaw (`SENTINEL_ETCD_FREEZE_ENDPOINTS`,
    /// `scripts/services.sh start etcd-freeze`).
    pub fn freeze_endpoints() -> String {
        env_or("SENTINEL_ETCD_FREEZE_ENDPOINTS", "http://127.0.0.1:23794")
    }

    /// The etcd that serves TLS only (`SENTINEL_ETCD_TLS_ENDPOINTS`,
    /// `scripts/services.sh start etcd-tls`).
    pub fn tls_endpoints() -> String {
        env_or("SENTINEL_ETCD_TLS_ENDPOINTS", "https://127.0.0.1:23793")
    }
}

/// The Nacos-compatible servers (rnacos).
pub mod nacos {
    use super::env_or;

    /// What to run when an rnacos server is missing.
    pub const START_HINT: &str = "start the test servers with `scripts/services.sh start nacos` \
         (from the repository root; the first run builds rnacos, about 10 minutes; \
         `eval \"$(scripts/services.sh env)\"` exports the addresses)";

    /// The plain rnacos most tests share (`SENTINEL_NACOS_ADDR`).
    pub fn addr() -> String {
        env_or("SENTINEL_NACOS_ADDR", "127.0.0.1:18848")
    }

    /// The rnacos with auth on (`SENTINEL_NACOS_AUTH_ADDR`), admin user `admin:adminpw`.
    pub fn auth_addr() -> String {
        env_or("SENTINEL_NACOS_AUTH_ADDR", "127.0.0.1:18849")
    }

    /// The rnacos the fault tests stop and restart (`SENTINEL_NACOS_FAULT_ADDR`).
    pub fn fault_addr() -> String {
        env_or("SENTINEL_NACOS_FAULT_ADDR", "127.0.0.1:18850")
    }

    /// The rnacos the frozen-server tests freeze and thaw (`SENTINEL_NACOS_FREEZE_ADDR`,
    /// `scripts/services.sh start nacos-freeze`).
    pub fn freeze_addr() -> String {
        env_or("SENTINEL_NACOS_FREEZE_ADDR", "127.0.0.1:18851")
    }
}

/// The NATS servers.
pub mod nats {
    use super::env_or;

    /// What to run when a NATS server is missing.
    pub const START_HINT: &str = "start the test servers with `scripts/services.sh start nats` \
         (from the repository root; `eval \"$(scripts/services.sh env)\"` exports the addresses)";

    /// The plain nats-server most tests share (`SENTINEL_NATS_ADDR`).
    pub fn addr() -> String {
        env_or("SENTINEL_NATS_ADDR", "127.0.0.1:14222")
    }

    /// The nats-server with user/password auth on (`SENTINEL_NATS_AUTH_ADDR`): user `app`,
    /// password `apppw`.
    pub fn auth_addr() -> String {
        env_or("SENTINEL_NATS_AUTH_ADDR", "127.0.0.1:14223")
    }

    /// The nats-server the fault tests stop and restart (`SENTINEL_NATS_FAULT_ADDR`); its
    /// JetStream store survives a restart.
    pub fn fault_addr() -> String {
        env_or("SENTINEL_NATS_FAULT_ADDR", "127.0.0.1:14224")
    }

    /// The nats-server the frozen-server tests freeze and thaw (`SENTINEL_NATS_FREEZE_ADDR`,
    /// `scripts/services.sh start nats-freeze`).
    pub fn freeze_addr() -> String {
        env_or("SENTINEL_NATS_FREEZE_ADDR", "127.0.0.1:14226")
    }

    /// The nats-server that serves TLS only (`SENTINEL_NATS_TLS_ADDR`), with a CA the script
    /// made (`SENTINEL_NATS_TLS_CA`).
    pub fn tls_addr() -> String {
        env_or("SENTINEL_NATS_TLS_ADDR", "127.0.0.1:14225")
    }
}

/// The Redis servers: plain, with auth, with keyspace notifications, for faults and
/// freezes, behind Redis Sentinel, as a cluster, over TLS, and the cluster backend's own.
pub mod redis {
    use super::env_or;

    /// What to run when a Redis server is missing.
    pub const START_HINT: &str = "start the test servers with `scripts/services.sh start redis` \
         (from the repository root; `eval \"$(scripts/services.sh env)\"` exports the addresses)";

    /// The plain Redis most tests share (`SENTINEL_REDIS_ADDR`); keyspace notifications off.
    pub fn addr() -> String {
        env_or("SENTINEL_REDIS_ADDR", "127.0.0.1:16379")
    }

    /// The Redis with `requirepass rootpw` and the ACL user app:apppw, who may use keys and
    /// channels matching `rules:*` only (`SENTINEL_REDIS_AUTH_ADDR`).
    pub fn auth_addr() -> String {
        env_or("SENTINEL_REDIS_AUTH_ADDR", "127.0.0.1:16380")
    }

    /// The Redis with `notify-keyspace-events KA` (`SENTINEL_REDIS_KEYSPACE_ADDR`).
    pub fn keyspace_addr() -> String {
        env_or("SENTINEL_REDIS_KEYSPACE_ADDR", "127.0.0.1:16381")
    }

    /// The Redis the fault tests stop and restart (`SENTINEL_REDIS_FAULT_ADDR`); its data
    /// lives in an append-only file and survives a restart.
    pub fn fault_addr() -> String {
        env_or("SENTINEL_REDIS_FAULT_ADDR", "127.0.0.1:16382")
    }

    /// The Redis that serves TLS only (`SENTINEL_REDIS_TLS_ADDR`, `scripts/services.sh start
    /// redis-tls`).
    pub fn tls_addr() -> String {
        env_or("SENTINEL_REDIS_TLS_ADDR", "127.0.0.1:16383")
    }

    /// The cluster backend's own Redis, which its outage tests stop and kill
    /// (`SENTINEL_REDIS_FLOW_ADDR`, `scripts/services.sh start redis-flow`).
    pub fn flow_addr() -> String {
        env_or("SENTINEL_REDIS_FLOW_ADDR", "127.0.0.1:16384")
    }

    /// The Redis the frozen-server tests freeze and thaw (`SENTINEL_REDIS_FREEZE_ADDR`,
    /// `scripts/services.sh start redis-freeze`).
    pub fn freeze_addr() -> String {
        env_or("SENTINEL_REDIS_FREEZE_ADDR", "127.0.0.1:16385")
    }

    /// The Redis Sentinel that watches the `redis-ha` pair (`SENTINEL_REDIS_SENTINEL_ADDRS`).
    pub fn sentinel_addrs() -> String {
        env_or("SENTINEL_REDIS_SENTINEL_ADDRS", "127.0.0.1:26390")
    }

    /// The master name the sentinel watches (`SENTINEL_REDIS_MASTER_NAME`).
    pub fn master_name() -> String {
        env_or("SENTINEL_REDIS_MASTER_NAME", "sentinel-test")
    }

    /// The nodes of the 3-master cluster (`SENTINEL_REDIS_CLUSTER_ADDRS`).
    pub fn cluster_addrs() -> String {
        env_or(
            "SENTINEL_REDIS_CLUSTER_ADDRS",
            "127.0.0.1:16401,127.0.0.1:16402,127.0.0.1:16403",
        )
    }
}

/// The ZooKeeper servers (standalone, from Debian's `zookeeper` package).
pub mod zookeeper {
    use std::path::PathBuf;

    use super::env_or;

    /// What to run when a ZooKeeper server is missing.
    pub const START_HINT: &str = "start the test servers with `scripts/services.sh start \
         zookeeper` (from the repository root; `eval \"$(scripts/services.sh env)\"` exports \
         the addresses)";

    /// The plain ZooKeeper most tests share (`SENTINEL_ZOOKEEPER_ADDR`).
    pub fn addr() -> String {
        env_or("SENTINEL_ZOOKEEPER_ADDR", "127.0.0.1:12181")
    }

    /// The ZooKeeper the fault tests stop, kill and restart (`SENTINEL_ZOOKEEPER_FAULT_ADDR`);
    /// its data survives a restart.
    pub fn fault_addr() -> String {
        env_or("SENTINEL_ZOOKEEPER_FAULT_ADDR", "127.0.0.1:12182")
    }

    /// The ZooKeeper the frozen-server tests freeze and thaw
    /// (`SENTINEL_ZOOKEEPER_FREEZE_ADDR`).
    pub fn freeze_addr() -> String {
        env_or("SENTINEL_ZOOKEEPER_FREEZE_ADDR", "127.0.0.1:12183")
    }

    /// The file holding the PID of `zookeeper-fault` (`SENTINEL_ZOOKEEPER_FAULT_PID_FILE`),
    /// for the tests that SIGKILL it.
    pub fn fault_pid_file() -> PathBuf {
        crate::services_path(
            "SENTINEL_ZOOKEEPER_FAULT_PID_FILE",
            "zookeeper-fault/server.pid",
        )
    }
}

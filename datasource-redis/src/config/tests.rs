//! Unit tests of `config`.

use sentinel_test_support::{assert_default_health_check, assert_refused};

use super::*;

#[test]
fn addresses_parse_with_default_ports() {
    let a = Address::parse("redis://10.0.0.1:7000/", &SERVER).expect("valid");
    assert_eq!((a.host.as_str(), a.port), ("10.0.0.1", 7000));
    let a = Address::parse("cache.local", &SERVER).expect("valid");
    assert_eq!((a.host.as_str(), a.port), ("cache.local", 6379));
    let a = Address::parse("[::1]:6380", &SERVER).expect("valid");
    assert_eq!(
        (a.host.as_str(), a.port, a.to_string()),
        ("::1", 6380, "[::1]:6380".into())
    );
    for bad in [
        "",
        ":1",
        "h:0",
        "h:x",
        "::1",
        "redis://u:p@h:1",
        "rediss://h",
        "[::1",
    ] {
        assert!(
            Address::parse(bad, &SERVER).is_err(),
            "{bad:?} must be refused"
        );
    }
}

#[test]
fn credentials_in_an_address_are_refused_without_echoing_them_in_the_reason() {
    let err = Address::parse("redis://app:s3cret@h:1", &SERVER).expect_err("refused");
    let ConfigError::InvalidAddress { reason, .. } = err else {
        panic!("{err:?}")
    };
    assert!(!reason.contains("s3cret"));
}

#[test]
fn one_deployment_only() {
    let err = RedisConfig::builder()
        .server("a:1")
        .sentinel(["b:2"], "m")
        .build()
        .expect_err("two deployments");
    assert_eq!(err, ConfigError::SeveralDeployments);
    assert_eq!(
        RedisConfig::builder().build().expect_err("none"),
        ConfigError::NoAddress
    );
    assert_eq!(
        RedisConfig::builder()
            .sentinel(["b"], " ")
            .build()
            .expect_err("no name"),
        ConfigError::EmptyMasterName
    );
}

#[test]
fn sentinels_split_and_default_to_26379() {
    let config = RedisConfig::builder()
        .sentinel(["s1,s2:26400"], "mymaster")
        .build()
        .expect("valid");
    assert_eq!(
        config.describe(),
        "master mymaster of sentinels s1:26379,s2:26400"
    );
}

#[test]
fn debug_and_describe_never_show_the_password() {
    let config = RedisConfig::builder()
        .server("h:1")
        .credentials("app", "s3cret-pw")
        .db(2)
        .build()
        .expect("valid");
    let debug = format!("{config:?}");
    assert!(
        !debug.contains("s3cret-pw") && debug.contains("app"),
        "{debug}"
    );
    assert_eq!(config.describe(), "h:1 as app db 2");
    let builder = RedisConfig::builder().server("h").password("s3cret-pw");
    assert!(!format!("{builder:?}").contains("s3cret-pw"));
}

#[test]
fn zero_limits_and_negative_databases_are_refused() {
    let base = || RedisConfig::builder().server("h");
    assert_refused(
        base().request_timeout(Duration::ZERO).build(),
        ConfigError::Zero {
            field: "request_timeout",
        },
    );
    assert_refused(
        base().db(-1).build(),
        ConfigError::NegativeDatabase { db: -1 },
    );
}

#[test]
fn the_default_health_check_notices_a_frozen_server_within_3_s_and_debug_shows_them() {
    let base = || RedisConfig::builder().server("h");
    let config = base().build().expect("valid");
    assert_default_health_check(&config, config.frozen_server_detection());
    let zero_timeout = base().health_check(Duration::from_secs(1), Duration::ZERO);
    let field = "health_check timeout";
    assert_refused(zero_timeout.build(), ConfigError::Zero { field });
}

#[test]
fn credentials_come_from_the_environment_and_a_password_alone_is_the_default_user() {
    // Cargo and nextest set CARGO_PKG_NAME and CARGO_MANIFEST_DIR for every test run.
    let base = || RedisConfig::builder().server("h");
    let both = CredentialsEnv::new("CARGO_PKG_NAME", "CARGO_MANIFEST_DIR");
    let from_env = base().credentials_from_env(both).build().expect("valid");
    assert_eq!(from_env.user(), Some(env!("CARGO_PKG_NAME")));
    let alone = CredentialsEnv::new("SENTINEL_TEST_UNSET_USER", "CARGO_MANIFEST_DIR");
    let config = base().credentials_from_env(alone).build().expect("valid");
    assert_eq!((config.user(), config.password().is_some()), (None, true));
    assert_eq!(base().build().expect("valid").password(), None);
}

#[cfg(feature = "tls")]
#[test]
fn tls_settings_redis_cannot_honour_are_refused_and_the_client_identity_is_passed() {
    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";
    let base = || RedisConfig::builder().server("h");
    let named = TlsConfig::new().domain_name("other.host");
    let err = base().tls(named).build().expect_err("domain_name");
    assert!(err.to_string().contains("domain_name"), "{err}");
    let junk = TlsConfig::new().ca_certificate_pem("junk");
    assert!(matches!(
        base().tls(junk).build(),
        Err(ConfigError::Settings(_))
    ));
    let mutual = TlsConfig::new().client_identity_pem(CERT, KEY);
    let config = base().tls(mutual).build().expect("valid");
    let certs = certificates(config.tls().expect("tls"));
    let identity = certs.client_tls.expect("client identity");
    assert_eq!(identity.client_key, KEY.as_bytes());
}

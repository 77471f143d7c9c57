//! Unit tests of `config`.

use sentinel_test_support::{assert_default_health_check, assert_refused};

use super::*;

#[test]
fn credentials_in_an_endpoint_are_refused_without_echoing_them() {
    let err = EtcdConfig::builder()
        .endpoint("http://app:s3cret-pw@127.0.0.1:2379")
        .build()
        .expect_err("user info in the URL");
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("s3cret-pw"), "{shown}");
    assert!(shown.contains("credentials("), "{shown}");
}

#[test]
fn debug_redacts_the_password() {
    let config = EtcdConfig::builder()
        .endpoint("http://127.0.0.1:2379")
        .credentials("app", "s3cret-pw")
        .build()
        .expect("valid config");
    let shown = format!("{config:?}");
    assert!(!shown.contains("s3cret-pw"), "{shown}");
    assert!(shown.contains("app"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    let builder = format!(
        "{:?}",
        EtcdConfig::builder().credentials("app", "s3cret-pw")
    );
    assert!(!builder.contains("s3cret-pw"), "{builder}");
}

#[test]
fn endpoints_are_split_and_checked() {
    let config = EtcdConfig::builder()
        .endpoints(["http://a:1, http://b:2", "c:3"])
        .build()
        .expect("valid config");
    assert_eq!(config.endpoints(), ["http://a:1", "http://b:2", "c:3"]);

    assert_eq!(
        EtcdConfig::builder().build().err(),
        Some(ConfigError::NoEndpoints)
    );
    assert!(matches!(
        EtcdConfig::builder().endpoint("ftp://x:1").build(),
        Err(ConfigError::InvalidEndpoint { .. })
    ));
    assert!(matches!(
        EtcdConfig::builder().endpoint("http://").build(),
        Err(ConfigError::InvalidEndpoint { .. })
    ));
    #[cfg(not(feature = "tls"))]
    assert!(matches!(
        EtcdConfig::builder().endpoint("https://x:1").build(),
        Err(ConfigError::InvalidEndpoint { .. })
    ));
}

#[test]
fn rejects_empty_user_and_zero_timeouts() {
    let base = || EtcdConfig::builder().endpoint("http://127.0.0.1:2379");
    assert_refused(base().credentials("", "pw").build(), ConfigError::EmptyUser);
    assert_refused(
        base().request_timeout(Duration::ZERO).build(),
        ConfigError::Zero {
            field: "request_timeout",
        },
    );
    assert_refused(
        base().connect_timeout(Duration::ZERO).build(),
        ConfigError::Zero {
            field: "connect_timeout",
        },
    );
}

#[test]
fn the_default_health_check_notices_a_frozen_server_within_3_s_and_debug_shows_it() {
    let base = || EtcdConfig::builder().endpoint("http://127.0.0.1:2379");
    let config = base().build().expect("valid");
    assert_default_health_check(&config, config.frozen_server_detection());
    let zero_timeout = base().health_check(Duration::from_secs(1), Duration::ZERO);
    let field = "health_check timeout";
    assert_refused(zero_timeout.build(), ConfigError::Zero { field });
}

#[test]
fn credentials_come_from_the_environment_only_when_asked_and_given_ones_win() {
    // Cargo and nextest set CARGO_PKG_NAME and CARGO_MANIFEST_DIR for every test run.
    let env = || CredentialsEnv::new("CARGO_PKG_NAME", "CARGO_MANIFEST_DIR");
    let base = || EtcdConfig::builder().endpoint("127.0.0.1:2379");
    assert_eq!(base().build().expect("valid").user(), None);
    let from_env = base().credentials_from_env(env()).build().expect("valid");
    assert_eq!(from_env.user(), Some(env!("CARGO_PKG_NAME")));
    let given = base().credentials_from_env(env()).credentials("app", "pw");
    assert_eq!(given.build().expect("valid").user(), Some("app"));
    let half = CredentialsEnv::new("CARGO_PKG_NAME", "SENTINEL_TEST_UNSET_PASSWORD");
    let err = base().credentials_from_env(half).build().expect_err("half");
    assert!(matches!(err, ConfigError::Settings(_)), "{err:?}");
}

#[test]
fn a_port_out_of_range_is_refused() {
    let err = EtcdConfig::builder().endpoint("http://h:99999").build();
    assert!(
        matches!(err, Err(ConfigError::InvalidEndpoint { .. })),
        "{err:?}"
    );
}

#[cfg(feature = "tls")]
#[test]
fn a_ca_that_is_no_pem_certificate_is_refused_by_the_builder() {
    let tls = TlsConfig::new().ca_certificate_pem("not a certificate");
    let err = EtcdConfig::builder()
        .endpoint("https://h:2379")
        .tls(tls)
        .build();
    let Err(ConfigError::Settings(backend::ConfigError::Tls { field, .. })) = err else {
        panic!("{err:?}")
    };
    assert_eq!(field, "ca_certificate");
    let plain = EtcdConfig::builder()
        .endpoint("http://h:2379")
        .tls(TlsConfig::new());
    assert!(matches!(
        plain.build(),
        Err(ConfigError::InvalidEndpoint { .. })
    ));
}

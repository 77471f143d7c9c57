//! Unit tests of `source`.

use super::*;

#[test]
fn keyspace_flags_must_cover_string_and_generic_events() {
    for on in ["KA", "AK", "K$g", "gK$x", "AKE"] {
        assert!(keyspace_events_cover_sets_and_deletes(on), "{on}");
    }
    for off in ["", "E", "EA", "K$", "Kg", "Kx"] {
        assert!(!keyspace_events_cover_sets_and_deletes(off), "{off}");
    }
}

#[test]
fn the_keyspace_channel_names_the_db_and_the_key() {
    let config = RedisConfig::builder()
        .server("127.0.0.1")
        .db(3)
        .build()
        .expect("valid");
    let source = RedisSource::new(config, "rules:flow", ChangeMode::Keyspace);
    assert_eq!(source.channel(), "__keyspace@3__:rules:flow");
    assert!(
        source.describe().contains("keyspace"),
        "{}",
        source.describe()
    );
}

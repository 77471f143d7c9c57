//! Unit tests of `client`.

use super::*;

#[test]
fn md5_is_lowercase_hex_of_the_bytes() {
    assert_eq!(content_md5(b""), "d41d8cd98f00b204e9800998ecf8427e");
    assert_eq!(content_md5(b"[]"), "d751713988987e9331980363e24189ce");
}

#[test]
fn listener_answers_are_decoded() {
    let body =
        b"orders-flow-rules%02SENTINEL_GROUP%01orders-degrade-rules%02SENTINEL_GROUP%02dev%01\n";
    assert_eq!(
        parse_changed(body),
        vec![
            ConfigKey::new("orders-flow-rules", "SENTINEL_GROUP"),
            ConfigKey::new("orders-degrade-rules", "SENTINEL_GROUP"),
        ]
    );
    assert!(parse_changed(b"").is_empty());
    assert!(parse_changed(b"%02%01").is_empty());
}

#[test]
fn excerpts_are_short() {
    let long = "x".repeat(500);
    assert_eq!(excerpt(long.as_bytes()).len(), 203);
    assert_eq!(excerpt(b" ok \n"), "ok");
}

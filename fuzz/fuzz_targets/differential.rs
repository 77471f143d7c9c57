//! The converters' fast path against their general path: for every family, when the typed
//! fast path takes a payload, it must load exactly what the general path (a JSON document,
//! then the family's decoder) loads, or refuse it as the general path does.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Err(difference) = sentinel_core::datasource::fuzzing::fast_and_general_agree(bytes) {
        panic!("{difference}");
    }
});

//! The commands that open no store, `validate` and `schema`, and reading a rules file, which
//! `push` and `diff` do too.

use std::path::Path;

use sentinel_core::{KeyPolicy, Validation};
use serde_json::{json, Value};

use crate::failure::Failure;
use crate::format::{Rules, Shape};
use crate::output::{issue_json, print_invalid, report};

/// `validate`: checks a rules file and prints its warnings, or every problem (exit 1).
pub(crate) fn validate(
    file: &Path,
    strict_keys: bool,
    shape: &Shape,
    json: bool,
) -> Result<(), Failure> {
    let keys = if strict_keys {
        KeyPolicy::Deny
    } else {
        KeyPolicy::Warn
    };
    let rules = read_file_with(file, shape, json, keys)?;
    let warnings: Vec<Value> = rules.warnings.iter().map(issue_json).collect();
    report(
        json,
        json!({ "ok": true, "rules": rules.counts(), "warnings": warnings }),
        || {
            let mut text = String::new();
            for warning in &rules.warnings {
                text.push_str(&format!("warning: {warning}\n"));
            }
            text.push_str(&format!("ok: {}", rules.summary()));
            text
        },
    );
    Ok(())
}

/// `schema`: prints the JSON Schema of a rule format.
pub(crate) fn schema(shape: &Shape) -> Result<(), Failure> {
    let name = shape.schema_name()?;
    let schemas = sentinel_core::datasource::schema::rule_schemas();
    let schema = schemas
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, schema)| schema)
        .ok_or_else(|| Failure::Usage(format!("no schema named {name}")))?;
    say!(
        "{}",
        serde_json::to_string_pretty(&schema).unwrap_or_default()
    );
    Ok(())
}

/// Reads and converts a rules file; prints its problems (and fails) when it is invalid.
pub(crate) fn read_file(path: &Path, shape: &Shape, json: bool) -> Result<Rules, Failure> {
    read_file_with(path, shape, json, KeyPolicy::Warn)
}

/// [`read_file`], with what an unknown key is.
fn read_file_with(
    path: &Path,
    shape: &Shape,
    json: bool,
    keys: KeyPolicy,
) -> Result<Rules, Failure> {
    let bytes = std::fs::read(path)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
    match shape
        .converter_with(keys)?
        .convert_with(&bytes, Validation::Strict)
    {
        Ok(converted) => Ok(Rules {
            set: converted.value,
            warnings: converted.warnings,
        }),
        Err(error) => {
            let error = error.with_payload(&path.display().to_string());
            print_invalid(&error, json, keys == KeyPolicy::Deny);
            Err(Failure::Rules)
        }
    }
}

//! Moving rules between the lists of a combined document by editing its text, so that
//! `promote` and `demote` change the moved rules and nothing else: every other byte of the
//! stored text (key order, spacing, numbers as written, keys the converters ignore) stays
//! as it was.
//!
//! A small scanner finds where each value of the document lies in the text (serde_json
//! gives values, not places). The moved rules are cut out of one list, with their separators,
//! and appended to the other one, re-indented to its depth. A shadow list left empty is
//! removed, and so is a shadow section left empty; an enforced list left empty stays `[]`.

use serde_json::Value;

/// Where a value (or an object's member, key to value) lies in the text: `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
}

/// One member of an object: its key, where the member lies (key to value), and its value.
#[derive(Debug, Clone)]
struct Member {
    key: String,
    member: Span,
    value: Span,
}

/// Why the text could not be edited (the caller then writes the document re-encoded).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the stored text cannot be edited in place: {0}")]
pub(crate) struct EditError(String);

fn fail<T>(why: impl Into<String>) -> Result<T, EditError> {
    Err(EditError(why.into()))
}

/// Deep enough for any rule document; deeper is refused, never a stack overflow.
const MAX_DEPTH: usize = 64;

/// Finds values in a JSON text.
struct Scanner<'a> {
    text: &'a [u8],
    pos: usize,
}

impl<'a> Scanner<'a> {
    fn at(text: &'a str, pos: usize) -> Self {
        Self {
            text: text.as_bytes(),
            pos,
        }
    }

    fn skip_space(&mut self) {
        while self
            .text
            .get(self.pos)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn expect(&mut self, byte: u8) -> Result<(), EditError> {
        self.skip_space();
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            fail(format!("expected `{}` at byte {}", byte as char, self.pos))
        }
    }

    /// The next value (after any space).
    fn value(&mut self, depth: usize) -> Result<Span, EditError> {
        if depth > MAX_DEPTH {
            return fail("nested too deep");
        }
        self.skip_space();
        let start = self.pos;
        match self.peek() {
            Some(b'"') => self.string()?,
            Some(open @ (b'{' | b'[')) => {
                let close = if open == b'{' { b'}' } else { b']' };
                self.pos += 1;
                self.skip_space();
                if self.peek() == Some(close) {
                    self.pos += 1;
                } else {
                    loop {
                        if open == b'{' {
                            self.skip_space();
                            self.string()?;
                            self.expect(b':')?;
                        }
                        self.value(depth + 1)?;
                        self.skip_space();
                        match self.peek() {
                            Some(b',') => self.pos += 1,
                            Some(b) if b == close => {
                                self.pos += 1;
                                break;
                            }
                            _ => return fail(format!("unexpected byte at {}", self.pos)),
                        }
                    }
                }
            }
            Some(_) => {
                // A number, `true`, `false` or `null`: up to the next delimiter.
                while self.peek().is_some_and(|b| {
                    !matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
                }) {
                    self.pos += 1;
                }
            }
            None => return fail("the text ends where a value should be"),
        }
        if self.pos == start {
            return fail(format!("no value at byte {start}"));
        }
        Ok(Span {
            start,
            end: self.pos,
        })
    }

    fn string(&mut self) -> Result<(), EditError> {
        if self.peek() != Some(b'"') {
            return fail(format!("expected a string at byte {}", self.pos));
        }
        self.pos += 1;
        loop {
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => self.pos += 2,
                Some(_) => self.pos += 1,
                None => return fail("an unterminated string"),
            }
        }
    }
}

/// The document's top value.
fn root(text: &str) -> Result<Span, EditError> {
    let mut scanner = Scanner::at(text, 0);
    let span = scanner.value(0)?;
    scanner.skip_space();
    if scanner.pos != text.len() {
        return fail("text after the document");
    }
    Ok(span)
}

/// The members of the object at `object`.
fn members(text: &str, object: Span) -> Result<Vec<Member>, EditError> {
    if text.as_bytes().get(object.start) != Some(&b'{') {
        return fail("expected an object");
    }
    let mut scanner = Scanner::at(text, object.start + 1);
    let mut members = Vec::new();
    scanner.skip_space();
    if scanner.peek() == Some(b'}') {
        return Ok(members);
    }
    loop {
        scanner.skip_space();
        let key_start = scanner.pos;
        scanner.string()?;
        let key: String = serde_json::from_str(&text[key_start..scanner.pos])
            .map_err(|e| EditError(format!("a key: {e}")))?;
        scanner.expect(b':')?;
        let value = scanner.value(1)?;
        members.push(Member {
            key,
            member: Span {
                start: key_start,
                end: value.end,
            },
            value,
        });
        scanner.skip_space();
        match scanner.peek() {
            Some(b',') => scanner.pos += 1,
            Some(b'}') => return Ok(members),
            _ => return fail(format!("unexpected byte at {}", scanner.pos)),
        }
    }
}

/// The elements of the list at `list`.
fn elements(text: &str, list: Span) -> Result<Vec<Span>, EditError> {
    if text.as_bytes().get(list.start) != Some(&b'[') {
        return fail("expected a list");
    }
    let mut scanner = Scanner::at(text, list.start + 1);
    let mut items = Vec::new();
    scanner.skip_space();
    if scanner.peek() == Some(b']') {
        return Ok(items);
    }
    loop {
        items.push(scanner.value(1)?);
        scanner.skip_space();
        match scanner.peek() {
            Some(b',') => scanner.pos += 1,
            Some(b']') => return Ok(items),
            _ => return fail(format!("unexpected byte at {}", scanner.pos)),
        }
    }
}

/// `text` with the items (elements or members) of the container at `container` whose
/// positions `remove` holds taken out with their separators; the others keep theirs.
fn remove_items(text: &str, container: Span, items: &[Span], remove: &[usize]) -> String {
    let inner_start = container.start + 1;
    let inner_end = container.end - 1;
    let kept: Vec<usize> = (0..items.len()).filter(|i| !remove.contains(i)).collect();
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..inner_start]);
    if let (Some(first), Some(last)) = (items.first(), items.last()) {
        if !kept.is_empty() {
            // The space before the first item, then each kept item with the separator that
            // came before it (the first kept one takes the first item's place).
            out.push_str(&text[inner_start..first.start]);
            for (n, &i) in kept.iter().enumerate() {
                if n > 0 {
                    out.push_str(&text[items[i - 1].end..items[i].start]);
                }
                out.push_str(&text[items[i].start..items[i].end]);
            }
            out.push_str(&text[last.end..inner_end]);
        }
    }
    out.push_str(&text[inner_end..]);
    out
}

/// The indentation of the line `pos` is on, when only spaces come before it on that line.
fn indent_at(text: &str, pos: usize) -> Option<&str> {
    let line_start = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    let indent = &text[line_start..pos];
    indent
        .chars()
        .all(|c| c == ' ' || c == '\t')
        .then_some(indent)
}

/// `item` (cut from where `from` is its indentation) re-indented for `to`.
fn reindent(item: &str, from: Option<&str>, to: Option<&str>) -> String {
    match (from, to) {
        (Some(from), Some(to)) if from != to && item.contains('\n') => {
            item.replace(&format!("\n{from}"), &format!("\n{to}"))
        }
        _ => item.to_owned(),
    }
}

/// `text` with `new` (texts of items, each with the indentation it had) appended to the
/// container at `container`, whose items are `items`; `child_indent` is the indentation an
/// item of an empty container takes.
fn append_items(
    text: &str,
    container: Span,
    items: &[Span],
    new: &[(String, Option<String>)],
    child_indent: Option<&str>,
) -> String {
    let inner_start = container.start + 1;
    let mut out = String::with_capacity(text.len() + 64);
    match items {
        [] => {
            // `[]` becomes `[a, b]` (`[a,b]` in a document without spaces), or one item a
            // line in a document of several lines.
            let pretty = text.contains('\n');
            let comma = if pretty || !text.contains(", ") {
                ","
            } else {
                ", "
            };
            out.push_str(&text[..inner_start]);
            for (n, (item, from)) in new.iter().enumerate() {
                if n > 0 {
                    out.push_str(comma);
                }
                if pretty {
                    out.push('\n');
                    out.push_str(child_indent.unwrap_or(""));
                }
                out.push_str(&reindent(item, from.as_deref(), child_indent));
            }
            if pretty {
                out.push('\n');
                out.push_str(line_indent(text, container.start));
            }
            out.push_str(&text[container.end - 1..]);
        }
        [.., last] => {
            // The separator the last item had (or a comma and the first item's space).
            let separator = match items {
                [.., before, last] => text[before.end..last.start].to_owned(),
                _ => format!(",{}", &text[inner_start..last.start]),
            };
            let to = indent_at(text, last.start);
            out.push_str(&text[..last.end]);
            for (item, from) in new {
                out.push_str(&separator);
                out.push_str(&reindent(item, from.as_deref(), to));
            }
            out.push_str(&text[last.end..]);
        }
    }
    out
}

/// The indentation of the line `pos` is on (its leading spaces).
fn line_indent(text: &str, pos: usize) -> &str {
    let line_start = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..];
    let len = line.len() - line.trim_start_matches([' ', '\t']).len();
    &line[..len]
}

/// The indentation one level deeper than the line `pos` is on, guessed from the document's
/// first indented line (two spaces if none is).
fn child_indent(text: &str, pos: usize) -> Option<String> {
    if !text.contains('\n') {
        return None;
    }
    let unit = text
        .lines()
        .skip(1)
        .map(|l| &l[..l.len() - l.trim_start_matches([' ', '\t']).len()])
        .find(|i| !i.is_empty())
        .unwrap_or("  ");
    Some(format!("{}{unit}", line_indent(text, pos)))
}

/// A rule's resource: its `resource`, or that of the dashboard's `{"rule": {...}}` shape.
fn resource_of(rule: &str) -> Option<String> {
    let value: Value = serde_json::from_str(rule).ok()?;
    value
        .get("resource")
        .or_else(|| value.get("rule").and_then(|r| r.get("resource")))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Which list rules move from and to, and which ones.
#[derive(Debug, Clone)]
pub(crate) struct Move<'a> {
    /// The family's name in the document (`flow`, `paramFlow`...).
    pub(crate) family: &'a str,
    /// Promote (shadow to enforced) or demote.
    pub(crate) promote: bool,
    /// Only rules of this resource.
    pub(crate) resource: Option<&'a str>,
    /// Only the rule at this position of the list.
    pub(crate) index: Option<usize>,
    /// Drop the target list's rules on the moved rules' resources first (every rule of the
    /// list for rules without a resource).
    pub(crate) replace: bool,
}

/// The shadow section's key.
const SHADOW: &str = "shadow";

/// The value of member `key` of the object at `object`, made a list when it is one rule or
/// `null` (as the converters read them): the text, and the list's span in it.
fn list_member(text: &str, object: Span, key: &str) -> Result<Option<(String, Span)>, EditError> {
    let Some(member) = members(text, object)?.into_iter().find(|m| m.key == key) else {
        return Ok(None);
    };
    let value = &text[member.value.start..member.value.end];
    let normalised = match value.as_bytes().first() {
        Some(b'[') => return Ok(Some((text.to_owned(), member.value))),
        Some(b'{') => format!("[{value}]"),
        _ if value == "null" => "[]".to_owned(),
        _ => return fail(format!("`{key}` is not a list")),
    };
    let text = format!(
        "{}{normalised}{}",
        &text[..member.value.start],
        &text[member.value.end..]
    );
    let span = Span {
        start: member.value.start,
        end: member.value.start + normalised.len(),
    };
    Ok(Some((text, span)))
}

/// The object holding the list rules move from (`source`) or to: the top object, or the
/// shadow section inside it.
fn section(text: &str, shadow: bool) -> Result<Option<Span>, EditError> {
    let top = root(text)?;
    if !shadow {
        return Ok(Some(top));
    }
    let shadow = members(text, top)?.into_iter().find(|m| m.key == SHADOW);
    match shadow {
        Some(m) if text.as_bytes().get(m.value.start) == Some(&b'{') => Ok(Some(m.value)),
        Some(_) => fail("`shadow` is not an object"),
        None => Ok(None),
    }
}

/// Moves the rules `how` picks in the combined document `text`; returns the new text and
/// how many rules moved (0: nothing matched, and the text is unchanged).
pub(crate) fn move_rules(stored: &str, how: &Move<'_>) -> Result<(String, usize), EditError> {
    let text = stored;
    // Cut the picked rules out of the list they are in.
    let Some(from_object) = section(text, how.promote)? else {
        return Ok((text.to_owned(), 0));
    };
    let Some((text, list)) = list_member(text, from_object, how.family)? else {
        return Ok((text.to_owned(), 0));
    };
    let items = elements(&text, list)?;
    let picked: Vec<usize> = (0..items.len())
        .filter(|&i| how.index.is_none_or(|want| want == i))
        .filter(|&i| {
            how.resource.is_none_or(|want| {
                resource_of(&text[items[i].start..items[i].end]).as_deref() == Some(want)
            })
        })
        .collect();
    if picked.is_empty() {
        return Ok((stored.to_owned(), 0));
    }
    let moved: Vec<(String, Option<String>)> = picked
        .iter()
        .map(|&i| {
            let item = &text[items[i].start..items[i].end];
            (
                item.to_owned(),
                indent_at(&text, items[i].start).map(str::to_owned),
            )
        })
        .collect();
    let mut text = remove_items(&text, list, &items, &picked);
    if how.promote && picked.len() == items.len() {
        // No shadow list left empty, and no shadow section.
        text = remove_member(&text, true, how.family)?;
        if let Some(shadow) = section(&text, true)? {
            if members(&text, shadow)?.is_empty() {
                text = remove_member(&text, false, SHADOW)?;
            }
        }
    }

    // Append them to the other list, made first when it is missing.
    let to_shadow = !how.promote;
    let to_object = match section(&text, to_shadow)? {
        Some(object) => object,
        None => {
            let top = root(&text)?;
            text = add_member(&text, top, SHADOW, "{}")?;
            section(&text, true)?.ok_or_else(|| EditError("no shadow section".into()))?
        }
    };
    let (mut text, mut list) = match list_member(&text, to_object, how.family)? {
        Some(found) => found,
        None => {
            let text = add_member(&text, to_object, how.family, "[]")?;
            let object =
                section(&text, to_shadow)?.ok_or_else(|| EditError("no target section".into()))?;
            list_member(&text, object, how.family)?
                .ok_or_else(|| EditError("no target list".into()))?
        }
    };
    let mut items = elements(&text, list)?;
    if how.replace {
        let moved_resources: Vec<Option<String>> =
            moved.iter().map(|(item, _)| resource_of(item)).collect();
        let dropped: Vec<usize> = (0..items.len())
            .filter(|&i| {
                let name = resource_of(&text[items[i].start..items[i].end]);
                name.is_none() || moved_resources.contains(&name)
            })
            .collect();
        if !dropped.is_empty() {
            text = remove_items(&text, list, &items, &dropped);
            let object =
                section(&text, to_shadow)?.ok_or_else(|| EditError("no target section".into()))?;
            list = list_member(&text, object, how.family)?
                .ok_or_else(|| EditError("no target list".into()))?
                .1;
            items = elements(&text, list)?;
        }
    }
    let child = child_indent(&text, list.start);
    let text = append_items(&text, list, &items, &moved, child.as_deref());
    Ok((text, picked.len()))
}

/// `text` without member `key` of the top object (`shadow` false) or of its shadow section.
fn remove_member(text: &str, shadow: bool, key: &str) -> Result<String, EditError> {
    let Some(object) = section(text, shadow)? else {
        return Ok(text.to_owned());
    };
    let found = members(text, object)?;
    let spans: Vec<Span> = found.iter().map(|m| m.member).collect();
    let remove: Vec<usize> = (0..found.len()).filter(|&i| found[i].key == key).collect();
    Ok(remove_items(text, object, &spans, &remove))
}

/// `text` with member `"key": value` appended to the object at `object`.
fn add_member(text: &str, object: Span, key: &str, value: &str) -> Result<String, EditError> {
    let found = members(text, object)?;
    let spans: Vec<Span> = found.iter().map(|m| m.member).collect();
    // The new member's `": "` as the document writes it.
    let first = match found.first() {
        Some(m) => Some(m.clone()),
        None => members(text, root(text)?)?.into_iter().next(),
    };
    let colon = first
        .and_then(|m| {
            let mut key = Scanner::at(text, m.member.start);
            key.string().ok()?;
            text.get(key.pos..m.value.start).map(str::to_owned)
        })
        .unwrap_or_else(|| ": ".to_owned());
    let key = serde_json::to_string(key).map_err(|e| EditError(e.to_string()))?;
    let member = format!("{key}{colon}{value}");
    let child = child_indent(text, object.start);
    Ok(append_items(
        text,
        object,
        &spans,
        &[(member, None)],
        child.as_deref(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn promote(text: &str, resource: Option<&str>, replace: bool) -> (String, usize) {
        let how = Move {
            family: "flow",
            promote: true,
            resource,
            index: None,
            replace,
        };
        move_rules(text, &how).expect("editable")
    }

    fn demote(text: &str, index: Option<usize>) -> (String, usize) {
        let how = Move {
            family: "flow",
            promote: false,
            resource: None,
            index,
            replace: false,
        };
        move_rules(text, &how).expect("editable")
    }

    #[test]
    fn a_promote_moves_the_rule_and_leaves_no_empty_shadow_section() {
        let text = r#"{
  "flow": [
    {"resource": "GET:/order", "count": 100, "owner": "team-a"}
  ],
  "degrade": [],
  "shadow": {
    "flow": [
      {"resource": "GET:/order", "count": 10}
    ]
  }
}"#;
        let (out, n) = promote(text, Some("GET:/order"), true);
        assert_eq!(n, 1);
        assert_eq!(
            out,
            r#"{
  "flow": [
    {"resource": "GET:/order", "count": 10}
  ],
  "degrade": []
}"#
        );
        // Without replace, appended after the enforced one, with its separator.
        let (out, _) = promote(text, None, false);
        assert!(
            out.contains(
                "\"owner\": \"team-a\"},\n    {\"resource\": \"GET:/order\", \"count\": 10}\n  ]"
            ),
            "{out}"
        );
    }

    #[test]
    fn a_demote_adds_the_shadow_section_and_keeps_the_enforced_list() {
        let text =
            r#"{"flow":[{"resource":"a","count":1},{"resource":"b","count":2.50}],"system":[]}"#;
        let (out, n) = demote(text, Some(1));
        assert_eq!(n, 1);
        assert_eq!(
            out,
            r#"{"flow":[{"resource":"a","count":1}],"system":[],"shadow":{"flow":[{"resource":"b","count":2.50}]}}"#
        );
        // Both moved: the enforced list stays, empty.
        let (out, n) = demote(text, None);
        assert_eq!(n, 2);
        assert!(
            out.starts_with(r#"{"flow":[],"system":[],"shadow":{"flow":["#),
            "{out}"
        );
        // And back: the document as it was, but for the order of the moved rules.
        let (back, n) = promote(&out, None, false);
        assert_eq!(n, 2);
        assert_eq!(
            back,
            r#"{"flow":[{"resource":"a","count":1},{"resource":"b","count":2.50}],"system":[]}"#
        );
    }

    #[test]
    fn a_pretty_document_is_edited_at_its_own_indentation() {
        let text = "{\n    \"flow\": [\n        {\n            \"resource\": \"a\",\n            \"count\": 1\n        }\n    ]\n}";
        let (out, _) = demote(text, Some(0));
        let expected = "{\n    \"flow\": [],\n    \"shadow\": {\n        \"flow\": [\n            {\n                \"resource\": \"a\",\n                \"count\": 1\n            }\n        ]\n    }\n}";
        assert_eq!(out, expected, "\n{out}");
        let (back, _) = promote(&out, None, false);
        assert_eq!(
            back,
            "{\n    \"flow\": [\n        {\n            \"resource\": \"a\",\n            \"count\": 1\n        }\n    ]\n}"
        );
    }

    #[test]
    fn one_rule_or_null_where_a_list_goes_and_nothing_matching() {
        let text = r#"{"flow": null, "shadow": {"flow": {"resource": "a", "count": 1}}}"#;
        let (out, n) = promote(text, None, false);
        assert_eq!(n, 1);
        assert_eq!(out, r#"{"flow": [{"resource": "a", "count": 1}]}"#);
        let (same, n) = promote(text, Some("b"), false);
        assert_eq!((same.as_str(), n), (text, 0));
    }

    #[test]
    fn broken_text_is_an_error_never_a_panic() {
        for text in [
            "",
            "{",
            r#"{"flow": [1,"#,
            r#"{"shadow": 3}"#,
            r#"{"a": "\"#,
            "[[[[",
        ] {
            let how = Move {
                family: "flow",
                promote: true,
                resource: None,
                index: None,
                replace: true,
            };
            let _ = move_rules(text, &how);
        }
        let deep = "[".repeat(10_000);
        assert!(root(&deep).is_err());
    }
}

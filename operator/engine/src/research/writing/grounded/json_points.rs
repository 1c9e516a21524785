//! Reading the points of a JSON answer, in every shape small models write them.

use serde_json::Value;

use super::{MAX_POINT_PASSAGES, Point};

/// The point objects of a JSON answer: `{"points": [...]}`, a bare array of points, or one point.
pub(super) fn point_values(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Object(o) => match o.get("points") {
            Some(Value::Array(points)) => Some(points),
            Some(_) => None,
            None if sentence_of(v).is_some() => Some(std::slice::from_ref(v)),
            None => None,
        },
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object) => {
            Some(items)
        }
        _ => None,
    }
}

/// The sentence of a point object (models rename the key now and then).
fn sentence_of(v: &Value) -> Option<&str> {
    ["sentence", "text", "claim"]
        .iter()
        .find_map(|k| v.get(k).and_then(Value::as_str))
}

/// One point, its ids limited to the `count` shown passages; `None` when it has no sentence or
/// cites no shown passage.
pub(super) fn point(v: &Value, count: usize) -> Option<Point> {
    let sentence = sentence_of(v)?.trim();
    if sentence.is_empty() {
        return None;
    }
    let raw = ["passages", "passage", "ids", "sources"]
        .iter()
        .find_map(|k| v.get(k))?;
    let mut passages = Vec::new();
    for n in ids(raw) {
        if (1..=count).contains(&n) && !passages.contains(&n) {
            passages.push(n);
        }
    }
    passages.truncate(MAX_POINT_PASSAGES);
    (!passages.is_empty()).then(|| Point {
        passages,
        sentence: super::each::without_torn_tail(&super::each::whole_sentences(
            sentence,
            super::MAX_SENTENCE_CHARS,
        )),
        written_for: None,
    })
}

/// Passage ids in any form a model writes them: `2`, `2.0`, `"2"`, `"[2]"`, `"1, 2"`, lists of those.
fn ids(v: &Value) -> Vec<usize> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                    .map(|f| f as u64)
            })
            .and_then(|n| usize::try_from(n).ok())
            .into_iter()
            .collect(),
        Value::String(s) => s
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|d| d.parse().ok())
            .collect(),
        Value::Array(items) => items.iter().flat_map(ids).collect(),
        _ => vec![],
    }
}

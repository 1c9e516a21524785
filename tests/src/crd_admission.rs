//! The CRD admission checker shared by the CRD tests (`crd_schema`, `admission_matrix`, `chart`):
//! the generated schemas as JSON, a structural validator that reports problems the way the API
//! server words them, and the CRDs' CEL rules evaluated client-side.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize;
use serde_json::{Value, json};

/// The admission table both admission tests read (`admission_matrix` client-side,
/// `kube_admission` on a real API server); its header says how a row reads.
pub const CASES: &str = include_str!("../tests/admission/cases.yaml");

/// The whole table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    /// A valid spec of each kind, which every case departs from.
    pub baselines: BTreeMap<String, Value>,
    /// The refused specs.
    pub cases: Vec<Case>,
}

/// Which admission layer refuses a case.
#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    /// The structural OpenAPI schema.
    Schema,
    /// A CEL rule.
    Cel,
}

/// One row of the table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// `ResearchRun`, `ResearchProfile` or `SearchEngine`.
    pub kind: String,
    /// The object's name, unique in the table.
    pub name: String,
    /// The layer that refuses it.
    pub layer: Layer,
    /// A part of the API server's message.
    pub expect: String,
    /// The HTTP code of the refusal.
    #[serde(default = "unprocessable")]
    pub code: u16,
    /// The refused spec.
    pub spec: Value,
    /// For a transition rule: the spec it is updated from.
    #[serde(default)]
    pub old: Option<Value>,
}

/// 422, the code of most refusals.
fn unprocessable() -> u16 {
    422
}

/// The table, parsed.
pub fn matrix() -> Result<Matrix, serde_yaml::Error> {
    serde_yaml::from_str(CASES)
}

/// The openAPIV3Schema of a CRD as JSON.
pub fn schema_of(crd: &CustomResourceDefinition) -> Value {
    let version = &crd.spec.versions[0];
    let schema = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("CRD has an openAPIV3Schema");
    serde_json::to_value(schema).expect("schema serializes")
}

/// Walks `properties` along a dotted path; `[]` steps into array items.
pub fn prop<'a>(schema: &'a Value, path: &str) -> &'a Value {
    let mut node = schema;
    for part in path.split('.') {
        node = if part == "[]" {
            &node["items"]
        } else {
            &node["properties"][part]
        };
        assert!(!node.is_null(), "no schema at {path} (stuck at {part})");
    }
    node
}

/// JSON type name as go-openapi reports it in type errors.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A schema bound (`minimum`, `maximum`) printed like Go's `%v` of a float64 (`1`, `0.5`).
fn bound(value: &Value) -> String {
    value
        .as_f64()
        .map_or_else(|| value.to_string(), |f| f.to_string())
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// A small structural validator for the OpenAPI subset the CRDs use (type, enum, pattern, length,
/// range, items, required, set and map list uniqueness, unknown fields), so examples and bad input
/// are checked the way the API server checks them before CEL runs.
///
/// Messages follow the API server's wording (apiextensions-apiserver turning go-openapi results
/// into field errors), e.g. `spec.topK: Invalid value: 0: spec.topK in body should be greater than
/// or equal to 1`, so one expected substring serves this validator and a real API server. Unknown
/// fields are reported as the API server's strict field validation does (`unknown field
/// "spec.x"`); without strict validation it prunes them silently.
pub fn openapi_errors(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    if value.is_null() {
        if schema["nullable"] != json!(true) {
            out.push(format!(
                "{path}: Invalid value: \"null\": {path} in body must be of type {}: \"null\"",
                schema["type"].as_str().unwrap_or("object")
            ));
        }
        return;
    }
    let ty = schema["type"].as_str().unwrap_or("");
    let int_or_string = schema["x-kubernetes-int-or-string"] == json!(true);
    let type_ok = int_or_string && (value.is_string() || value.is_i64() || value.is_u64())
        || match ty {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "object" => value.is_object(),
            "array" => value.is_array(),
            _ => true,
        };
    if !type_ok {
        let actual = type_name(value);
        out.push(format!(
            "{path}: Invalid value: \"{actual}\": {path} in body must be of type {ty}: \"{actual}\""
        ));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        let supported: Vec<String> = allowed.iter().map(Value::to_string).collect();
        out.push(format!(
            "{path}: Unsupported value: {value}: supported values: {}",
            supported.join(", ")
        ));
    }
    if let Some(s) = value.as_str() {
        let chars = s.chars().count() as u64;
        if let Some(min) = schema["minLength"].as_u64()
            && chars < min
        {
            out.push(format!(
                "{path}: Invalid value: {value}: {path} in body should be at least {min} chars long"
            ));
        }
        if let Some(max) = schema["maxLength"].as_u64()
            && chars > max
        {
            out.push(format!("{path}: Too long: may not be longer than {max}"));
        }
        if let Some(p) = schema["pattern"].as_str()
            && !regex::Regex::new(p)
                .expect("schema pattern compiles")
                .is_match(s)
        {
            out.push(format!(
                "{path}: Invalid value: {value}: {path} in body should match '{p}'"
            ));
        }
    }
    if let Some(n) = value.as_f64() {
        if schema["minimum"].as_f64().is_some_and(|m| n < m) {
            out.push(format!(
                "{path}: Invalid value: {value}: {path} in body should be greater than or equal to {}",
                bound(&schema["minimum"])
            ));
        }
        if schema["maximum"].as_f64().is_some_and(|m| n > m) {
            out.push(format!(
                "{path}: Invalid value: {value}: {path} in body should be less than or equal to {}",
                bound(&schema["maximum"])
            ));
        }
    }
    if let Some(items) = value.as_array() {
        let len = items.len() as u64;
        if let Some(min) = schema["minItems"].as_u64()
            && len < min
        {
            out.push(format!(
                "{path}: Invalid value: {len}: {path} in body should have at least {min} items"
            ));
        }
        if let Some(max) = schema["maxItems"].as_u64()
            && len > max
        {
            out.push(format!(
                "{path}: Too many: {len}: must have at most {max} items"
            ));
        }
        match schema["x-kubernetes-list-type"].as_str() {
            Some("set") => {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        out.push(format!("{path}[{i}]: Duplicate value: {item}"));
                    }
                }
            }
            Some("map") => {
                let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let key_of = |item: &Value| -> Value {
                    keys.iter()
                        .map(|k| ((*k).to_owned(), item[*k].clone()))
                        .collect()
                };
                for (i, item) in items.iter().enumerate() {
                    let key = key_of(item);
                    if items[..i].iter().any(|earlier| key_of(earlier) == key) {
                        out.push(format!("{path}[{i}]: Duplicate value: {key}"));
                    }
                }
            }
            _ => {}
        }
        for (i, item) in items.iter().enumerate() {
            openapi_errors(&schema["items"], item, &format!("{path}[{i}]"), out);
        }
    }
    if let Some(fields) = value.as_object() {
        for req in schema["required"].as_array().into_iter().flatten() {
            let req = req.as_str().unwrap_or_default();
            if !fields.contains_key(req) {
                out.push(format!("{}: Required value", child(path, req)));
            }
        }
        let preserve = schema["x-kubernetes-preserve-unknown-fields"] == json!(true);
        if let Some(props) = schema["properties"].as_object() {
            for (k, v) in fields {
                match props.get(k) {
                    Some(sub) => openapi_errors(sub, v, &child(path, k), out),
                    None if preserve => {}
                    None => out.push(format!("unknown field \"{}\"", child(path, k))),
                }
            }
        } else if schema["additionalProperties"].is_object() {
            for (k, v) in fields {
                openapi_errors(&schema["additionalProperties"], v, &child(path, k), out);
            }
        }
    }
}

/// What admission says about an object: structural errors, then CEL errors, each as the API
/// server words them. Defaults are applied first, as the API server does before validating.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Structural (OpenAPI) errors.
    pub schema: Vec<String>,
    /// CEL (`x-kubernetes-validations`) errors.
    pub cel: Vec<String>,
    /// The CEL rules were not run because a structural error blocks them (see [`admit`]).
    pub cel_skipped: bool,
}

impl Verdict {
    /// Every error, structural first.
    pub fn all(&self) -> Vec<String> {
        self.schema.iter().chain(&self.cel).cloned().collect()
    }
}

/// Validates `object` (an update from `old` when given) against a CRD schema, both layers.
pub fn admit(schema: &Value, object: &Value, old: Option<&Value>) -> Verdict {
    let defaulted = kube::core::cel::apply_defaults(schema, object);
    let mut structural = Vec::new();
    // Only spec is validated structurally: metadata is checked by the API server's own rules,
    // and status goes through its subresource.
    openapi_errors(
        prop(schema, "spec"),
        &defaulted["spec"],
        "spec",
        &mut structural,
    );
    // The API server skips CEL when a type, enum, required or size error means the object lacks
    // the shape the rules were written for (apiextensions-apiserver's `hasBlockingErr`); it then
    // adds "some validation rules were not checked" instead.
    let blocking = structural.iter().any(|e| {
        [
            "must be of type",
            "Unsupported value",
            "Required value",
            "Too long",
            "Too many",
        ]
        .iter()
        .any(|kind| e.contains(kind))
    });
    let cel = if blocking {
        Vec::new()
    } else {
        kube::core::cel::Validator::new()
            .validate(schema, object, old)
            .map_or_else(
                |errs| errs.iter().map(|e| e.to_string()).collect(),
                |()| Vec::new(),
            )
    };
    Verdict {
        schema: structural,
        cel,
        cel_skipped: blocking,
    }
}

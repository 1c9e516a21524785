//! The admission matrix: every invalid ResearchRun, ResearchProfile and SearchEngine spec
//! in `admission/cases.yaml` is refused by the GENERATED CRDs with the expected message.
//!
//! The structural layer is checked with the shared OpenAPI validator (worded like the API server),
//! the CEL layer with kube's CEL interpreter, transition rules with the case's `old` spec. The same
//! table runs against a real API server in `tests/tests/kube_admission.rs`.

use std::collections::{BTreeMap, BTreeSet};

use quarry_e2e::crd_admission::{self, Case, Layer, Matrix, Verdict, admit, schema_of};
use serde_json::{Value, json};

fn matrix() -> Matrix {
    crd_admission::matrix().expect("admission/cases.yaml parses")
}

/// The generated schema of `kind`, from the same CRDs written to crds/*.yaml.
fn schema_for(kind: &str) -> Value {
    let crd = quarry_api::all_crds()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no generated CRD of kind {kind}"));
    schema_of(&crd)
}

fn object(kind: &str, name: &str, spec: &Value) -> Value {
    json!({
        "apiVersion": "quarry.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "ns"},
        "spec": spec
    })
}

/// Why a case does not hold, or `None` when it does.
fn check(case: &Case, schemas: &BTreeMap<String, Value>) -> Option<String> {
    let Some(schema) = schemas.get(&case.kind) else {
        return Some(format!("unknown kind {}", case.kind));
    };
    let old = case
        .old
        .as_ref()
        .map(|spec| object(&case.kind, &case.name, spec));
    if let Some(old) = &old {
        // The object must be creatable, or the update is never reached on a real server.
        let created = admit(schema, old, None);
        if !created.all().is_empty() {
            return Some(format!(
                "its old spec is itself refused: {:?}",
                created.all()
            ));
        }
    }
    let verdict: Verdict = admit(
        schema,
        &object(&case.kind, &case.name, &case.spec),
        old.as_ref(),
    );
    let layer_errors = match case.layer {
        Layer::Schema => &verdict.schema,
        Layer::Cel => &verdict.cel,
    };
    let all = verdict.all();
    if all.is_empty() {
        return Some("accepted, but must be refused".to_owned());
    }
    if !layer_errors.iter().any(|e| e.contains(&case.expect)) {
        return Some(format!(
            "no {:?} error contains {:?}; errors: {all:?}",
            case.layer, case.expect
        ));
    }
    // One error per case keeps each row about the one rule it names.
    if all.len() != 1 {
        return Some(format!("expected exactly one error, got {all:?}"));
    }
    let strict = case.expect.starts_with("unknown field");
    let code = if strict { 400 } else { 422 };
    if case.code != code {
        return Some(format!(
            "code {} but this kind of refusal is answered with {code}",
            case.code
        ));
    }
    if case.old.is_some() && case.layer != Layer::Cel {
        return Some("only CEL transition rules see the old object".to_owned());
    }
    None
}

fn schemas() -> BTreeMap<String, Value> {
    ["ResearchRun", "ResearchProfile", "SearchEngine"]
        .into_iter()
        .map(|kind| (kind.to_owned(), schema_for(kind)))
        .collect()
}

#[test]
fn every_invalid_spec_is_refused_with_its_message() {
    let matrix = matrix();
    let schemas = schemas();
    let mut failures = Vec::new();
    for case in &matrix.cases {
        match check(case, &schemas) {
            None => println!(
                "ok   {:<16} {:<6} {}",
                case.kind,
                format!("{:?}", case.layer).to_lowercase(),
                case.name
            ),
            Some(why) => {
                println!("FAIL {} {}: {why}", case.kind, case.name);
                failures.push(format!("{} ({}): {why}", case.name, case.kind));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} admission cases failed:\n{}",
        failures.len(),
        matrix.cases.len(),
        failures.join("\n")
    );
}

#[test]
fn matrix_is_large_spread_and_its_baselines_are_accepted() {
    let matrix = matrix();
    assert!(
        matrix.cases.len() >= 30,
        "{} cases, want at least 30",
        matrix.cases.len()
    );
    let mut per_kind: BTreeMap<&str, usize> = BTreeMap::new();
    let mut layers: BTreeSet<(&str, Layer)> = BTreeSet::new();
    let mut names = BTreeSet::new();
    let dns = regex::Regex::new(quarry_api::values::DNS1123_SUBDOMAIN_PATTERN).unwrap();
    for case in &matrix.cases {
        *per_kind.entry(case.kind.as_str()).or_default() += 1;
        layers.insert((case.kind.as_str(), case.layer));
        assert!(
            names.insert(case.name.as_str()),
            "duplicate case {}",
            case.name
        );
        assert!(dns.is_match(&case.name), "{} is no object name", case.name);
    }
    for kind in ["ResearchRun", "ResearchProfile", "SearchEngine"] {
        let n = per_kind.get(kind).copied().unwrap_or_default();
        assert!(n >= 8, "{kind}: {n} cases, want at least 8");
    }
    for kind in ["ResearchRun", "ResearchProfile"] {
        assert!(
            layers.contains(&(kind, Layer::Schema)),
            "{kind} schema cases"
        );
        assert!(layers.contains(&(kind, Layer::Cel)), "{kind} CEL cases");
    }
    assert!(
        matrix.cases.iter().any(|c| c.old.is_some()),
        "transition rules are covered"
    );
    println!("admission cases per kind: {per_kind:?}");
    println!(
        "per layer: schema {}, cel {}",
        matrix
            .cases
            .iter()
            .filter(|c| c.layer == Layer::Schema)
            .count(),
        matrix
            .cases
            .iter()
            .filter(|c| c.layer == Layer::Cel)
            .count()
    );

    // The baselines are accepted by both layers and by the Rust types, also as updates of
    // themselves (the transition rule holds for an unchanged spec).
    let schemas = schemas();
    assert_eq!(
        matrix.baselines.keys().collect::<Vec<_>>(),
        vec!["ResearchProfile", "ResearchRun", "SearchEngine"]
    );
    for (kind, spec) in &matrix.baselines {
        let obj = object(kind, "baseline", spec);
        assert_eq!(
            admit(&schemas[kind], &obj, None),
            Verdict::default(),
            "{kind}"
        );
        assert_eq!(
            admit(&schemas[kind], &obj, Some(&obj)),
            Verdict::default(),
            "{kind}"
        );
        match kind.as_str() {
            "ResearchRun" => {
                serde_json::from_value::<quarry_api::ResearchRun>(obj).expect("typed run");
            }
            "ResearchProfile" => {
                serde_json::from_value::<quarry_api::ResearchProfile>(obj).expect("typed profile");
            }
            _ => {
                serde_json::from_value::<quarry_api::SearchEngine>(obj).expect("typed engine");
            }
        }
    }
    // The mutable fields of a run may change (the transition rule lets them through).
    let base = &matrix.baselines["ResearchRun"];
    let mut changed = base.clone();
    changed["suspend"] = json!(true);
    changed["ttlSecondsAfterFinished"] = json!(60);
    assert_eq!(
        admit(
            &schemas["ResearchRun"],
            &object("ResearchRun", "r", &changed),
            Some(&object("ResearchRun", "r", base))
        ),
        Verdict::default()
    );
}

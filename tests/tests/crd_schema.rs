//! Checks on the generated CRD schemas: bounds, enums, defaults, CEL rules (compiled and evaluated
//! client-side with kube's `cel` feature), list-map semantics, printer columns and names.

use kube::CustomResourceExt;
use kube::core::cel::{ScopeContext, Validator, analyze_rule, compile_schema};
use quarry_api::profile::{
    AZURE_API_VERSION_MESSAGE, AZURE_API_VERSION_RULE, SEARCH_EXACTLY_ONE_MESSAGE,
    SEARCH_EXACTLY_ONE_RULE,
};
use quarry_api::run::{
    APPROVAL_FIXED_MESSAGE, APPROVAL_FIXED_RULE, APPROVAL_PRESENCE_MESSAGE, APPROVAL_PRESENCE_RULE,
    APPROVED_FINAL_MESSAGE, APPROVED_FINAL_RULE, CANCEL_FINAL_MESSAGE, CANCEL_FINAL_RULE,
    QUERY_NOT_BLANK_RULE, REPORT_PREFIX_MESSAGE, REPORT_PREFIX_RULE, SPEC_IMMUTABLE_MESSAGE,
    SPEC_IMMUTABLE_RULE,
};
use quarry_api::{ResearchProfile, ResearchRun, SearchEngine};
use quarry_e2e::crd_admission::{openapi_errors, prop, schema_of};
use serde_json::{Value, json};

fn run_schema() -> Value {
    schema_of(&ResearchRun::crd())
}

fn profile_schema() -> Value {
    schema_of(&ResearchProfile::crd())
}

#[test]
fn run_spec_bounds_enums_and_defaults() {
    let s = run_schema();
    assert_eq!(prop(&s, "spec")["required"], json!(["query"]));
    let q = prop(&s, "spec.query");
    assert_eq!(
        (q["minLength"].clone(), q["maxLength"].clone()),
        (json!(3), json!(4000))
    );
    assert_eq!(prop(&s, "spec.context")["maxLength"], json!(50000));

    let mode = prop(&s, "spec.mode");
    assert_eq!(mode["enum"], json!(["quick", "deep"]));
    assert_eq!(mode["default"], json!("deep"));

    let outputs = prop(&s, "spec.outputs");
    assert_eq!(
        outputs["items"]["enum"],
        json!(["study", "ideas", "implementations"])
    );
    assert_eq!(
        (outputs["minItems"].clone(), outputs["maxItems"].clone()),
        (json!(1), json!(3))
    );
    // Kubernetes forbids uniqueItems; a set list type gives the uniqueness instead.
    assert_eq!(outputs["x-kubernetes-list-type"], json!("set"));
    assert!(outputs.get("uniqueItems").is_none());
    assert_eq!(outputs["default"], json!(["study"]));

    let sources = prop(&s, "spec.sources");
    assert_eq!(
        sources["items"]["enum"],
        json!(["web", "security", "stackexchange"])
    );
    assert_eq!(sources["x-kubernetes-list-type"], json!("set"));
    assert_eq!(
        sources["default"],
        json!(["web", "security", "stackexchange"])
    );
    assert_eq!(
        (sources["minItems"].clone(), sources["maxItems"].clone()),
        (json!(1), json!(3))
    );

    let top_k = prop(&s, "spec.topK");
    assert_eq!(
        (
            top_k["minimum"].as_f64(),
            top_k["maximum"].as_f64(),
            top_k["default"].clone()
        ),
        (Some(1.0), Some(20.0), json!(5))
    );

    let profile_ref = prop(&s, "spec.profileRef");
    assert_eq!(profile_ref["default"], json!("default"));
    assert_eq!(profile_ref["maxLength"], json!(253));
    assert_eq!(
        profile_ref["pattern"],
        json!(quarry_api::values::DNS1123_SUBDOMAIN_PATTERN)
    );

    for field in ["maxConcurrentResearchers", "maxRounds"] {
        let f = prop(&s, &format!("spec.limits.{field}"));
        assert_eq!(
            (f["minimum"].as_f64(), f["maximum"].as_f64()),
            (Some(1.0), Some(10.0)),
            "{field}"
        );
    }
    assert_eq!(
        prop(&s, "spec.limits.maxTokens")["minimum"].as_f64(),
        Some(1.0)
    );
    assert_eq!(
        prop(&s, "spec.limits.maxCostUSD")["pattern"],
        json!(quarry_api::values::USD_PATTERN)
    );
    assert_eq!(
        prop(&s, "spec.limits.timeout")["pattern"],
        json!(quarry_api::values::DURATION_PATTERN)
    );
    assert_eq!(
        prop(&s, "spec.report.kind")["enum"],
        json!(["configMap", "objectStore"])
    );
    assert_eq!(
        prop(&s, "spec.report")["default"],
        json!({"kind": "configMap"})
    );
    assert_eq!(prop(&s, "spec.suspend")["default"], json!(false));
    assert_eq!(
        prop(&s, "spec.ttlSecondsAfterFinished")["minimum"].as_f64(),
        Some(0.0)
    );
}

#[test]
fn run_status_shape() {
    let s = run_schema();
    let conditions = prop(&s, "status.conditions");
    assert_eq!(conditions["x-kubernetes-list-type"], json!("map"));
    assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
    // List-map keys must be required in the item schema, or the API server rejects the CRD.
    assert!(
        conditions["items"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("type"))
    );
    let agenda = prop(&s, "status.agenda");
    assert_eq!(agenda["x-kubernetes-list-map-keys"], json!(["id"]));
    assert!(
        agenda["items"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("id"))
    );
    assert_eq!(
        prop(&s, "status.phase")["enum"],
        json!([
            "Pending",
            "Planning",
            "Researching",
            "Synthesizing",
            "Completed",
            "Failed",
            "Cancelled"
        ])
    );
    for field in [
        "inputTokens",
        "outputTokens",
        "costUSD",
        "llmCalls",
        "searches",
        "pagesFetched",
    ] {
        prop(&s, &format!("status.usage.{field}"));
    }
    for field in ["configMap", "objectUrl", "bytes", "sha256", "sources"] {
        prop(&s, &format!("status.report.{field}"));
    }
    for field in [
        "taskId",
        "state",
        "sources",
        "tokens",
        "startedAt",
        "finishedAt",
    ] {
        prop(&s, &format!("status.researchers.[].{field}"));
    }
    for field in [
        "observedGeneration",
        "round",
        "progress",
        "startTime",
        "completionTime",
        "message",
    ] {
        prop(&s, &format!("status.{field}"));
    }
}

#[test]
fn run_names_columns_and_subresources() {
    let crd = ResearchRun::crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("researchruns.quarry.dev")
    );
    assert_eq!(crd.spec.group, "quarry.dev");
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.short_names, Some(vec!["rr".to_owned()]));
    assert_eq!(crd.spec.names.categories, Some(vec!["quarry".to_owned()]));
    let v = &crd.spec.versions[0];
    assert_eq!(v.name, "v1alpha1");
    assert!(
        v.subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    );
    let columns: Vec<(String, String, String)> = v
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| (c.name.clone(), c.type_.clone(), c.json_path.clone()))
        .collect();
    let expected = [
        ("Phase", "string", ".status.phase"),
        ("Progress", "string", ".status.progress"),
        ("Cost", "string", ".status.usage.costUSD"),
        ("Sources", "integer", ".status.report.sources"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ];
    assert_eq!(
        columns,
        expected
            .iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect::<Vec<_>>()
    );
    let selectable: Vec<&str> = v
        .selectable_fields
        .as_ref()
        .unwrap()
        .iter()
        .map(|f| f.json_path.as_str())
        .collect();
    assert_eq!(selectable, vec![".spec.profileRef", ".status.phase"]);
}

#[test]
fn run_cel_rules_are_present() {
    let s = run_schema();
    assert_eq!(
        prop(&s, "spec")["x-kubernetes-validations"],
        json!([
            {"rule": SPEC_IMMUTABLE_RULE, "message": SPEC_IMMUTABLE_MESSAGE},
            {"rule": APPROVAL_PRESENCE_RULE, "message": APPROVAL_PRESENCE_MESSAGE},
        ])
    );
    assert_eq!(
        prop(&s, "spec.approval")["x-kubernetes-validations"],
        json!([{"rule": APPROVAL_FIXED_RULE, "message": APPROVAL_FIXED_MESSAGE}])
    );
    assert_eq!(
        prop(&s, "spec.approval.approved")["x-kubernetes-validations"],
        json!([{"rule": APPROVED_FINAL_RULE, "message": APPROVED_FINAL_MESSAGE}])
    );
    assert_eq!(
        prop(&s, "spec.report")["x-kubernetes-validations"],
        json!([{"rule": REPORT_PREFIX_RULE, "message": REPORT_PREFIX_MESSAGE}])
    );
    // Every spec field except the mutable ones is compared with oldSelf (approval has rules of
    // its own: only approved and agenda change).
    let spec_fields: Vec<String> = prop(&s, "spec")["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(spec_fields.len(), 13);
    for field in &spec_fields {
        let compared = SPEC_IMMUTABLE_RULE.contains(&format!("self.{field} == oldSelf.{field}"));
        let mutable = matches!(
            field.as_str(),
            "suspend" | "cancel" | "ttlSecondsAfterFinished" | "approval"
        );
        assert_eq!(compared, !mutable, "{field}");
    }
}

#[test]
fn profile_schema_shape() {
    let crd = ResearchProfile::crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("researchprofiles.quarry.dev")
    );
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.categories, Some(vec!["quarry".to_owned()]));
    assert_eq!(crd.spec.names.short_names, Some(vec!["rp".to_owned()]));
    assert!(
        crd.spec.versions[0]
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    );

    let s = profile_schema();
    assert_eq!(prop(&s, "spec")["required"], json!(["models"]));
    assert_eq!(prop(&s, "spec.models")["required"], json!(["primary"]));
    for tier in ["primary", "fallback", "budget"] {
        let t = |f: &str| prop(&s, &format!("spec.models.{tier}.{f}")).clone();
        assert_eq!(
            t("provider")["enum"],
            json!(["openai", "azureOpenai", "anthropic"])
        );
        assert_eq!(t("toolMode")["enum"], json!(["native", "jsonAction"]));
        assert_eq!(t("toolMode")["default"], json!("native"));
        assert_eq!(
            (
                t("timeoutSeconds")["minimum"].as_f64(),
                t("timeoutSeconds")["maximum"].as_f64()
            ),
            (Some(1.0), Some(3600.0))
        );
        assert_eq!(t("timeoutSeconds")["default"], json!(120));
        assert_eq!(t("contextWindow")["default"], json!(8192));
        assert_eq!(t("apiKeySecretRef")["required"], json!(["key", "name"]));
        assert_eq!(
            t("apiKeyEnv")["pattern"],
            json!(quarry_api::values::ENV_VAR_PATTERN)
        );
        assert_eq!(
            t("baseURL")["pattern"],
            json!(quarry_api::values::HTTP_URL_PATTERN)
        );
        for f in [
            "model",
            "jsonMode",
            "maxOutputTokens",
            "temperature",
            "stream",
        ] {
            t(f);
        }
    }
    let prices = prop(&s, "spec.prices");
    assert_eq!(prices["x-kubernetes-list-type"], json!("map"));
    assert_eq!(prices["x-kubernetes-list-map-keys"], json!(["model"]));
    for f in ["inputUSDPerMillion", "outputUSDPerMillion"] {
        assert_eq!(
            prop(&s, &format!("spec.prices.[].{f}"))["pattern"],
            json!(quarry_api::values::USD_PATTERN)
        );
    }
    assert_eq!(
        prop(&s, "spec.search")["x-kubernetes-validations"],
        json!([{"rule": SEARCH_EXACTLY_ONE_RULE, "message": SEARCH_EXACTLY_ONE_MESSAGE}])
    );
    prop(&s, "spec.search.searchEngineRef.name");
    prop(&s, "spec.search.url");
    prop(&s, "spec.limits.maxCostUSD");
    assert_eq!(
        prop(&s, "spec.fetch")["default"],
        json!({
            "maxPageBytes": 2097152,
            "pageCharsForModel": 6000,
            "perHostConcurrency": 2,
            "politenessDelayMillis": 500,
            "respectRobots": true
        })
    );
    let range = |path: &str| {
        let p = prop(&s, path);
        (p["minimum"].as_f64(), p["maximum"].as_f64())
    };
    assert_eq!(
        range("spec.fetch.perHostConcurrency"),
        (Some(1.0), Some(16.0))
    );
    assert_eq!(
        range("spec.fetch.politenessDelayMillis"),
        (Some(0.0), Some(60000.0))
    );
    assert_eq!(
        prop(&s, "spec.fetch.allowedDomains")["x-kubernetes-list-type"],
        json!("set")
    );
    assert_eq!(
        prop(&s, "spec.fetch.allowedHosts")["x-kubernetes-list-type"],
        json!("set")
    );
    prop(&s, "spec.fetch.deniedDomains");
    let conditions = prop(&s, "status.conditions");
    assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
    prop(&s, "status.observedGeneration");
}

/// Collects every `x-kubernetes-validations` rule in a schema.
fn collect_rules(node: &Value, out: &mut Vec<String>) {
    match node {
        Value::Object(map) => {
            if let Some(Value::Array(rules)) = map.get("x-kubernetes-validations") {
                out.extend(rules.iter().map(|r| r["rule"].as_str().unwrap().to_owned()));
            }
            map.values().for_each(|v| collect_rules(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_rules(v, out)),
        _ => {}
    }
}

/// Asserts that no rule in the compiled tree failed to compile; returns how many compiled.
fn assert_compiles(node: &kube::core::cel::CompiledSchema) -> usize {
    let errors: Vec<String> = node
        .compilation_errors()
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "CEL compile errors: {errors:?}");
    node.validations.len()
        + node.properties.values().map(assert_compiles).sum::<usize>()
        + node.items.as_deref().map_or(0, assert_compiles)
}

#[test]
fn every_cel_rule_compiles_in_scope_and_within_cost() {
    for (schema, expected) in [
        (
            run_schema(),
            vec![
                SPEC_IMMUTABLE_RULE,
                REPORT_PREFIX_RULE,
                QUERY_NOT_BLANK_RULE,
                CANCEL_FINAL_RULE,
                APPROVAL_PRESENCE_RULE,
                APPROVAL_FIXED_RULE,
                APPROVED_FINAL_RULE,
            ],
        ),
        (
            profile_schema(),
            // One Azure rule per model tier: primary, fallback, budget and the five roles.
            std::iter::once(SEARCH_EXACTLY_ONE_RULE)
                .chain(std::iter::repeat_n(AZURE_API_VERSION_RULE, 8))
                .collect(),
        ),
    ] {
        let mut rules = Vec::new();
        collect_rules(&schema, &mut rules);
        rules.sort();
        let mut expected: Vec<String> = expected.into_iter().map(str::to_owned).collect();
        expected.sort();
        assert_eq!(rules, expected);

        let compiled = compile_schema(&schema);
        assert_eq!(assert_compiles(&compiled), rules.len());
        for rule in &rules {
            let warnings = analyze_rule(rule, &compiled, ScopeContext::CrdValidation);
            assert!(warnings.is_empty(), "{rule}: {warnings:?}");
        }
    }
}

fn run_object(spec: Value) -> Value {
    json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun", "metadata": {"name": "r"}, "spec": spec})
}

/// Validates an update of a ResearchRun from `old` spec to `new` spec; returns the messages.
fn run_update(old: Value, new: Value) -> Result<(), Vec<String>> {
    Validator::new()
        .validate(&run_schema(), &run_object(new), Some(&run_object(old)))
        .map_err(|errs| errs.iter().map(|e| e.to_string()).collect())
}

const IMMUTABLE: &str = "spec: spec is immutable except suspend, cancel, ttlSecondsAfterFinished and the approver's approval.approved and approval.agenda";

#[test]
fn immutability_rule_rejects_spec_changes() {
    let base = json!({"query": "how does CEL work?", "mode": "quick", "limits": {"maxRounds": 2}});
    let changes = [
        json!({"query": "something else", "mode": "quick", "limits": {"maxRounds": 2}}),
        json!({"query": "how does CEL work?", "mode": "deep", "limits": {"maxRounds": 2}}),
        json!({"query": "how does CEL work?", "mode": "quick", "limits": {"maxRounds": 3}}),
        json!({"query": "how does CEL work?", "mode": "quick"}),
        json!({"query": "how does CEL work?", "mode": "quick", "limits": {"maxRounds": 2}, "context": "x"}),
        json!({"query": "how does CEL work?", "mode": "quick", "limits": {"maxRounds": 2}, "outputs": ["ideas"]}),
        json!({"query": "how does CEL work?", "mode": "quick", "limits": {"maxRounds": 2}, "topK": 6}),
        json!({"query": "how does CEL work?", "mode": "quick", "limits": {"maxRounds": 2}, "profileRef": "other"}),
        json!({"query": "how does CEL work?", "mode": "quick", "limits": {"maxRounds": 2}, "sources": ["web"]}),
        json!({"query": "how does CEL work?", "mode": "quick", "limits": {"maxRounds": 2},
               "report": {"kind": "objectStore"}}),
    ];
    for new in changes {
        assert_eq!(
            run_update(base.clone(), new.clone()),
            Err(vec![IMMUTABLE.to_owned()]),
            "{new}"
        );
    }
}

#[test]
fn immutability_rule_allows_suspend_cancel_ttl_and_defaulted_fields() {
    let base = json!({"query": "how does CEL work?", "mode": "quick"});
    let allowed = [
        json!({"query": "how does CEL work?", "mode": "quick", "suspend": true}),
        json!({"query": "how does CEL work?", "mode": "quick", "cancel": true}),
        json!({"query": "how does CEL work?", "mode": "quick", "ttlSecondsAfterFinished": 30}),
        json!({"query": "how does CEL work?", "mode": "quick", "suspend": false}),
        // Spelling out a default is no change: defaults are applied before the rule runs.
        json!({"query": "how does CEL work?", "mode": "quick", "topK": 5, "profileRef": "default"}),
        base.clone(),
    ];
    for new in allowed {
        assert_eq!(run_update(base.clone(), new.clone()), Ok(()), "{new}");
    }
    // Creation: transition rules do not run without an old object.
    assert_eq!(
        Validator::new()
            .validate(&run_schema(), &run_object(base), None)
            .map_err(|e| e.len()),
        Ok(())
    );
}

#[test]
fn cancel_cannot_be_unset() {
    let cancelled = json!({"query": "how does CEL work?", "cancel": true});
    assert_eq!(
        run_update(
            cancelled.clone(),
            json!({"query": "how does CEL work?", "cancel": false})
        ),
        Err(vec![format!("spec.cancel: {CANCEL_FINAL_MESSAGE}")])
    );
    assert_eq!(run_update(cancelled.clone(), cancelled.clone()), Ok(()));
    // Leaving the field out is no way around it: the default false applies first.
    assert_eq!(
        run_update(cancelled, json!({"query": "how does CEL work?"})),
        Err(vec![format!("spec.cancel: {CANCEL_FINAL_MESSAGE}")])
    );
    assert_eq!(
        prop(&run_schema(), "spec.cancel")["x-kubernetes-validations"],
        json!([{"rule": CANCEL_FINAL_RULE, "message": CANCEL_FINAL_MESSAGE}])
    );
    assert_eq!(prop(&run_schema(), "spec.cancel")["default"], json!(false));
}

#[test]
fn report_prefix_rule() {
    let v = |report: Value| {
        Validator::new()
            .validate(
                &run_schema(),
                &run_object(json!({"query": "abc", "report": report})),
                None,
            )
            .map_err(|errs| errs.iter().map(|e| e.to_string()).collect::<Vec<_>>())
    };
    assert_eq!(v(json!({"kind": "objectStore", "prefix": "runs/"})), Ok(()));
    assert_eq!(v(json!({"kind": "configMap"})), Ok(()));
    assert_eq!(
        v(json!({"kind": "configMap", "prefix": "runs/"})),
        Err(vec![format!("spec.report: {REPORT_PREFIX_MESSAGE}")])
    );
}

#[test]
fn search_exactly_one_rule() {
    let v = |search: Value| {
        let obj = json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile", "metadata": {"name": "p"},
            "spec": {"models": {"primary": {"baseURL": "http://127.0.0.1:8080/v1", "model": "m"}}, "search": search}});
        Validator::new()
            .validate(&profile_schema(), &obj, None)
            .map_err(|errs| errs.iter().map(|e| e.to_string()).collect::<Vec<_>>())
    };
    let msg = format!("spec.search: {SEARCH_EXACTLY_ONE_MESSAGE}");
    assert_eq!(v(json!({"url": "http://127.0.0.1:8888"})), Ok(()));
    assert_eq!(v(json!({"searchEngineRef": {"name": "default"}})), Ok(()));
    assert_eq!(v(json!({})), Err(vec![msg.clone()]));
    assert_eq!(
        v(json!({"url": "http://127.0.0.1:8888", "searchEngineRef": {"name": "default"}})),
        Err(vec![msg.clone()])
    );
    // Providers and sources sit beside either endpoint, or alone (the default SearchEngine).
    let brave = json!([{"kind": "brave", "apiKeySecretRef": {"name": "keys", "key": "brave"}}]);
    assert_eq!(
        v(json!({"url": "http://127.0.0.1:8888", "providers": brave})),
        Ok(())
    );
    assert_eq!(
        v(
            json!({"searchEngineRef": {"name": "default"}, "sources": {"security": {"enabled": false}}})
        ),
        Ok(())
    );
    assert_eq!(v(json!({"providers": brave})), Ok(()));
    assert_eq!(v(json!({"sources": {}})), Ok(()));
    assert_eq!(
        v(
            json!({"url": "http://127.0.0.1:8888", "searchEngineRef": {"name": "default"}, "providers": brave})
        ),
        Err(vec![msg])
    );
}

#[test]
fn search_providers_and_sources_schema() {
    let s = profile_schema();
    let providers = prop(&s, "spec.search.providers");
    assert_eq!(providers["x-kubernetes-list-type"], json!("map"));
    assert_eq!(providers["x-kubernetes-list-map-keys"], json!(["kind"]));
    assert_eq!(providers["maxItems"], json!(3));
    assert_eq!(
        prop(&s, "spec.search.providers.[].kind")["enum"],
        json!(["brave", "tavily", "serper"])
    );
    prop(&s, "spec.search.providers.[].apiKeySecretRef.name");
    prop(&s, "spec.search.providers.[].baseURL");
    assert_eq!(
        prop(&s, "spec.search.providers.[].requestsPerMinute")["minimum"],
        json!(1.0)
    );
    for f in [
        "enabled",
        "osvBaseURL",
        "nvdBaseURL",
        "nvdApiKeySecretRef",
        "kevURL",
        "githubBaseURL",
        "githubTokenSecretRef",
    ] {
        prop(&s, &format!("spec.search.sources.security.{f}"));
    }
    for f in ["enabled", "baseURL", "defaultSite", "keySecretRef"] {
        prop(&s, &format!("spec.search.sources.stackExchange.{f}"));
    }
    assert_eq!(
        prop(&s, "spec.search.sources.stackExchange.defaultSite")["pattern"],
        json!(quarry_api::profile::STACK_EXCHANGE_SITE_PATTERN)
    );
    let v = |search: Value| {
        let obj = json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile", "metadata": {"name": "p"},
            "spec": {"models": {"primary": {"baseURL": "http://127.0.0.1:8080/v1", "model": "m"}}, "search": search}});
        Validator::new()
            .validate(&profile_schema(), &obj, None)
            .map_err(|errs| errs.iter().map(|e| e.to_string()).collect::<Vec<_>>())
    };
    assert_eq!(
        v(json!({"url": "http://h", "sources": {"stackExchange": {"defaultSite": "serverfault"}}})),
        Ok(())
    );
}

#[test]
fn azure_tiers_need_an_api_version() {
    let v = |tier: Value| {
        let obj = json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile", "metadata": {"name": "p"},
            "spec": {"models": {"primary": {"baseURL": "http://127.0.0.1:8080/v1", "model": "m"}, "fallback": tier},
                     "search": {"url": "http://127.0.0.1:8888"}}});
        Validator::new()
            .validate(&profile_schema(), &obj, None)
            .map_err(|errs| errs.iter().map(|e| e.to_string()).collect::<Vec<_>>())
    };
    let base = |extra: Value| {
        let mut t = json!({"baseURL": "https://example.openai.azure.com", "model": "gpt-deploy"});
        t.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        t
    };
    assert_eq!(
        v(base(
            json!({"provider": "azureOpenai", "apiVersion": "2024-10-21"})
        )),
        Ok(())
    );
    assert_eq!(v(base(json!({"provider": "anthropic"}))), Ok(()));
    assert_eq!(v(base(json!({}))), Ok(()));
    assert_eq!(
        v(base(json!({"provider": "azureOpenai"}))),
        Err(vec![format!(
            "spec.models.fallback: {AZURE_API_VERSION_MESSAGE}"
        )])
    );
}

/// Every YAML document in `deploy/examples/`, with its file name.
fn example_docs() -> Vec<(String, Value)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("deploy/examples exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("example readable");
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(doc).expect("example is YAML");
            docs.push((
                file.file_name().unwrap().to_string_lossy().into_owned(),
                value,
            ));
        }
    }
    docs
}

#[test]
fn examples_are_valid_for_schema_cel_and_types() {
    let docs = example_docs();
    let mut kinds: Vec<(String, String)> = Vec::new();
    for (file, doc) in &docs {
        let kind = doc["kind"].as_str().expect("kind").to_owned();
        kinds.push((file.clone(), kind.clone()));
        let schema = match kind.as_str() {
            "ResearchRun" => {
                let run: ResearchRun = serde_json::from_value(doc.clone()).expect("typed run");
                assert!(run.spec.effective_limits(None).is_ok(), "{file}");
                run_schema()
            }
            "ResearchProfile" => {
                let text = serde_yaml::to_string(doc).expect("re-serialize");
                let profile = ResearchProfile::from_yaml(&text).expect("typed profile");
                for p in &profile.spec.prices {
                    assert!(p.micro_usd_per_million().is_ok(), "{file}: {}", p.model);
                }
                profile_schema()
            }
            "SearchEngine" => {
                let _: SearchEngine = serde_json::from_value(doc.clone()).expect("typed engine");
                schema_of(&SearchEngine::crd())
            }
            "ResearchSchedule" => {
                let schedule: quarry_api::ResearchSchedule =
                    serde_json::from_value(doc.clone()).expect("typed schedule");
                // The template is kept as given by the API server; it must be a run spec.
                let spec: quarry_api::ResearchRunSpec =
                    serde_json::from_value(schedule.spec.run_template.spec.clone())
                        .expect("the template is a ResearchRun spec");
                assert!(spec.effective_limits(None).is_ok(), "{file}");
                let mut errors = Vec::new();
                let template = serde_json::to_value(&spec).expect("spec serializes");
                openapi_errors(prop(&run_schema(), "spec"), &template, "spec", &mut errors);
                assert!(errors.is_empty(), "{file}: template {errors:?}");
                schema_of(&quarry_api::ResearchSchedule::crd())
            }
            "Secret" => continue,
            other => panic!("{file}: unexpected kind {other}"),
        };
        let mut errors = Vec::new();
        openapi_errors(prop(&schema, "spec"), &doc["spec"], "spec", &mut errors);
        assert!(errors.is_empty(), "{file}: {errors:?}");
        assert_eq!(
            Validator::new()
                .validate(&schema, doc, None)
                .map_err(|e| e.len()),
            Ok(()),
            "{file}"
        );
    }
    let expected = [
        ("profile-anthropic.yaml", "ResearchProfile"),
        ("profile-local.yaml", "ResearchProfile"),
        ("profile-object-store.yaml", "Secret"),
        ("profile-object-store.yaml", "ResearchProfile"),
        ("profile-object-store.yaml", "ResearchRun"),
        ("profile-ollama.yaml", "ResearchProfile"),
        ("profile-openai.yaml", "Secret"),
        ("profile-openai.yaml", "ResearchProfile"),
        ("profile-search-providers.yaml", "Secret"),
        ("profile-search-providers.yaml", "ResearchProfile"),
        ("profile-vllm.yaml", "ResearchProfile"),
        ("run-approval.yaml", "ResearchRun"),
        ("run-deep-implementations.yaml", "ResearchRun"),
        ("run-deep.yaml", "ResearchRun"),
        ("run-quick-ideas.yaml", "ResearchRun"),
        ("run-quick.yaml", "ResearchRun"),
        ("run-suspended.yaml", "ResearchRun"),
        ("schedule.yaml", "ResearchSchedule"),
        ("searchengine.yaml", "SearchEngine"),
    ];
    // Runs for every mode and every output, profiles for every provider kind.
    let runs: Vec<&Value> = docs
        .iter()
        .map(|(_, d)| d)
        .filter(|d| d["kind"] == "ResearchRun")
        .collect();
    for mode in ["quick", "deep"] {
        assert!(
            runs.iter().any(|r| r["spec"]["mode"] == mode),
            "no {mode} run"
        );
    }
    for output in ["study", "ideas", "implementations"] {
        assert!(
            runs.iter().any(|r| r["spec"]["outputs"]
                .as_array()
                .is_some_and(|o| o.contains(&json!(output)))),
            "no run with output {output}"
        );
    }
    let providers: Vec<&str> = docs
        .iter()
        .filter(|(_, d)| d["kind"] == "ResearchProfile")
        .map(|(_, d)| {
            d["spec"]["models"]["primary"]["provider"]
                .as_str()
                .unwrap_or("openai")
        })
        .collect();
    assert!(
        providers.contains(&"anthropic") && providers.contains(&"openai"),
        "{providers:?}"
    );
    assert_eq!(
        kinds,
        expected
            .iter()
            .map(|(f, k)| (f.to_string(), k.to_string()))
            .collect::<Vec<_>>()
    );
}

#[test]
fn local_demo_profile_reads_as_documented() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/examples/profile-local.yaml");
    let profile = ResearchProfile::from_yaml(&std::fs::read_to_string(path).unwrap()).unwrap();
    let primary = &profile.spec.models.primary;
    assert_eq!(primary.base_url, "http://127.0.0.1:8080/v1");
    assert_eq!(primary.tool_mode, quarry_api::ToolMode::JsonAction);
    assert_eq!(primary.api_key_secret_ref, None);
    assert_eq!(primary.max_output_tokens, Some(1024));
    assert_eq!(
        profile.spec.search_target(),
        quarry_api::SearchTarget::Url("http://127.0.0.1:8888")
    );
    assert_eq!(
        profile.spec.fetch.allowed_hosts,
        vec!["127.0.0.1".to_owned()]
    );
}

/// Structural errors of a SearchEngine spec.
fn engine_spec_errors(spec: Value) -> Vec<String> {
    let mut out = Vec::new();
    openapi_errors(
        prop(&schema_of(&SearchEngine::crd()), "spec"),
        &spec,
        "spec",
        &mut out,
    );
    out
}

#[test]
fn search_engine_schema_bounds_and_columns() {
    let schema = schema_of(&SearchEngine::crd());
    assert_eq!(engine_spec_errors(json!({})), Vec::<String>::new());
    assert_eq!(
        engine_spec_errors(json!({"settingsOverrides": {"any": {"nested": [1, "x"]}}})),
        Vec::<String>::new(),
        "overrides are free-form"
    );
    assert_eq!(
        prop(&schema, "spec.settingsOverrides")["x-kubernetes-preserve-unknown-fields"],
        json!(true)
    );
    assert_eq!(
        prop(&schema, "spec.engines")["x-kubernetes-list-type"],
        "map"
    );
    assert_eq!(
        prop(&schema, "spec.engines")["x-kubernetes-list-map-keys"],
        json!(["name"])
    );
    // Bad input is in the admission matrix (tests/admission/cases.yaml).
    let crd = SearchEngine::crd();
    let columns: Vec<String> = crd.spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(columns, vec!["Ready", "Replicas", "Active", "URL", "Age"]);
    assert!(
        crd.spec.versions[0]
            .subresources
            .as_ref()
            .unwrap()
            .status
            .is_some()
    );
}

//! Generates docs/api.md, the API reference, from the generated CRD schemas, and fails when the
//! file differs from what the code generates (like crd_drift).
//!
//! Regenerate with `QUARRY_UPDATE_DOCS=1 cargo test -p quarry --test api_docs`.

use std::fmt::Write as _;

use serde_json::Value;

/// One line per field: path, type, required, details, description.
fn fields(schema: &Value, path: &str, required: bool, out: &mut Vec<[String; 4]>) {
    let mut ty = schema["type"].as_str().unwrap_or("").to_owned();
    if schema["x-kubernetes-int-or-string"] == true {
        ty = "int or string".into();
    }
    if ty == "array" {
        let item = schema["items"]["type"].as_str().unwrap_or("object");
        ty = format!("[]{item}");
    }
    if ty == "object" && schema["properties"].is_null() {
        if let Some(v) = schema["additionalProperties"]["type"].as_str() {
            ty = format!("map[string]{v}");
        } else if schema["x-kubernetes-preserve-unknown-fields"] == true {
            ty = "object (free-form)".into();
        }
    }
    let mut details = Vec::new();
    if required {
        details.push("**required**".to_owned());
    }
    if let Some(d) = schema.get("default") {
        details.push(format!("default `{d}`"));
    }
    if let Some(e) = schema["enum"].as_array() {
        let values: Vec<String> = e
            .iter()
            .map(|v| format!("`{}`", v.as_str().unwrap_or(&v.to_string())))
            .collect();
        details.push(format!("one of {}", values.join(", ")));
    }
    for (key, label) in [
        ("minimum", "min"),
        ("maximum", "max"),
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("minItems", "min items"),
        ("maxItems", "max items"),
    ] {
        if let Some(v) = schema.get(key) {
            let v = v.as_f64().map_or_else(|| v.to_string(), |f| f.to_string());
            details.push(format!("{label} {v}"));
        }
    }
    if let Some(p) = schema["pattern"].as_str() {
        details.push(format!("pattern `{}`", p.replace('|', "\\|")));
    }
    for rule in schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(m) = rule["message"].as_str() {
            details.push(format!("rule: {m}"));
        }
    }
    let description = schema["description"]
        .as_str()
        .unwrap_or("")
        .replace('\n', " ")
        .replace('|', "\\|");
    if !path.is_empty() {
        out.push([
            format!("`{path}`"),
            ty.replace('|', "\\|"),
            details.join("; "),
            description,
        ]);
    }
    let required_here: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if let Some(props) = schema["properties"].as_object() {
        for (name, sub) in props {
            let child = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            fields(sub, &child, required_here.contains(&name.as_str()), out);
        }
    }
    if schema["items"].is_object() {
        let mut nested = Vec::new();
        fields(&schema["items"], &format!("{path}[]"), false, &mut nested);
        // The item itself is described by the array's line; its fields follow.
        out.extend(nested.into_iter().skip(1));
    }
    if schema["additionalProperties"]["properties"].is_object() {
        let mut nested = Vec::new();
        fields(
            &schema["additionalProperties"],
            &format!("{path}.<key>"),
            false,
            &mut nested,
        );
        out.extend(nested.into_iter().skip(1));
    }
}

/// The whole reference as Markdown.
fn generate() -> String {
    let mut md = String::from(
        "# Quarry API reference\n\nGenerated from the CRD schemas (`operator/api/src/`) by \
         `operator/api/tests/api_docs.rs`; do not edit. Regenerate with\n\
         `QUARRY_UPDATE_DOCS=1 cargo test -p quarry --test api_docs`.\n\n\
         Group `quarry.dev`, version `v1alpha1`. All kinds are namespaced and in the category \
         `quarry` (`kubectl get quarry`).\n",
    );
    for crd in quarry_api::all_crds() {
        let names = &crd.spec.names;
        let version = &crd.spec.versions[0];
        let _ = write!(md, "\n## {}\n\n", names.kind);
        let short = names.short_names.clone().unwrap_or_default().join(", ");
        let _ = writeln!(
            md,
            "`{}` · plural `{}`{} · scope {}\n",
            crd.metadata.name.clone().unwrap_or_default(),
            names.plural,
            if short.is_empty() {
                String::new()
            } else {
                format!(" · short names `{short}`")
            },
            crd.spec.scope
        );
        let schema = serde_json::to_value(
            version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref()),
        )
        .expect("schema serializes");
        if let Some(d) = schema["description"].as_str() {
            let _ = writeln!(md, "{d}\n");
        }
        if let Some(columns) = &version.additional_printer_columns {
            let cols: Vec<String> = columns
                .iter()
                .map(|c| format!("{} (`{}`)", c.name, c.json_path))
                .collect();
            let _ = writeln!(md, "`kubectl get` columns: {}.\n", cols.join(", "));
        }
        for rule in schema["properties"]["spec"]["x-kubernetes-validations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let _ = writeln!(
                md,
                "- Rule on `spec`: {}",
                rule["message"]
                    .as_str()
                    .unwrap_or(rule["rule"].as_str().unwrap_or(""))
            );
        }
        for part in ["spec", "status"] {
            if schema["properties"][part].is_null() {
                continue;
            }
            let _ = write!(md, "\n### {} `{part}`\n\n", names.kind);
            md.push_str("| field | type | constraints | description |\n|---|---|---|---|\n");
            let mut rows = Vec::new();
            fields(&schema["properties"][part], "", false, &mut rows);
            for [path, ty, details, description] in rows {
                let _ = writeln!(md, "| {path} | {ty} | {details} | {description} |");
            }
        }
    }
    md
}

#[test]
fn api_reference_matches_the_crds() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/api.md");
    let generated = generate();
    if std::env::var_os("QUARRY_UPDATE_DOCS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("docs dir")).expect("create docs/");
        std::fs::write(&path, &generated).expect("write docs/api.md");
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "docs/api.md differs from the CRD schemas; regenerate with: QUARRY_UPDATE_DOCS=1 cargo test -p quarry --test api_docs"
    );
}

#[test]
fn api_reference_names_every_spec_field() {
    let md = generate();
    for field in [
        "`query`",
        "`limits.maxCostUSD`",
        "`models.primary.apiKeySecretRef.name`",
        "`idleTimeout`",
        "`conditions[].reason`",
    ] {
        assert!(md.contains(field), "{field} missing from the reference");
    }
}

/// Every `pub const NAME: &str = "Reason";` in a `reasons` module of `file`.
fn reasons_in(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
        .expect("source file");
    let start = text.find("pub mod reasons").expect("reasons module");
    let module = &text[start..];
    let end = module.find("\n}").unwrap_or(module.len());
    module[..end]
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter_map(|l| l.split('"').nth(1))
        .map(str::to_owned)
        .collect()
}

#[test]
fn troubleshooting_page_explains_every_condition_reason() {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/troubleshooting.md"),
    )
    .expect("docs/troubleshooting.md");
    let mut all = Vec::new();
    for file in [
        "src/conditions.rs",
        "../vocab/src/lib.rs",
        "../controller/src/search_engine/mod.rs",
        "../controller/src/queue/protocol.rs",
    ] {
        all.extend(reasons_in(file));
    }
    assert!(all.len() >= 30, "{all:?}");
    let missing: Vec<&String> = all
        .iter()
        .filter(|r| !page.contains(&format!("`{r}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "reasons missing from docs/troubleshooting.md: {missing:?}"
    );
}

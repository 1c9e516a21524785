//! SearXNG's settings.yml as a SearchEngine asks for it.

use serde_json::{Value, json};

use super::{BASE_SETTINGS, SearchEngine, SpecError};
use quarry_api::search_engine::SEARXNG_PORT;

/// Renders settings.yml: the base file, the spec's engine list, its overrides, and the settings
/// Quarry needs (JSON output, limiter off) forced last.
pub fn render_settings(engine: &SearchEngine) -> Result<String, SpecError> {
    let mut settings: Value = serde_yaml::from_str(BASE_SETTINGS)
        .map_err(|e| SpecError::settings_from("config/searxng/settings.yml is not YAML", e))?;
    let spec = &engine.spec;
    if !spec.engines.is_empty() {
        let keep: Vec<Value> = spec.engines.iter().map(|e| json!(e.name)).collect();
        settings["use_default_settings"] = json!({"engines": {"keep_only": keep}});
        let entries: Vec<Value> = spec
            .engines
            .iter()
            .map(|e| {
                let mut entry = json!({"name": e.name});
                if e.disabled {
                    entry["disabled"] = json!(true);
                }
                if let Some(t) = e.timeout {
                    entry["timeout"] = json!(t);
                }
                if let Some(w) = e.weight {
                    entry["weight"] = json!(w);
                }
                entry
            })
            .collect();
        settings["engines"] = Value::Array(entries);
    }
    if let Some(overrides) = &spec.settings_overrides {
        if !overrides.is_object() {
            return Err(SpecError::settings(
                "spec.settingsOverrides must be an object of SearXNG settings",
            ));
        }
        merge(&mut settings, overrides);
    }
    // What Quarry cannot work without wins over any override.
    let formats = settings["search"]["formats"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut formats: Vec<Value> = formats.into_iter().filter(|f| f.is_string()).collect();
    if !formats.iter().any(|f| f == "json") {
        formats.push(json!("json"));
    }
    settings["search"]["formats"] = Value::Array(formats);
    settings["server"]["limiter"] = json!(false);
    settings["server"]["port"] = json!(SEARXNG_PORT);
    settings["server"]["bind_address"] = json!("0.0.0.0");
    if let Some(server) = settings["server"].as_object_mut() {
        // The key comes from the pod (SEARXNG_SECRET), never from a ConfigMap anyone may read.
        server.remove("secret_key");
    }
    serde_yaml::to_string(&settings).map_err(|e| SpecError::settings_from("rendering settings", e))
}

/// Deep merge: objects merge key by key, anything else replaces.
fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o.clone(),
    }
}

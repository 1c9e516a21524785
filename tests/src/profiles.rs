//! ResearchProfile manifests for the local test and demo services.

/// The local demo profile: the real small model with the JSON action protocol, searx, docs on 127.0.0.1.
pub fn demo_profile(model_url: &str, model: &str, searx_url: &str) -> String {
    format!(
        r#"# Written by demo-services: the local demo stack. Everything runs on 127.0.0.1.
apiVersion: quarry.dev/v1alpha1
kind: ResearchProfile
metadata:
  name: local-demo
spec:
  models:
    primary:
      baseURL: "{model_url}"
      model: {model}
      # The 0.5B model has no native tool calling: use the JSON action protocol.
      toolMode: jsonAction
      jsonMode: true
      temperature: 0
      # A 2-core machine needs minutes to read a long prompt.
      timeoutSeconds: 900
      contextWindow: 8192
      maxOutputTokens: 400
  search:
    url: "{searx_url}"
  fetch:
    allowedHosts: ["127.0.0.1"]
    # One local docs server is every host here: no politeness spacing needed.
    politenessDelayMillis: 0
    perHostConcurrency: 8
    # Small models read slowly: cap each page.
    pageCharsForModel: 1500
"#
    )
}

/// A profile for the scripted model server: native tools, a price table, output cap 700.
pub fn scripted_profile(model_url: &str, searx_url: &str) -> String {
    let profile = format!(
        r#"apiVersion: quarry.dev/v1alpha1
kind: ResearchProfile
metadata:
  name: scripted
spec:
  models:
    primary:
      baseURL: "{model_url}"
      model: scripted
      apiKeyEnv: QUARRY_TEST_KEY
      timeoutSeconds: 20
      contextWindow: 32768
      maxOutputTokens: 700
  prices:
    - model: scripted
      inputUSDPerMillion: "1.25"
      outputUSDPerMillion: "10.00"
  search:
    url: "{searx_url}"
  fetch:
    allowedHosts: ["127.0.0.1"]
    # One local docs server is every host here: no politeness spacing needed.
    politenessDelayMillis: 0
    perHostConcurrency: 8
    pageCharsForModel: 4000
"#
    );
    profile
}

/// Writes [`scripted_profile`] to `<dir>/profile.yaml` and returns its path.
pub fn write_scripted_profile(
    dir: &std::path::Path,
    model_url: &str,
    searx_url: &str,
) -> std::io::Result<std::path::PathBuf> {
    let path = dir.join("profile.yaml");
    std::fs::write(&path, scripted_profile(model_url, searx_url))?;
    Ok(path)
}

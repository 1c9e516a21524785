//! Which images a SearchEngine may run, and the user its pods run as.

use super::{SpecError, reasons};

/// User and group id of the `searxng` user of SearXNG's image: its pods run as it, never root.
pub const SEARXNG_UID: i64 = 977;

/// Image repositories a SearchEngine may run when the operator is given none: SearXNG's own.
pub const DEFAULT_ALLOWED_IMAGES: &[&str] = &["docker.io/searxng/searxng"];

/// Pure: `image` in its full form: a reference without a registry is Docker Hub's, as the
/// container runtime reads it (`searxng/searxng` is `docker.io/searxng/searxng`, `nginx` is
/// `docker.io/library/nginx`).
pub fn normalize_image(image: &str) -> String {
    let image = image.trim();
    let first = image.split('/').next().unwrap_or_default();
    let has_registry =
        image.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let full = if has_registry {
        image.to_string()
    } else if image.contains('/') {
        format!("docker.io/{image}")
    } else {
        format!("docker.io/library/{image}")
    };
    full.strip_prefix("index.docker.io/")
        .map_or(full.clone(), |rest| format!("docker.io/{rest}"))
}

/// Pure: whether `image` comes from one of the `allowed` repositories: the repository itself
/// with any tag or digest, or, for an entry ending in `/`, anything under that prefix.
pub fn image_allowed(image: &str, allowed: &[String]) -> bool {
    let image = normalize_image(image);
    let named = image.split('@').next().unwrap_or_default();
    let repository = match named.rfind(':') {
        // A colon after the last slash starts the tag; before it, it is a registry port.
        Some(colon) if !named[colon..].contains('/') => &named[..colon],
        _ => named,
    };
    allowed.iter().any(|entry| {
        let entry = entry.trim();
        if entry.is_empty() {
            return false;
        }
        if entry.ends_with('/') {
            let prefix = normalize_image(&format!("{entry}x"));
            return repository.starts_with(prefix.trim_end_matches('x'));
        }
        repository == normalize_image(entry)
    })
}

/// Pure: why `image` may not run, naming the allowed repositories and the way out.
pub fn image_refusal(image: &str, allowed: &[String]) -> Option<SpecError> {
    if image_allowed(image, allowed) {
        return None;
    }
    Some(SpecError {
        reason: reasons::IMAGE_NOT_ALLOWED,
        message: format!(
            "spec.image {image:?} is not from an image repository this operator allows ({}); use an image from one of them, or have the cluster admin add the repository to the chart value searchEngine.allowedImages (operator flag --allowed-search-images)",
            allowed.join(", ")
        ),
        source: None,
    })
}

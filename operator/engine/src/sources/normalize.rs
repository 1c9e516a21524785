//! One shape for hits from every source: canonical URL keys and deduplication, so the same page
//! found by SearXNG, Brave and an advisory feed is read (and counted) once.

use std::collections::HashMap;

use url::Url;

use super::SearchHit;
use super::http::collapse_whitespace;

/// Query parameters that only track the click; dropping them makes one page one key.
const TRACKING_PARAMS: [&str; 6] = ["fbclid", "gclid", "dclid", "msclkid", "mc_cid", "mc_eid"];

/// The key two URLs of the same page share: lowercase scheme and host, no default port, no
/// fragment, no trailing slash on the path, no tracking parameters (`utm_*`, `fbclid`,
/// `gclid`, ...). Unparseable input is returned trimmed.
pub fn canonical_url(raw: &str) -> String {
    let raw = raw.trim();
    let Ok(mut url) = Url::parse(raw) else {
        return raw.to_string();
    };
    // The url crate already lowercases scheme and host and drops default ports of http(s).
    url.set_fragment(None);
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| {
            let k = k.to_ascii_lowercase();
            !k.starts_with("utm_") && !TRACKING_PARAMS.contains(&k.as_str())
        })
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    let path = url.path().to_string();
    if path.len() > 1 && path.ends_with('/') {
        url.set_path(path.trim_end_matches('/'));
    }
    url.to_string()
}

/// Drops hits without an http(s) URL, tidies whitespace, and keeps the first hit of each
/// canonical URL in order (filling in its snippet from a later duplicate when it has none).
pub fn normalize_and_dedup(hits: Vec<SearchHit>) -> Vec<SearchHit> {
    let mut out: Vec<SearchHit> = Vec::with_capacity(hits.len());
    let mut index: HashMap<String, usize> = HashMap::new();
    for hit in hits {
        let url = hit.url.trim();
        let Ok(parsed) = Url::parse(url) else {
            continue;
        };
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            continue;
        }
        let snippet = collapse_whitespace(&hit.snippet);
        let key = canonical_url(url);
        if let Some(&i) = index.get(&key) {
            if out[i].snippet.is_empty() && !snippet.is_empty() {
                out[i].snippet = snippet;
            }
            continue;
        }
        let title = collapse_whitespace(&hit.title);
        index.insert(key, out.len());
        out.push(SearchHit {
            title: if title.is_empty() {
                url.to_string()
            } else {
                title
            },
            url: url.to_string(),
            snippet,
            engine: hit.engine,
        });
    }
    out
}

#[cfg(test)]
mod tests;

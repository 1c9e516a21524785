//! Which release a page is of: a question scoped to one release is not answered by another's
//! notes.

/// Words that name a release by the number after them, besides the task's own products.
const RELEASE_WORDS: [&str; 2] = ["release", "version"];

/// Pure: whether `word` is a version number (`3.11`, `15`, `15.16`), its stop aside.
fn version(word: &str) -> Option<&str> {
    let w = word.trim_end_matches(['.', ',', '?', ';', ':', ')']);
    (w.starts_with(|c: char| c.is_ascii_digit())
        && w.chars().all(|c| c.is_ascii_digit() || c == '.')
        && !w.contains(".."))
    .then_some(w)
}

/// Pure: the products `task` names before a version number, lower-cased, and those versions
/// ("python" and `3.11` of "What did Python 3.11 add to asyncio?").
fn asked_releases(task: &str) -> (Vec<String>, Vec<String>) {
    let words: Vec<&str> = task.split_whitespace().collect();
    let mut products = Vec::new();
    let mut versions = Vec::new();
    for pair in words.windows(2) {
        let product = pair[0].trim_end_matches("'s").trim_end_matches("’s");
        if let Some(v) = version(pair[1])
            && product.starts_with(|c: char| c.is_uppercase())
            && product.chars().all(char::is_alphanumeric)
        {
            products.push(product.to_lowercase());
            versions.push(v.to_string());
        }
    }
    // A release compared with the named one is asked too: "Python 3.11 than 3.10".
    if !versions.is_empty() {
        for w in &words {
            if let Some(v) = version(w).filter(|v| v.contains('.'))
                && !versions.iter().any(|known| known == v)
            {
                versions.push(v.to_string());
            }
        }
    }
    (products, versions)
}

/// Pure: the releases a page title names ("What's New In Python 3.7 — Python 3.11.2
/// documentation" names 3.7; "E.5. Release 15.16" names 15.16): a version after one of
/// `products` or a word of [`RELEASE_WORDS`], before the docs' own suffix (" — Python 3.11.2
/// documentation" is the build every page of the tree shares).
fn title_releases(title: &str, products: &[String]) -> Vec<String> {
    let own = title.split(" — ").next().unwrap_or(title);
    let words: Vec<&str> = own.split_whitespace().collect();
    words
        .windows(2)
        .filter_map(|pair| {
            let word = pair[0].to_lowercase();
            let names = products.contains(&word) || RELEASE_WORDS.contains(&word.as_str());
            names
                .then(|| version(pair[1]))
                .flatten()
                .map(str::to_string)
        })
        .collect()
}

/// Pure: whether release `named` is the release `asked` (or one of its minor releases, or the
/// other way round: `15.16` of 15, `3.11` of `3.11.2`).
fn same_release(named: &str, asked: &str) -> bool {
    named == asked
        || named.starts_with(&format!("{asked}."))
        || asked.starts_with(&format!("{named}."))
}

/// Pure: which of `titles` may answer `task` by the release it asks of: when the task names a
/// product's version ("Python 3.11"), a page whose title names another release of it ("What's
/// New In Python 3.7") speaks of that release, and its changes are not the asked one's. Asked
/// what Python 3.11 added and how much faster it is, the 1.5B model's deep report cited
/// `ncurses_version` from the 3.8 notes and a tenfold `heapq` from 2.4's (tuning set). Pages
/// naming no release stay; when no page would, every page stays.
pub fn of_asked_release(task: &str, titles: &[&str]) -> Vec<bool> {
    let (products, versions) = asked_releases(task);
    if versions.is_empty() {
        return vec![true; titles.len()];
    }
    let mask: Vec<bool> = titles
        .iter()
        .map(|t| {
            let named = title_releases(t, &products);
            named.is_empty()
                || named
                    .iter()
                    .any(|n| versions.iter().any(|v| same_release(n, v)))
        })
        .collect();
    if mask.contains(&true) {
        mask
    } else {
        vec![true; titles.len()]
    }
}

#[cfg(test)]
mod tests;

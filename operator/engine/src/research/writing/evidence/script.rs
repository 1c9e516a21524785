//! Letters of another script: a small model answering in English may slip into the language of
//! its training data mid-sentence.

/// Pure: the letters of `claim` outside the Latin script that `evidence` does not hold. The
/// 0.5B model wrote "... while it is still potentially visible to other事务" from a passage
/// ending "visible to other transactions" (tuning set), and the sentence was kept.
pub(super) fn foreign_letters(claim: &str, evidence: &str) -> Vec<char> {
    let mut out: Vec<char> = claim
        .chars()
        .filter(|c| c.is_alphabetic() && !is_latin(*c) && !evidence.contains(*c))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Pure: whether `c` is a letter of the Latin script (ASCII, Latin-1 and Latin Extended: "é",
/// "ß", "ő"), which English technical prose borrows names in.
fn is_latin(c: char) -> bool {
    (c as u32) < 0x0250 || ('\u{1E00}'..='\u{1EFF}').contains(&c)
}

#[cfg(test)]
mod tests;

//! Prompt templates, compiled in from `config/prompts/` (the only place prompts are written).

/// The researcher's system prompt.
pub const RESEARCHER: &str = include_str!("../../../../../config/prompts/researcher.md");
/// The researcher's first user message.
pub const RESEARCHER_TASK: &str = include_str!("../../../../../config/prompts/researcher_task.md");
/// The clean-context reporting prompt, used when a researcher's own answer was unusable.
pub const REPORTER: &str = include_str!("../../../../../config/prompts/reporter.md");
/// The grounded-answer prompt: numbered passages in, sentences ending in `[n]` out.
pub const GROUNDED: &str = include_str!("../../../../../config/prompts/grounded.md");
/// The grounded-answer prompt in JSON form (models with JSON mode): points citing passage ids.
pub const GROUNDED_JSON: &str = include_str!("../../../../../config/prompts/grounded_json.md");
/// The grounded answer's second try in JSON form: one sentence per passage.
pub const GROUNDED_EACH: &str = include_str!("../../../../../config/prompts/grounded_each.md");
/// The coordinator's planning prompt.
pub const PLANNER: &str = include_str!("../../../../../config/prompts/planner.md");
/// The lead evaluator's prompt.
pub const EVALUATOR: &str = include_str!("../../../../../config/prompts/evaluator.md");
/// The common frame of every synthesis call.
pub const SYNTHESIS_ENVELOPE: &str =
    include_str!("../../../../../config/prompts/synthesis_envelope.md");
/// Study mode instructions.
pub const STUDY: &str = include_str!("../../../../../config/prompts/study.md");
/// Idea mode instructions.
pub const IDEAS: &str = include_str!("../../../../../config/prompts/ideas.md");
/// Implementation mode instructions.
pub const IMPLEMENTATIONS: &str = include_str!("../../../../../config/prompts/implementations.md");
/// Per-document summaries, which keep synthesis within the writer's context window.
pub const SUMMARIZER: &str = include_str!("../../../../../config/prompts/summarizer.md");
/// The optional model judge of the evidence gate.
pub const JUDGE: &str = include_str!("../../../../../config/prompts/judge.md");

/// Pure: whether `text`, an item of a model's JSON answer, is no item of its own but a copy of
/// one of the example values the prompt `template` shows in quotes (`"first task"`, `"..."`),
/// or has no word at all. The 1.5B model planned "first task", "second task", "third task", and
/// three researchers searched for them.
pub fn is_placeholder(text: &str, template: &str) -> bool {
    let t = text.trim();
    !t.chars().any(char::is_alphanumeric)
        || template
            .to_lowercase()
            .contains(&format!("\"{}\"", t.to_lowercase()))
}

/// Replaces `{name}` placeholders; unknown placeholders and other braces (JSON examples) stay as they are.
pub fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (name, value) in vars {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

/// Fences untrusted text so a model can tell evidence from instructions.
pub fn fence_page(url: &str, title: &str, body: &str) -> String {
    // A page cannot close the fence early: its own closing tags, in any case, are defused.
    let body = defuse_closing_tag(body, "</page");
    let title = title.replace(['"', '\n'], " ");
    format!("<page url=\"{url}\" title=\"{title}\">\n{body}\n</page>")
}

/// Inserts a space after `<` of every case-insensitive occurrence of `tag` (ASCII) in `text`.
fn defuse_closing_tag(text: &str, tag: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len() + 8);
    let mut last = 0;
    for (at, _) in lower.match_indices(tag) {
        out.push_str(&text[last..at]);
        out.push_str("</ ");
        last = at + 2;
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests;

//! The context window as a hard limit: every prompt is measured before it is sent
//! and trimmed to fit `contextWindow - maxOutputTokens`; a server that still refuses it for
//! its length gets one smaller prompt.
//!
//! Pure functions over a [`ChatRequest`]; the clients call them.

use super::ChatRequest;

/// Characters per token assumed when measuring a prompt before sending it. Lower than the
/// 4 used to estimate usage: code, URLs and non-English text tokenize denser, and a prompt
/// that is measured too small is refused by the server (8192 of 8192).
pub const SAFE_CHARS_PER_TOKEN: usize = 3;
/// Characters per token used to estimate usage when the server reports none.
const CHARS_PER_TOKEN: u64 = 4;
/// Tokens a chat template adds per message (role markers, separators).
const TOKENS_PER_MESSAGE: usize = 8;
/// Shortest a trimmed message becomes: enough to keep its gist and the trim notice.
const MIN_MESSAGE_CHARS: usize = 300;
/// The notice that replaces what a trimmed message lost.
pub const TRIM_NOTICE: &str = "\n[… trimmed to fit the model's context window]\n";

/// Tokens a text of `chars` characters is assumed to hold when the server reports no usage.
pub fn estimate_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(CHARS_PER_TOKEN)
}

/// Characters a request sends: messages, tool-call arguments and tool definitions.
pub fn request_chars(request: &ChatRequest) -> usize {
    let messages: usize = request
        .messages
        .iter()
        .map(|m| {
            m.content.chars().count()
                + m.tool_calls
                    .iter()
                    .map(|c| c.arguments.to_string().len())
                    .sum::<usize>()
        })
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.description.len() + t.parameters.to_string().len())
        .sum();
    messages + tools
}

/// Characters of messages a request may hold for `window` tokens with `max_output` reserved.
pub fn prompt_budget_chars(request: &ChatRequest, window: u64) -> usize {
    let window = usize::try_from(window).unwrap_or(usize::MAX);
    let reserved = request.max_tokens as usize + TOKENS_PER_MESSAGE * request.messages.len();
    window.saturating_sub(reserved) * SAFE_CHARS_PER_TOKEN
}

/// True when a server's refusal says the prompt was longer than the model's context.
pub fn is_context_overflow(status: u16, body: &str) -> bool {
    let b = body.to_ascii_lowercase();
    (status == 400 || status == 413)
        && (b.contains("context_length_exceeded")
            || b.contains("context length")
            || b.contains("context window")
            || b.contains("maximum context")
            || (b.contains("context") && (b.contains("exceed") || b.contains("too long")))
            || (b.contains("prompt is") && b.contains("tokens")))
}

/// The request with its messages trimmed until the whole prompt is at most `budget` characters.
/// The largest message is halved first (pages and tool results, as a rule), keeping its head
/// and tail; the system prompt and the last message are trimmed only when nothing else is left.
/// Returns the request unchanged when it already fits, and how many characters were cut.
pub fn fit(mut request: ChatRequest, budget: usize) -> (ChatRequest, usize) {
    let total = |r: &ChatRequest| request_chars(r);
    let before = total(&request);
    if before <= budget {
        return (request, 0);
    }
    let last = request.messages.len().saturating_sub(1);
    for protect_ends in [true, false] {
        loop {
            let over = total(&request).saturating_sub(budget);
            if over == 0 {
                break;
            }
            let candidate = request
                .messages
                .iter()
                .enumerate()
                .filter(|(i, m)| {
                    !(protect_ends && (*i == last || m.role == super::Role::System))
                        && m.content.chars().count()
                            > MIN_MESSAGE_CHARS + TRIM_NOTICE.chars().count()
                })
                .max_by_key(|(_, m)| m.content.chars().count())
                .map(|(i, _)| i);
            let Some(i) = candidate else { break };
            let len = request.messages[i].content.chars().count();
            // Cut what is over, but at least half, never below the floor.
            let keep = (len.saturating_sub(over + TRIM_NOTICE.chars().count()))
                .min(len / 2)
                .max(MIN_MESSAGE_CHARS);
            request.messages[i].content = shorten(&request.messages[i].content, keep);
        }
    }
    let after = total(&request);
    (request, before.saturating_sub(after))
}

/// The first two thirds and the last third of `keep` characters of `text`, with the notice
/// between (the end of a page or tool result often holds its conclusion).
fn shorten(text: &str, keep: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= keep {
        return text.to_string();
    }
    let head = keep * 2 / 3;
    let tail = keep - head;
    let mut out: String = chars[..head].iter().collect();
    out.push_str(TRIM_NOTICE);
    out.extend(&chars[chars.len() - tail..]);
    out
}

#[cfg(test)]
mod tests;

//! Shaping a request for the server: messages and tools in the native form or as the
//! JSON-action protocol.

use super::*;

pub(super) fn native_tool(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    })
}

pub(super) fn native_message(m: &Message) -> Value {
    match m.role {
        Role::Assistant if !m.tool_calls.is_empty() => {
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments.to_string()},
                    })
                })
                .collect();
            let content = if m.content.is_empty() {
                Value::Null
            } else {
                json!(m.content)
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
            "content": m.content,
        }),
        role => json!({"role": role, "content": m.content}),
    }
}

/// The instruction describing the JSON action protocol and the available tools.
pub fn json_action_instruction(tools: &[ToolSpec]) -> String {
    let mut s = String::from(
        "## Tools\nYou can call exactly one tool per answer. To call a tool, answer with exactly one JSON \
         object and nothing else, in this form:\n{\"tool\": \"<tool name>\", \"arguments\": {<arguments>}}\n\
         When you do not need a tool, answer with your final text directly instead (no JSON object with a \
         \"tool\" key).\n\nAvailable tools:\n",
    );
    for t in tools {
        s.push_str(&format!(
            "- {}: {}\n  arguments (JSON Schema): {}\n",
            t.name, t.description, t.parameters
        ));
    }
    s
}

/// Messages for the JSON action protocol: the instruction goes into the first system message
/// (many chat templates accept a single leading system message only), assistant tool calls are
/// rendered as the JSON action text and tool results become user messages (servers without tool
/// support reject role `tool`).
pub(super) fn json_action_messages(messages: &[Message], tools: &[ToolSpec]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    let instruction = (!tools.is_empty()).then(|| json_action_instruction(tools));
    let mut instruction_placed = instruction.is_none();
    for (i, m) in messages.iter().enumerate() {
        match m.role {
            Role::System if !instruction_placed => {
                let text = instruction.as_deref().unwrap_or_default();
                out.push(json!({"role": "system", "content": format!("{}\n\n{text}", m.content)}));
                instruction_placed = true;
            }
            Role::Assistant if !m.tool_calls.is_empty() => {
                let content = if m.content.trim().is_empty() {
                    m.tool_calls
                        .iter()
                        .map(|c| json!({"tool": c.name, "arguments": c.arguments}).to_string())
                        .collect::<Vec<_>>()
                        .join("\n")
                } else {
                    m.content.clone()
                };
                out.push(json!({"role": "assistant", "content": content}));
            }
            Role::Tool => {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                // The call this answers: the latest earlier assistant call with that id.
                let name = messages[..i]
                    .iter()
                    .rev()
                    .flat_map(|p| p.tool_calls.iter())
                    .find(|c| c.id == id)
                    .map(|c| c.name.as_str())
                    .unwrap_or("tool");
                out.push(json!({"role": "user", "content": format!("Result of tool `{name}`:\n{}", m.content)}));
            }
            role => out.push(json!({"role": role, "content": m.content})),
        }
    }
    if !instruction_placed && let Some(text) = instruction {
        out.insert(0, json!({"role": "system", "content": text}));
    }
    out
}

//! Unit tests of `events`.

use super::*;
use quarry_engine::research::machine::state::{Failure, Phase, RunInput};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn lines(buffer: &Buffer) -> Vec<Value> {
    String::from_utf8(buffer.0.lock().unwrap().clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn state_changes_become_typed_lines_and_repeated_progress_is_dropped() {
    let buffer = Buffer::default();
    let events = JsonEvents::to_writer(Box::new(buffer.clone()));
    let mut state = RunState::new(RunInput::new("What is CEL?", Mode::Quick));
    state.phase = Phase::Researching;
    events.on_change(&state, &Event::Start);
    let progress = |units| Event::ResearcherProgress {
        task_id: 1,
        units,
        usage: Usage::default(),
    };
    events.on_change(&state, &progress(1));
    events.on_change(&state, &progress(1));
    state.usage.input_tokens = 900;
    state.usage.cost_pico_usd = 1_125_000_000;
    events.on_change(&state, &progress(2));
    state.phase = Phase::Failed;
    events.on_change(
        &state,
        &Event::SynthesisFailed {
            failure: Failure::new("ModelOutputInvalid", "no report"),
            usage: Usage::default(),
        },
    );
    let got = lines(&buffer);
    let types: Vec<&str> = got.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "run_start",
            "researcher_progress",
            "researcher_progress",
            "synthesis_failed"
        ]
    );
    assert_eq!(got[0]["query"], "What is CEL?");
    assert_eq!(got[0]["mode"], "quick");
    assert_eq!(got[0]["outputs"], json!(["study"]));
    assert_eq!(got[2]["toolCalls"], 2);
    assert_eq!(
        got[2]["usage"],
        json!({"inputTokens": 900, "outputTokens": 0, "costUSD": "0.001125", "llmCalls": 0})
    );
    assert_eq!(got[3]["phase"], "Failed");
    assert_eq!(got[3]["reason"], "ModelOutputInvalid");
    assert!(
        got.iter()
            .all(|l| l["time"].as_str().is_some_and(|t| t.ends_with('Z')))
    );
}

#[test]
fn the_end_line_names_the_report_or_the_error() {
    let mut state = RunState::new(RunInput::new("q", Mode::Deep));
    state.phase = Phase::Completed;
    state.searches = 2;
    let ok = end_json(Some(&state), &Ok(PathBuf::from("/tmp/r-a1.md")));
    assert_eq!(
        ok,
        json!({"type": "run_end", "ok": true, "phase": "Completed", "report": "/tmp/r-a1.md",
                   "usage": {"inputTokens": 0, "outputTokens": 0, "costUSD": "0.000000", "llmCalls": 0},
                   "searches": 2, "pagesRead": 0})
    );
    let failed = end_json(
        None,
        &Err(StandaloneError::MissingKey {
            name: "OPENAI_API_KEY".into(),
        }),
    );
    assert_eq!(
        failed,
        json!({"type": "run_end", "ok": false,
                   "error": "the profile names environment variable OPENAI_API_KEY for the API key, but it is not set"})
    );
}

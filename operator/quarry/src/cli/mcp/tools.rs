//! The MCP tools Quarry offers: their names, input schemas and the text a report is returned as.

use super::*;

/// Name of the research tool.
pub const RESEARCH_TOOL: &str = "research";
/// Name of the report tool.
pub const GET_REPORT_TOOL: &str = "get_report";
/// Name of the listing tool.
pub const LIST_RUNS_TOOL: &str = "list_runs";
/// Name of the schedule listing tool.
pub const LIST_SCHEDULES_TOOL: &str = "list_schedules";
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum ModeArg {
    Quick,
    Deep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum OutputArg {
    Study,
    Ideas,
    Implementations,
}
pub(super) fn wait_default() -> bool {
    true
}

/// Arguments of the `research` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ResearchInput {
    /// The research question, self-contained (3 to 4000 characters).
    pub(super) query: String,
    /// quick: one researcher, fast and cheap; deep: planner, parallel researchers, evaluator.
    #[serde(default)]
    #[schemars(with = "ModeArg")]
    pub(super) mode: Option<ModeArg>,
    /// What to produce: study (a cited report, the default), ideas, implementations.
    #[serde(default)]
    #[schemars(with = "Vec<OutputArg>")]
    pub(super) outputs: Option<Vec<OutputArg>>,
    /// Wait for the report and return it; false returns at once with the run's name.
    #[serde(default = "wait_default")]
    pub(super) wait: bool,
}

/// Arguments of the `get_report` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GetReportInput {
    /// The run's name, as research or list_runs gave it.
    pub(super) name: String,
    /// Namespace of a cluster run (default: the kube context's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) namespace: Option<String>,
}

/// Arguments of the `list_runs` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ListRunsInput {
    /// Namespace to list (default: the kube context's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) namespace: Option<String>,
    /// List the runs of every namespace.
    #[serde(default)]
    pub(super) all_namespaces: bool,
    /// Only the runs this ResearchSchedule made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) schedule: Option<String>,
}

/// Arguments of the `list_schedules` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ListSchedulesInput {
    /// Namespace to list (default: the kube context's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) namespace: Option<String>,
    /// List the schedules of every namespace.
    #[serde(default)]
    pub(super) all_namespaces: bool,
}

/// Pure: the JSON Schema of a tool's arguments (draft 2020-12, subschemas inlined for clients
/// that do not follow `$ref`; no top-level title or description).
pub fn input_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut object = match serde_json::to_value(schema) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => JsonObject::new(),
    };
    object.remove("title");
    object.remove("description");
    object.remove("$schema");
    Arc::new(object)
}

/// The tools this server offers.
pub fn tools() -> Vec<Tool> {
    let research = Tool::new(
        RESEARCH_TOOL,
        "Research a question on the web and return a cited Markdown report. Every citation is \
         checked against the pages actually read. Quick mode takes about a minute with a fast \
         model; deep mode several. Long reports are cut to 50 KB / 2000 lines and the text says \
         where the full report is.",
        input_schema::<ResearchInput>(),
    )
    .with_title("Research a question")
    .with_annotations(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(true),
    );
    let get_report = Tool::new(
        GET_REPORT_TOOL,
        "Return the report of a finished research run by name (cut to 50 KB / 2000 lines with \
         its full location), or say how far the run is.",
        input_schema::<GetReportInput>(),
    )
    .with_title("Get a research report")
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(false));
    let list_runs = Tool::new(
        LIST_RUNS_TOOL,
        "List research runs with phase, progress, cost and sources: the cluster namespace's \
         ResearchRuns and the standalone runs this server started.",
        input_schema::<ListRunsInput>(),
    )
    .with_title("List research runs")
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(false));
    let list_schedules = Tool::new(
        LIST_SCHEDULES_TOOL,
        "List the cluster's ResearchSchedules: when each researches next, its active runs, its \
         latest report's run (read it with get_report) and how many changes that report found.",
        input_schema::<ListSchedulesInput>(),
    )
    .with_title("List research schedules")
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(false));
    vec![research, get_report, list_runs, list_schedules]
}

/// Pure: what an agent receives for a report: the head within the tool-output budget (50 KB / 2000
/// lines, the notice included) and, always, where the full report is.
pub fn report_text(markdown: &str, location: &str) -> String {
    let total_lines = markdown.lines().count();
    let footer_reserve = format!(
        "\n\n[Report truncated: showing lines 1-{total_lines} of {total_lines} ({} of {} bytes). Full report: {location}]",
        markdown.len(),
        markdown.len()
    )
    .len();
    let cut = truncate_head(
        markdown,
        DEFAULT_MAX_BYTES.saturating_sub(footer_reserve),
        DEFAULT_MAX_LINES - 2,
    );
    if !cut.truncated {
        return format!("{}\n\n---\nFull report: {location}", markdown.trim_end());
    }
    let head = markdown
        .get(..cut.kept_bytes)
        .unwrap_or_default()
        .trim_end();
    format!(
        "{head}\n\n[Report truncated: showing lines 1-{} of {} ({} of {} bytes). Full report: {location}]",
        cut.kept_lines, cut.total_lines, cut.kept_bytes, cut.total_bytes
    )
}

impl ResearchInput {
    pub(super) fn mode(&self, default: Mode) -> Mode {
        match self.mode {
            Some(ModeArg::Quick) => Mode::Quick,
            Some(ModeArg::Deep) => Mode::Deep,
            None => default,
        }
    }

    /// The requested outputs, sorted and without repeats (empty: the default study).
    pub(super) fn outputs(&self) -> Vec<Output> {
        let mut outputs: Vec<Output> = self
            .outputs
            .iter()
            .flatten()
            .map(|o| match o {
                OutputArg::Study => Output::Study,
                OutputArg::Ideas => Output::Ideas,
                OutputArg::Implementations => Output::Implementations,
            })
            .collect();
        outputs.sort();
        outputs.dedup();
        outputs
    }
}

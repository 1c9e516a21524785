//! A real Prometheus for tests (Debian's `prometheus` package, with `promtool`): started on a free
//! 127.0.0.1 port with a configuration and a TSDB of its own in a temporary directory, never a
//! system instance, and read through its HTTP API as Grafana reads it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

/// Where the binaries come from.
pub const INSTALL_HINT: &str =
    "Debian's prometheus package, with promtool (scripts/install-test-deps.sh)";

/// `name` (`prometheus`, `promtool`) on PATH; panics with the install hint when it is missing,
/// so a test that needs it never passes without it.
pub fn binary(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is not installed: needs {INSTALL_HINT}"))
}

/// The `spec` of the chart's PrometheusRule: a plain Prometheus rule file (its `groups`).
pub fn rule_file_of(prometheus_rule: &str) -> Result<String, String> {
    let rule: serde_yaml::Value =
        serde_yaml::from_str(prometheus_rule).map_err(|e| format!("the PrometheusRule: {e}"))?;
    if rule["kind"].as_str() != Some("PrometheusRule") {
        return Err(format!("not a PrometheusRule: {:?}", rule["kind"]));
    }
    serde_yaml::to_string(&rule["spec"]).map_err(|e| e.to_string())
}

/// One series of a query answer: its labels and its samples (one for an instant query).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    /// (Unix time in seconds, value); NaN and ±Inf as Prometheus sends them.
    pub values: Vec<(f64, f64)>,
}

impl Series {
    /// A label's value ("" when absent).
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map_or("", String::as_str)
    }

    /// The finite values.
    pub fn finite(&self) -> Vec<f64> {
        self.values
            .iter()
            .map(|(_, v)| *v)
            .filter(|v| v.is_finite())
            .collect()
    }

    /// The largest finite value.
    pub fn max(&self) -> Option<f64> {
        self.finite().into_iter().reduce(f64::max)
    }

    /// The last value.
    pub fn last(&self) -> Option<f64> {
        self.values.last().map(|(_, v)| *v)
    }
}

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A running Prometheus; killed when dropped, its directory removed.
pub struct Prometheus {
    child: tokio::process::Child,
    base: String,
    http: reqwest::Client,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (`host:port`, `/metrics`) every `scrape_interval`
    /// (e.g. `1s`) as job `quarry`, evaluating `rules` (a plain rule file) as often, and waits
    /// until it is ready.
    pub async fn start(
        targets: &[String],
        scrape_interval: &str,
        rules: Option<&str>,
    ) -> Result<Prometheus, String> {
        let bin = binary("prometheus");
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let port = crate::searx::free_port().map_err(|e| e.to_string())?;
        let mut config = format!(
            "global:\n  scrape_interval: {scrape_interval}\n  scrape_timeout: {scrape_interval}\n  \
             evaluation_interval: {scrape_interval}\n"
        );
        if let Some(rules) = rules {
            std::fs::write(dir.path().join("rules.yaml"), rules).map_err(|e| e.to_string())?;
            config.push_str("rule_files:\n  - rules.yaml\n");
        }
        let list = targets
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ");
        config.push_str(&format!(
            "scrape_configs:\n  - job_name: quarry\n    metrics_path: /metrics\n    \
             static_configs:\n      - targets: [{list}]\n"
        ));
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).map_err(|e| e.to_string())?;
        let log = dir.path().join("prometheus.log");
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let child = tokio::process::Command::new(&bin)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--storage.tsdb.retention.time=1d")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(|e| e.to_string())?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let mut prometheus = Prometheus {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| e.to_string())?,
            log,
            _dir: dir,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = prometheus.child.try_wait() {
                return Err(format!(
                    "prometheus exited with {status}:\n{}",
                    prometheus.log_tail()
                ));
            }
            let ready = prometheus
                .http
                .get(format!("{}/-/ready", prometheus.base))
                .send()
                .await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return Ok(prometheus);
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "prometheus was not ready within 30 s:\n{}",
                    prometheus.log_tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Its base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// The last 60 lines of its log.
    pub fn log_tail(&self) -> String {
        crate::kube_operator::tail(&self.log)
    }

    async fn get(&self, path: &str, params: &[(&str, String)]) -> Result<Value, String> {
        let url = reqwest::Url::parse_with_params(&format!("{}{path}", self.base), params)
            .map_err(|e| format!("{path}: {e}"))?;
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        let body: Value = response
            .json()
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        if body["status"] != "success" {
            return Err(format!("GET {path} {params:?}: {body}"));
        }
        Ok(body["data"].clone())
    }

    /// Waits until every target has been scraped successfully (health `up`) at least once.
    pub async fn wait_for_targets(&self, timeout: Duration) -> Result<(), String> {
        crate::kube_operator::wait_for(
            "prometheus's targets up",
            timeout,
            || async { self.get("/api/v1/targets", &[]).await.ok() },
            |data: &Value| {
                data["activeTargets"].as_array().is_some_and(|targets| {
                    !targets.is_empty() && targets.iter().all(|t| t["health"] == "up")
                })
            },
        )
        .await
        .map(|_| ())
    }

    /// `/api/v1/query` at `time`: the vector (or scalar, as one series without labels).
    pub async fn query(&self, expr: &str, time: f64) -> Result<Vec<Series>, String> {
        let data = self
            .get(
                "/api/v1/query",
                &[("query", expr.to_string()), ("time", format!("{time:.3}"))],
            )
            .await?;
        parse_result(&data)
    }

    /// `/api/v1/query_range` from `start` to `end` every `step` seconds (a Grafana time series).
    pub async fn query_range(
        &self,
        expr: &str,
        start: f64,
        end: f64,
        step: f64,
    ) -> Result<Vec<Series>, String> {
        let data = self
            .get(
                "/api/v1/query_range",
                &[
                    ("query", expr.to_string()),
                    ("start", format!("{start:.3}")),
                    ("end", format!("{end:.3}")),
                    ("step", format!("{step}")),
                ],
            )
            .await?;
        parse_result(&data)
    }

    /// The values of `label` on series matching `selector` between `start` and `end`
    /// (Grafana's `label_values(selector, label)`).
    pub async fn label_values(
        &self,
        label: &str,
        selector: &str,
        start: f64,
        end: f64,
    ) -> Result<Vec<String>, String> {
        let data = self
            .get(
                &format!("/api/v1/label/{label}/values"),
                &[
                    ("match[]", selector.to_string()),
                    ("start", format!("{start:.3}")),
                    ("end", format!("{end:.3}")),
                ],
            )
            .await?;
        Ok(data
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect())
    }
}

fn number(v: &Value) -> Result<(f64, f64), String> {
    let time = v[0].as_f64().ok_or_else(|| format!("sample time: {v}"))?;
    let text = v[1].as_str().ok_or_else(|| format!("sample value: {v}"))?;
    let value = match text {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        t => t.parse().map_err(|e| format!("sample value {t:?}: {e}"))?,
    };
    Ok((time, value))
}

fn parse_result(data: &Value) -> Result<Vec<Series>, String> {
    let labels_of = |m: &Value| -> BTreeMap<String, String> {
        m.as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect()
    };
    match data["resultType"].as_str() {
        Some("scalar") => Ok(vec![Series {
            labels: BTreeMap::new(),
            values: vec![number(&data["result"])?],
        }]),
        Some("vector") | Some("matrix") => data["result"]
            .as_array()
            .ok_or_else(|| format!("no result: {data}"))?
            .iter()
            .map(|s| {
                let values = match s.get("value") {
                    Some(v) => vec![number(v)?],
                    None => s["values"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(number)
                        .collect::<Result<_, _>>()?,
                };
                Ok(Series {
                    labels: labels_of(&s["metric"]),
                    values,
                })
            })
            .collect(),
        other => Err(format!("unexpected result type {other:?}: {data}")),
    }
}

/// Runs `promtool ARGS` in `dir`; its combined output, or an error with it.
pub fn promtool(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new(binary("promtool"))
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("running promtool: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "promtool {args:?} failed ({}):\n{text}",
            out.status
        ))
    }
}

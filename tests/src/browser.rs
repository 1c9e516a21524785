//! A real browser for the console's tests: Debian's headless `chromium`, driven over WebDriver
//! (`chromedriver`, from `chromium-driver`) with fantoccini. Each test starts its own driver on
//! a free loopback port and saves screenshots under its temp directory.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

/// Where Debian installs the browser and its driver.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's chromedriver.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Whether chromium and chromedriver are installed.
pub fn browser_available() -> bool {
    Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists()
}

/// A headless chromium session; the driver process ends with it.
pub struct Browser {
    /// The WebDriver session.
    pub client: Client,
    driver: tokio::process::Child,
    shots: PathBuf,
}

impl Browser {
    /// Starts chromedriver and a headless chromium, or panics saying how to install them.
    pub async fn start(shots: &Path) -> Browser {
        Self::start_with(shots, &[]).await
    }

    /// [`Browser::start`] with more chromium flags (e.g. JavaScript off).
    pub async fn start_with(shots: &Path, extra: &[&str]) -> Browser {
        assert!(
            browser_available(),
            "chromium and chromium-driver are not installed (scripts/install-test-deps.sh installs them)"
        );
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            l.local_addr().expect("its address").port()
        };
        let driver = tokio::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let mut args = vec![
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1280,1000",
            "--no-first-run",
            "--disable-extensions",
        ];
        args.extend_from_slice(extra);
        let caps = json!({"goog:chromeOptions": {"binary": CHROMIUM, "args": args}});
        let caps = match caps {
            serde_json::Value::Object(map) => map,
            _ => unreachable!("a JSON object literal"),
        };
        let url = format!("http://127.0.0.1:{port}");
        let mut last = String::new();
        for _ in 0..100 {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(client) => {
                    std::fs::create_dir_all(shots).expect("the screenshot directory");
                    return Browser {
                        client,
                        driver,
                        shots: shots.to_path_buf(),
                    };
                }
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chromedriver on {url} did not start a session: {last}");
    }

    /// Saves a screenshot `<name>.png` (under `$QUARRY_SCREENSHOTS` when set, to keep it) and
    /// returns its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("a screenshot");
        let dir = std::env::var_os("QUARRY_SCREENSHOTS")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.shots.clone());
        std::fs::create_dir_all(&dir).expect("the screenshot directory");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("the screenshot is written");
        path
    }

    /// Ends the session and the driver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill().await;
    }
}

//! A throwaway Debian `redis-server` on 127.0.0.1 for tests (no persistence, killed on drop).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's package installs the server.
pub const REDIS_SERVER: &str = "/usr/bin/redis-server";

/// A running redis-server; killed when dropped.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    /// Starts redis-server on a free port and waits (bounded) until it answers PING.
    pub fn start() -> std::io::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(REDIS_SERVER)
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if server.ping() {
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(std::io::Error::other(format!(
                    "redis-server exited with {status}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(std::io::Error::other(
            "redis-server did not answer PING in 10 s",
        ))
    }

    /// Starts a server for the test `test`, or panics saying redis-server is not installed
    /// (tests that need it are `#[ignore = "needs redis-server ..."]` and run only when asked).
    pub fn start_for(test: &str) -> Self {
        assert!(
            redis_available(),
            "{test}: redis-server is not installed; run scripts/install-test-deps.sh"
        );
        Self::start().unwrap_or_else(|e| panic!("{test}: redis-server: {e}"))
    }

    /// `redis://127.0.0.1:<port>/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Whether the server answers PING.
    pub fn ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        if stream.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 7];
        stream.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    /// Stops the server (a test of "Redis down mid-run").
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether Debian's redis-server is installed.
pub fn redis_available() -> bool {
    Path::new(REDIS_SERVER).exists()
}

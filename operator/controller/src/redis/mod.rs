//! Redis-backed implementations of the engine's ports: the search and page cache (`GET` and
//! `SET key value EX ttl`, shared by every operator replica) here, the event stream in [`event_stream`].
//!
//! The connection ([`RedisConnector`]) is made lazily and remade by redis-rs's `ConnectionManager` after a drop. Every
//! command has a short deadline: the cache is an optimisation, so a slow or absent Redis turns
//! into misses (and a retry at most every [`RECONNECT_EVERY`]) instead of stalling a run.

pub mod event_stream;

use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::Mutex;

use quarry_engine::cache::{Cache, CacheError};

/// Deadline of one cache command.
pub const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);
/// How long after a failed connect the next attempt is made.
pub const RECONNECT_EVERY: Duration = Duration::from_secs(5);

/// A lazily made, shared Redis connection: connected on first use, remade by redis-rs after a
/// drop, and after a failed connect not tried again for [`RECONNECT_EVERY`], so callers fail
/// fast while Redis is down. Shared by the cache and the event stream.
pub struct RedisConnector {
    client: redis::Client,
    /// The live connection, or when the last connect failed.
    conn: Mutex<Result<ConnectionManager, Option<Instant>>>,
}

impl RedisConnector {
    /// A connector for `url` (`redis://host:6379/0`); no connection is made until first use.
    pub fn new(url: &str) -> Result<Self, redis::RedisError> {
        Ok(Self {
            client: redis::Client::open(url)?,
            conn: Mutex::new(Err(None)),
        })
    }

    /// The client, for connections of one's own (blocking reads must not share the connection).
    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    /// The connection, connecting when none was made or the last failure is old enough.
    pub async fn connection(&self) -> Result<ConnectionManager, String> {
        let mut slot = self.conn.lock().await;
        match &*slot {
            Ok(conn) => return Ok(conn.clone()),
            Err(Some(failed)) if failed.elapsed() < RECONNECT_EVERY => {
                return Err("unreachable; retrying shortly".into());
            }
            Err(_) => {}
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(COMMAND_TIMEOUT))
            .set_response_timeout(Some(COMMAND_TIMEOUT))
            .set_number_of_retries(1);
        match tokio::time::timeout(
            COMMAND_TIMEOUT * 2,
            ConnectionManager::new_with_config(self.client.clone(), config),
        )
        .await
        {
            Ok(Ok(conn)) => {
                *slot = Ok(conn.clone());
                Ok(conn)
            }
            Ok(Err(e)) => {
                *slot = Err(Some(Instant::now()));
                Err(e.to_string())
            }
            Err(_) => {
                *slot = Err(Some(Instant::now()));
                Err("connect timed out".into())
            }
        }
    }
}

/// A [`Cache`] in Redis.
pub struct RedisCache {
    conn: RedisConnector,
}

impl RedisCache {
    /// A cache at `url` (`redis://host:6379/0`); no connection is made until first use.
    pub fn new(url: &str) -> Result<Self, CacheError> {
        Ok(Self {
            conn: RedisConnector::new(url).map_err(|e| backend_error(&e))?,
        })
    }

    async fn connection(&self) -> Result<ConnectionManager, CacheError> {
        self.conn
            .connection()
            .await
            .map_err(|message| CacheError::Backend {
                backend: "redis",
                message,
            })
    }
}

#[async_trait]
impl Cache for RedisCache {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, CacheError> {
        let mut conn = self.connection().await?;
        match tokio::time::timeout(COMMAND_TIMEOUT, conn.get::<_, Option<Vec<u8>>>(key)).await {
            Ok(result) => result.map_err(|e| backend_error(&e)),
            Err(_) => Err(timed_out()),
        }
    }

    async fn put(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), CacheError> {
        let mut conn = self.connection().await?;
        let seconds = ttl.as_secs().max(1);
        match tokio::time::timeout(
            COMMAND_TIMEOUT,
            conn.set_ex::<_, _, ()>(key, value, seconds),
        )
        .await
        {
            Ok(result) => result.map_err(|e| backend_error(&e)),
            Err(_) => Err(timed_out()),
        }
    }

    fn backend(&self) -> &'static str {
        "redis"
    }
}

fn backend_error(e: &redis::RedisError) -> CacheError {
    CacheError::Backend {
        backend: "redis",
        message: e.to_string(),
    }
}

fn timed_out() -> CacheError {
    CacheError::Backend {
        backend: "redis",
        message: format!("no answer within {COMMAND_TIMEOUT:?}"),
    }
}

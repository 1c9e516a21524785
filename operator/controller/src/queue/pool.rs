//! The run's URL pool in Redis: every worker's researchers of one run claim from it, so no two
//! tasks of a run read the same URL.
//!
//! It is a hash URL -> task id rather than a plain set: a task reclaimed from a dead worker may
//! read again what its dead predecessor claimed (that read was never reported, the run has no
//! report of that page), while every other task of the run is refused.

use std::collections::BTreeSet;

use async_trait::async_trait;
use redis::aio::ConnectionManager;

use super::protocol::RUN_KEY_TTL;
use super::{COMMAND_TIMEOUT, timed};
use quarry_engine::research::agents::researcher::SharedUrls;

/// Claims a URL for a task atomically: free or already the same task's, it is (re)claimed.
const CLAIM: &str = r#"
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if owner and owner ~= ARGV[2] then return 0 end
if not owner then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"#;

/// Gives a URL back when the task holds it (a task never frees another's claim).
const RELEASE: &str = r#"
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 1
"#;

/// Pages one run may claim at most; past it, the pool answers from what it holds (a run reads
/// tens of pages, this only bounds a runaway).
pub const MAX_URLS: usize = 10_000;

/// The URL pool of one run, as seen by one of its tasks.
pub struct RedisUrls {
    conn: ConnectionManager,
    key: String,
    task_id: u32,
}

impl RedisUrls {
    /// The pool at `key` (`quarry:run:<run>:urls`) for task `task_id`.
    pub fn new(conn: ConnectionManager, key: String, task_id: u32) -> Self {
        Self { conn, key, task_id }
    }
}

#[async_trait]
impl SharedUrls for RedisUrls {
    async fn claim(&self, url: &str) -> Result<bool, String> {
        let mut conn = self.conn.clone();
        let claimed: i64 = timed(
            "claim URL",
            COMMAND_TIMEOUT,
            redis::cmd("EVAL")
                .arg(CLAIM)
                .arg(1)
                .arg(&self.key)
                .arg(url)
                .arg(self.task_id)
                .arg(RUN_KEY_TTL.as_secs())
                .query_async(&mut conn),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(claimed == 1)
    }

    async fn taken(&self) -> Result<BTreeSet<String>, String> {
        let mut conn = self.conn.clone();
        let urls: Vec<String> = timed(
            "read URL pool",
            COMMAND_TIMEOUT,
            redis::cmd("HKEYS").arg(&self.key).query_async(&mut conn),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(urls.into_iter().take(MAX_URLS).collect())
    }

    async fn release(&self, url: &str) -> Result<(), String> {
        let mut conn = self.conn.clone();
        let _: i64 = timed(
            "release URL",
            COMMAND_TIMEOUT,
            redis::cmd("EVAL")
                .arg(RELEASE)
                .arg(1)
                .arg(&self.key)
                .arg(url)
                .arg(self.task_id)
                .query_async(&mut conn),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(())
    }
}

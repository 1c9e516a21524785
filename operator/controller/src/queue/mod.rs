//! Scale-out mode: researcher tasks on a Redis stream, run by `quarry worker` processes.
//!
//! The leader (operator or `quarry run --workers`) keeps the reducer and the run's state; only
//! researchers run remotely. [`dispatch::RedisDispatch`] is the executor's dispatch port over Redis,
//! [`worker`] the consumer side, [`pool`] the run's URL pool in Redis, and [`protocol`] the
//! messages and the pure decisions (de-duplication, reclaim). See `protocol` for every key.

pub mod dispatch;
pub mod pool;
pub mod protocol;
pub mod seal;
pub mod worker;

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// Deadline of one non-blocking Redis command of the queue.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors of the work queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// A Redis command failed or timed out.
    #[error("Redis: {action}: {message}")]
    Redis { action: String, message: String },
    /// A message could not be encoded or read.
    #[error(transparent)]
    Protocol(#[from] protocol::ProtocolError),
    /// The configuration is unusable.
    #[error("{0}")]
    Config(String),
    /// The health and metrics server failed.
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
}

/// Maps a Redis error of `action`.
pub(crate) fn redis_err(action: &str) -> impl FnOnce(redis::RedisError) -> QueueError + '_ {
    move |e| QueueError::Redis {
        action: action.to_string(),
        message: e.to_string(),
    }
}

/// Runs one Redis command future with a deadline.
pub(crate) async fn timed<T>(
    action: &str,
    deadline: Duration,
    fut: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, QueueError> {
    match tokio::time::timeout(deadline, fut).await {
        Ok(r) => r.map_err(redis_err(action)),
        Err(_) => Err(QueueError::Redis {
            action: action.to_string(),
            message: format!("no answer within {deadline:?}"),
        }),
    }
}

/// A reconnecting connection whose replies may take up to `response_timeout` (blocking reads
/// need more than their BLOCK time).
pub(crate) async fn connect(
    client: &redis::Client,
    response_timeout: Duration,
) -> Result<ConnectionManager, QueueError> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(COMMAND_TIMEOUT))
        .set_response_timeout(Some(response_timeout))
        .set_number_of_retries(2);
    timed(
        "connect",
        COMMAND_TIMEOUT * 2,
        ConnectionManager::new_with_config(client.clone(), config),
    )
    .await
}

/// Creates the consumer group on the tasks stream (and the stream) unless it exists. Delivery
/// starts at the stream's beginning: tasks queued before any worker started are not skipped.
pub(crate) async fn ensure_group(conn: &mut ConnectionManager) -> Result<(), QueueError> {
    let created: redis::RedisResult<()> = tokio::time::timeout(
        COMMAND_TIMEOUT,
        redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(protocol::TASKS_STREAM)
            .arg(protocol::GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(conn),
    )
    .await
    .map_err(|_| QueueError::Redis {
        action: "XGROUP CREATE".into(),
        message: format!("no answer within {COMMAND_TIMEOUT:?}"),
    })?;
    match created {
        Ok(()) => Ok(()),
        Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
        Err(e) => Err(redis_err("XGROUP CREATE")(e)),
    }
}

/// The bytes of field `name` of a stream entry.
pub(crate) fn field_bytes(
    map: &std::collections::HashMap<String, redis::Value>,
    name: &str,
) -> Option<Vec<u8>> {
    match map.get(name)? {
        redis::Value::BulkString(b) => Some(b.clone()),
        redis::Value::SimpleString(s) => Some(s.clone().into_bytes()),
        _ => None,
    }
}

//! The Redis side of the fleet: one connection (a single Redis through the
//! `redis` crate's connection manager, or a Redis Cluster through its
//! cluster client), every command bounded by `fleet.timeout` and guarded by
//! the engine's [`Health`].
//!
//! Nothing connects at start-up: the first command connects, so a node
//! starts (as a single node) while Redis is down. The connection manager
//! and the cluster client reconnect by themselves after a connection drops;
//! while Redis stays away, [`Health`] keeps requests from waiting on it.

use super::config::RedisUrl;
use super::health::Health;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, FromRedisValue, Pipeline, RedisFuture, Script, Value};
use std::future::Future;
use std::time::Duration;

/// Why a fleet operation did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetError {
    /// The engine failed recently and is left alone for a moment.
    #[error("engine unusable (recent failure)")]
    Down,
    /// The operation failed or timed out (the message says which).
    #[error("{0}")]
    Failed(String),
    /// The engine answered with something that is not valid (counted in
    /// `crawlcache_fleet_invalid_total`; never used).
    #[error("invalid data: {0}")]
    Invalid(String),
    /// The fleet could not be set up from its configuration (a Redis URL
    /// the client refuses, a bucket without credentials): the node does
    /// not start.
    #[error("{0}")]
    Setup(String),
}

/// A Redis connection of either kind.
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

#[allow(clippy::large_enum_variant, reason = "one per process")]
enum Target {
    Single(ConnectionManager),
    Cluster { client: ClusterClient, conn: tokio::sync::Mutex<Option<ClusterConnection>> },
}

/// The fleet's Redis.
pub struct Redis {
    target: Target,
    timeout: Duration,
    /// Up or down, errors, warnings.
    pub health: Health,
}

impl Redis {
    /// A client for `url` whose commands each take at most `timeout`. Does
    /// not connect (the first command does); must be called inside a tokio
    /// runtime. Errors: a URL the `redis` crate does not accept.
    pub fn new(url: &RedisUrl, timeout: Duration) -> Result<Redis, FleetError> {
        let target = match url {
            RedisUrl::None => return Err(FleetError::Setup("no Redis configured".into())),
            RedisUrl::Single(u) => {
                let client = redis::Client::open(u.as_str()).map_err(|e| {
                    FleetError::Setup(format!("configuration key `fleet.redis_url`: {e}"))
                })?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(1)
                    .set_min_delay(Duration::from_millis(50))
                    .set_max_delay(timeout);
                let manager =
                    ConnectionManager::new_lazy_with_config(client, config).map_err(|e| {
                        FleetError::Setup(format!("configuration key `fleet.redis_url`: {e}"))
                    })?;
                Target::Single(manager)
            }
            RedisUrl::Cluster(seeds) => {
                let client = ClusterClient::builder(seeds.iter().map(String::as_str))
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(1)
                    .build()
                    .map_err(|e| {
                        FleetError::Setup(format!("configuration key `fleet.redis_url`: {e}"))
                    })?;
                Target::Cluster { client, conn: tokio::sync::Mutex::new(None) }
            }
        };
        Ok(Redis { target, timeout, health: Health::new("redis") })
    }

    /// The per-command bound.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn conn(&self) -> Result<Conn, redis::RedisError> {
        match &self.target {
            Target::Single(m) => Ok(Conn::Single(m.clone())),
            Target::Cluster { client, conn } => {
                let mut guard = conn.lock().await;
                if let Some(c) = guard.as_ref() {
                    return Ok(Conn::Cluster(c.clone()));
                }
                let c = client.get_async_connection().await?;
                *guard = Some(c.clone());
                Ok(Conn::Cluster(c))
            }
        }
    }

    /// Runs `op` on a connection within the timeout, unless Redis failed a
    /// moment ago ([`FleetError::Down`]). An operation that meets a dropped
    /// connection is sent once more on the new connection the client makes
    /// (the first command after Redis came back meets the old one). `what`
    /// names the operation in the warning a failure logs.
    async fn run<T, F, Fut>(&self, what: &str, op: F) -> Result<T, FleetError>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        if !self.health.allows() {
            return Err(FleetError::Down);
        }
        let attempt = async {
            let mut tries = 0;
            loop {
                tries += 1;
                let conn = self.conn().await.map_err(|e| format!("connecting: {e}"))?;
                match op(conn).await {
                    Ok(v) => return Ok(v),
                    Err(e)
                        if tries == 1
                            && (e.is_io_error()
                                || e.is_unrecoverable_error()
                                || e.is_connection_dropped()) =>
                    {
                        self.forget_connection().await;
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
        };
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(Ok(v)) => {
                self.health.succeeded();
                Ok(v)
            }
            Ok(Err(e)) => {
                self.health.failed(what, &e);
                Err(FleetError::Failed(format!("Redis {what}: {e}")))
            }
            Err(_) => {
                let e = format!("no answer within {} ms", self.timeout.as_millis());
                self.health.failed(what, &e);
                Err(FleetError::Failed(format!("Redis {what}: {e}")))
            }
        }
    }

    /// Makes the next command connect anew (the connection manager of a
    /// single Redis reconnects by itself).
    async fn forget_connection(&self) {
        if let Target::Cluster { conn, .. } = &self.target {
            *conn.lock().await = None;
        }
    }

    /// Sends one command and converts its reply.
    pub async fn query<T: FromRedisValue + Send>(&self, cmd: Cmd) -> Result<T, FleetError> {
        let name = cmd.args_iter().next().map(|a| match a {
            redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
            _ => "command".into(),
        });
        let what = name.unwrap_or_else(|| "command".into());
        let cmd = &cmd;
        self.run(&what, move |mut c| async move { cmd.query_async::<T>(&mut c).await }).await
    }

    /// Runs a Lua script with `keys` and `args` (EVALSHA, loading it on
    /// first use).
    pub async fn script<T: FromRedisValue + Send>(
        &self,
        script: &Script,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<T, FleetError> {
        self.run("EVALSHA", |mut c| async move {
            let mut inv = script.prepare_invoke();
            for k in keys {
                inv.key(*k);
            }
            for a in args {
                inv.arg(*a);
            }
            inv.invoke_async::<T>(&mut c).await
        })
        .await
    }
}

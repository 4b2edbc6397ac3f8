//! How the store reaches Redis: one standalone server (or a primary behind a load balancer), a
//! Redis Cluster, or a primary that Redis Sentinel manages. Everything above this module sees
//! one [`Conn`] that sends commands and scripts, and one subscription to the events channel;
//! the `redis` crate does the routing (cluster slots, `MOVED`, the sentinels' answer), this
//! module only chooses which of its connections to use and when to ask Sentinel again.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig, PubSub};
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Cmd, ErrorKind, IntoConnectionInfo, Pipeline, RedisError, RedisFuture, Value};

/// Which kind of deployment the store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Topology {
    Standalone,
    Cluster,
    Sentinel,
}

impl Topology {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Standalone => "standalone",
            Self::Cluster => "cluster",
            Self::Sentinel => "sentinel",
        }
    }

    /// The command that broadcasts an opening: sharded pub/sub on a cluster (a channel lives
    /// on the shard that owns its slot, and `SSUBSCRIBE` follows it through a failover),
    /// classic pub/sub elsewhere (works on any Redis, 6 included).
    pub(super) fn publish(self) -> &'static str {
        match self {
            Self::Cluster => "SPUBLISH",
            _ => "PUBLISH",
        }
    }
}

/// What the builder was given: parsed, credentials inside the `redis` crate's own types only.
pub(super) enum Target {
    Standalone(Box<redis::Client>),
    Cluster(Box<ClusterClientBuilder>),
    Sentinel(Box<SentinelClientBuilder>),
}

/// A private CA's certificates for rustls.
fn certificates(root: &[u8]) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(root.to_vec()),
    }
}

impl Target {
    /// `tls_root`: a private CA for `rediss://`.
    pub(super) fn standalone(url: &str, tls_root: Option<&[u8]>) -> Result<Self, RedisError> {
        if let Some(root) = tls_root {
            return redis::Client::build_with_tls(url, certificates(root))
                .map(|c| Self::Standalone(Box::new(c)));
        }
        let _ = tls_root;
        redis::Client::open(url).map(|c| Self::Standalone(Box::new(c)))
    }

    pub(super) fn cluster(nodes: &[String], tls_root: Option<&[u8]>) -> Result<Self, RedisError> {
        let infos = nodes
            .iter()
            .map(|n| n.as_str().into_connection_info())
            .collect::<Result<Vec<_>, _>>()?;
        if infos.is_empty() {
            return Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "no cluster node",
            )));
        }
        let builder = ClusterClientBuilder::new(infos);
        let builder = match tls_root {
            Some(root) => builder.certs(certificates(root)),
            None => builder,
        };
        let _ = tls_root;
        Ok(Self::Cluster(Box::new(builder)))
    }

    pub(super) fn sentinel(
        sentinels: &[String],
        service: &str,
        primary: Option<(Option<String>, String)>,
        tls_root: Option<&[u8]>,
    ) -> Result<Self, RedisError> {
        let infos = sentinels
            .iter()
            .map(|n| n.as_str().into_connection_info())
            .collect::<Result<Vec<_>, _>>()?;
        let Some(first) = infos.first() else {
            return Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "no sentinel",
            )));
        };
        let tls = match first.addr() {
            redis::ConnectionAddr::TcpTls { insecure: true, .. } => Some(redis::TlsMode::Insecure),
            redis::ConnectionAddr::TcpTls { .. } => Some(redis::TlsMode::Secure),
            _ => None,
        };
        let sentinel_auth = first.redis_settings().clone();
        let mut builder = SentinelClientBuilder::new(
            infos.iter().map(|i| i.addr().clone()),
            service,
            SentinelServerType::Master,
        )?;
        if let Some(user) = sentinel_auth.username() {
            builder = builder.set_client_to_sentinel_username(user);
        }
        if let Some(password) = sentinel_auth.password() {
            builder = builder.set_client_to_sentinel_password(password);
        }
        if let Some(mode) = tls {
            builder = builder
                .set_client_to_sentinel_tls_mode(mode)
                .set_client_to_redis_tls_mode(mode);
        }
        if let Some(root) = tls_root {
            builder = builder
                .set_client_to_sentinel_certificates(certificates(root))
                .set_client_to_redis_certificates(certificates(root));
        }
        let _ = tls_root;
        if let Some((user, password)) = primary {
            if let Some(user) = user {
                builder = builder.set_client_to_redis_username(user);
            }
            builder = builder.set_client_to_redis_password(password);
        }
        Ok(Self::Sentinel(Box::new(builder)))
    }

    pub(super) fn topology(&self) -> Topology {
        match self {
            Self::Standalone(_) => Topology::Standalone,
            Self::Cluster(_) => Topology::Cluster,
            Self::Sentinel(_) => Topology::Sentinel,
        }
    }
}

/// Where pushed messages of a cluster connection go (sharded pub/sub arrives as RESP3 pushes).
pub(super) type PushHandler = Arc<dyn Fn(redis::PushInfo) + Send + Sync>;

/// A connection that sends commands and scripts to the right server. Cheap to clone; clones
/// share the underlying multiplexed connections.
#[derive(Clone)]
pub(crate) enum Conn {
    Standalone(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(SentinelConn),
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Standalone(_) => "Conn::Standalone",
            Self::Cluster(_) => "Conn::Cluster",
            Self::Sentinel(_) => "Conn::Sentinel",
        })
    }
}

/// How the subscriber task (re)connects for classic pub/sub.
#[derive(Clone)]
pub(super) enum Subscriber {
    Standalone(Box<redis::Client>),
    Sentinel(SentinelConn),
    /// Sharded pub/sub rides on the cluster connection itself: `SSUBSCRIBE` once, and the
    /// `redis` crate re-subscribes on whichever node owns the channel's slot after a
    /// reconnection or a failover.
    Cluster(ClusterConnection),
}

impl Subscriber {
    /// A fresh pub/sub connection (standalone: the same server; Sentinel: the primary the
    /// sentinels name now). Not for a cluster.
    pub(super) async fn pubsub(&self) -> Result<PubSub, RedisError> {
        match self {
            Self::Standalone(client) => client.get_async_pubsub().await,
            Self::Sentinel(sentinel) => sentinel.primary_client().await?.get_async_pubsub().await,
            Self::Cluster(_) => Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "a cluster subscribes through its connection",
            ))),
        }
    }
}

/// Opens further connections to the same deployment, for commands that must not share the
/// store's multiplexed connection: a `WAIT` blocks the connection it is sent on until the
/// replicas answer, and everything queued behind it on that connection with it.
#[derive(Clone)]
pub(crate) enum Dialer {
    Standalone(Box<redis::Client>),
    Cluster(Box<ClusterClient>),
    /// The same sentinels, through a connection of its own that follows failovers as the
    /// store's does.
    Sentinel(Arc<tokio::sync::Mutex<SentinelClient>>),
}

impl fmt::Debug for Dialer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Standalone(_) => "Dialer::Standalone",
            Self::Cluster(_) => "Dialer::Cluster",
            Self::Sentinel(_) => "Dialer::Sentinel",
        })
    }
}

impl Dialer {
    /// A connection of its own (lazily connected where the `redis` crate allows), every call
    /// on it bounded by `timeout`.
    pub(crate) async fn dial(&self, timeout: Duration) -> Result<Conn, RedisError> {
        let config = manager_config(timeout);
        match self {
            Self::Standalone(client) => Ok(Conn::Standalone(
                ConnectionManager::new_lazy_with_config((**client).clone(), config)?,
            )),
            Self::Cluster(client) => Ok(Conn::Cluster(
                client
                    .get_async_connection_with_config(
                        ClusterConfig::new()
                            .set_connection_timeout(timeout)
                            .set_response_timeout(timeout),
                    )
                    .await?,
            )),
            Self::Sentinel(sentinel) => Ok(Conn::Sentinel(SentinelConn(Arc::new(SentinelInner {
                sentinel: sentinel.clone(),
                current: RwLock::new(None),
                generation: AtomicU64::new(0),
                stale: AtomicBool::new(true),
                config,
            })))),
        }
    }
}

/// Connects (lazily: nothing here waits for a server). `on_push` receives a cluster's pushed
/// messages.
pub(super) fn open(
    target: Target,
    timeout: Duration,
    on_push: PushHandler,
) -> Result<(Conn, Subscriber, Dialer), RedisError> {
    let config = manager_config(timeout);
    match target {
        Target::Standalone(client) => {
            let conn = ConnectionManager::new_lazy_with_config((*client).clone(), config)?;
            Ok((
                Conn::Standalone(conn),
                Subscriber::Standalone(client.clone()),
                Dialer::Standalone(client),
            ))
        }
        Target::Cluster(builder) => {
            let client: ClusterClient = (*builder)
                .use_protocol(redis::ProtocolVersion::RESP3)
                .connection_timeout(timeout)
                .response_timeout(timeout)
                // A request waits at most the store's timeout for the cluster to settle (slots
                // moving after a failover): the store's own timeout is the bound.
                .retries(3)
                .min_retry_wait(10)
                .max_retry_wait(timeout.as_millis().try_into().unwrap_or(u64::MAX).max(10))
                .build()?;
            let push = move |info: redis::PushInfo| -> Result<(), std::convert::Infallible> {
                on_push(info);
                Ok(())
            };
            let conn = client.get_pending_async_connection_with_config(
                ClusterConfig::new()
                    .set_connection_timeout(timeout)
                    .set_response_timeout(timeout)
                    .set_push_sender(push),
            );
            Ok((
                Conn::Cluster(conn.clone()),
                Subscriber::Cluster(conn),
                Dialer::Cluster(Box::new(client)),
            ))
        }
        Target::Sentinel(builder) => {
            let client = Arc::new(tokio::sync::Mutex::new(builder.build()?));
            let sentinel = SentinelConn(Arc::new(SentinelInner {
                sentinel: client.clone(),
                current: RwLock::new(None),
                generation: AtomicU64::new(0),
                stale: AtomicBool::new(true),
                config,
            }));
            Ok((
                Conn::Sentinel(sentinel.clone()),
                Subscriber::Sentinel(sentinel),
                Dialer::Sentinel(client),
            ))
        }
    }
}

fn manager_config(timeout: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        // Reconnect once per request, at once: a dead server is an immediate error (the
        // `on_error` decision), not a wait that turns into a timeout.
        .set_number_of_retries(0)
        .set_min_delay(Duration::from_millis(1))
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Standalone(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
            Self::Sentinel(c) => Box::pin(c.command(cmd)),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Standalone(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Sentinel(c) => Box::pin(c.commands(pipeline, offset, count)),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Standalone(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
            Self::Sentinel(_) => 0,
        }
    }
}

/// A primary found through Redis Sentinel. Commands go to a connection manager on the primary
/// the sentinels named last; an error that says the server is gone or is no longer the
/// primary (refused, dropped, timed out, `READONLY`) makes the next command ask the sentinels
/// again, so a failover costs the requests in flight while it happens, and nothing after the
/// sentinels name the new primary.
#[derive(Clone)]
pub(crate) struct SentinelConn(Arc<SentinelInner>);

struct SentinelInner {
    /// Shared with the connections a [`Dialer`] opens.
    sentinel: Arc<tokio::sync::Mutex<SentinelClient>>,
    /// The connection to the primary named last, and its generation.
    current: RwLock<Option<(u64, ConnectionManager)>>,
    generation: AtomicU64,
    /// Whether the next command asks the sentinels first.
    stale: AtomicBool,
    config: ConnectionManagerConfig,
}

/// Whether an error means the primary may have moved.
fn primary_may_have_moved(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_refusal()
        || error.is_connection_dropped()
        || error.is_timeout()
        || matches!(
            error.kind(),
            ErrorKind::Server(
                redis::ServerErrorKind::ReadOnly | redis::ServerErrorKind::MasterDown
            )
        )
}

impl SentinelConn {
    /// A client for the primary the sentinels name now (each call asks them).
    async fn primary_client(&self) -> Result<redis::Client, RedisError> {
        self.0.sentinel.lock().await.async_get_client().await
    }

    /// The connection to use: the current one, or, when it is stale or missing, one to the
    /// primary the sentinels name now.
    async fn connection(&self) -> Result<(u64, ConnectionManager), RedisError> {
        let inner = &*self.0;
        if !inner.stale.load(Ordering::Acquire)
            && let Some(current) = super::read(&inner.current).clone()
        {
            return Ok(current);
        }
        // One lookup at a time; whoever waited behind it uses its result.
        let mut sentinel = inner.sentinel.lock().await;
        if !inner.stale.load(Ordering::Acquire)
            && let Some(current) = super::read(&inner.current).clone()
        {
            return Ok(current);
        }
        let client = sentinel.async_get_client().await?;
        let manager = ConnectionManager::new_lazy_with_config(client, inner.config.clone())?;
        let generation = inner.generation.fetch_add(1, Ordering::AcqRel) + 1;
        *super::write(&inner.current) = Some((generation, manager.clone()));
        inner.stale.store(false, Ordering::Release);
        Ok((generation, manager))
    }

    fn failed(&self, generation: u64, error: &RedisError) {
        if primary_may_have_moved(error)
            && super::read(&self.0.current)
                .as_ref()
                .is_some_and(|(g, _)| *g == generation)
        {
            self.0.stale.store(true, Ordering::Release);
        }
    }

    async fn command(&self, cmd: &Cmd) -> Result<Value, RedisError> {
        let (generation, mut conn) = self.connection().await?;
        let result = conn.req_packed_command(cmd).await;
        if let Err(error) = &result {
            self.failed(generation, error);
        }
        result
    }

    async fn commands(
        &self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> Result<Vec<Value>, RedisError> {
        let (generation, mut conn) = self.connection().await?;
        let result = conn.req_packed_commands(pipeline, offset, count).await;
        if let Err(error) = &result {
            self.failed(generation, error);
        }
        result
    }
}

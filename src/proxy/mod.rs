//! The proxy: the shared state ([`state`]), the server and its serving
//! threads ([`server`]), connection placement ([`placement`], [`shares`]),
//! one place that routes each request ([`route`]), the stages that carry
//! routes out ([`stages`]), and graceful shutdown ([`shutdown`]).
//!
//! Shutdown: on SIGINT or SIGTERM the listener is closed, connections are
//! asked to finish their current exchange, background store writes are
//! given `server.shutdown_timeout` to complete, and the index is flushed.

pub mod body_cache;
pub mod conn;
pub mod exchange;
pub mod in_tunnel;
pub mod invalidate;
pub mod lookup;
pub mod meta_cache;
pub mod overflow;
pub mod overload;
pub mod placement;
pub mod robots_gate;
pub mod route;
pub mod server;
pub mod shares;
pub mod shutdown;
pub mod stages;
pub mod state;
pub mod tunnel;

pub use conn::client_http1;
pub use server::{run, ADDR_FILE, BLOCKING_THREADS};
pub use shares::{serving_threads, Shares, SHARE_SLACK};
pub use shutdown::{serve_until_closing, shutdown_signal, TaskGuard, Tasks};
pub use state::{
    no_endpoints, origin_client, robots_registry, ProxyState, SelfEndpoints, ServeError,
};

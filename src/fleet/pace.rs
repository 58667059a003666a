//! Crawl-delay spacing for the fleet as a whole: one atomic next-slot
//! reservation per request to an origin, in Redis.
//!
//! [`RESERVE`] reads the origin's next free slot (`pace:{ORIGIN}`, in ms of
//! Redis's own clock, so the nodes' clocks do not matter), takes
//! `max(slot, now)`, stores that plus the delay, and answers how long the
//! caller must wait. Reservations are served one at a time by Redis, so
//! requests from every node to one origin are spaced by the delay. The key
//! expires once its slot has passed (plus a minute), so idle origins cost
//! nothing.
//!
//! Tolerance: a node starts its request when its wait ends, so two
//! requests reach the origin at least `delay` minus the difference of the
//! two nodes' Redis round trips and connection set-up apart: a few
//! milliseconds on one network. Tests allow 100 ms.

use super::keys;
use super::redis::{FleetError, Redis};
use redis::Script;
use std::sync::OnceLock;
use std::time::Duration;

/// The reservation (KEYS[1] = pace key, ARGV[1] = delay in ms): returns the
/// wait in ms.
pub const RESERVE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local delay = tonumber(ARGV[1])
local slot = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local start = now
if slot > now then start = slot end
redis.call('SET', KEYS[1], start + delay, 'PX', start + delay - now + 60000)
return start - now
"#;

fn script() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| Script::new(RESERVE))
}

/// The longest wait accepted from Redis (a slot further away means a
/// corrupt key or a queue no crawler should sit in): one hour.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);

/// Reserves the next slot of `origin_key` with spacing `delay`; returns how
/// long to wait before contacting the origin. Errors when Redis is down or
/// answers nonsense (the caller then paces locally).
pub async fn reserve(redis: &Redis, origin_key: &str, delay: Duration) -> Result<Duration, FleetError> {
    let key = keys::pace(origin_key);
    let ms = delay.as_millis().min(u128::from(u32::MAX)).to_string();
    let wait: i64 = redis.script(script(), &[key.as_bytes()], &[ms.as_bytes()]).await?;
    let wait = Duration::from_millis(u64::try_from(wait).map_err(|_| FleetError::Invalid(format!("negative wait {wait} ms")))?);
    if wait > MAX_WAIT {
        return Err(FleetError::Invalid(format!("wait of {} s for {origin_key}", wait.as_secs())));
    }
    Ok(wait)
}

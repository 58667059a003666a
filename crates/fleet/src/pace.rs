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
//! Reservations alone are open-loop: a request that starts late (a busy
//! machine wakes its task late) would eat into the gap before the next
//! slot. So when its wait ends, a request also passes [`CONFIRM`]: the time
//! the origin's last request was actually sent (`pace:{ORIGIN}:sent`, Redis
//! clock) must be at least `delay` ago, else it waits the difference and
//! asks again. Tolerance: two requests reach the origin at least `delay`
//! minus the difference of their times from that check to the origin (one
//! Redis round trip and the connection set-up, a few milliseconds on one
//! network) apart. Tests allow 100 ms.

use super::keys;
use super::redis::{FleetError, Redis};
use redis::Script;
use std::sync::OnceLock;
use std::time::Duration;

/// The reservation (`KEYS[1]` = pace key, `ARGV[1]` = delay in ms): returns the
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

/// The send check (`KEYS[1]` = sent key, `ARGV[1]` = delay in ms): 0 and the
/// send time recorded when the last request was sent `delay` ago or more,
/// else the ms left to wait.
pub const CONFIRM: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local delay = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if last > now then last = now end
if now - last < delay then return last + delay - now end
redis.call('SET', KEYS[1], now, 'PX', delay + 60000)
return 0
"#;

fn confirm_script() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| Script::new(CONFIRM))
}

/// Checks, when a request's reserved wait has ended, that the origin's
/// last request was sent at least `delay` ago, and records this one as
/// sent: `Duration::ZERO` (send now), or how long to wait before asking
/// again. Errors as [`reserve`].
pub async fn confirm(
    redis: &Redis,
    origin_key: &str,
    delay: Duration,
) -> Result<Duration, FleetError> {
    let key = format!("{}:sent", keys::pace(origin_key));
    let ms = delay.as_millis().min(u128::from(u32::MAX)).to_string();
    let wait: i64 = redis.script(confirm_script(), &[key.as_bytes()], &[ms.as_bytes()]).await?;
    let wait = Duration::from_millis(
        u64::try_from(wait).map_err(|_| FleetError::Invalid(format!("negative wait {wait} ms")))?,
    );
    if wait > delay {
        return Err(FleetError::Invalid(format!(
            "send wait of {} ms for {origin_key}",
            wait.as_millis()
        )));
    }
    Ok(wait)
}

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
pub async fn reserve(
    redis: &Redis,
    origin_key: &str,
    delay: Duration,
) -> Result<Duration, FleetError> {
    let key = keys::pace(origin_key);
    let ms = delay.as_millis().min(u128::from(u32::MAX)).to_string();
    let wait: i64 = redis.script(script(), &[key.as_bytes()], &[ms.as_bytes()]).await?;
    let wait = Duration::from_millis(
        u64::try_from(wait).map_err(|_| FleetError::Invalid(format!("negative wait {wait} ms")))?,
    );
    if wait > MAX_WAIT {
        return Err(FleetError::Invalid(format!("wait of {} s for {origin_key}", wait.as_secs())));
    }
    Ok(wait)
}

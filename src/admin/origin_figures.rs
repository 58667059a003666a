//! The figures per origin that `/stats`, `/metrics` and the status page
//! show alike ([`crate::metrics::origins`]), for the origins with the most
//! requests only, so labels stay bounded in number.

use crate::proxy::ProxyState;

/// How many origins `/metrics` exports series for, and `/stats` and the
/// status page list (those with the most requests): labels bounded in
/// number however many origins a crawl reaches.
pub const ORIGIN_SERIES: usize = 20;

/// The [`ORIGIN_SERIES`] origins with the most requests and their figures
/// ([`crate::metrics::origins`]), also in `/stats` as `"origins"` and on
/// the status page; each with `hit_ratio` (0 to 1) beside the counts.
pub fn origins_json(state: &ProxyState) -> serde_json::Value {
    let o = &state.metrics.origins;
    let top: Vec<serde_json::Value> = o
        .top(ORIGIN_SERIES)
        .into_iter()
        .map(|(origin, f)| {
            let mut v = serde_json::to_value(&f).unwrap_or_default();
            v["origin"] = origin.into();
            v["hit_ratio"] = f.hit_ratio().into();
            v
        })
        .collect();
    serde_json::json!({ "estimate": o.is_estimate(), "others": o.others(), "top": top })
}

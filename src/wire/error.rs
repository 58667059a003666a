//! Plain-text error responses that name their cause (SPEC section 5: a 504
//! in offline mode says the URL was never stored; a 403 names the rule).

use super::body::ProxyBody;
use crawlcache_policy::cache_status::CacheStatus;
use crawlcache_policy::hop_by_hop::add_via;
use http::header::HeaderValue;
use http::{Response, StatusCode};

/// A `text/plain` response with `status` and the body `message` (a newline
/// is added), `Cache-Control: no-store`, `Via` and the given `Cache-Status`.
pub fn error_response(
    status: StatusCode,
    message: &str,
    cache_status: &CacheStatus,
) -> Response<ProxyBody> {
    let mut body = String::with_capacity(message.len() + 1);
    body.push_str(message);
    body.push('\n');
    let mut resp = Response::new(ProxyBody::full(body));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    h.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    add_via(h);
    cache_status.apply(h);
    resp
}

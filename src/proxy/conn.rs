//! The server settings of a client connection, plain or intercepted:
//! HTTP/1.1, and HTTP/2 inside intercepted tunnels.

use hyper::server::conn::http1;

/// The HTTP/1.1 server settings for client connections (plain and
/// intercepted): keep-alive, a read buffer of 512 KiB, request fields
/// bounded by bytes as on the origin side (`exchange::MAX_HEADER_BYTES`,
/// 256 KiB, whose 431 names the limit), so crawlers carrying many cookies
/// (one `Cookie` line, RFC 6265 section 5.4) are served; header read
/// timeout. The field count stays at the HTTP library's 100, which it parses
/// without allocating: raising it makes every request, hits included, set
/// aside room for that many fields (measured: half the hit throughput at
/// 8192).
pub fn client_http1() -> http1::Builder {
    let mut b = http1::Builder::new();
    // hyper's header-read timeout (30 s) is armed for every request head:
    // a coarse timer keeps it cheap (crate::wire::coarse_timer).
    b.keep_alive(true).max_buf_size(512 * 1024).timer(crate::wire::coarse_timer::CoarseTimer);
    b
}

/// Most streams an HTTP/2 client may have open at once on one intercepted
/// connection (`SETTINGS_MAX_CONCURRENT_STREAMS`, RFC 9113 section 6.5.2);
/// a client opening more gets `REFUSED_STREAM` from the HTTP/2 library.
pub const H2_MAX_CONCURRENT_STREAMS: u32 = 128;

/// Largest request field section an HTTP/2 client may send
/// (`SETTINGS_MAX_HEADER_LIST_SIZE`, RFC 9113 section 6.5.2): the same
/// 256 KiB as HTTP/1.1 heads (`exchange::MAX_HEADER_BYTES`). The library
/// counts CONTINUATION frames against it too, which is what stops a
/// CONTINUATION flood (CVE-2024-27316).
pub const H2_MAX_HEADER_LIST_BYTES: u32 = 256 * 1024;

/// Streams a client may reset before the server has answered them, at
/// once, before the connection is closed with `GOAWAY`
/// (`ENHANCE_YOUR_CALM`): the rapid-reset attack, CVE-2023-44487 (the
/// library's default is 20).
pub const H2_MAX_PENDING_ACCEPT_RESET_STREAMS: usize = 20;

/// Stream errors the server's side may cause (resets it sends for broken
/// frames) before the connection is closed (the library's default, 1024):
/// a peer that provokes endless resets is cut off.
pub const H2_MAX_LOCAL_ERROR_RESET_STREAMS: usize = 1024;

/// The HTTP/2 server settings for intercepted client connections that chose
/// `h2` by ALPN (RFC 9113): the limits above against hostile clients, flow
/// control windows of 1 MiB per stream and 2 MiB per connection (so a
/// 256 KiB upload or a crawler's window does not stall), at most 400 KiB
/// buffered per stream for a slow reader, a PING every 20 s on a quiet
/// connection (closed when it is not answered within 20 s), no server push
/// (HTTP/2 servers never push unasked; hyper has no push), and no
/// extended CONNECT (RFC 8441): WebSocket clients open HTTP/1.1 instead.
pub fn client_http2() -> hyper::server::conn::http2::Builder<hyper_util::rt::TokioExecutor> {
    let mut b = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
    b.timer(hyper_util::rt::TokioTimer::new())
        .max_concurrent_streams(H2_MAX_CONCURRENT_STREAMS)
        .max_header_list_size(H2_MAX_HEADER_LIST_BYTES)
        .max_pending_accept_reset_streams(H2_MAX_PENDING_ACCEPT_RESET_STREAMS)
        .max_local_error_reset_streams(H2_MAX_LOCAL_ERROR_RESET_STREAMS)
        .initial_stream_window_size(1024 * 1024)
        .initial_connection_window_size(2 * 1024 * 1024)
        .max_send_buf_size(400 * 1024)
        .keep_alive_interval(std::time::Duration::from_secs(20))
        .keep_alive_timeout(std::time::Duration::from_secs(20));
    b
}

//! The HTTP/1.1 server settings of a client connection, plain or
//! intercepted.

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

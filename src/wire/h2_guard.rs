//! A limit the HTTP/2 library does not have: SETTINGS and PING floods
//! (CVE-2019-9515, CVE-2019-9512; RFC 9113 section 10.5). The library
//! (h2 0.4) answers every SETTINGS and PING frame a peer sends; it keeps one
//! answer pending at a time, so a peer that reads nothing stops itself,
//! but one that reads its answers is answered frame for frame, without
//! end. [`FrameGuard`] watches the frame headers a peer sends on an HTTP/2
//! connection (reading nothing else: the library still parses every
//! frame) and, when more than [`MAX_CONTROL_FRAMES`] SETTINGS or PING
//! frames asking for an answer arrive within [`CONTROL_WINDOW`], writes a
//! `GOAWAY` with `ENHANCE_YOUR_CALM` (section 7) where the connection takes
//! it at once, and ends the connection with an error naming the limit.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Most SETTINGS and PING frames (not acknowledgements) a peer may send
/// within [`CONTROL_WINDOW`]. Browsers and servers send a few per
/// connection: SETTINGS at the start and on rare changes, a PING now and
/// then to measure or keep the connection.
pub const MAX_CONTROL_FRAMES: u32 = 1000;
/// The window [`MAX_CONTROL_FRAMES`] is counted over.
pub const CONTROL_WINDOW: Duration = Duration::from_secs(10);
/// The client connection preface (RFC 9113 section 3.4), which a server
/// reads before the first frame.
pub const CLIENT_PREFACE_LEN: usize = 24;

const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const ACK: u8 = 0x1;

/// Counts the frame headers in a stream of HTTP/2 bytes (pure; see
/// [`FrameGuard`]).
#[derive(Debug)]
pub struct FrameCounter {
    skip: usize,
    header: [u8; 9],
    filled: usize,
    payload_left: usize,
    window_start: Instant,
    in_window: u32,
}

impl FrameCounter {
    /// A counter whose stream starts with `skip` bytes that are not frames
    /// (the client preface on a server's side).
    pub fn new(skip: usize) -> FrameCounter {
        FrameCounter {
            skip,
            header: [0; 9],
            filled: 0,
            payload_left: 0,
            window_start: Instant::now(),
            in_window: 0,
        }
    }

    /// Takes the next bytes read, at `now`; `false` once the peer has sent
    /// more than [`MAX_CONTROL_FRAMES`] SETTINGS or PING frames (not
    /// acknowledgements) within [`CONTROL_WINDOW`].
    pub fn feed(&mut self, mut bytes: &[u8], now: Instant) -> bool {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
            } else if self.payload_left > 0 {
                let n = self.payload_left.min(bytes.len());
                self.payload_left -= n;
                bytes = &bytes[n..];
            } else {
                let n = (9 - self.filled).min(bytes.len());
                self.header[self.filled..self.filled + n].copy_from_slice(&bytes[..n]);
                self.filled += n;
                bytes = &bytes[n..];
                if self.filled == 9 {
                    self.filled = 0;
                    let h = self.header;
                    self.payload_left =
                        usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                    if matches!(h[3], SETTINGS | PING) && h[4] & ACK == 0 {
                        if now.duration_since(self.window_start) > CONTROL_WINDOW {
                            self.window_start = now;
                            self.in_window = 0;
                        }
                        self.in_window += 1;
                        if self.in_window > MAX_CONTROL_FRAMES {
                            return false;
                        }
                    }
                }
            }
        }
        true
    }
}

/// A GOAWAY frame (RFC 9113 section 6.8) with `ENHANCE_YOUR_CALM` (0xb)
/// and no last stream processed.
const GOAWAY_CALM: [u8; 17] = [0, 0, 8, 0x7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xb];

/// An HTTP/2 connection whose peer's frame headers are counted (see the
/// module documentation); the bytes pass through unchanged.
pub struct FrameGuard<IO> {
    inner: IO,
    counter: FrameCounter,
    tripped: bool,
}

impl<IO> FrameGuard<IO> {
    /// Guards `inner`, whose first `skip` bytes read are not frames
    /// ([`CLIENT_PREFACE_LEN`] on a server's side, 0 on a client's).
    pub fn new(inner: IO, skip: usize) -> FrameGuard<IO> {
        FrameGuard { inner, counter: FrameCounter::new(skip), tripped: false }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for FrameGuard<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let flood = || {
            std::io::Error::other(format!(
                "the HTTP/2 peer sent more than {MAX_CONTROL_FRAMES} SETTINGS or PING frames within {} s (RFC 9113 section 10.5); connection closed",
                CONTROL_WINDOW.as_secs()
            ))
        };
        if self.tripped {
            return Poll::Ready(Err(flood()));
        }
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = result {
            let me = &mut *self;
            if !me.counter.feed(&buf.filled()[before..], Instant::now()) {
                me.tripped = true;
                // Best effort: the GOAWAY goes out if the connection takes
                // it now; the error ends the connection either way.
                if let Poll::Ready(Ok(_)) = Pin::new(&mut me.inner).poll_write(cx, &GOAWAY_CALM) {
                    let _ = Pin::new(&mut me.inner).poll_flush(cx);
                }
                buf.set_filled(before);
                return Poll::Ready(Err(flood()));
            }
        }
        result
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for FrameGuard<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let n = payload.len();
        let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags, 0, 0, 0, 0];
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn settings_and_pings_past_the_limit_trip_the_counter_and_acks_do_not() {
        let now = Instant::now();
        let mut c = FrameCounter::new(CLIENT_PREFACE_LEN);
        assert!(c.feed(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", now));
        // DATA and HEADERS frames, and acknowledgements, are not counted;
        // payload bytes that look like headers are skipped.
        let ping = frame(PING, 0, b"12345678");
        let ping_ack = frame(PING, ACK, b"12345678");
        let data = frame(0x0, 0, &frame(PING, 0, b"inside!!").repeat(3));
        for _ in 0..5000 {
            assert!(c.feed(&ping_ack, now));
            assert!(c.feed(&data, now));
        }
        // Byte by byte, a header split across reads counts once.
        for _ in 0..MAX_CONTROL_FRAMES {
            for b in &ping {
                assert!(c.feed(std::slice::from_ref(b), now));
            }
        }
        assert!(!c.feed(&frame(SETTINGS, 0, &[0, 2, 0, 0, 0, 0]), now));
        // A new window starts the count again.
        let mut c = FrameCounter::new(0);
        for i in 0..3 * MAX_CONTROL_FRAMES {
            let at = now
                + CONTROL_WINDOW * (i / MAX_CONTROL_FRAMES)
                + Duration::from_millis(1) * (i / MAX_CONTROL_FRAMES);
            assert!(c.feed(&ping, at), "frame {i}");
        }
    }
}

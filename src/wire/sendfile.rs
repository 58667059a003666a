//! Large stored bodies sent with `sendfile(2)` on plain-HTTP client
//! connections when `server.sendfile` is on (off by default;
//! benches/runs/load-2026-12.md has the measurements): the kernel hands the page-cache
//! pages of the body file to the socket, so the body is not copied through
//! user space at all (what nginx does with `sendfile on`).
//!
//! hyper writes a response body it was given as one [`bytes::Bytes`]
//! without copying it: the slice it passes to the connection's
//! `poll_write_vectored` points into that `Bytes`. A large body is served
//! as a [`MappedBody`], a read-only map of the body file that registers its
//! address range (and the file) while it lives. [`SendfileIo`], the I/O of
//! a plain client connection, looks each slice it is asked to write up in
//! that registry: a slice inside a registered map is sent from the file
//! with `sendfile` at the same offset; anything else is written as usual.
//! The map is only a name for the bytes: whoever writes it some other way
//! (a TLS connection, a test) still reads the right bytes from it, so the
//! fast path can never change what the client receives.

use bytes::Bytes;
use hyper::rt::{Read, ReadBufCursor, Write};
use std::collections::BTreeMap;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll};

/// Body bytes sent with `sendfile` since start
/// (`crawlcache_sendfile_bytes_total`).
pub static SENT_BYTES: AtomicU64 = AtomicU64::new(0);

/// Live maps of body files: start address -> (length in bytes, the file's
/// descriptor). An entry is removed before its map is unmapped and its file
/// closed (see [`MappedBody`]'s `Drop`).
static MAPS: Mutex<BTreeMap<usize, (usize, i32)>> = Mutex::new(BTreeMap::new());

fn maps() -> std::sync::MutexGuard<'static, BTreeMap<usize, (usize, i32)>> {
    crawlcache_base::locks::lock(&MAPS)
}

/// A read-only map of a whole body file, registered for [`SendfileIo`]
/// while it lives. Build the body with [`MappedBody::bytes`].
pub struct MappedBody {
    map: memmap2::Mmap,
    // Kept open so `sendfile` can read it for as long as the map is
    // registered; closed after the map is unregistered.
    _file: std::fs::File,
}

impl MappedBody {
    /// Maps `file`, which must be exactly `len` bytes long, for bytes that
    /// may go out with `sendfile` (plain-HTTP connection, `server.sendfile`
    /// on): the map is registered and keeps the file open, and its pages
    /// are not faulted in (the kernel reads the file itself). Bytes that
    /// will be copied (written, or encrypted for TLS) take [`copy_map`].
    /// `None` when the file is not `len` bytes long (or is empty) or cannot
    /// be mapped.
    ///
    /// The caller promises the file is never written again while mapped:
    /// the store's body files are written once under a temporary name,
    /// renamed into place by their SHA-256 and only ever read or unlinked
    /// (an unlinked file stays mapped whole). Only a process outside
    /// crawlcache truncating the file could invalidate the map (SIGBUS);
    /// the store's files are the proxy's own (README, Security).
    pub fn bytes(file: &std::fs::File, len: u64) -> Option<Bytes> {
        if len == 0 || file.metadata().ok()?.len() != len {
            return None;
        }
        // SAFETY: see the promise above; the length was checked just now.
        let map = unsafe { memmap2::MmapOptions::new().map(file) }.ok()?;
        if map.len() as u64 != len {
            return None;
        }
        let file = file.try_clone().ok()?;
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            maps().insert(map.as_ptr() as usize, (map.len(), file.as_raw_fd()));
        }
        Some(Bytes::from_owner(MappedBody { map, _file: file }))
    }
}

/// A read-only map of `file`, which must be exactly `len` bytes long, with
/// its pages faulted in at once, for bytes that will be copied (see
/// [`MappedBody::bytes`], whose promise about the file the caller makes
/// here too). `None` when the file is not `len` bytes long (or is empty)
/// or cannot be mapped.
pub fn copy_map(file: &std::fs::File, len: u64) -> Option<memmap2::Mmap> {
    if len == 0 || file.metadata().ok()?.len() != len {
        return None;
    }
    // SAFETY: as for `MappedBody::bytes`; the length was checked just now.
    let map = unsafe { memmap2::MmapOptions::new().populate().map(file) }.ok()?;
    (map.len() as u64 == len).then_some(map)
}

impl AsRef<[u8]> for MappedBody {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for MappedBody {
    fn drop(&mut self) {
        // Unregistered before the fields (map, then file) are dropped.
        maps().remove(&(self.map.as_ptr() as usize));
    }
}

/// Where `buf` lies in a registered body file: (descriptor, offset).
///
/// A slice handed to a write is borrowed from a live `Bytes`, so when it
/// lies inside a registered map that map (and its open file) outlives the
/// write: the descriptor cannot be closed or reused under it.
fn locate(buf: &[u8]) -> Option<(i32, u64)> {
    if buf.is_empty() {
        return None;
    }
    let start = buf.as_ptr() as usize;
    let map = maps();
    let (&base, &(len, fd)) = map.range(..=start).next_back()?;
    (start + buf.len() <= base + len).then_some((fd, (start - base) as u64))
}

/// The I/O of a plain-HTTP client connection: a TCP stream whose writes of
/// registered body maps go out with `sendfile` when enabled (see the
/// module's text).
pub struct SendfileIo {
    inner: hyper_util::rt::TokioIo<tokio::net::TcpStream>,
    enabled: bool,
}

impl SendfileIo {
    /// Wraps an accepted client connection; `enabled`: whether body maps
    /// go out with `sendfile` (`server.sendfile`) or are written as any
    /// other bytes.
    pub fn new(stream: tokio::net::TcpStream, enabled: bool) -> SendfileIo {
        SendfileIo { inner: hyper_util::rt::TokioIo::new(stream), enabled }
    }

    /// The TCP connection inside, for a `CONNECT` tunnel that takes the
    /// connection over (a TLS tunnel writes encrypted bytes, never with
    /// `sendfile`; plain HTTP in a tunnel wraps it in a new `SendfileIo`).
    pub fn into_tcp(self) -> tokio::net::TcpStream {
        self.inner.into_inner()
    }

    /// Sends up to `len` bytes of file `fd` from `offset` with one
    /// `sendfile` call once the socket is writable. Errors: the socket's,
    /// or `UnexpectedEof` when the file is shorter than its map said.
    #[cfg(target_os = "linux")]
    fn poll_sendfile(
        &mut self,
        cx: &mut Context<'_>,
        fd: i32,
        offset: u64,
        len: usize,
    ) -> Poll<std::io::Result<usize>> {
        use std::os::fd::AsRawFd;
        let stream = self.inner.inner();
        loop {
            std::task::ready!(stream.poll_write_ready(cx))?;
            let sent = stream.try_io(tokio::io::Interest::WRITABLE, || {
                let mut off = offset as libc::off_t;
                // SAFETY: both descriptors are open for the whole call (the
                // socket is ours; the file is kept open by the live map, see
                // `locate`), and `off` is a valid off_t the call may update.
                let n = unsafe { libc::sendfile(stream.as_raw_fd(), fd, &mut off, len) };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match sent {
                Ok(0) => {
                    return Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "a stored body file is shorter than its map",
                    )))
                }
                Ok(n) => {
                    SENT_BYTES.fetch_add(n as u64, Ordering::Relaxed);
                    return Poll::Ready(Ok(n));
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// Whether a `sendfile` failure means the file cannot be sent that way at
/// all (a file system without splice support and the like), rather than a
/// broken connection: the bytes are then written from the map instead.
#[cfg(target_os = "linux")]
fn unsupported(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP))
}

impl Read for SendfileIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl Write for SendfileIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    /// Writes the slices before the first one that lies in a registered
    /// body map as usual; when the first slice is such a one, sends it from
    /// its file instead. Either way a partial write, as `writev` may do.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        #[cfg(target_os = "linux")]
        {
            // Only slices worth a system call of their own are looked up;
            // empty ones before them are passed over.
            let first = bufs.iter().position(|b| !b.is_empty()).unwrap_or(bufs.len());
            let mapped = match this.enabled {
                true => bufs[first..].iter().enumerate().find_map(|(i, b)| {
                    if b.len() >= 4096 {
                        locate(b).map(|at| (first + i, at))
                    } else {
                        None
                    }
                }),
                false => None,
            };
            match mapped {
                Some((i, (fd, offset))) if i == first => {
                    match this.poll_sendfile(cx, fd, offset, bufs[i].len()) {
                        Poll::Ready(Err(e)) if unsupported(&e) => {
                            tracing::warn!("sendfile is not usable here ({e}); writing stored bodies from their maps on this connection");
                            this.enabled = false;
                        }
                        other => return other,
                    }
                }
                Some((i, _)) => {
                    return Pin::new(&mut this.inner).poll_write_vectored(cx, &bufs[..i])
                }
                None => {}
            }
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn body_file(len: usize) -> (tempfile::NamedTempFile, Vec<u8>) {
        let bytes: Vec<u8> =
            (0..len as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&bytes).unwrap();
        (f, bytes)
    }

    #[test]
    fn a_mapped_body_and_its_slices_are_located_in_their_file_until_dropped() {
        let (f, want) = body_file(100_000);
        let bytes = MappedBody::bytes(&f.reopen().unwrap(), want.len() as u64).unwrap();
        assert!(bytes == want[..], "the map reads the file's bytes");
        let (fd, off) = locate(&bytes).expect("the whole body is registered");
        assert_eq!(off, 0);
        let part = bytes.slice(12_345..50_000);
        assert_eq!(locate(&part), Some((fd, 12_345)), "a range of it is found at its offset");
        assert_eq!(locate(b"not a mapped body"), None);
        let addr = bytes.as_ptr() as usize;
        drop(bytes);
        assert!(locate(&part).is_some(), "a slice keeps the map alive");
        drop(part);
        assert!(!maps().contains_key(&addr), "unregistered once the last slice is gone");
    }

    #[test]
    fn a_map_for_copying_reads_the_file_and_is_not_registered() {
        let (f, want) = body_file(70_000);
        let bytes = Bytes::from_owner(copy_map(&f.reopen().unwrap(), want.len() as u64).unwrap());
        assert!(bytes == want[..]);
        assert_eq!(locate(&bytes), None, "never sent with sendfile");
    }

    #[test]
    fn a_file_of_another_length_is_not_mapped() {
        let (f, want) = body_file(10_000);
        assert!(MappedBody::bytes(&f.reopen().unwrap(), want.len() as u64 + 1).is_none());
        assert!(MappedBody::bytes(&f.reopen().unwrap(), 0).is_none());
    }

    /// A body map written through a client connection arrives byte for
    /// byte, the head before it, and went out with `sendfile`.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_mapped_slice_goes_out_with_sendfile_byte_for_byte() {
        use tokio::io::AsyncReadExt;
        let (f, want) = body_file(3 * 1024 * 1024 + 11);
        let bytes = MappedBody::bytes(&f.reopen().unwrap(), want.len() as u64).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.unwrap();
            got
        });
        let mut io = SendfileIo::new(tokio::net::TcpStream::connect(addr).await.unwrap(), true);
        let before = SENT_BYTES.load(Ordering::Relaxed);
        let head = b"HEAD-BYTES ".to_vec();
        let (mut h, mut b) = (&head[..], &bytes[1..]);
        while !h.is_empty() || !b.is_empty() {
            let bufs = [IoSlice::new(h), IoSlice::new(b)];
            let n = std::future::poll_fn(|cx| Pin::new(&mut io).poll_write_vectored(cx, &bufs))
                .await
                .unwrap();
            let from_head = n.min(h.len());
            h = &h[from_head..];
            b = &b[n - from_head..];
        }
        std::future::poll_fn(|cx| Pin::new(&mut io).poll_shutdown(cx)).await.unwrap();
        drop(io);
        let got = reader.await.unwrap();
        assert_eq!(&got[..head.len()], &head[..]);
        assert!(got[head.len()..] == want[1..], "the body arrived byte for byte");
        assert!(
            SENT_BYTES.load(Ordering::Relaxed) - before >= (want.len() - 1) as u64,
            "the body went out with sendfile"
        );
    }
}

//! The bytes of a WARC file as the reader sees them ([`super::reader`]):
//! decompressed when the file is gzip (one member per record, or several
//! records per member), buffered so that a record head can be peeked at,
//! with the map from decompressed positions back to gzip members that
//! makes an [`Offset`] and lets reading resume at the next member after a
//! damaged one.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, BufRead, Read, Seek, SeekFrom};

use flate2::bufread::GzDecoder;

const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// Where a record starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offset {
    /// Byte offset in the file: of the record itself in a plain file, of
    /// the gzip member the record starts in in a gzip file.
    pub file: u64,
    /// For a gzip file, how many decompressed bytes of its member precede
    /// the record (0 when the record starts the member).
    pub within_member: Option<u64>,
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.within_member {
            Some(n) if n > 0 => write!(
                f,
                "offset {} (+{n} decompressed bytes into the gzip member there)",
                self.file
            ),
            _ => write!(f, "offset {}", self.file),
        }
    }
}

/// Counts the bytes consumed from the file (the compressed offset).
pub(super) struct Counted<R> {
    inner: R,
    pos: u64,
}

impl<R: BufRead> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counted<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.inner.consume(n);
        self.pos += n as u64;
    }
}

impl<R: BufRead + Seek> Counted<R> {
    /// Moves to the next occurrence of `pattern` at or after `from`; false
    /// (positioned at the end) when there is none.
    fn seek_to_next(&mut self, from: u64, pattern: &[u8]) -> io::Result<bool> {
        self.inner.seek(SeekFrom::Start(from))?;
        self.pos = from;
        let mut carry: Vec<u8> = Vec::new();
        let mut carry_at = from;
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                return Ok(false);
            }
            let mut window = std::mem::take(&mut carry);
            window.extend_from_slice(buf);
            let n = buf.len();
            if let Some(i) = window.windows(pattern.len()).position(|w| w == pattern) {
                let at = carry_at + i as u64;
                self.inner.seek(SeekFrom::Start(at))?;
                self.pos = at;
                return Ok(true);
            }
            self.inner.consume(n);
            let keep = pattern.len().saturating_sub(1).min(window.len());
            carry_at += (window.len() - keep) as u64;
            carry = window[window.len() - keep..].to_vec();
        }
    }
}

/// Where the decompressed bytes come from.
pub(super) enum Source<R> {
    /// A plain file.
    Plain(Counted<R>),
    /// A gzip file, between two members.
    Between(Counted<R>),
    /// A gzip file, inside a member.
    Member(Box<GzDecoder<Counted<R>>>),
    /// Transitional (never observed outside a method).
    Gone,
}

/// The decompressed byte stream, with a buffer that can be peeked into and
/// the map from decompressed offsets to gzip members.
pub(super) struct Stream<R> {
    pub(super) src: Source<R>,
    pub(super) gzip: bool,
    pub(super) buf: Vec<u8>,
    pub(super) lo: usize,
    pub(super) hi: usize,
    /// Decompressed offset of `buf[lo]`.
    pub(super) pos: u64,
    /// (decompressed offset, file offset) of each gzip member started and
    /// not yet pruned.
    pub(super) members: VecDeque<(u64, u64)>,
    pub(super) eof: bool,
    /// The file offset of the member that failed to decompress.
    pub(super) failed_member: Option<u64>,
    /// The failure of the source, repeated by every read until `recover`.
    pub(super) broken: Option<(io::ErrorKind, String)>,
}

pub(super) const BUF: usize = 64 * 1024;

impl<R: BufRead + Seek> Stream<R> {
    /// The stream of `inner`, gzip or plain as its first bytes say.
    /// Errors: `inner` cannot be read.
    pub(super) fn new(mut inner: R) -> io::Result<Stream<R>> {
        let gzip = inner.fill_buf()?.starts_with(&GZIP_MAGIC[..2]);
        let c = Counted { inner, pos: 0 };
        let src = if gzip { Source::Between(c) } else { Source::Plain(c) };
        let mut members = VecDeque::new();
        if !gzip {
            members.push_back((0, 0));
        }
        Ok(Stream {
            src,
            gzip,
            buf: vec![0; BUF],
            lo: 0,
            hi: 0,
            pos: 0,
            members,
            eof: false,
            failed_member: None,
            broken: None,
        })
    }

    pub(super) fn produced(&self) -> u64 {
        self.pos + (self.hi - self.lo) as u64
    }

    /// Reads more decompressed bytes into the buffer; Ok(false) at the end.
    pub(super) fn more(&mut self) -> io::Result<bool> {
        if let Some((kind, msg)) = &self.broken {
            return Err(io::Error::new(*kind, msg.clone()));
        }
        if self.eof {
            return Ok(false);
        }
        if self.lo == self.hi {
            self.lo = 0;
            self.hi = 0;
        } else if self.buf.len() - self.hi < BUF / 4 {
            self.buf.copy_within(self.lo..self.hi, 0);
            self.hi -= self.lo;
            self.lo = 0;
        }
        if self.buf.len() - self.hi < BUF / 4 {
            let grow = self.buf.len().max(BUF);
            self.buf.resize(self.buf.len() + grow, 0);
        }
        let produced = self.produced();
        loop {
            let src = std::mem::replace(&mut self.src, Source::Gone);
            let (next, result) = match src {
                Source::Plain(mut c) => {
                    let r = c.read(&mut self.buf[self.hi..]);
                    (Source::Plain(c), r)
                }
                Source::Between(mut c) => match c.fill_buf() {
                    Ok([]) => (Source::Between(c), Ok(0)),
                    Ok(_) => {
                        self.members.push_back((produced, c.pos));
                        self.src = Source::Member(Box::new(GzDecoder::new(c)));
                        continue;
                    }
                    Err(e) => (Source::Between(c), Err(e)),
                },
                Source::Member(mut d) => match d.read(&mut self.buf[self.hi..]) {
                    Ok(0) => {
                        self.src = Source::Between(d.into_inner());
                        continue;
                    }
                    Ok(n) => (Source::Member(d), Ok(n)),
                    Err(e) => {
                        self.failed_member = self.members.back().map(|m| m.1);
                        (Source::Between(d.into_inner()), Err(e))
                    }
                },
                Source::Gone => (Source::Gone, Ok(0)),
            };
            self.src = next;
            return match result {
                Ok(0) => {
                    self.eof = true;
                    Ok(false)
                }
                Ok(n) => {
                    self.hi += n;
                    Ok(true)
                }
                Err(e) => {
                    self.broken = Some((e.kind(), e.to_string()));
                    Err(e)
                }
            };
        }
    }

    /// Makes at least `n` bytes available when the stream has them; returns
    /// how many are.
    pub(super) fn ensure(&mut self, n: usize) -> io::Result<usize> {
        while self.hi - self.lo < n {
            if !self.more()? {
                break;
            }
        }
        Ok(self.hi - self.lo)
    }

    pub(super) fn available(&self) -> &[u8] {
        &self.buf[self.lo..self.hi]
    }

    pub(super) fn consume(&mut self, n: usize) {
        let n = n.min(self.hi - self.lo);
        self.lo += n;
        self.pos += n as u64;
    }

    /// The offset of decompressed position `pos`, as reported.
    pub(super) fn offset_of(&self, pos: u64) -> Offset {
        if !self.gzip {
            return Offset { file: pos, within_member: None };
        }
        match self.members.iter().rev().find(|(d, _)| *d <= pos) {
            Some((d, f)) => Offset { file: *f, within_member: Some(pos - d) },
            None => Offset { file: 0, within_member: Some(pos) },
        }
    }

    /// Forgets members that end before `pos`.
    pub(super) fn prune(&mut self, pos: u64) {
        while self.members.len() > 1 && self.members[1].0 <= pos {
            self.members.pop_front();
        }
    }

    /// The decompressed offset of the first member starting after `pos`, if
    /// one has started.
    pub(super) fn member_start_after(&self, pos: u64) -> Option<u64> {
        self.members.iter().map(|m| m.0).find(|d| *d > pos)
    }

    /// After a gzip member failed to decompress: drops what was buffered and
    /// moves to the next gzip header after the failed member's start.
    /// Ok(false) when there is none (the end).
    pub(super) fn recover(&mut self) -> io::Result<bool> {
        self.broken = None;
        self.pos = self.produced();
        self.lo = 0;
        self.hi = 0;
        let Some(from) = self.failed_member.take() else {
            self.eof = true;
            return Ok(false);
        };
        let src = std::mem::replace(&mut self.src, Source::Gone);
        let mut c = match src {
            Source::Between(c) | Source::Plain(c) => c,
            Source::Member(d) => d.into_inner(),
            Source::Gone => {
                self.eof = true;
                return Ok(false);
            }
        };
        let found = c.seek_to_next(from + 1, &GZIP_MAGIC);
        self.src = Source::Between(c);
        match found {
            Ok(true) => {
                self.eof = false;
                Ok(true)
            }
            Ok(false) => {
                self.eof = true;
                Ok(false)
            }
            Err(e) => {
                self.eof = true;
                Err(e)
            }
        }
    }

    /// The file offset reached (for progress).
    pub(super) fn file_pos(&self) -> u64 {
        match &self.src {
            Source::Plain(c) | Source::Between(c) => c.pos,
            Source::Member(d) => d.get_ref().pos,
            Source::Gone => 0,
        }
    }
}

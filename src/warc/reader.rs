//! A streaming WARC reader (ISO 28500 section 4: a record is a version line,
//! named fields, an empty line, a block of `Content-Length` bytes and two
//! CRLFs) for plain files and gzip files, whether each record is its own
//! gzip member (the usual `.warc.gz`) or the whole file is one member.
//!
//! Blocks are never held in memory: [`WarcReader::block`] reads the current
//! record's block as it comes.
//!
//! Bad input is reported, never panicked on, and reading goes on:
//! - a record whose head is malformed (no `WARC/` version line, a field
//!   without a colon, no valid `Content-Length`, a head over
//!   [`MAX_HEAD_BYTES`]) is reported at its offset, and reading resumes at
//!   the next line starting with `WARC/1.` or the next gzip member,
//!   whichever comes first;
//! - a block not followed by its two CRLFs (a wrong `Content-Length`) is
//!   reported, and reading resumes the same way;
//! - a gzip member that does not decompress (corrupt or cut short) is
//!   reported at the member's offset in the file, and reading resumes at
//!   the next gzip header found after it;
//! - a file that ends inside a record reports that record as truncated.
//!
//! Offsets are byte offsets in the file as stored: for a gzip file, the
//! offset of the gzip member the record starts in (and, when the record
//! does not start the member, how far into the member's decompressed bytes
//! it starts), as warcio and CDX indexes give them.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use flate2::bufread::GzDecoder;

/// The longest record head read (version line and fields), in bytes.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

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

/// A record that could not be read: where it starts and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// Where the record (or the gzip member) starts.
    pub offset: Offset,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "record at {}: {}", self.offset, self.message)
    }
}

/// The head of a record: version, named fields, block length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHead {
    /// Where the record starts.
    pub offset: Offset,
    /// The version line without `WARC/` (`1.0`, `1.1`).
    pub version: String,
    /// The named fields in order, values trimmed (continuation lines joined).
    pub fields: Vec<(String, String)>,
    /// `Content-Length`: the block's length in bytes.
    pub content_length: u64,
}

impl RecordHead {
    /// The first value of field `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Every value of field `name` (case-insensitive), in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.fields
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `WARC-Type`, lower-cased (empty when missing).
    pub fn record_type(&self) -> String {
        self.get("WARC-Type").unwrap_or("").to_ascii_lowercase()
    }
}

/// Counts the bytes consumed from the file (the compressed offset).
struct Counted<R> {
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
enum Source<R> {
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
struct Stream<R> {
    src: Source<R>,
    gzip: bool,
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    /// Decompressed offset of `buf[lo]`.
    pos: u64,
    /// (decompressed offset, file offset) of each gzip member started and
    /// not yet pruned.
    members: VecDeque<(u64, u64)>,
    eof: bool,
    /// The file offset of the member that failed to decompress.
    failed_member: Option<u64>,
    /// The failure of the source, repeated by every read until `recover`.
    broken: Option<(io::ErrorKind, String)>,
}

const BUF: usize = 64 * 1024;

impl<R: BufRead + Seek> Stream<R> {
    fn produced(&self) -> u64 {
        self.pos + (self.hi - self.lo) as u64
    }

    /// Reads more decompressed bytes into the buffer; Ok(false) at the end.
    fn more(&mut self) -> io::Result<bool> {
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
    fn ensure(&mut self, n: usize) -> io::Result<usize> {
        while self.hi - self.lo < n {
            if !self.more()? {
                break;
            }
        }
        Ok(self.hi - self.lo)
    }

    fn available(&self) -> &[u8] {
        &self.buf[self.lo..self.hi]
    }

    fn consume(&mut self, n: usize) {
        let n = n.min(self.hi - self.lo);
        self.lo += n;
        self.pos += n as u64;
    }

    /// The offset of decompressed position `pos`, as reported.
    fn offset_of(&self, pos: u64) -> Offset {
        if !self.gzip {
            return Offset { file: pos, within_member: None };
        }
        match self.members.iter().rev().find(|(d, _)| *d <= pos) {
            Some((d, f)) => Offset { file: *f, within_member: Some(pos - d) },
            None => Offset { file: 0, within_member: Some(pos) },
        }
    }

    /// Forgets members that end before `pos`.
    fn prune(&mut self, pos: u64) {
        while self.members.len() > 1 && self.members[1].0 <= pos {
            self.members.pop_front();
        }
    }

    /// The decompressed offset of the first member starting after `pos`, if
    /// one has started.
    fn member_start_after(&self, pos: u64) -> Option<u64> {
        self.members.iter().map(|m| m.0).find(|d| *d > pos)
    }

    /// After a gzip member failed to decompress: drops what was buffered and
    /// moves to the next gzip header after the failed member's start.
    /// Ok(false) when there is none (the end).
    fn recover(&mut self) -> io::Result<bool> {
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
    fn file_pos(&self) -> u64 {
        match &self.src {
            Source::Plain(c) | Source::Between(c) => c.pos,
            Source::Member(d) => d.get_ref().pos,
            Source::Gone => 0,
        }
    }
}

enum State {
    Header,
    Block {
        remaining: u64,
        offset: Offset,
        declared: u64,
    },
    /// The block failed; the error is reported by `finish_block`.
    Failed(ReadError),
    Resync,
    Done,
}

/// Reads the records of one WARC file in order (see the module docs).
pub struct WarcReader<R> {
    stream: Stream<R>,
    state: State,
}

impl WarcReader<BufReader<File>> {
    /// Opens the file at `path`. Errors: it cannot be opened or read.
    pub fn open(path: &Path) -> io::Result<WarcReader<BufReader<File>>> {
        WarcReader::new(BufReader::with_capacity(BUF, File::open(path)?))
    }
}

impl<R: BufRead + Seek> WarcReader<R> {
    /// A reader of `inner`, gzip or plain as its first bytes say.
    /// Errors: `inner` cannot be read.
    pub fn new(mut inner: R) -> io::Result<WarcReader<R>> {
        let gzip = inner.fill_buf()?.starts_with(&GZIP_MAGIC[..2]);
        let c = Counted { inner, pos: 0 };
        let src = if gzip { Source::Between(c) } else { Source::Plain(c) };
        let mut members = VecDeque::new();
        if !gzip {
            members.push_back((0, 0));
        }
        Ok(WarcReader {
            stream: Stream {
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
            },
            state: State::Header,
        })
    }

    /// True for a gzip file.
    pub fn is_gzip(&self) -> bool {
        self.stream.gzip
    }

    /// How far into the file reading has got, in bytes (for progress).
    pub fn file_position(&self) -> u64 {
        self.stream.file_pos()
    }

    /// The next record's head, or the error that made a record unreadable
    /// (reading then goes on with the next one), or `None` at the end.
    /// The previous record's block, if not read to its end, is skipped
    /// first ([`WarcReader::finish_block`]); its error, if any, comes
    /// first.
    pub fn next_record(&mut self) -> Option<Result<RecordHead, ReadError>> {
        loop {
            match &self.state {
                State::Block { .. } | State::Failed(_) => {
                    if let Err(e) = self.finish_block() {
                        return Some(Err(e));
                    }
                }
                State::Resync => self.resync(),
                State::Done => return None,
                State::Header => return self.read_head(),
            }
        }
    }

    /// Reads the rest of the current block and the two CRLFs after it.
    /// Errors: the block is cut short (the file ends, or its gzip member
    /// does not decompress), or is not followed by CRLF CRLF (its
    /// `Content-Length` is wrong). Ok when there is no current block.
    pub fn finish_block(&mut self) -> Result<(), ReadError> {
        let offset = match &self.state {
            State::Failed(_) => {
                let State::Failed(e) = std::mem::replace(&mut self.state, State::Header) else {
                    unreachable!()
                };
                self.after_failure();
                return Err(e);
            }
            State::Block { offset, .. } => *offset,
            _ => return Ok(()),
        };
        let mut sink = [0u8; 8192];
        loop {
            match self.block().read(&mut sink) {
                Ok(0) => break,
                Ok(_) => continue,
                // The state is now Failed.
                Err(_) => return self.finish_block(),
            }
        }
        self.state = State::Header;
        self.terminator(offset).inspect_err(|_| {
            if matches!(self.state, State::Header) {
                self.state = State::Resync;
            }
        })
    }

    /// The current record's block (empty when there is none), read up to
    /// its `Content-Length`. A read error means the block is cut short;
    /// [`WarcReader::finish_block`] then reports it.
    pub fn block(&mut self) -> Block<'_, R> {
        Block { reader: self }
    }

    /// Sets the state after the source failed or ended inside a record:
    /// reading goes on at the next gzip header after a member that did not
    /// decompress; a plain file that ended or cannot be read is done.
    fn after_failure(&mut self) {
        self.state = match self.stream.failed_member.is_some() {
            true => match self.stream.recover() {
                Ok(true) => State::Header,
                _ => State::Done,
            },
            false => State::Done,
        };
    }

    /// The error for a failure of the source while reading the record at `offset`.
    fn source_error(&self, offset: Offset, e: &io::Error) -> ReadError {
        match self.stream.failed_member {
            Some(m) => ReadError {
                offset: if offset.file == m {
                    offset
                } else {
                    Offset { file: m, within_member: Some(0) }
                },
                message: if e.kind() == io::ErrorKind::UnexpectedEof {
                    "the gzip member is cut short (truncated file)".to_string()
                } else {
                    format!("the gzip member does not decompress ({e})")
                },
            },
            None => ReadError { offset, message: format!("cannot read the file: {e}") },
        }
    }

    /// Skips the CRLF CRLF after a block (leniently: any run of CR and LF,
    /// possibly none at the very end) of the record at `record`. Err (at
    /// `record`) names what was found instead, or that the record's gzip
    /// member is cut.
    fn terminator(&mut self, record: Offset) -> Result<(), ReadError> {
        let mut seen = 0;
        loop {
            match self.stream.ensure(1) {
                Ok(0) => {
                    self.state = State::Done;
                    return Ok(());
                }
                Ok(_) => {}
                // The record is whole and its gzip member ended: the
                // failure is the next member's (read_head reports it).
                Err(_) if seen >= 2 && self.stream.failed_member != Some(record.file) => {
                    return Ok(())
                }
                Err(e) => {
                    let offset = self.stream.offset_of(self.stream.pos);
                    let err = self.source_error(offset, &e);
                    self.after_failure();
                    return Err(ReadError { offset: record, message: err.message });
                }
            }
            let b = self.stream.available()[0];
            if b == b'\r' || b == b'\n' {
                self.stream.consume(1);
                seen += 1;
                continue;
            }
            if seen == 0 && self.at_member_start() {
                // Some writers end a gzip member right after the block.
                return Ok(());
            }
            if seen >= 2 || (seen >= 1 && self.stream.available().starts_with(b"WARC/")) {
                return Ok(());
            }
            let found: String = self
                .stream
                .available()
                .iter()
                .take(16)
                .map(|&b| if b.is_ascii_graphic() || b == b' ' { b as char } else { '.' })
                .collect();
            return Err(ReadError { offset: record, message: format!("the block is not followed by CRLF CRLF (found {found:?}); its Content-Length is wrong") });
        }
    }

    fn at_member_start(&self) -> bool {
        self.stream.gzip && self.stream.members.iter().any(|m| m.0 == self.stream.pos)
    }

    /// Moves to the next line starting with `WARC/1.` or the next gzip
    /// member, whichever comes first.
    fn resync(&mut self) {
        let start = self.stream.pos;
        loop {
            match self.stream.ensure(8) {
                Ok(0) => {
                    self.state = State::Done;
                    return;
                }
                Ok(_) => {}
                Err(_) => {
                    self.after_failure();
                    return;
                }
            }
            let boundary = self.stream.member_start_after(start);
            if boundary == Some(self.stream.pos)
                || (self.stream.pos == start && self.stream.available().starts_with(b"WARC/1."))
            {
                self.state = State::Header;
                return;
            }
            let avail = self.stream.available();
            let limit = match boundary {
                Some(b) if b > self.stream.pos => ((b - self.stream.pos) as usize).min(avail.len()),
                _ => avail.len(),
            };
            if let Some(i) =
                avail[..limit].windows(8).position(|w| w[0] == b'\n' && &w[1..] == b"WARC/1.")
            {
                self.stream.consume(i + 1);
                self.state = State::Header;
                return;
            }
            // Keep the last 7 bytes: a match may straddle the refill.
            let skip = if limit < avail.len() { limit } else { limit.saturating_sub(7).max(1) };
            self.stream.consume(skip);
            if self.stream.eof && self.stream.available().len() < 8 {
                let rest = self.stream.available().len();
                self.stream.consume(rest);
                self.state = State::Done;
                return;
            }
        }
    }

    /// Reads a record head at the current position.
    fn read_head(&mut self) -> Option<Result<RecordHead, ReadError>> {
        // Leniently skip blank lines between records.
        loop {
            match self.stream.ensure(1) {
                Ok(0) => {
                    self.state = State::Done;
                    return None;
                }
                Ok(_) => {}
                Err(e) => {
                    let offset = self.stream.offset_of(self.stream.pos);
                    let err = self.source_error(offset, &e);
                    self.after_failure();
                    return Some(Err(err));
                }
            }
            match self.stream.available()[0] {
                b'\r' | b'\n' => self.stream.consume(1),
                _ => break,
            }
        }
        let start = self.stream.pos;
        self.stream.prune(start);
        let offset = self.stream.offset_of(start);
        // Find the end of the head within MAX_HEAD_BYTES.
        let head_len = loop {
            let avail = self.stream.available();
            if let Some(i) = find_head_end(avail) {
                break Some(i);
            }
            if avail.len() >= MAX_HEAD_BYTES {
                break None;
            }
            let want = avail.len() + 1;
            match self.stream.ensure(want) {
                Ok(n) if n >= want => continue,
                Ok(_) => {
                    // The file ends inside the head.
                    let n = self.stream.available().len();
                    self.stream.consume(n);
                    self.state = State::Done;
                    return Some(Err(ReadError {
                        offset,
                        message: "the file ends inside the record's head (truncated file)".into(),
                    }));
                }
                Err(e) => {
                    let err = self.source_error(offset, &e);
                    self.after_failure();
                    return Some(Err(err));
                }
            }
        };
        let Some((head_end, body_start)) = head_len else {
            self.stream.consume(1);
            self.state = State::Resync;
            return Some(Err(ReadError {
                offset,
                message: format!("no end of the record's head within {MAX_HEAD_BYTES} bytes"),
            }));
        };
        let parsed = parse_head(&self.stream.available()[..head_end], offset);
        match parsed {
            Ok(head) => {
                self.stream.consume(body_start);
                self.state = State::Block {
                    remaining: head.content_length,
                    offset,
                    declared: head.content_length,
                };
                Some(Ok(head))
            }
            Err(e) => {
                self.stream.consume(1);
                self.state = State::Resync;
                Some(Err(e))
            }
        }
    }
}

/// The end of a head in `buf`: (length of the head without the blank line,
/// offset of the block).
fn find_head_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while let Some(j) = buf[i..].iter().position(|&b| b == b'\n') {
        let nl = i + j;
        // The line after this newline: is it empty?
        let rest = &buf[nl + 1..];
        if rest.starts_with(b"\r\n") {
            return Some((nl + 1, nl + 3));
        }
        if rest.starts_with(b"\n") {
            return Some((nl + 1, nl + 2));
        }
        if rest.is_empty() || rest == b"\r" {
            return None;
        }
        i = nl + 1;
    }
    None
}

/// Parses a record head (version line and fields, without the blank line)
/// of the record at `offset`. Errors: a [`ReadError`] at `offset` saying
/// what is wrong.
fn parse_head(bytes: &[u8], offset: Offset) -> Result<RecordHead, ReadError> {
    let bad = |message: String| ReadError { offset, message };
    let text = std::str::from_utf8(bytes)
        .map_err(|_| bad("the record's head is not UTF-8 text".into()))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let first = lines.next().unwrap_or("");
    let Some(version) = first.trim_end().strip_prefix("WARC/") else {
        let shown: String = first.chars().take(40).collect();
        return Err(bad(format!("no WARC version line (found {shown:?})")));
    };
    if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(bad(format!("bad WARC version {version:?}")));
    }
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in lines {
        if line.is_empty() {
            continue;
        }
        if line.starts_with(' ') || line.starts_with('\t') {
            match fields.last_mut() {
                Some((_, v)) => {
                    v.push(' ');
                    v.push_str(line.trim());
                    continue;
                }
                None => return Err(bad("a continuation line before any field".into())),
            }
        }
        let Some((name, value)) = line.split_once(':') else {
            let shown: String = line.chars().take(40).collect();
            return Err(bad(format!("a field line without a colon: {shown:?}")));
        };
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad(format!("a bad field name {name:?}")));
        }
        fields.push((name.to_string(), value.trim().to_string()));
    }
    let length = fields
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("Content-Length"))
        .ok_or_else(|| bad("no Content-Length field".into()))?
        .1
        .clone();
    let content_length = length
        .parse::<u64>()
        .map_err(|_| bad(format!("Content-Length {length:?} is not a number")))?;
    Ok(RecordHead { offset, version: version.to_string(), fields, content_length })
}

/// The current record's block: [`Read`] and [`BufRead`], up to its
/// `Content-Length`.
pub struct Block<'a, R> {
    reader: &'a mut WarcReader<R>,
}

impl<R: BufRead + Seek> Block<'_, R> {
    fn fail(&mut self, e: ReadError) -> io::Error {
        let msg = e.to_string();
        self.reader.state = State::Failed(e);
        io::Error::new(io::ErrorKind::UnexpectedEof, msg)
    }
}

impl<R: BufRead + Seek> BufRead for Block<'_, R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let (remaining, offset, declared) = match &self.reader.state {
            State::Block { remaining, offset, declared } => (*remaining, *offset, *declared),
            State::Failed(e) => {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, e.to_string()))
            }
            _ => return Ok(&[]),
        };
        if remaining == 0 {
            return Ok(&[]);
        }
        if self.reader.stream.available().is_empty() {
            match self.reader.stream.ensure(1) {
                Ok(0) => {
                    let got = declared - remaining;
                    let e = ReadError {
                        offset,
                        message: format!("the block is cut short: Content-Length says {declared} bytes, the file ends after {got} (truncated file)"),
                    };
                    return Err(self.fail(e));
                }
                Ok(_) => {}
                Err(e) => {
                    let err = self.reader.source_error(offset, &e);
                    return Err(self.fail(err));
                }
            }
        }
        let avail = self.reader.stream.available();
        let n = (avail.len() as u64).min(remaining) as usize;
        Ok(&self.reader.stream.available()[..n])
    }

    fn consume(&mut self, n: usize) {
        if let State::Block { remaining, .. } = &mut self.reader.state {
            let n = (n as u64).min(*remaining);
            *remaining -= n;
            self.reader.stream.consume(n as usize);
        }
    }
}

impl<R: BufRead + Seek> Read for Block<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

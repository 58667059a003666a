//! Writes WARC/1.1 records, each compressed as its own gzip member (ISO
//! 28500 annex D: "record-at-time compression"), so that any record can be
//! read from its offset alone and a damaged member loses one record only.

use std::io::{self, Read, Write};

use flate2::write::GzEncoder;
use flate2::Compression;

/// Writes records to `out`, each in its own gzip member.
pub struct WarcWriter<W: Write> {
    out: W,
    /// Bytes written to `out` so far (compressed).
    written: u64,
    /// Records written so far.
    records: u64,
}

/// Counts what passes through to the wrapped writer.
struct Counting<'a, W> {
    inner: &'a mut W,
    n: u64,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> WarcWriter<W> {
    /// A writer to `out` (wrap a file in a `BufWriter`).
    pub fn new(out: W) -> WarcWriter<W> {
        WarcWriter { out, written: 0, records: 0 }
    }

    /// Writes one record: `WARC/1.1`, the `fields` in order (names and
    /// values as given; values must not contain CR or LF, which are
    /// replaced by spaces), `Content-Length: block_len`, an empty line,
    /// exactly `block_len` bytes read from `block`, and CRLF CRLF, as one
    /// gzip member. Returns the file offset the record starts at.
    ///
    /// Errors: writing fails, or `block` fails or yields another number of
    /// bytes than `block_len` (the member is then incomplete: the caller
    /// must drop the output).
    pub fn write_record(
        &mut self,
        fields: &[(&str, &str)],
        block_len: u64,
        block: &mut dyn Read,
    ) -> io::Result<u64> {
        let offset = self.written;
        let mut head = String::with_capacity(512);
        head.push_str("WARC/1.1\r\n");
        for (name, value) in fields {
            head.push_str(name);
            head.push_str(": ");
            head.extend(value.chars().map(|c| if c == '\r' || c == '\n' { ' ' } else { c }));
            head.push_str("\r\n");
        }
        head.push_str(&format!("Content-Length: {block_len}\r\n\r\n"));
        let mut counting = Counting { inner: &mut self.out, n: 0 };
        let mut gz = GzEncoder::new(&mut counting, Compression::default());
        gz.write_all(head.as_bytes())?;
        let copied = io::copy(&mut block.take(block_len), &mut gz)?;
        if copied != block_len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the record block has {copied} bytes, not the {block_len} announced"),
            ));
        }
        gz.write_all(b"\r\n\r\n")?;
        gz.finish()?;
        self.written += counting.n;
        self.records += 1;
        Ok(offset)
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Records written so far.
    pub fn records_written(&self) -> u64 {
        self.records
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::reader::WarcReader;
    use super::*;
    use std::io::Cursor;

    fn write_three() -> Vec<u8> {
        let mut w = WarcWriter::new(Vec::new());
        for (i, body) in
            [&b"first block"[..], b"", &[0u8, 255, 13, 10, 13, 10, 1][..]].iter().enumerate()
        {
            let n = i.to_string();
            w.write_record(
                &[("WARC-Type", "resource"), ("WARC-Record-ID", &n)],
                body.len() as u64,
                &mut &body[..],
            )
            .unwrap();
        }
        w.finish().unwrap()
    }

    /// (record ID, block, file offset) of each record read.
    type Records = Vec<(String, Vec<u8>, u64)>;

    fn read_all(bytes: &[u8]) -> (Records, Vec<String>) {
        let mut r = WarcReader::new(Cursor::new(bytes.to_vec())).unwrap();
        let (mut ok, mut errors) = (Vec::new(), Vec::new());
        while let Some(next) = r.next_record() {
            match next {
                Ok(head) => {
                    let mut block = Vec::new();
                    let read = r.block().read_to_end(&mut block);
                    match (read, r.finish_block()) {
                        (Ok(_), Ok(())) => ok.push((
                            head.get("WARC-Record-ID").unwrap_or("").to_string(),
                            block,
                            head.offset.file,
                        )),
                        (_, Err(e)) => errors.push(e.to_string()),
                        (Err(e), Ok(())) => errors.push(e.to_string()),
                    }
                }
                Err(e) => errors.push(e.to_string()),
            }
        }
        (ok, errors)
    }

    #[test]
    fn records_round_trip_gzip_per_record_whole_file_gzip_and_plain() {
        let gz = write_three();
        let (ok, errors) = read_all(&gz);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(ok.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["0", "1", "2"]);
        assert_eq!(ok[0].1, b"first block");
        assert_eq!(ok[2].1, [0u8, 255, 13, 10, 13, 10, 1]);
        assert_eq!(ok[0].2, 0);
        assert!(ok[1].2 > 0 && ok[2].2 > ok[1].2, "each record its own member, at its own offset");

        let mut plain = Vec::new();
        flate2::read::MultiGzDecoder::new(&gz[..]).read_to_end(&mut plain).unwrap();
        assert!(plain.starts_with(b"WARC/1.1\r\n"));
        let (ok_plain, errors) = read_all(&plain);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            ok_plain.iter().map(|r| &r.1).collect::<Vec<_>>(),
            ok.iter().map(|r| &r.1).collect::<Vec<_>>()
        );

        let mut whole = GzEncoder::new(Vec::new(), Compression::fast());
        whole.write_all(&plain).unwrap();
        let (ok_whole, errors) = read_all(&whole.finish().unwrap());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            ok_whole.iter().map(|r| &r.1).collect::<Vec<_>>(),
            ok.iter().map(|r| &r.1).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_short_block_is_an_error_not_a_bad_record() {
        let mut w = WarcWriter::new(Vec::new());
        assert!(w.write_record(&[("WARC-Type", "resource")], 10, &mut &b"short"[..]).is_err());
    }

    #[test]
    fn a_malformed_record_is_reported_at_its_offset_and_the_next_one_is_read() {
        let gz = write_three();
        let (ok, _) = read_all(&gz);
        let second = ok[1].2 as usize;
        let third = ok[2].2 as usize;
        // Replace the second member by one whose head is garbage.
        let mut bad = GzEncoder::new(Vec::new(), Compression::fast());
        bad.write_all(b"WARC/1.1\r\nthis is no field\r\nContent-Length: 0\r\n\r\n\r\n\r\n")
            .unwrap();
        let mut file = gz[..second].to_vec();
        file.extend(bad.finish().unwrap());
        let bad_at = second;
        file.extend(&gz[third..]);
        let (ok2, errors) = read_all(&file);
        assert_eq!(ok2.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["0", "2"]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains(&format!("offset {bad_at}"))
                && errors[0].contains("without a colon"),
            "{errors:?}"
        );

        // The same in a plain file: the error names the record's own offset.
        let mut plain = Vec::new();
        flate2::read::MultiGzDecoder::new(&file[..]).read_to_end(&mut plain).unwrap();
        let at = plain.windows(8).position(|w| w == b"WARC/1.1").and_then(|first| {
            plain[first + 1..].windows(8).position(|w| w == b"WARC/1.1").map(|p| p + first + 1)
        });
        let (ok3, errors) = read_all(&plain);
        assert_eq!(ok3.len(), 2);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].contains(&format!("offset {}", at.unwrap())), "{errors:?}");
    }

    #[test]
    fn a_corrupt_gzip_member_loses_that_record_only() {
        let gz = write_three();
        let (ok, _) = read_all(&gz);
        let (second, third) = (ok[1].2 as usize, ok[2].2 as usize);
        let mut file = gz.clone();
        // Garble the deflate data of the second member (past its 10-byte header).
        for b in &mut file[second + 10..third - 8] {
            *b ^= 0x5a;
        }
        let (ok2, errors) = read_all(&file);
        assert_eq!(ok2.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["0", "2"], "{errors:?}");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains(&format!("offset {second}")), "{errors:?}");
    }

    #[test]
    fn a_truncated_file_reports_the_cut_record() {
        let gz = write_three();
        let (ok, _) = read_all(&gz);
        let third = ok[2].2 as usize;
        for cut in [third + 5, gz.len() - 3] {
            let (ok2, errors) = read_all(&gz[..cut]);
            assert_eq!(ok2.len(), 2, "cut at {cut}: {errors:?}");
            assert_eq!(errors.len(), 1, "cut at {cut}: {errors:?}");
            assert!(
                errors[0].contains(&format!("offset {third}")) && errors[0].contains("truncated"),
                "{errors:?}"
            );
        }
        let mut plain = Vec::new();
        flate2::read::MultiGzDecoder::new(&gz[..]).read_to_end(&mut plain).unwrap();
        let (ok3, errors) = read_all(&plain[..plain.len() - 6]);
        assert_eq!(ok3.len(), 2);
        assert!(errors.len() == 1 && errors[0].contains("cut short"), "{errors:?}");
    }

    #[test]
    fn a_wrong_content_length_is_reported_and_reading_resumes() {
        let plain = b"WARC/1.0\r\nWARC-Type: resource\r\nWARC-Record-ID: a\r\nContent-Length: 3\r\n\r\nabcdef\r\n\r\n\
                      WARC/1.0\r\nWARC-Type: resource\r\nWARC-Record-ID: b\r\nContent-Length: 2\r\n\r\nxy\r\n\r\n";
        let (ok, errors) = read_all(plain);
        assert_eq!(ok.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["b"]);
        assert!(
            errors.len() == 1
                && errors[0].contains("offset 0")
                && errors[0].contains("Content-Length is wrong"),
            "{errors:?}"
        );
    }

    #[test]
    fn garbage_never_panics() {
        let gz = write_three();
        let mut plain = Vec::new();
        flate2::read::MultiGzDecoder::new(&gz[..]).read_to_end(&mut plain).unwrap();
        for input in [&gz, &plain] {
            for cut in (0..input.len()).step_by(7) {
                let _ = read_all(&input[..cut]);
                let mut flipped = input.clone();
                flipped[cut] ^= 0xff;
                let _ = read_all(&flipped);
            }
        }
        let _ = read_all(b"");
        let _ = read_all(b"\x1f\x8b");
        let _ = read_all(b"WARC/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n");
    }
}

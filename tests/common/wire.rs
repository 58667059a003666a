//! HTTP/1.1 message parsing shared by the test client and the scripted
//! origin: header fields, heads, the chunked coding, HTTP dates.

use std::time::{SystemTime, UNIX_EPOCH};

/// Header fields in the order received; a name may repeat.
pub type Fields = Vec<(String, String)>;

/// First value of field `name` (case-insensitive).
pub fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// Every value of field `name` (case-insensitive), one per field line, in order.
pub fn field_all<'a>(fields: &'a Fields, name: &str) -> Vec<&'a str> {
    fields.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect()
}

/// Whether a comma-separated field (e.g. `Connection`, `Transfer-Encoding`)
/// contains `token`, over all its lines.
pub(crate) fn field_has_token(fields: &Fields, name: &str, token: &str) -> bool {
    field_all(fields, name)
        .iter()
        .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
}

pub(crate) fn find_subslice(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Splits a message head (without the final CRLF CRLF) into its start line and
/// fields. Obsolete line folding is not supported.
pub(crate) fn parse_head(head: &[u8]) -> Result<(String, Fields), String> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let start = lines.next().unwrap_or_default().to_owned();
    let mut fields = Vec::new();
    for line in lines {
        if line.is_empty() {
            continue;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("malformed field line {line:?} in head {text:?}"))?;
        fields.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    Ok((start, fields))
}

/// An incremental decoder of the chunked transfer coding (RFC 9112 §7.1).
#[derive(Default)]
pub(crate) struct ChunkedDecoder {
    pub(crate) body: Vec<u8>,
    state: ChunkedState,
}

#[derive(Default, PartialEq)]
enum ChunkedState {
    #[default]
    Size,
    Data(usize),
    DataEnd,
    Trailer,
    Done,
}

impl ChunkedDecoder {
    /// Consumes what it can from the front of `buf`; leaves the rest (the
    /// next message, or an incomplete line) in place.
    pub(crate) fn feed(&mut self, buf: &mut Vec<u8>) -> Result<(), String> {
        let mut pos = 0;
        loop {
            match self.state {
                ChunkedState::Size => {
                    let Some(eol) = find_subslice(&buf[pos..], b"\r\n") else { break };
                    let line = String::from_utf8_lossy(&buf[pos..pos + eol]).into_owned();
                    let hex = line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(hex, 16)
                        .map_err(|e| format!("bad chunk size line {line:?}: {e}"))?;
                    pos += eol + 2;
                    self.state =
                        if size == 0 { ChunkedState::Trailer } else { ChunkedState::Data(size) };
                }
                ChunkedState::Data(remaining) => {
                    let take = remaining.min(buf.len() - pos);
                    if take == 0 {
                        break;
                    }
                    self.body.extend_from_slice(&buf[pos..pos + take]);
                    pos += take;
                    self.state = if take == remaining {
                        ChunkedState::DataEnd
                    } else {
                        ChunkedState::Data(remaining - take)
                    };
                }
                ChunkedState::DataEnd => {
                    if buf.len() - pos < 2 {
                        break;
                    }
                    if &buf[pos..pos + 2] != b"\r\n" {
                        return Err(format!(
                            "chunk data not followed by CRLF: {:?}",
                            &buf[pos..pos + 2]
                        ));
                    }
                    pos += 2;
                    self.state = ChunkedState::Size;
                }
                ChunkedState::Trailer => {
                    let Some(eol) = find_subslice(&buf[pos..], b"\r\n") else { break };
                    pos += eol + 2;
                    if eol == 0 {
                        self.state = ChunkedState::Done;
                    }
                }
                ChunkedState::Done => break,
            }
        }
        buf.drain(..pos);
        Ok(())
    }

    pub(crate) fn done(&self) -> bool {
        self.state == ChunkedState::Done
    }
}

/// Encodes `chunks` in the chunked transfer coding; with `last_chunk` the
/// terminating `0\r\n\r\n` is appended, without it the body is truncated.
pub fn chunked_body(chunks: &[&[u8]], last_chunk: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for c in chunks.iter().filter(|c| !c.is_empty()) {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    if last_chunk {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    out
}

/// An HTTP date (IMF-fixdate, RFC 9110 §5.6.7) for `t`, e.g.
/// `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(t: SystemTime) -> String {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[days.rem_euclid(7) as usize],
        day,
        MONTHS[(month - 1) as usize],
        year,
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

//! WARC files written by a test: [`write_response`] adds one `response`
//! record through crawlcache's own WARC writer.

use crawlcache::warc::writer::WarcWriter;

/// Writes to `w` a `response` record with `id` (`<urn:uuid:...>`): `url`
/// answered `status` (`200 OK`) with `body` (`Content-Type: text/plain`) at
/// `date` (a WARC-Date). Panics when the writer fails.
pub fn write_response(
    w: &mut WarcWriter<Vec<u8>>,
    id: &str,
    url: &str,
    date: &str,
    status: &str,
    body: &[u8],
) {
    let block = [
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes(),
        body.to_vec(),
    ]
    .concat();
    let fields = [
        ("WARC-Type", "response"),
        ("WARC-Record-ID", id),
        ("WARC-Target-URI", url),
        ("WARC-Date", date),
        ("Content-Type", "application/http;msgtype=response"),
    ];
    w.write_record(&fields, block.len() as u64, &mut &block[..]).expect("writing a WARC record");
}

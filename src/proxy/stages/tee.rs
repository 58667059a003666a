//! Copies an origin's body to the client and into the store at once; the
//! entry is published only when the body arrived complete (RFC 9111
//! section 3.3, C09).

use super::super::state::ProxyState;
use crate::metrics::Metrics;
use crate::wire::body::Inbound;
use crate::wire::body::ProxyBody;
use bytes::Bytes;
use crawlcache_base::collapse::{Lead, Outcome};
use crawlcache_store::BodyWriter;
use std::sync::Arc;
use tokio::sync::mpsc;

/// What the tee task needs to publish a body once complete.
pub struct TeeJob {
    /// The proxy state.
    pub state: Arc<ProxyState>,
    /// The primary key.
    pub primary: String,
    /// The secondary key (RFC 9111 section 4.1).
    pub secondary_key: Vec<u8>,
    /// The response head to store ([`crawlcache_policy::cache::encode_head`]).
    pub meta: Vec<u8>,
    /// When the request was sent (`request_time`, RFC 9111 section 4.2.3),
    /// in milliseconds since the Unix epoch: an invalidation after it wins
    /// (section 4.4).
    pub request_time_ms: u64,
    /// The collapsed-forwarding lead, released with the outcome.
    pub lead: Option<Lead>,
}

/// A response body announced at most this many bytes long is read whole
/// before the response goes out ([`buffered`]): no task and channel per
/// response, and the client gets head and body in one write. The same
/// bound as the bytes a [`BodyWriter`] holds in memory.
pub const BUFFER_MAX: u64 = 64 * 1024;

/// Where the bytes for the client go while the body is copied.
enum Client {
    /// To the response body, through a channel; `open` until the receiver
    /// is gone.
    Channel { tx: mpsc::Sender<Result<Bytes, std::io::Error>>, open: bool },
    /// Collected, and the error that cut the body short if one did.
    Buffer { chunks: Vec<Bytes>, error: Option<std::io::Error> },
}

impl Client {
    /// Hands `item` to the client. A client that takes nothing for `stall`
    /// (`upstream.response_timeout`, as long as an origin may stall in a
    /// body) is let go: its body ends, after what it was sent, with an
    /// error naming the stall, and the copy goes on into the store at the
    /// origin's pace, so that requests collapsed onto this one and the
    /// store do not wait on a reader that does not read (an HTTP/2 client
    /// holding a zero window, an HTTP/1.1 one whose socket stays full).
    async fn send(&mut self, item: Result<Bytes, std::io::Error>, stall: std::time::Duration) {
        match self {
            Client::Channel { tx, open } => {
                if !*open {
                    return;
                }
                match tokio::time::timeout(stall, tx.send(item)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => *open = false,
                    Err(_) => {
                        *open = false;
                        let tx = tx.clone();
                        let why = format!(
                            "the client read nothing for {} s; its response was cut off and the body goes on into the store",
                            stall.as_secs_f64()
                        );
                        tracing::info!("{why}");
                        // Queued after what the client has not read yet.
                        tokio::spawn(async move {
                            let _ = tx
                                .send(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, why)))
                                .await;
                        });
                    }
                }
            }
            Client::Buffer { chunks, error } => match item {
                Ok(b) => chunks.push(b),
                Err(e) => *error = Some(e),
            },
        }
    }

    fn open(&self) -> bool {
        match self {
            Client::Channel { open, .. } => *open,
            Client::Buffer { .. } => true,
        }
    }
}

/// Copies the upstream body to the client and into the store. The entry is
/// published only when the body arrived complete (C09); a write error (C18)
/// abandons the store but not the client's transfer. If the client goes
/// away the download continues into the store, bounded by
/// `cache.max_object_size`.
pub async fn run(
    job: TeeJob,
    body: Inbound,
    writer: BodyWriter,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let state = job.state.clone();
    let _task = state.tasks.enter();
    let mut client = Client::Channel { tx, open: true };
    let (complete, writer) = copy(&job, body, writer, &mut client).await;
    drop(client);
    conclude(&state, job, complete, writer).await;
}

/// [`run`] for a body announced at most [`BUFFER_MAX`] bytes long: reads
/// it whole (into the store as it arrives) and publishes the entry, then
/// returns the client's body: the bytes, or, when the origin cut it short,
/// the bytes received followed by the error, as the streamed copy would
/// have sent them (`len`, the announced length, stays the body's size
/// hint); and whether the entry was committed to the store, which the
/// response's `Cache-Status` then says (`stored`, RFC 9211 section 2.5).
/// Publishing is quick for a short body (no blocking trip unless the store
/// must evict first); a body file of up to [`BUFFER_MAX`] bytes is one
/// write to the page cache and a rename before the response goes out.
pub async fn buffered(
    job: TeeJob,
    body: Inbound,
    mut writer: BodyWriter,
    len: Option<u64>,
) -> (ProxyBody, bool) {
    if let Some(len) = len {
        writer.expect_len(len);
    }
    let state = job.state.clone();
    let _task = state.tasks.enter();
    let mut client = Client::Buffer { chunks: Vec::new(), error: None };
    let (complete, writer) = copy(&job, body, writer, &mut client).await;
    let Client::Buffer { mut chunks, error } = client else { unreachable!("a buffer was given") };
    let stored = conclude(&state, job, complete, writer).await == Outcome::Stored;
    let body = match error {
        None => ProxyBody::Full(match chunks.len() {
            0 => None,
            1 => chunks.pop(),
            _ => {
                let mut all = bytes::BytesMut::with_capacity(chunks.iter().map(|c| c.len()).sum());
                for c in &chunks {
                    all.extend_from_slice(c);
                }
                Some(all.freeze())
            }
        }),
        Some(e) => ProxyBody::Cut { chunks: chunks.into(), error: Some(e), paused: false, len },
    };
    (body, stored)
}

/// The copy loop: each data frame into the writer (while it is still
/// wanted) and to the client. Returns whether the body arrived complete and
/// the writer if the store still wants it.
async fn copy(
    job: &TeeJob,
    mut body: Inbound,
    writer: BodyWriter,
    client: &mut Client,
) -> (bool, Option<BodyWriter>) {
    use http_body_util::BodyExt;
    let state = &job.state;
    let max = state.config.cache.max_object_size;
    let idle = state.config.upstream.response_timeout;
    let mut writer = Some(writer);
    let complete = loop {
        let frame = match tokio::time::timeout(idle, body.frame()).await {
            Err(_) => {
                let msg = format!(
                    "origin stalled for {} s in the middle of the body",
                    idle.as_secs_f64()
                );
                client
                    .send(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, msg)), idle)
                    .await;
                break false;
            }
            Ok(None) => break true,
            Ok(Some(Err(e))) => {
                client
                    .send(Err(std::io::Error::other(format!("origin body failed: {e}"))), idle)
                    .await;
                break false;
            }
            Ok(Some(Ok(f))) => f,
        };
        let Ok(data) = frame.into_data() else { continue };
        if let Some(w) = writer.as_mut() {
            let result = if w.len() + data.len() as u64 > max {
                tracing::info!(
                    "{} is larger than cache.max_object_size; not storing it",
                    job.primary
                );
                Err(None)
            } else {
                w.write(&data).map_err(Some)
            };
            if let Err(e) = result {
                if let Some(e) = e {
                    Metrics::inc(&state.metrics.store_errors);
                    tracing::warn!(
                        "storing {} failed, passing it through instead: {e}",
                        job.primary
                    );
                }
                writer = None;
            }
        }
        client.send(Ok(data), idle).await;
        if !client.open() && writer.is_none() {
            break false;
        }
    };
    (complete, writer)
}

/// Publishes a complete body and releases the collapsed-forwarding lead
/// with the outcome, which it returns (`Stored` when the entry was
/// committed).
async fn conclude(
    state: &Arc<ProxyState>,
    job: TeeJob,
    complete: bool,
    writer: Option<BodyWriter>,
) -> Outcome {
    let outcome = if !complete {
        Metrics::inc(&state.metrics.incomplete_bodies);
        tracing::info!("body of {} ended early; nothing stored", job.primary);
        Outcome::NotShared
    } else if let Some(w) = writer {
        publish(state, &job, w).await
    } else {
        Outcome::NotShared
    };
    if let Some(lead) = job.lead {
        lead.finish(outcome);
    }
    outcome
}

/// Finishes the body (a body file is written or renamed into place), then
/// records the entry, unless the URL was invalidated after the request was
/// sent (RFC 9111 section 4.4). A short body held in memory is recorded
/// right here when the store can take it without blocking (no eviction due,
/// no maintenance running: `BodyWriter::finish_quick` and
/// `Store::try_insert_quick`); anything else (a body spilled to a temporary
/// file, eviction due, maintenance running) takes one trip to a blocking
/// thread for both steps.
async fn publish(state: &Arc<ProxyState>, job: &TeeJob, writer: BodyWriter) -> Outcome {
    let (sent_ms, meta) = (job.request_time_ms, &job.meta);
    let inserted = match writer.finish_quick() {
        // Hashing, and for a body of `inline_max` bytes or more one write
        // to the page cache and a rename: no trip to a blocking thread.
        Ok(finished) => match finished {
            Err(e) => Err(Some(e)),
            Ok(committed) => {
                match state.invalidations.publish(&job.primary, sent_ms, || {
                    state.store.try_insert_quick(&job.primary, &job.secondary_key, meta, &committed)
                }) {
                    None => {
                        state.store.discard_body(&committed);
                        return Outcome::NotShared;
                    }
                    Some(Some(r)) => {
                        if r.is_err() {
                            state.store.discard_body(&committed);
                        }
                        r.map_err(Some)
                    }
                    Some(None) => insert_blocking(state, job, Ok(committed), meta.clone()).await,
                }
            }
        },
        Err(writer) => insert_blocking(state, job, Err(writer), meta.clone()).await,
    };
    match inserted {
        Ok(_evicted) => {
            Metrics::inc(&state.metrics.stored);
            // Fleet mode: shared with the fleet tier in the background.
            if let Some(f) = &state.fleet {
                crawlcache_fleet::tier::publish_later(f, &job.primary, &job.secondary_key);
            }
            Outcome::Stored
        }
        Err(None) => Outcome::NotShared,
        Err(Some(e)) => {
            Metrics::inc(&state.metrics.store_errors);
            tracing::warn!("storing {} failed: {e}", job.primary);
            Outcome::NotShared
        }
    }
}

/// Finishes the body (when `body` is still the writer) and inserts the
/// entry on a blocking thread, checking invalidations first. `Err(None)`:
/// nothing stored and nothing to report (invalidated, or the blocking task
/// failed, which is logged).
async fn insert_blocking(
    state: &Arc<ProxyState>,
    job: &TeeJob,
    body: Result<crawlcache_store::CommittedBody, BodyWriter>,
    meta: Vec<u8>,
) -> Result<u64, Option<crawlcache_store::StoreError>> {
    let (st, sent_ms) = (state.clone(), job.request_time_ms);
    let (primary, sk) = (job.primary.clone(), job.secondary_key.clone());
    let joined = tokio::task::spawn_blocking(move || {
        let committed = match body {
            Ok(c) => c,
            Err(writer) => writer.finish().map_err(Some)?,
        };
        // Not when the URL was invalidated after the request was sent (RFC 9111 section 4.4).
        let r = st
            .invalidations
            .publish(&primary, sent_ms, || st.store.insert(&primary, &sk, &meta, Some(&committed)));
        if !matches!(r, Some(Ok(_))) {
            // Release the finished body now rather than at close.
            st.store.discard_body(&committed);
        }
        match r {
            None => Err(None),
            Some(r) => r.map_err(Some),
        }
    })
    .await;
    joined.unwrap_or_else(|e| {
        tracing::warn!("storing {} failed: {e}", job.primary);
        Err(None)
    })
}

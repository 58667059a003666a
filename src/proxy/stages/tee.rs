//! Copies an origin's body to the client and into the store at once; the
//! entry is published only when the body arrived complete (RFC 9111
//! section 3.3, C09).

use super::super::collapse::{Lead, Outcome};
use super::super::ProxyState;
use crate::cache::StoredResponse;
use crate::metrics::Metrics;
use crate::store::BodyWriter;
use bytes::Bytes;
use hyper::body::Incoming;
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
    /// The response head to store.
    pub stored: StoredResponse,
    /// The collapsed-forwarding lead, released with the outcome.
    pub lead: Option<Lead>,
}

/// Copies the upstream body to the client and into the store. The entry is
/// published only when the body arrived complete (C09); a write error (C18)
/// abandons the store but not the client's transfer. If the client goes
/// away the download continues into the store, bounded by
/// `cache.max_object_size`.
pub async fn run(job: TeeJob, mut body: Incoming, writer: BodyWriter, tx: mpsc::Sender<Result<Bytes, std::io::Error>>) {
    use http_body_util::BodyExt;
    let state = job.state.clone();
    let _task = state.tasks.enter();
    let max = state.config.cache.max_object_size;
    let idle = state.config.upstream.response_timeout;
    let mut writer = Some(writer);
    let mut client_open = true;
    let complete = loop {
        let frame = match tokio::time::timeout(idle, body.frame()).await {
            Err(_) => {
                let msg = format!("origin stalled for {} s in the middle of the body", idle.as_secs_f64());
                if client_open {
                    let _ = tx.send(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, msg))).await;
                }
                break false;
            }
            Ok(None) => break true,
            Ok(Some(Err(e))) => {
                if client_open {
                    let _ = tx.send(Err(std::io::Error::other(format!("origin body failed: {e}")))).await;
                }
                break false;
            }
            Ok(Some(Ok(f))) => f,
        };
        let Ok(data) = frame.into_data() else { continue };
        if let Some(w) = writer.as_mut() {
            let result = if w.len() + data.len() as u64 > max {
                tracing::info!("{} is larger than cache.max_object_size; not storing it", job.primary);
                Err(None)
            } else {
                w.write(&data).map_err(Some)
            };
            if let Err(e) = result {
                if let Some(e) = e {
                    Metrics::inc(&state.metrics.store_errors);
                    tracing::warn!("storing {} failed, passing it through instead: {e}", job.primary);
                }
                writer = None;
            }
        }
        if client_open && tx.send(Ok(data)).await.is_err() {
            client_open = false;
        }
        if !client_open && writer.is_none() {
            break false;
        }
    };
    drop(tx);
    let outcome = if !complete {
        Metrics::inc(&state.metrics.incomplete_bodies);
        tracing::info!("body of {} ended early; nothing stored", job.primary);
        Outcome::NotShared
    } else if let Some(w) = writer {
        publish(&state, &job, w).await
    } else {
        Outcome::NotShared
    };
    if let Some(lead) = job.lead {
        lead.finish(outcome);
    }
}

/// Finishes the body (a body file is written or renamed into place), then
/// records the entry, unless the URL was invalidated after the request was
/// sent (RFC 9111 section 4.4). A short body held in memory is recorded
/// right here when the store can take it without blocking (no eviction due,
/// no maintenance running: `Store::try_insert_quick`); anything else takes
/// one trip to a blocking thread for both steps.
async fn publish(state: &Arc<ProxyState>, job: &TeeJob, writer: BodyWriter) -> Outcome {
    let sent_ms = job.stored.request_time_ms;
    let meta = job.stored.to_bytes();
    let inserted = if writer.len() < state.store.inline_max() {
        // Hashing only: nothing touches the disk.
        match writer.finish() {
            Err(e) => Err(Some(e)),
            Ok(committed) => match state.invalidations.publish(&job.primary, sent_ms, || {
                state.store.try_insert_quick(&job.primary, &job.secondary_key, &meta, &committed)
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
                Some(None) => insert_blocking(state, job, Ok(committed), meta).await,
            },
        }
    } else {
        insert_blocking(state, job, Err(writer), meta).await
    };
    match inserted {
        Ok(_evicted) => {
            Metrics::inc(&state.metrics.stored);
            // Fleet mode: shared with the fleet tier in the background.
            if let Some(f) = &state.fleet {
                crate::fleet::tier::publish_later(f, &job.primary, &job.secondary_key);
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
    body: Result<crate::store::CommittedBody, BodyWriter>,
    meta: Vec<u8>,
) -> Result<u64, Option<crate::store::StoreError>> {
    let (st, sent_ms) = (state.clone(), job.stored.request_time_ms);
    let (primary, sk) = (job.primary.clone(), job.secondary_key.clone());
    let joined = tokio::task::spawn_blocking(move || {
        let committed = match body {
            Ok(c) => c,
            Err(writer) => writer.finish().map_err(Some)?,
        };
        // Not when the URL was invalidated after the request was sent (RFC 9111 section 4.4).
        let r = st.invalidations.publish(&primary, sent_ms, || st.store.insert(&primary, &sk, &meta, Some(&committed)));
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

//! Pairs responses with their requests (see [`super`]).

use std::collections::{HashMap, VecDeque};

use super::types::*;

/// What one record read gave: `None` when it is not HTTP(S).
pub(super) enum Outcome {
    Request(Option<Request>),
    /// A response or a revisit: paired with its request.
    Response(Option<Pending>),
    /// A resource: stored on its own, a GET.
    Resource(Option<Pending>),
    /// A record type that replays nothing.
    Ignored,
}

/// Pairs responses with requests (see the module docs).
#[derive(Default)]
pub(super) struct Matcher {
    pub(super) requests: HashMap<String, Request>,
    /// Requests not yet paired, by target URI, oldest first.
    pub(super) open_by_uri: HashMap<String, VecDeque<String>>,
    /// Response ID -> the request that names it in `WARC-Concurrent-To`.
    pub(super) named_by_request: HashMap<String, String>,
    pub(super) pending: Vec<Option<Pending>>,
    pub(super) pending_by_uri: HashMap<String, VecDeque<usize>>,
    pub(super) pending_by_id: HashMap<String, usize>,
    pub(super) pending_by_concurrent: HashMap<String, usize>,
}

impl Matcher {
    pub(super) fn take_open(&mut self, uri: &str, id: &str) {
        if let Some(q) = self.open_by_uri.get_mut(uri) {
            q.retain(|x| x != id);
        }
    }

    /// The request a response belongs to, if it has been read.
    pub(super) fn request_for(&mut self, p: &Pending) -> Option<Request> {
        let id = p
            .concurrent
            .iter()
            .find(|c| self.requests.contains_key(*c))
            .cloned()
            .or_else(|| self.named_by_request.get(&p.id).cloned())
            .or_else(|| self.open_by_uri.get(&p.uri).and_then(|q| q.back().cloned()))?;
        let req = self.requests.remove(&id)?;
        self.take_open(&req.uri, &req.id);
        Some(req)
    }

    pub(super) fn hold(&mut self, p: Pending) {
        let i = self.pending.len();
        self.pending_by_uri.entry(p.uri.clone()).or_default().push_back(i);
        self.pending_by_id.insert(p.id.clone(), i);
        for c in &p.concurrent {
            self.pending_by_concurrent.insert(c.clone(), i);
        }
        self.pending.push(Some(p));
    }

    /// Records a request; returns the held response it answers, if any
    /// (the request is then paired and not kept).
    pub(super) fn add_request(&mut self, req: Request) -> Option<(Pending, Request)> {
        for c in &req.concurrent {
            self.named_by_request.insert(c.clone(), req.id.clone());
        }
        let found = self
            .pending_by_concurrent
            .get(&req.id)
            .copied()
            .filter(|i| self.pending[*i].is_some())
            .or_else(|| {
                req.concurrent
                    .iter()
                    .find_map(|c| self.pending_by_id.get(c).copied())
                    .filter(|i| self.pending[*i].is_some())
            })
            .or_else(|| {
                self.pending_by_uri
                    .get(&req.uri)
                    .and_then(|q| q.iter().copied().find(|i| self.pending[*i].is_some()))
            });
        match found.and_then(|i| self.pending[i].take()) {
            Some(p) => Some((p, req)),
            None => {
                self.open_by_uri.entry(req.uri.clone()).or_default().push_back(req.id.clone());
                self.requests.insert(req.id.clone(), req);
                None
            }
        }
    }

    pub(super) fn drain(&mut self) -> Vec<Pending> {
        self.pending.drain(..).flatten().collect()
    }
}

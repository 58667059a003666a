//! [`Scan`]: the entries of the index, one at a time.

use std::sync::Arc;

use crate::error::StoreError;
use crate::index;
use crate::inner::Inner;
use crate::types::Entry;

/// The entries of the index one at a time, in index order, from
/// [`crate::Store::scan`]. Each item is decoded when it is reached (with a pending
/// touch or freshening laid over it, like [`crate::Store::lookup`]), so a scan of
/// any size holds one entry at a time. The scan sees the index as it is when
/// each item is read: entries inserted or removed meanwhile may or may not
/// appear. Undecodable rows are skipped with a warning.
pub struct Scan {
    rows: index::Rows,
    prefix: Vec<u8>,
    inner: Arc<Inner>,
    /// An error met before the first row (moving the in-memory changes
    /// into sled), reported as the first item.
    failed: Option<StoreError>,
}

impl Scan {
    /// A scan of `rows` (the index's entry rows) keeping those under
    /// `prefix`; `failed` is reported first.
    pub(crate) fn new(
        rows: index::Rows,
        prefix: &str,
        inner: Arc<Inner>,
        failed: Option<StoreError>,
    ) -> Scan {
        Scan { rows, prefix: prefix.as_bytes().to_vec(), inner, failed }
    }
}

impl Iterator for Scan {
    type Item = Result<Entry, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        loop {
            let (k, v) = match self.rows.next()? {
                Ok(row) => row,
                Err(e) => return Some(Err(e)),
            };
            if !self.prefix.is_empty()
                && !index::primary_key_bytes(&k).is_some_and(|pk| pk.starts_with(&self.prefix))
            {
                continue;
            }
            match self.inner.read_entry(&k, &v) {
                Ok(Some(mut e)) => {
                    self.inner.overlay_pending(std::slice::from_mut(&mut e));
                    return Some(Ok(e));
                }
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Where a [`crate::Store::page`] starts: after the entry with this primary and
/// secondary key (both as the entry has them), in index order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageCursor {
    /// The last entry's primary key.
    pub primary_key: String,
    /// The last entry's secondary key.
    pub secondary_key: Vec<u8>,
}

/// One page of entries from [`crate::Store::page`].
#[derive(Debug, Default)]
pub struct Page {
    /// The entries kept, in index order (at most the page's `limit`).
    pub entries: Vec<Entry>,
    /// Where the next page starts; `None` when the index is exhausted.
    pub next: Option<PageCursor>,
    /// Index rows looked at for this page (kept or not).
    pub examined: usize,
}

/// [`crate::Store::page`] over `inner`.
pub(crate) fn page(
    inner: &Inner,
    after: Option<&PageCursor>,
    limit: usize,
    budget: usize,
    mut keep: impl FnMut(&str) -> bool,
) -> Result<Page, StoreError> {
    inner.index.spill()?;
    let end = &crate::rows::ENTRIES_END[..];
    let start = after.map(|c| crate::rows::entry_key(&c.primary_key, &c.secondary_key));
    let rows = match &start {
        None => inner.index.entry_rows(),
        Some(k) => inner
            .index
            .tree
            .range(std::ops::Bound::Excluded(k.as_slice()), std::ops::Bound::Excluded(end)),
    };
    let mut page = Page::default();
    let mut last: Option<Vec<u8>> = None;
    for row in rows {
        let (k, v) = row?;
        page.examined += 1;
        let kept = index::primary_key_bytes(&k)
            .and_then(|pk| std::str::from_utf8(pk).ok())
            .is_some_and(&mut keep);
        if kept {
            if let Some(mut e) = inner.read_entry(&k, &v)? {
                inner.overlay_pending(std::slice::from_mut(&mut e));
                page.entries.push(e);
            }
        }
        last = Some(k.to_vec());
        if page.entries.len() >= limit || page.examined >= budget.max(1) {
            break;
        }
    }
    let more = match &last {
        Some(k) => inner
            .index
            .tree
            .range(std::ops::Bound::Excluded(k.as_slice()), std::ops::Bound::Excluded(end))
            .next()
            .is_some(),
        None => false,
    };
    page.next = last
        .filter(|_| more)
        .and_then(|k| crate::rows::split_entry_key(&k))
        .map(|(primary_key, secondary_key)| PageCursor { primary_key, secondary_key });
    Ok(page)
}

#[cfg(test)]
mod tests {
    use crate::Store;

    /// Pages follow each other without a gap or a repeat, a filter that
    /// keeps few keys still ends each page within the budget, and the
    /// last page says there is no next one.
    #[test]
    fn pages_cover_the_index_once_within_their_budget() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 1 << 20).unwrap();
        for i in 0..25 {
            let host = if i % 5 == 0 { "b.test" } else { "a.test" };
            store.insert(&format!("http://{host}/{i:02}"), b"", b"meta", None).unwrap();
        }
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let page = store.page(after.as_ref(), 4, 1000, |_| true).unwrap();
            assert!(page.entries.len() <= 4);
            seen.extend(page.entries.iter().map(|e| e.primary_key.clone()));
            match page.next {
                Some(c) => after = Some(c),
                None => break,
            }
        }
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!((seen.len(), sorted.len()), (25, 25), "every entry once");
        // A sparse filter with a small budget: pages may be short, never
        // look at more rows than the budget, and still find every match.
        let (mut found, mut after, mut pages) = (0, None, 0);
        loop {
            let page =
                store.page(after.as_ref(), 10, 3, |k| k.starts_with("http://b.test/")).unwrap();
            assert!(page.examined <= 3);
            found += page.entries.len();
            pages += 1;
            match page.next {
                Some(c) => after = Some(c),
                None => break,
            }
        }
        assert_eq!((found, pages), (5, 9));
    }
}

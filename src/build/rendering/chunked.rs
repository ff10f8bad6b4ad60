//! A vector of one small record a document (what a writer did with each), held in chunks of
//! [`CHUNK`] so that it can be let go of a chunk at a time as it is read out: at 1M records it
//! is about 115 MB, which a whole vector held until the build index's table of documents
//! (about 150 MB) was made of it.

use rayon::prelude::*;

/// Records a chunk: enough for the work of a chunk to be shared out between the cores.
pub(crate) const CHUNK: usize = 1 << 16;

/// A vector held in chunks of [`CHUNK`] records (the last one shorter).
#[derive(Debug, Default)]
pub(crate) struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T: Send> Chunked<T> {
    /// The records `make(0)` to `make(count - 1)`, made in parallel a chunk at a time.
    pub(crate) fn make(count: usize, make: impl Fn(usize) -> T + Sync) -> Chunked<T> {
        let chunks = (0..count.div_ceil(CHUNK))
            .map(|c| (c * CHUNK..count.min((c + 1) * CHUNK)).into_par_iter().with_min_len(64).map(&make).collect())
            .collect();
        Chunked { chunks, len: count }
    }
}

impl<T> Chunked<T> {
    /// Number of records.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Record `k`.
    pub(crate) fn get(&self, k: usize) -> Option<&T> {
        self.chunks.get(k / CHUNK)?.get(k % CHUNK)
    }

    /// Replaces record `k` (`k < len()`).
    pub(crate) fn set(&mut self, k: usize, record: T) {
        self.chunks[k / CHUNK][k % CHUNK] = record;
    }

    /// Adds a record at the end.
    pub(crate) fn push(&mut self, record: T) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => last.push(record),
            _ => {
                // a few late records follow the planned ones: room for those, not a whole chunk
                let mut chunk = Vec::with_capacity(64.min(CHUNK));
                chunk.push(record);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    /// Every record, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.chunks.iter().flatten()
    }

    /// Every record, in order, each chunk let go of once read out.
    pub(crate) fn into_records(self) -> impl Iterator<Item = T> {
        self.chunks.into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_keep_their_order_across_chunks() {
        let count = 2 * CHUNK + 5;
        let mut records = Chunked::make(count, |k| k * 3);
        assert_eq!(records.len(), count);
        assert_eq!(records.get(CHUNK), Some(&(CHUNK * 3)));
        assert_eq!(records.get(count), None);
        records.set(CHUNK + 1, 7);
        for extra in 0..100 {
            records.push(extra);
        }
        assert_eq!(records.len(), count + 100);
        assert_eq!(records.get(count + 99), Some(&99));
        let expected: Vec<usize> = (0..count).map(|k| if k == CHUNK + 1 { 7 } else { k * 3 }).chain(0..100).collect();
        assert_eq!(records.iter().copied().collect::<Vec<_>>(), expected);
        assert_eq!(records.into_records().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn an_empty_vector_takes_pushes() {
        let mut records: Chunked<u8> = Chunked::make(0, |_| 1);
        assert_eq!(records.len(), 0);
        records.push(4);
        assert_eq!(records.iter().copied().collect::<Vec<_>>(), vec![4]);
    }
}

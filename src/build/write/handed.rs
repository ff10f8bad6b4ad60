//! What the archive writer did with each document handed over (`archive.rs`), as its bulk
//! step (`archive_bulk.rs`) reads it too.

use super::stage::{Placed, Placements};
use crate::archive::Receipt;
use crate::build::rendering::{Chunked, Visited};

/// What the writer did with each document handed over: placed (its hash; put or taken from the
/// index unchanged), and the receipt of its bytes (its size; its place in the spool when put).
#[derive(Clone, Copy, Default)]
pub(super) struct Handed {
    pub(super) placed: Placed,
    pub(super) receipt: Receipt,
}

/// The documents of one archive write with what was done with each, by position (see
/// `Docs`): every one, or in a partial build those visited and the late ones.
pub(super) struct Handled {
    pub(super) each: Chunked<Handed>,
    pub(super) at: Option<Vec<usize>>,
}

impl Handled {
    /// What was done with document `i`, when it was handed over.
    pub(super) fn get(&self, i: usize) -> Option<&Handed> {
        match &self.at {
            None => self.each.get(i),
            Some(at) => at.binary_search(&i).ok().and_then(|k| self.each.get(k)),
        }
    }

    /// Notes what was done with document `i`.
    pub(super) fn push(&mut self, i: usize, handed: Handed) {
        if let Some(at) = &mut self.at {
            at.push(i);
        }
        self.each.push(handed);
    }

    /// Every document's placement, for the gone paths.
    pub(super) fn placements(&self) -> Placements {
        let mut each = Chunked::default();
        for handed in self.each.iter() {
            each.push(handed.placed);
        }
        Placements::from(Visited { each, at: self.at.clone() })
    }
}

/// The placement of a document the archive holds as the index says.
pub(super) fn from_index(hash: blake3::Hash) -> Placed {
    Placed { hash, staged: false, written: 0, from_index: true }
}

/// The receipt of a document the archive holds already: its size.
pub(super) fn receipt_of(size: u64) -> Receipt {
    Receipt::kept(size)
}

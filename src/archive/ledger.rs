//! The documents a write has staged, on disk (docs/archive.md, "Writing"): for each, its keys,
//! hash, sizes, media type and where its stored bytes are (the spool, or a part of the archive
//! being merged). A million documents' records weigh about 200 MB: held in memory they made
//! most of a 1M-record build's peak, so a write reads them back a record at a time.

use std::path::PathBuf;

use super::Error;
use super::codec::{Cursor, put_str, put_varint};
use super::sort::{Scratch, ScratchRecords};

/// Where a staged document's stored (gzip) bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// In the write's spool, from this offset.
    Spool(u64),
    /// In the part of the archive being rewritten named so, from this offset (a merge copies
    /// the documents it keeps from there, checked).
    Part([u8; 32], u64),
}

/// A document compressed and hashed, waiting to be placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Staged {
    pub(super) keys: Vec<String>,
    pub(super) hash: [u8; 32],
    /// Its length decompressed.
    pub(super) size: u64,
    pub(super) media_type: String,
    pub(super) source: Source,
    /// Its stored (gzip) length.
    pub(super) length: u64,
}

/// An append-only file of staged records (a [`Scratch`]), removed when dropped.
pub(super) struct Ledger {
    scratch: Scratch,
    count: u64,
}

impl Ledger {
    /// An empty ledger in the file `path` (made anew).
    pub(super) fn create(path: PathBuf) -> Result<Ledger, Error> {
        Ok(Ledger { scratch: Scratch::create(path)?, count: 0 })
    }

    /// The number of records pushed.
    pub(super) fn len(&self) -> u64 {
        self.count
    }

    /// Appends one record.
    pub(super) fn push(&mut self, staged: &Staged) -> Result<(), Error> {
        let mut record = Vec::with_capacity(96 + staged.keys.iter().map(String::len).sum::<usize>());
        put_fields(&mut record, staged);
        put_varint(&mut record, staged.keys.len() as u64);
        for key in &staged.keys {
            put_str(&mut record, key);
        }
        self.scratch.push(&record)?;
        self.count += 1;
        Ok(())
    }

    /// Every record pushed so far, in order, read back a record at a time.
    pub(super) fn records(&mut self) -> Result<Records, Error> {
        let path = self.scratch.path().to_path_buf();
        Ok(Records { input: self.scratch.read()?, path, left: self.count })
    }
}

/// The records of a ledger, in the order pushed.
pub(super) struct Records {
    input: ScratchRecords,
    path: PathBuf,
    left: u64,
}

impl Iterator for Records {
    type Item = Result<Staged, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(self.read_one())
    }
}

impl Records {
    fn read_one(&mut self) -> Result<Staged, Error> {
        let damaged = |what: String| Error::Damaged { file: self.path.display().to_string(), offset: 0, what };
        let record = self.input.next().transpose()?.ok_or_else(|| damaged("a record missing".into()))?;
        decode(&record).map_err(damaged)
    }
}

/// A staged document's fields but its keys (its hash, sizes, where its bytes are, media type),
/// appended: the ledger's records and the full write's sort items share them.
pub(super) fn put_fields(out: &mut Vec<u8>, staged: &Staged) {
    out.extend_from_slice(&staged.hash);
    put_varint(out, staged.size);
    put_varint(out, staged.length);
    match staged.source {
        Source::Spool(at) => {
            out.push(0);
            put_varint(out, at);
        }
        Source::Part(name, offset) => {
            out.push(1);
            out.extend_from_slice(&name);
            put_varint(out, offset);
        }
    }
    put_str(out, &staged.media_type);
}

/// The fields [`put_fields`] wrote, as a document with no keys.
pub(super) fn fields(cursor: &mut Cursor<'_>) -> Result<Staged, String> {
    let hash = cursor.hash("a staged hash")?;
    let (size, length) = (cursor.varint("a staged size")?, cursor.varint("a staged length")?);
    let source = match cursor.take(1, "a staged source")?[0] {
        0 => Source::Spool(cursor.varint("a spool offset")?),
        _ => Source::Part(cursor.hash("a part name")?, cursor.varint("a part offset")?),
    };
    let media_type = cursor.string("a media type")?;
    Ok(Staged { keys: Vec::new(), hash, size, media_type, source, length })
}

fn decode(record: &[u8]) -> Result<Staged, String> {
    let mut cursor = Cursor::new(record);
    let mut staged = fields(&mut cursor)?;
    let count = cursor.usize("a key count")?;
    staged.keys = (0..count).map(|_| cursor.string("a key")).collect::<Result<Vec<_>, _>>()?;
    cursor.end()?;
    Ok(staged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_back_as_pushed() {
        let dir = std::env::temp_dir().join(format!("gen-ledger-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut ledger = Ledger::create(dir.join("ledger")).unwrap();
        let spooled = Staged {
            keys: vec!["a/1".into(), "a/x".into()],
            hash: [7; 32],
            size: 300,
            media_type: "application/json".into(),
            source: Source::Spool(1 << 40),
            length: 120,
        };
        let kept = Staged { keys: vec!["b".into()], source: Source::Part([9; 32], 77), ..spooled.clone() };
        ledger.push(&spooled).unwrap();
        ledger.push(&kept).unwrap();
        let read: Vec<Staged> = ledger.records().unwrap().map(Result::unwrap).collect();
        assert_eq!(read, [spooled.clone(), kept]);
        ledger.push(&spooled).unwrap();
        assert_eq!(ledger.records().unwrap().count(), 3, "pushed after a read, read again");
        drop(ledger);
        assert!(!dir.join("ledger").exists(), "removed when dropped");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! An external sort of byte records (docs/archive.md, "Writing"): records are gathered up to a
//! budget of bytes, sorted there, and written out as a sorted run; the runs are then merged as
//! they are read. A write sorts its 3.3 million keys at 1M records with 16 MiB held, where a
//! sort in memory held every key (about 400 MB) at once. Records compare as bytes: a caller
//! encodes what sorts first, first. The budget is of bytes, not of records
//! (which is what the `extsort` crate bounds), since a key's length varies.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rayon::slice::ParallelSliceMut;

use super::Error;

/// The bytes of records a sort holds before it writes them out as a run.
pub(super) const BUDGET: usize = 16 << 20;

/// Records being sorted: the ones held, and the runs written (files named `<stem>.run<N>`,
/// removed when the sort is dropped).
pub(super) struct Sorter {
    stem: PathBuf,
    budget: usize,
    held: Vec<u8>,
    /// Each held record's start and end in `held`.
    spans: Vec<(u32, u32)>,
    runs: Vec<PathBuf>,
}

fn failed(path: &Path) -> impl Fn(io::Error) -> Error + '_ {
    move |source| Error::Io { file: path.display().to_string(), source }
}

impl Sorter {
    /// A sort that writes its runs beside `stem`, holding at most about `budget` bytes.
    pub(super) fn new(stem: PathBuf, budget: usize) -> Sorter {
        Sorter { stem, budget, held: Vec::new(), spans: Vec::new(), runs: Vec::new() }
    }

    /// Adds one record.
    pub(super) fn push(&mut self, record: &[u8]) -> Result<(), Error> {
        if !self.held.is_empty() && self.held.len() + record.len() > self.budget {
            self.spill()?;
        }
        let start = self.held.len() as u32;
        self.held.extend_from_slice(record);
        self.spans.push((start, self.held.len() as u32));
        Ok(())
    }

    fn sort_held(&mut self) {
        let held = &self.held;
        self.spans.par_sort_unstable_by(|a, b| held[a.0 as usize..a.1 as usize].cmp(&held[b.0 as usize..b.1 as usize]));
    }

    /// Writes the held records out as a sorted run.
    fn spill(&mut self) -> Result<(), Error> {
        self.sort_held();
        let path = PathBuf::from(format!("{}.run{}", self.stem.display(), self.runs.len()));
        self.runs.push(path.clone()); // listed first: removed when dropped, even half written
        let mut out = BufWriter::with_capacity(1 << 16, File::create(&path).map_err(failed(&path))?);
        for &(start, end) in &self.spans {
            write_record(&mut out, &self.held[start as usize..end as usize], &path)?;
        }
        out.flush().map_err(failed(&path))?;
        self.held.clear();
        self.spans.clear();
        Ok(())
    }

    /// The records in byte order (equal records each given).
    pub(super) fn finish(mut self) -> Result<Sorted, Error> {
        if self.runs.is_empty() {
            self.sort_held();
            return Ok(Sorted { sorter: self, next: 0, heap: BinaryHeap::new(), inputs: Vec::new() });
        }
        if !self.held.is_empty() {
            self.spill()?;
        }
        let mut inputs = Vec::with_capacity(self.runs.len());
        let mut heap = BinaryHeap::new();
        for (i, path) in self.runs.iter().enumerate() {
            let mut input = BufReader::with_capacity(1 << 16, File::open(path).map_err(failed(path))?);
            if let Some(record) = read_record(&mut input, path)? {
                heap.push(Reverse((record, i)));
            }
            inputs.push(input);
        }
        Ok(Sorted { sorter: self, next: 0, heap, inputs })
    }
}

impl Drop for Sorter {
    fn drop(&mut self) {
        for run in &self.runs {
            let _ = std::fs::remove_file(run);
        }
    }
}

/// Writes one record of a run (or of any file of records): its length, then its bytes.
pub(super) fn write_record(out: &mut impl Write, record: &[u8], path: &Path) -> Result<(), Error> {
    out.write_all(&(record.len() as u32).to_le_bytes()).map_err(failed(path))?;
    out.write_all(record).map_err(failed(path))
}

/// Reads the next record written by [`write_record`]; `None` at the end.
pub(super) fn read_record(input: &mut impl Read, path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let mut len = [0; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(failed(path)(e)),
    }
    let mut record = vec![0; u32::from_le_bytes(len) as usize];
    input.read_exact(&mut record).map_err(failed(path))?;
    Ok(Some(record))
}

/// A file of records (written with [`write_record`]) appended to, then read back a record at a
/// time, as often as wanted; removed when dropped. A write's scratch files are these.
pub(super) struct Scratch {
    path: PathBuf,
    out: BufWriter<File>,
}

impl Scratch {
    /// An empty file of records at `path` (made anew).
    pub(super) fn create(path: PathBuf) -> Result<Scratch, Error> {
        let file = File::create(&path).map_err(failed(&path))?;
        Ok(Scratch { out: BufWriter::with_capacity(1 << 16, file), path })
    }

    /// Appends one record.
    pub(super) fn push(&mut self, record: &[u8]) -> Result<(), Error> {
        write_record(&mut self.out, record, &self.path)
    }

    /// Every record pushed so far, in order (the file read from its start).
    pub(super) fn read(&mut self) -> Result<ScratchRecords, Error> {
        self.out.flush().map_err(failed(&self.path))?;
        let file = File::open(&self.path).map_err(failed(&self.path))?;
        Ok(ScratchRecords { path: self.path.clone(), input: BufReader::with_capacity(1 << 16, file) })
    }

    /// The file's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The records of a [`Scratch`], read back.
pub(super) struct ScratchRecords {
    path: PathBuf,
    input: BufReader<File>,
}

impl Iterator for ScratchRecords {
    type Item = Result<Vec<u8>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        read_record(&mut self.input, &self.path).transpose()
    }
}

/// The sorted records: from memory when they fitted the budget, else merged from the runs.
pub(super) struct Sorted {
    sorter: Sorter,
    /// The next held record, when nothing was written out.
    next: usize,
    heap: BinaryHeap<Reverse<(Vec<u8>, usize)>>,
    inputs: Vec<BufReader<File>>,
}

impl Iterator for Sorted {
    type Item = Result<Vec<u8>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.sorter.runs.is_empty() {
            let &(start, end) = self.sorter.spans.get(self.next)?;
            self.next += 1;
            return Some(Ok(self.sorter.held[start as usize..end as usize].to_vec()));
        }
        let Reverse((record, i)) = self.heap.pop()?;
        match read_record(&mut self.inputs[i], &self.sorter.runs[i]) {
            Ok(Some(next)) => self.heap.push(Reverse((next, i))),
            Ok(None) => {}
            Err(e) => return Some(Err(e)),
        }
        Some(Ok(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_out_in_byte_order_from_memory_and_from_runs() {
        let dir = std::env::temp_dir().join(format!("gen-sort-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut seed = 11u64;
        let records: Vec<Vec<u8>> = (0..5000)
            .map(|i| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                format!("api/v2/thing/{}/{}", seed >> 50, i % 7).into_bytes()
            })
            .collect();
        let mut expected = records.clone();
        expected.sort();
        for budget in [1 << 20, 20_000, 3000] {
            let mut sorter = Sorter::new(dir.join("keys"), budget);
            for record in &records {
                sorter.push(record).unwrap();
            }
            let sorted: Vec<Vec<u8>> = sorter.finish().unwrap().map(Result::unwrap).collect();
            assert_eq!(sorted, expected, "budget {budget}");
        }
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(left.is_empty(), "every run removed: {left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

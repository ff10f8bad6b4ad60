//! What the build index is trusted for: a file whose stamp is unchanged and old enough is taken
//! as unchanged without reading it; any other is read and checked against its hash. Here is
//! that rule, used for data files, for the tree files a killed commit touched, and by
//! `gen publish`. (A plain build does not look at the tree's other files at all.)

use super::{DocumentFile, Index};
use crate::data::listing::PreviousData;
use crate::fsutil::Stamp;
use crate::tree::dir::TreeDir;
use std::io::Read;

/// How long before a build started a file must have last changed for its stamp to be trusted:
/// a file changed later may have changed again within the same tick of the file system's clock
/// (coarse clocks tick every few milliseconds; some file systems keep seconds or two).
pub(crate) const UNTRUSTED_WINDOW_NS: i64 = 2_000_000_000;

impl Index {
    /// True when a file whose stamp is unchanged since this index recorded it can be taken as
    /// unchanged: it last changed well before that build started. A file that changed just
    /// before or during that build is hashed again, whatever its stamp says. The same rule
    /// holds for data files and for the tree's own files when they are checked (whose stamps
    /// are taken after the build's commit, so such a check reads every file a build wrote).
    pub(crate) fn trusted(&self, stamp: &Stamp) -> bool {
        self.data_recorded().trusted(stamp)
    }

    /// What this index recorded of the data folder, as the next build's listing compares with
    /// it: the data table, the folders' notes, and the time before which a stamp is trusted.
    pub(crate) fn data_recorded(&self) -> PreviousData<'_> {
        PreviousData {
            data: &self.data,
            folders: self.folders.as_ref(),
            trusted_before_ns: self.started_ns - UNTRUSTED_WINDOW_NS,
        }
    }

    /// Whether the file at `path` in `tree` is as `file` says the build left it, with its `.gz`
    /// sibling when `gzip` wants one (and without one otherwise): `None` when it is not;
    /// `Some(true)` when telling took reading it. A stamp is enough only when it is unchanged
    /// and [`Index::trusted`]: a file changed just before its stamp was taken (during the
    /// commit, say) may have changed again within the same clock tick, so its bytes are read
    /// and checked against its hash (and its `.gz` sibling's, unpacked, against them).
    pub(crate) fn check_file(&self, tree: &TreeDir, path: &str, file: &DocumentFile, gzip: bool) -> Option<bool> {
        let gz_rel = || format!("{path}.gz");
        let same_gz = match file.gz {
            Some(gz) => gzip && tree.stamp(&gz_rel()) == Some(gz),
            None => !gzip,
        };
        if !same_gz || tree.stamp(path) != Some(file.stamp) {
            return None;
        }
        let gz_trusted = file.gz.is_none_or(|gz| self.trusted(&gz));
        if self.trusted(&file.stamp) && gz_trusted {
            return Some(false);
        }
        let bytes = tree.read(path, file.stamp.size)?;
        if blake3::hash(&bytes) != file.hash.0 {
            return None;
        }
        if let Some(gz) = file.gz.filter(|_| !gz_trusted) {
            let packed = tree.read(&gz_rel(), gz.size)?;
            let mut unpacked = Vec::with_capacity(bytes.len() + 1);
            let decoder = flate2::read::GzDecoder::new(&packed[..]);
            decoder.take(bytes.len() as u64 + 1).read_to_end(&mut unpacked).ok()?;
            if unpacked != bytes {
                return None;
            }
        }
        (tree.stamp(path) == Some(file.stamp)).then_some(true)
    }
}

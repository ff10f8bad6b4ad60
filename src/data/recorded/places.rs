//! The build index's keys: resource segments and sub-document kinds stored once and named by
//! their position, and records' names stored end to end in one string, so that each entry of
//! the index's tables is a few fixed-size numbers (a million records, a few hundred MB less).

use super::Place;
use super::codec::{Decoder, Entry, Key, put_bytes, put_u64};
use std::io::{Read, Write};

/// Strings stored once, each named by its position: resource segments and sub-document kinds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Interned {
    pub(crate) strings: Vec<String>,
}

impl Interned {
    pub(crate) fn find(&self, s: &str) -> Option<u32> {
        self.strings.iter().position(|x| x == s).map(|i| i as u32)
    }

    pub(crate) fn intern(&mut self, s: &str) -> u32 {
        self.find(s).unwrap_or_else(|| {
            self.strings.push(s.to_string());
            (self.strings.len() - 1) as u32
        })
    }

    pub(crate) fn get(&self, i: u32) -> &str {
        &self.strings[i as usize]
    }

    /// Sorts the strings; returns each old position's new one.
    pub(crate) fn sorted(&mut self) -> Vec<u32> {
        let mut order: Vec<usize> = (0..self.strings.len()).collect();
        order.sort_by(|a, b| self.strings[*a].cmp(&self.strings[*b]));
        let mut new_of_old = vec![0u32; order.len()];
        for (new, old) in order.iter().enumerate() {
            new_of_old[*old] = new as u32;
        }
        let mut strings: Vec<Option<String>> = std::mem::take(&mut self.strings).into_iter().map(Some).collect();
        self.strings = order.iter().map(|&old| strings[old].take().expect("each once")).collect();
        new_of_old
    }
}

/// Names stored one after another in one string; an entry holds (offset, length).
#[derive(Debug, Clone, Default)]
pub(crate) struct Names {
    pub(crate) text: String,
}

/// No name.
pub(crate) const NO_NAME: (u32, u32) = (0, u32::MAX);

impl Names {
    pub(crate) fn add(&mut self, name: Option<&str>) -> (u32, u32) {
        match name {
            None => NO_NAME,
            Some(name) => {
                let at = self.text.len() as u32;
                self.text.push_str(name);
                (at, name.len() as u32)
            }
        }
    }

    pub(crate) fn get(&self, (at, len): (u32, u32)) -> Option<&str> {
        (len != u32::MAX).then(|| self.text.get(at as usize..at as usize + len as usize)).flatten()
    }
}

/// The places and names of a table of entries, interned.
#[derive(Debug, Clone, Default)]
pub(crate) struct Places {
    pub(crate) segments: Interned,
    pub(crate) kinds: Interned,
    pub(crate) names: Names,
}

impl Places {
    pub(crate) fn key(&mut self, place: &Place<'_>) -> Key {
        let kind = place.kind.map_or(0, |kind| self.kinds.intern(kind) + 1);
        Key { segment: self.segments.intern(place.segment), id: place.id, kind }
    }

    /// The key of `place`, when its segment and kind are known here.
    pub(crate) fn find(&self, place: &Place<'_>) -> Option<Key> {
        let kind = match place.kind {
            None => 0,
            Some(kind) => self.kinds.find(kind)? + 1,
        };
        Some(Key { segment: self.segments.find(place.segment)?, id: place.id, kind })
    }

    pub(crate) fn place(&self, key: Key) -> Place<'_> {
        let kind = (key.kind > 0).then(|| self.kinds.get(key.kind - 1));
        Place { segment: self.segments.get(key.segment), kind, id: key.id }
    }

    pub(crate) fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
        for table in [&self.segments, &self.kinds] {
            put_u64(out, table.strings.len() as u64)?;
            for s in &table.strings {
                put_bytes(out, s.as_bytes())?;
            }
        }
        put_bytes(out, self.names.text.as_bytes())
    }

    pub(crate) fn decode(input: &mut Decoder<impl Read>) -> Result<Places, String> {
        let mut places = Places::default();
        for table in [&mut places.segments, &mut places.kinds] {
            let n = input.count(1)?;
            for _ in 0..n {
                table.strings.push(input.string()?);
            }
        }
        places.names.text = input.string()?;
        Ok(places)
    }
}

/// Checks what decoding cannot: entries sorted by key without repeats, and every index into
/// the interned strings and names in range (a file that passes its checksum but was not written
/// by this version would otherwise panic on lookup).
pub(crate) fn check_entries(places: &Places, entries: &[Entry]) -> Result<(), String> {
    let in_range = |e: &Entry| {
        (e.key.segment as usize) < places.segments.strings.len()
            && (e.key.kind as usize) <= places.kinds.strings.len()
            && (e.name == NO_NAME || places.names.get(e.name).is_some())
    };
    let sorted = entries.windows(2).all(|w| w[0].key < w[1].key);
    match sorted && entries.iter().all(in_range) {
        true => Ok(()),
        false => Err("is not one this version of gen wrote (its entries do not add up)".to_string()),
    }
}

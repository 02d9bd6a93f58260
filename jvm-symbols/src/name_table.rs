//! The names of one perf map, each stored once: HotSpot writes the same name many times (every
//! `I2C/C2I adapters` blob, a method compiled at several tiers), so the index keeps a name id
//! per entry and one text buffer. Memory is paid from the index's [`Reservation`] before it is
//! allocated.

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::pool::{reserve_text, reserve_within, Reservation};

#[derive(Debug, Default)]
pub(crate) struct NameTable {
    /// Every distinct name, back to back.
    text: String,
    /// End of each name in `text`: name `i` is `text[ends[i - 1]..ends[i]]`.
    ends: Vec<u32>,
    /// Name ids by the hash of their text, and each name's hash (so growing the table
    /// rehashes no text); only while the map is being read.
    dedup: HashTable<u32>,
    hashes: Vec<u64>,
    /// foldhash, seeded per process. Not a cryptographic hash: a target that found colliding
    /// names would only slow down the reading of its own map, which the load timeout bounds.
    hasher: DefaultHashBuilder,
}

impl NameTable {
    /// The id of `name` (invalid UTF-8 replaced), adding it if new. `None` when the
    /// reservation cannot pay for a new name.
    pub(crate) fn intern(&mut self, raw: &[u8], res: &mut Reservation) -> Option<u32> {
        let name = String::from_utf8_lossy(raw);
        let hash = self.hasher.hash_one(name.as_bytes());
        let (text, ends, hashes) = (&self.text, &self.ends, &self.hashes);
        // The full hash first: one memory access rules out nearly every other name.
        if let Some(&id) = self.dedup.find(hash, |&id| hashes[id as usize] == hash && name_of(text, ends, id) == name) {
            return Some(id);
        }
        let end = u32::try_from(self.text.len() + name.len()).ok()?;
        if !reserve_text(&mut self.text, name.len(), res)
            || !reserve_within(&mut self.ends, 1, res)
            || !reserve_within(&mut self.hashes, 1, res)
            || !self.reserve_dedup(res)
        {
            return None;
        }
        let id = self.ends.len() as u32;
        self.text.push_str(&name);
        self.ends.push(end);
        self.hashes.push(hash);
        let hashes = &self.hashes;
        self.dedup.insert_unique(hash, id, |&id| hashes[id as usize]);
        Some(id)
    }

    pub(crate) fn get(&self, id: u32) -> &str {
        name_of(&self.text, &self.ends, id)
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Reading is over: the dedup table goes, the buffers shrink to fit.
    pub(crate) fn finish(&mut self) {
        self.dedup = HashTable::new();
        self.hashes = Vec::new();
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
    }

    /// Heap bytes held (capacities, not lengths).
    pub(crate) fn bytes(&self) -> u64 {
        (self.text.capacity() + self.ends.capacity() * 4 + self.hashes.capacity() * 8 + self.dedup.allocation_size())
            as u64
    }

    /// A full table doubles: pay for the new one while the old one is still held.
    fn reserve_dedup(&mut self, res: &mut Reservation) -> bool {
        if self.dedup.len() < self.dedup.capacity() {
            return true;
        }
        let next = (self.dedup.capacity() * 2).max(64);
        let estimate = table_bytes(next);
        if !res.grow(estimate) {
            return false;
        }
        let hashes = &self.hashes;
        self.dedup.reserve(next - self.dedup.len(), |&id| hashes[id as usize]);
        // Should hashbrown's layout ever differ from the estimate, what it took is still paid.
        let actual = self.dedup.allocation_size() as u64;
        actual <= estimate || res.grow(actual - estimate)
    }
}

/// hashbrown's allocation for `capacity` u32 items: buckets (a power of two, at most 7/8
/// full) of 4 bytes, padded to 16, then a control byte per bucket and 16 more.
fn table_bytes(capacity: usize) -> u64 {
    let buckets = (capacity * 8 / 7).next_power_of_two() as u64;
    (buckets * 4).next_multiple_of(16) + buckets + 16
}

fn name_of<'a>(text: &'a str, ends: &[u32], id: u32) -> &'a str {
    let id = id as usize;
    let start = if id == 0 { 0 } else { ends[id - 1] as usize };
    &text[start..ends[id] as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_names_share_one_id_and_bytes_are_paid_for() {
        let mut res = Reservation::unlimited();
        let mut names = NameTable::default();
        let a = names.intern(b"I2C/C2I adapters", &mut res).unwrap();
        let b = names.intern(b"void a.B.c()", &mut res).unwrap();
        assert_eq!(names.intern(b"I2C/C2I adapters", &mut res), Some(a));
        assert_eq!(names.intern(b"bad\xffname", &mut res), Some(2));
        assert_eq!((names.get(a), names.get(b), names.get(2)), ("I2C/C2I adapters", "void a.B.c()", "bad\u{fffd}name"));
        assert_eq!(names.len(), 3);
        assert!(res.held_bytes() >= names.bytes(), "{} < {}", res.held_bytes(), names.bytes());
        names.finish();
        assert_eq!(names.get(b), "void a.B.c()");
    }

    #[test]
    fn a_refused_reservation_adds_nothing() {
        let mut res = Reservation::capped(10_000);
        let mut names = NameTable::default();
        let mut added = 0;
        while names.intern(format!("void com.acme.Klass.method{added}()").as_bytes(), &mut res).is_some() {
            added += 1;
        }
        assert!(added > 10, "{added}");
        assert_eq!(names.len(), added);
        assert!(res.held_bytes() <= 10_000);
        assert!(names.bytes() <= res.held_bytes(), "{} > {}", names.bytes(), res.held_bytes());
        // A name already there costs nothing.
        assert_eq!(names.intern(b"void com.acme.Klass.method0()", &mut res), Some(0));
    }
}

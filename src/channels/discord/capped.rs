//! A map that holds at most so many entries: past its bound the entry put in longest ago is
//! forgotten. Unlike [`crate::channels::recent::Recent`] an entry can be taken out again,
//! which tern needs for threads deleted and questions settled.

use std::collections::{BTreeMap, HashMap};

/// At most `bound` entries, the oldest forgotten first.
#[derive(Debug)]
pub struct Capped<V> {
    /// Each key's value and when it was put in.
    entries: HashMap<String, (u64, V)>,
    /// The keys by when they were put in, oldest first.
    order: BTreeMap<u64, String>,
    /// When the next entry is put in.
    clock: u64,
    bound: usize,
}

impl<V> Capped<V> {
    /// Holds at most `bound` entries (at least one).
    pub fn new(bound: usize) -> Self {
        Self {
            entries: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
            bound: bound.max(1),
        }
    }

    /// Puts `value` in under `key`, as the newest entry; the oldest goes when the map is full.
    pub fn insert(&mut self, key: &str, value: V) {
        self.remove(key);
        while self.entries.len() >= self.bound {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
        let at = self.clock;
        self.clock += 1;
        self.order.insert(at, key.to_owned());
        self.entries.insert(key.to_owned(), (at, value));
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        self.entries.get(key).map(|(_, value)| value)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// Takes `key` out; its value, if it was there.
    pub fn remove(&mut self, key: &str) -> Option<V> {
        let (at, value) = self.entries.remove(key)?;
        self.order.remove(&at);
        Some(value)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_its_bound_the_oldest_entry_goes() {
        let mut capped = Capped::new(3);
        for (i, key) in ["a", "b", "c", "d"].into_iter().enumerate() {
            capped.insert(key, i);
        }
        assert_eq!(capped.len(), 3);
        assert!(!capped.contains("a"));
        assert_eq!(capped.get("d"), Some(&3));
        // Put in again, an entry is the newest: "b" is the oldest now, not "c".
        capped.insert("c", 9);
        capped.insert("e", 4);
        assert!(!capped.contains("b"));
        assert_eq!(capped.get("c"), Some(&9));
        // Taken out, an entry leaves room and is not forgotten twice.
        assert_eq!(capped.remove("d"), Some(3));
        assert_eq!(capped.remove("d"), None);
        capped.insert("f", 5);
        assert_eq!(capped.len(), 3);
        assert!(capped.contains("c") && capped.contains("e") && capped.contains("f"));
        for i in 0..10_000 {
            capped.insert(&i.to_string(), i);
        }
        assert_eq!(capped.len(), 3);
        assert_eq!(capped.order.len(), 3, "no stale order is left behind");
    }
}

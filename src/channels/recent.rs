//! A bounded memory of strings seen lately: post ids already taken (a reconnect may replay
//! them) and threads tern talks in. The oldest are forgotten past the bound.

use std::collections::{HashSet, VecDeque};

/// The latest `bound` strings remembered.
#[derive(Debug)]
pub struct Recent {
    set: HashSet<String>,
    order: VecDeque<String>,
    bound: usize,
}

impl Recent {
    /// Remembers at most `bound` strings.
    pub fn new(bound: usize) -> Self {
        Self {
            set: HashSet::new(),
            order: VecDeque::new(),
            bound: bound.max(1),
        }
    }

    /// Remembers `item`; false when it was remembered already.
    pub fn insert(&mut self, item: &str) -> bool {
        if self.set.contains(item) {
            return false;
        }
        while self.order.len() >= self.bound {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        self.set.insert(item.to_owned());
        self.order.push_back(item.to_owned());
        true
    }

    /// Whether `item` is remembered.
    pub fn contains(&self, item: &str) -> bool {
        self.set.contains(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_item_counts_once_until_forgotten() {
        let mut recent = Recent::new(2);
        assert!(recent.insert("a"));
        assert!(!recent.insert("a"));
        assert!(recent.insert("b"));
        assert!(recent.insert("c"));
        assert!(!recent.contains("a"));
        assert!(recent.contains("b") && recent.contains("c"));
        assert!(recent.insert("a"));
    }
}

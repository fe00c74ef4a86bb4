//! The progress thread's timer queue: the next deadline of every connection in a binary
//! heap, so that neither sleeping nor firing timers visits connections that did nothing.
//!
//! A connection's deadline can only move when the core touches it (services it, installs
//! it, fires its timer): the core marks it then, and the queue asks for its deadline again
//! before it is next consulted. Entries are replaced lazily: the heap may hold old
//! deadlines of a connection, and only the one recorded in `at` counts.

use crate::Instant;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use mio::Token;

/// Deadlines keyed by connection token.
#[derive(Debug, Default)]
pub(crate) struct TimerQueue {
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
    /// The current deadline of each connection that has one.
    at: HashMap<Token, Instant>,
    /// Connections touched since their deadline was last asked for.
    dirty: HashSet<Token>,
}

impl TimerQueue {
    /// `t`'s deadline may have moved: ask for it again before the queue is next consulted.
    pub(crate) fn mark(&mut self, t: Token) {
        self.dirty.insert(t);
    }

    /// Whether some connection's deadline must be asked for again.
    pub(crate) fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// The connections to ask for their deadline (the marked set is emptied).
    pub(crate) fn take_dirty(&mut self) -> Vec<Token> {
        self.dirty.drain().collect()
    }

    /// Records `t`'s deadline (`None`: it has no timer running).
    pub(crate) fn set(&mut self, t: Token, deadline: Option<Instant>) {
        match deadline {
            Some(d) => {
                if self.at.insert(t, d) != Some(d) {
                    self.heap.push(Reverse((d, t.0)));
                }
            }
            None => {
                self.at.remove(&t);
            }
        }
        self.compact();
    }

    /// `t` is gone: its deadline no longer counts.
    pub(crate) fn forget(&mut self, t: Token) {
        self.at.remove(&t);
        self.dirty.remove(&t);
        self.compact();
    }

    /// Drops replaced entries off the top of the heap; rebuilds the heap when replaced
    /// entries outnumber the live ones (a busy connection re-arming its timer on every
    /// pass must not grow it without bound).
    fn compact(&mut self) {
        while let Some(Reverse((d, t))) = self.heap.peek()
            && self.at.get(&Token(*t)) != Some(d)
        {
            self.heap.pop();
        }
        if self.heap.len() > 2 * self.at.len() + 64 {
            self.heap = self.at.iter().map(|(t, d)| Reverse((*d, t.0))).collect();
        }
    }

    /// The earliest deadline recorded.
    pub(crate) fn earliest(&self) -> Option<Instant> {
        // `compact` keeps a live entry on top.
        self.heap.peek().map(|Reverse((d, _))| *d)
    }

    /// Removes and returns every connection whose deadline is at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Vec<Token> {
        let mut due = Vec::new();
        while let Some(&Reverse((d, t))) = self.heap.peek() {
            if d > now {
                break;
            }
            self.heap.pop();
            let t = Token(t);
            if self.at.get(&t) == Some(&d) {
                self.at.remove(&t);
                due.push(t);
            }
        }
        self.compact();
        due
    }

    /// How many connections have a deadline recorded.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.at.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    #[test]
    fn earliest_is_the_smallest_live_deadline() {
        let mut q = TimerQueue::default();
        assert_eq!(q.earliest(), None);
        q.set(Token(1), Some(ms(30)));
        q.set(Token(2), Some(ms(10)));
        q.set(Token(3), Some(ms(20)));
        assert_eq!(q.earliest(), Some(ms(10)));
        // Token 2 re-arms later: its old entry no longer counts.
        q.set(Token(2), Some(ms(50)));
        assert_eq!(q.earliest(), Some(ms(20)));
        // Token 3 stops its timer.
        q.set(Token(3), None);
        assert_eq!(q.earliest(), Some(ms(30)));
        q.forget(Token(1));
        q.set(Token(4), None);
        assert_eq!(q.earliest(), Some(ms(50)));
    }

    #[test]
    fn pop_due_returns_each_due_connection_once() {
        let mut q = TimerQueue::default();
        q.set(Token(1), Some(ms(5)));
        q.set(Token(2), Some(ms(15)));
        q.set(Token(1), Some(ms(7))); // replaced: one entry for token 1 is live
        q.set(Token(3), Some(ms(7)));
        let mut due = q.pop_due(ms(10));
        due.sort();
        assert_eq!(due, vec![Token(1), Token(3)]);
        assert_eq!(q.pop_due(ms(10)), Vec::<Token>::new());
        assert_eq!(q.earliest(), Some(ms(15)));
        assert_eq!(q.len(), 1);
        // A forgotten connection never comes due.
        q.forget(Token(2));
        assert_eq!(q.pop_due(ms(100)), Vec::<Token>::new());
        assert_eq!(q.earliest(), None);
    }

    #[test]
    fn rearming_on_every_pass_keeps_the_heap_bounded() {
        let mut q = TimerQueue::default();
        for i in 0..10_000u64 {
            q.set(Token(7), Some(ms(1_000 + (i % 97))));
            q.set(Token(8), Some(ms(2_000 + i)));
        }
        assert!(q.heap.len() <= 2 * q.at.len() + 64 + 1, "{}", q.heap.len());
        assert_eq!(q.earliest(), Some(ms(1_000 + (9_999 % 97))));
    }

    #[test]
    fn marks_are_taken_once() {
        let mut q = TimerQueue::default();
        q.mark(Token(1));
        q.mark(Token(1));
        q.mark(Token(2));
        assert!(q.has_dirty());
        let mut d = q.take_dirty();
        d.sort();
        assert_eq!(d, vec![Token(1), Token(2)]);
        assert!(!q.has_dirty());
        q.mark(Token(3));
        q.forget(Token(3));
        assert!(!q.has_dirty());
    }
}

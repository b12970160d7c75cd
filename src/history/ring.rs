//! The bounded memory of transitions: a ring bounded by entries and bytes (the oldest go
//! first), numbered so a reader can page and resume, and the filters queries use.

use super::Transition;
use std::collections::VecDeque;
use std::sync::Arc;

/// Which transitions a query wants; empty fields match everything.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// Matches a path and its descendants (`.spec.template`), as kube prints paths.
    pub path_prefix: String,
    /// A manager that lost or gained the field.
    pub manager: String,
    /// Unix seconds, inclusive; 0: unbounded.
    pub since: i64,
    pub until: i64,
}

impl Filter {
    pub fn matches(&self, t: &Transition) -> bool {
        let prefix = |p: &str| {
            p.strip_prefix(self.path_prefix.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        };
        (self.kind.is_empty() || *self.kind == *t.kind)
            && (self.namespace.is_empty() || *self.namespace == *t.namespace)
            && (self.name.is_empty() || *self.name == *t.name)
            && (self.path_prefix.is_empty() || prefix(&t.path))
            && (self.manager.is_empty()
                || t.from
                    .iter()
                    .chain(t.to.iter())
                    .any(|m| **m == *self.manager))
            && (self.since == 0 || t.observed >= self.since)
            && (self.until == 0 || t.observed <= self.until)
    }
}

/// The ring.
#[derive(Debug)]
pub struct Ring {
    entries: VecDeque<(Arc<Transition>, usize)>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
    next_seq: u64,
    /// Transitions pushed out by the bounds.
    pub evicted: u64,
}

impl Ring {
    pub fn new(max_entries: usize, max_bytes: usize) -> Ring {
        Ring {
            entries: VecDeque::new(),
            bytes: 0,
            max_entries: max_entries.max(1),
            max_bytes,
            next_seq: 1,
            evicted: 0,
        }
    }

    /// Adds `t` (numbered here unless it has a number already, from a sink) of about `size`
    /// bytes; the oldest go while a bound is passed.
    pub fn push(&mut self, mut t: Transition, size: usize) -> Arc<Transition> {
        if t.seq == 0 {
            t.seq = self.next_seq;
        }
        self.next_seq = self.next_seq.max(t.seq + 1);
        let t = Arc::new(t);
        self.entries.push_back((t.clone(), size));
        self.bytes += size;
        while self.entries.len() > self.max_entries
            || (self.bytes > self.max_bytes && self.entries.len() > 1)
        {
            if let Some((_, s)) = self.entries.pop_front() {
                self.bytes -= s;
                self.evicted += 1;
            }
        }
        t
    }

    /// Transitions after `after` (a sequence number; 0: from the oldest kept) that `f`
    /// matches, at most `limit`; and the sequence number to resume after when more may match.
    pub fn query(
        &self,
        f: &Filter,
        after: u64,
        limit: usize,
    ) -> (Vec<Arc<Transition>>, Option<u64>) {
        let start = self.entries.partition_point(|(t, _)| t.seq <= after);
        let mut out = Vec::new();
        for (t, _) in self.entries.range(start..) {
            if !f.matches(t) {
                continue;
            }
            if out.len() == limit {
                let last = out.last().map_or(after, |t: &Arc<Transition>| t.seq);
                return (out, Some(last));
            }
            out.push(t.clone());
        }
        (out, None)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The oldest sequence number kept (0 when empty).
    pub fn oldest(&self) -> u64 {
        self.entries.front().map_or(0, |(t, _)| t.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Change;

    fn t(name: &str, path: &str, from: &str, to: &str, observed: i64) -> Transition {
        Transition {
            seq: 0,
            cluster: "c".into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: name.into(),
            path: path.into(),
            change: Change::TakenOver,
            from: vec![from.into()].into(),
            to: vec![to.into()].into(),
            operation: "Apply".into(),
            subresource: "".into(),
            resource_version: "1".into(),
            time: None,
            observed,
            old_value: None,
            new_value: None,
            fields: 0,
        }
    }

    #[test]
    fn bounded_by_entries_and_bytes_oldest_first() {
        let mut r = Ring::new(3, 1000);
        for i in 0..5 {
            r.push(t("a", ".data.k", "x", "y", i), 100);
        }
        assert_eq!((r.len(), r.oldest(), r.evicted), (3, 3, 2));
        let mut r = Ring::new(100, 250);
        for i in 0..5 {
            r.push(t("a", ".data.k", "x", "y", i), 100);
        }
        assert_eq!((r.len(), r.bytes(), r.oldest()), (2, 200, 4));
    }

    #[test]
    fn queries_filter_and_page() {
        let mut r = Ring::new(100, 1 << 20);
        r.push(t("a", ".data.k", "helm", "edit", 10), 1);
        r.push(t("a", ".data.kk", "helm", "edit", 20), 1);
        r.push(t("b", ".data.k", "edit", "helm", 30), 1);
        r.push(t("a", ".metadata.labels.x", "ci", "helm", 40), 1);
        let f = Filter {
            path_prefix: ".data.k".into(),
            ..Filter::default()
        };
        let (page, _) = r.query(&f, 0, 10);
        // `.data.kk` is no descendant of `.data.k`.
        assert_eq!(page.iter().map(|t| t.seq).collect::<Vec<_>>(), [1, 3]);
        let f = Filter {
            manager: "helm".into(),
            since: 15,
            name: "a".into(),
            ..Filter::default()
        };
        let (page, next) = r.query(&f, 0, 1);
        assert_eq!((page[0].seq, next), (2, Some(2)));
        let (page, next) = r.query(&f, 2, 1);
        assert_eq!((page[0].seq, next), (4, None));
        let f = Filter {
            until: 20,
            ..Filter::default()
        };
        assert_eq!(r.query(&f, 0, 10).0.len(), 2);
    }
}

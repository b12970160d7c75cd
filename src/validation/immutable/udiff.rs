//! The unified diff some refusals carry (`diff.Diff` of apimachinery: the two values'
//! `json.MarshalIndent` compared line by line by go-difflib, three lines of context, no file
//! headers). go-difflib is a port of Python's `difflib`; this is the same algorithm
//! (`SequenceMatcher`: longest matching blocks, popular lines of long texts ignored as anchors,
//! opcodes grouped with their context), so hunks split where the server's split.

use foldhash::HashMap;

/// The unified diff of `a` and `b` as `diff.Diff` prints it ("" when they are equal).
pub fn unified(a: &str, b: &str) -> String {
    let (a, b) = (split_lines(a), split_lines(b));
    let m = Matcher::new(&a, &b);
    let mut out = String::new();
    for group in m.grouped(3) {
        let (first, last) = (group[0], group[group.len() - 1]);
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(first.1, last.2),
            range(first.3, last.4)
        ));
        for (tag, i1, i2, j1, j2) in group {
            if tag == Tag::Equal {
                for l in &a[i1..i2] {
                    out.push(' ');
                    out.push_str(l);
                }
            }
            if matches!(tag, Tag::Replace | Tag::Delete) {
                for l in &a[i1..i2] {
                    out.push('-');
                    out.push_str(l);
                }
            }
            if matches!(tag, Tag::Replace | Tag::Insert) {
                for l in &b[j1..j2] {
                    out.push('+');
                    out.push_str(l);
                }
            }
        }
    }
    out
}

/// Lines with their newlines; the last one gets one (go-difflib's `SplitLines`).
fn split_lines(s: &str) -> Vec<String> {
    let mut lines: Vec<String> = s.split_inclusive('\n').map(String::from).collect();
    match lines.last_mut() {
        Some(l) if !l.ends_with('\n') => l.push('\n'),
        Some(_) => lines.push("\n".into()),
        None => lines.push("\n".into()),
    }
    lines
}

fn range(start: usize, stop: usize) -> String {
    let (mut beginning, length) = (start + 1, stop - start);
    if length == 1 {
        return beginning.to_string();
    }
    if length == 0 {
        beginning -= 1;
    }
    format!("{beginning},{length}")
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Tag {
    Replace,
    Delete,
    Insert,
    Equal,
}

type Op = (Tag, usize, usize, usize, usize);

struct Matcher<'a> {
    a: &'a [String],
    b: &'a [String],
    /// Where each line of `b` is, popular lines left out.
    b2j: HashMap<&'a str, Vec<usize>>,
}

impl<'a> Matcher<'a> {
    fn new(a: &'a [String], b: &'a [String]) -> Matcher<'a> {
        let mut b2j: HashMap<&str, Vec<usize>> = HashMap::default();
        for (j, l) in b.iter().enumerate() {
            b2j.entry(l.as_str()).or_default().push(j);
        }
        // Autojunk: in a text of 200 lines or more, a line found more often than 1% of them
        // (plus one) anchors no match.
        let n = b.len();
        if n >= 200 {
            let popular = n / 100 + 1;
            b2j.retain(|_, js| js.len() <= popular);
        }
        Matcher { a, b, b2j }
    }

    fn longest(&self, alo: usize, ahi: usize, blo: usize, bhi: usize) -> (usize, usize, usize) {
        let (mut besti, mut bestj, mut bestsize) = (alo, blo, 0);
        let mut j2len: HashMap<usize, usize> = HashMap::default();
        for i in alo..ahi {
            let mut next: HashMap<usize, usize> = HashMap::default();
            if let Some(js) = self.b2j.get(self.a[i].as_str()) {
                for &j in js {
                    if j < blo {
                        continue;
                    }
                    if j >= bhi {
                        break;
                    }
                    let k = j
                        .checked_sub(1)
                        .and_then(|p| j2len.get(&p))
                        .copied()
                        .unwrap_or(0)
                        + 1;
                    next.insert(j, k);
                    if k > bestsize {
                        (besti, bestj, bestsize) = (i + 1 - k, j + 1 - k, k);
                    }
                }
            }
            j2len = next;
        }
        // Grown over equal lines on both sides (popular ones included).
        while besti > alo && bestj > blo && self.a[besti - 1] == self.b[bestj - 1] {
            besti -= 1;
            bestj -= 1;
            bestsize += 1;
        }
        while besti + bestsize < ahi
            && bestj + bestsize < bhi
            && self.a[besti + bestsize] == self.b[bestj + bestsize]
        {
            bestsize += 1;
        }
        (besti, bestj, bestsize)
    }

    fn matching_blocks(&self) -> Vec<(usize, usize, usize)> {
        let (la, lb) = (self.a.len(), self.b.len());
        let mut queue = vec![(0, la, 0, lb)];
        let mut blocks = Vec::new();
        while let Some((alo, ahi, blo, bhi)) = queue.pop() {
            let (i, j, k) = self.longest(alo, ahi, blo, bhi);
            if k > 0 {
                blocks.push((i, j, k));
                if alo < i && blo < j {
                    queue.push((alo, i, blo, j));
                }
                if i + k < ahi && j + k < bhi {
                    queue.push((i + k, ahi, j + k, bhi));
                }
            }
        }
        blocks.sort();
        // Adjacent blocks collapsed.
        let mut out: Vec<(usize, usize, usize)> = Vec::new();
        for (i, j, k) in blocks {
            match out.last_mut() {
                Some((i1, j1, k1)) if *i1 + *k1 == i && *j1 + *k1 == j => *k1 += k,
                _ => out.push((i, j, k)),
            }
        }
        out.push((la, lb, 0));
        out
    }

    fn opcodes(&self) -> Vec<Op> {
        let (mut i, mut j) = (0, 0);
        let mut ops = Vec::new();
        for (ai, bj, size) in self.matching_blocks() {
            let tag = match (i < ai, j < bj) {
                (true, true) => Some(Tag::Replace),
                (true, false) => Some(Tag::Delete),
                (false, true) => Some(Tag::Insert),
                (false, false) => None,
            };
            if let Some(t) = tag {
                ops.push((t, i, ai, j, bj));
            }
            (i, j) = (ai + size, bj + size);
            if size > 0 {
                ops.push((Tag::Equal, ai, i, bj, j));
            }
        }
        ops
    }

    fn grouped(&self, n: usize) -> Vec<Vec<Op>> {
        let mut codes = self.opcodes();
        if codes.is_empty() {
            codes.push((Tag::Equal, 0, 1, 0, 1));
        }
        if let Some(c) = codes.first_mut()
            && c.0 == Tag::Equal
        {
            *c = (
                c.0,
                c.1.max(c.2.saturating_sub(n)),
                c.2,
                c.3.max(c.4.saturating_sub(n)),
                c.4,
            );
        }
        if let Some(c) = codes.last_mut()
            && c.0 == Tag::Equal
        {
            *c = (c.0, c.1, c.2.min(c.1 + n), c.3, c.4.min(c.3 + n));
        }
        let mut groups = Vec::new();
        let mut group = Vec::new();
        for (tag, mut i1, i2, mut j1, j2) in codes {
            if tag == Tag::Equal && i2 - i1 > 2 * n {
                group.push((tag, i1, i2.min(i1 + n), j1, j2.min(j1 + n)));
                groups.push(std::mem::take(&mut group));
                i1 = i1.max(i2.saturating_sub(n));
                j1 = j1.max(j2.saturating_sub(n));
            }
            group.push((tag, i1, i2, j1, j2));
        }
        let only_equal = group.len() == 1 && group[0].0 == Tag::Equal;
        if !group.is_empty() && !only_equal {
            groups.push(group);
        }
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::unified;

    #[test]
    fn hunks_as_go_difflib_prints_them() {
        let a = "{\n \"a\": 1,\n \"b\": 2,\n \"c\": 3,\n \"d\": 4,\n \"e\": 5,\n \"f\": 6,\n \"g\": 7,\n \"h\": 8,\n \"i\": 9,\n \"j\": 10\n}";
        let b = a
            .replace("\"b\": 2", "\"b\": 20")
            .replace("\"j\": 10", "\"j\": 11");
        // Context lines keep their leading space after the diff's own.
        assert_eq!(
            unified(a, &b),
            "@@ -1,6 +1,6 @@\n {\n  \"a\": 1,\n- \"b\": 2,\n+ \"b\": 20,\n  \"c\": 3,\n  \"d\": 4,\n  \"e\": 5,\n@@ -8,5 +8,5 @@\n  \"g\": 7,\n  \"h\": 8,\n  \"i\": 9,\n- \"j\": 10\n+ \"j\": 11\n }\n"
        );
        assert_eq!(unified(a, a), "");
        assert_eq!(unified("x", "y"), "@@ -1 +1 @@\n-x\n+y\n");
    }
}

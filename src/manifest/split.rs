//! Where the documents of a YAML stream begin and end, found by scanning lines, before any of
//! them is parsed: so each can be measured against its limit and counted, and parsed apart.
//!
//! A line that starts with `---` (followed by nothing, a space or a tab) starts a document; a
//! line that starts with `...` ends one. In YAML these markers end any scalar that would span
//! them (they are forbidden content), so the scan needs no parsing.

/// One part of the stream: bytes `start..end`, starting on 1-based line `line`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub start: usize,
    pub end: usize,
    pub line: u32,
}

fn marker(line: &[u8], m: &[u8; 3]) -> bool {
    line.starts_with(m) && matches!(line.get(3), None | Some(b' ' | b'\t' | b'\r' | b'\n'))
}

/// The parts of `text`, in order, covering it whole (a part may hold no document: only
/// comments, or an end marker).
#[cfg(test)]
pub fn chunks(text: &str) -> Vec<Chunk> {
    chunks_up_to(text, usize::MAX)
}

/// [`chunks`], stopping after `max + 1` parts (the caller refuses more than `max`: the rest of
/// a huge stream is not scanned).
pub fn chunks_up_to(text: &str, max: usize) -> Vec<Chunk> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut start_line = 1u32;
    let mut pos = 0usize;
    let mut line = 1u32;
    // Directives (`%YAML`) belong to the document the next `---` starts.
    let mut directives = false;
    while pos < b.len() {
        let end = memchr::memchr(b'\n', &b[pos..]).map_or(b.len(), |i| pos + i + 1);
        let l = &b[pos..end];
        if l.first() == Some(&b'%') {
            directives = true;
        } else if marker(l, b"---") && directives {
            directives = false;
        } else if marker(l, b"---") && pos > start {
            if out.len() > max {
                return out;
            }
            out.push(Chunk {
                start,
                end: pos,
                line: start_line,
            });
            start = pos;
            start_line = line;
        } else if marker(l, b"...") {
            out.push(Chunk {
                start,
                end,
                line: start_line,
            });
            start = end;
            start_line = line + 1;
        }
        pos = end;
        line += 1;
    }
    if start < b.len() {
        out.push(Chunk {
            start,
            end: b.len(),
            line: start_line,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(text: &str) -> Vec<(&str, u32)> {
        chunks(text)
            .into_iter()
            .map(|c| (&text[c.start..c.end], c.line))
            .collect()
    }

    #[test]
    fn documents_split_at_markers_only() {
        assert_eq!(
            parts("a: 1\n---\nb: |\n  ---x\n  c\n--- \nc: 3"),
            [
                ("a: 1\n", 1),
                ("---\nb: |\n  ---x\n  c\n", 2),
                ("--- \nc: 3", 6)
            ]
        );
        assert_eq!(parts("---\na: 1\n"), [("---\na: 1\n", 1)]);
        assert_eq!(
            parts("a: 1\n...\n# c\n---\nb: 2\n"),
            [("a: 1\n...\n", 1), ("# c\n", 3), ("---\nb: 2\n", 4)]
        );
        assert_eq!(parts("----\na: ---\n"), [("----\na: ---\n", 1)]);
        assert_eq!(
            parts("a: 1\n...\n%YAML 1.1\n---\nb: 2\n"),
            [("a: 1\n...\n", 1), ("%YAML 1.1\n---\nb: 2\n", 3)]
        );
        assert!(parts("").is_empty());
    }
}

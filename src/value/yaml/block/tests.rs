//! The block reader held to the event parser.

use super::super::parse_events;
use super::*;

fn opts() -> YamlOptions {
    YamlOptions::default()
}

/// Read by the block reader, and the same as the event parser's documents.
fn same(src: &str) -> Vec<YamlDoc> {
    let docs = read(src, &opts()).unwrap_or_else(|| panic!("declined: {src:?}"));
    let events = parse_events(src, &opts()).unwrap();
    assert_eq!(docs, events, "{src:?}");
    docs
}

/// Declined, or (if read) the same as the event parser's documents.
fn agrees(src: &str) -> bool {
    match read(src, &opts()) {
        None => false,
        Some(docs) => {
            let events = parse_events(src, &opts());
            assert!(
                events.as_ref().is_ok_and(|e| *e == docs),
                "{src:?}:\n{docs:?}\n{events:?}"
            );
            true
        }
    }
}

#[test]
fn reads_what_manifests_hold_as_the_event_parser_does() {
    for src in [
        "a: 1\n",
        "a: 1",
        "---\na: 1\n---\nb: [x, 'y', \"z\"]\n",
        "# Source: chart/templates/x.yaml\n---\n# c\napiVersion: v1 # trailing\nkind: ConfigMap\n",
        "spec:\n  containers:\n  - name: app\n    image: r/a:1.0\n    args: [\"--port=8080\", --v=2]\n    ports:\n    - {name: http, containerPort: 8080}\n  - name: b\n",
        "a:\n  - x\n  -   y: 1\n      z: 2\n",
        "data:\n  script: |\n    #!/bin/sh\n    echo \"a: b\" # not a comment\n\n      indented\n\n  other: |-\n    x\n\n\nnext: 1\n",
        "k: |\n\n  leading blank\n",
        "list:\n- |\n  one\n- two\n",
        "v: yes\nw: 012\nx: 1.0\ny: ~\nz: 0x1F\nn: 1e3\nq: '012'\nk: 2024-01-01\n",
        "1: a\ntrue: b\n1.5: c\n",
        "s: \"tab\\there \\u00e9 \\\"q\\\" \\\\ \\x41\"\nt: 'it''s'\n",
        "url: http://example.com:8080/x\nimg: a:b#c\nweird: a :b\n",
        "e: {}\nf: []\ng: {a: {b: [1, {c: d}]}}\nh: {\"x\":\"y\", 'p': q}\n",
        "k: v\n\n\n# end\n",
        "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": []}\n",
        "- a\n- b\n",
        "ünï: cödé\n",
        "a: b\n  continued\n\n   after a blank # c\nd: e\n",
        "- one\n  two\n- three\n",
        "a: 'two\n  lines'\nb: \"x  \n\n   y\"\nk:{\"name\":\"app\"}: {}\n",
        "c: first\n  `Endpoints` [x] - y\n",
        "a:\n  # indented comment\n  b: 1 # c\n# c\nd: # c\n  - x # c\n",
        "m: {k0: 0, k1: 1, k2: 2, k3: 3, k4: 4, k5: 5, k6: 6, k7: 7, k8: 8, k9: 9, k10: 10, k11: 11, k12: 12, k13: 13, k14: 14, k15: 15, k16: 16, k17: 17}\n",
        "description: Spec is the spec, a very long line\n    wrapped by the emitter.\nz: 1\n",
    ] {
        same(src);
    }
}

#[test]
fn keeps_lines() {
    let docs = same("---\n# c\nb:\n  - x\n\n  - y\nc: |\n  t\n");
    assert_eq!(docs[0].line, 3);
    match &docs[0].lines {
        Lines::Map(3, entries) => {
            assert_eq!(entries[0].0, 3);
            assert_eq!(entries[1].0, 7);
            assert_eq!(entries[1].1.line(), 8);
            match &entries[0].1 {
                Lines::List(4, items) => assert_eq!(items[1].line(), 6),
                other => panic!("{other:?}"),
            }
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn declines_what_it_does_not_read_exactly() {
    for src in [
        "",
        "# only a comment\n",
        "a: &x 1\nb: *x\n",
        "a: !!str 1\n",
        "a: >\n  folded\n",
        "a: |+\n  kept\n\n",
        "a: |2\n   x\n",
        "a:\nb: 1\n",
        "a: 1\na: 2\n",
        "a:\tb\n",
        "a: b\r\n",
        "? complex\n: key\n",
        "a: [x,\n  y]\n",
        "a: .nan\n",
        "<<: {a: 1}\n",
        "a: b: c\n",
        "---\n---\na: 1\n",
        "a: 1\n...\n",
        "%YAML 1.1\n---\na: 1\n",
        "a: \"\\N\"\n",
        "- [a: b]\n",
        "a: x\u{85}y\n",
        "a: [-]\n",
        "a: [x, -]\n",
        "a: [x -]\n",
        "a: {k: -}\n",
        "m: {k0: 0, k1: 1, k2: 2, k3: 3, k4: 4, k5: 5, k6: 6, k7: 7, k8: 8, k9: 9, k10: 10, k11: 11, k12: 12, k13: 13, k14: 14, k15: 15, k16: 16, k5: 17}\n",
    ] {
        assert!(read(src, &opts()).is_none(), "read: {src:?}");
    }
}

#[test]
fn a_passed_deadline_is_left_to_the_event_parser() {
    let opts = YamlOptions {
        deadline: crate::deadline::Deadline::at(std::time::Instant::now()),
        ..YamlOptions::default()
    };
    assert!(read("a: 1\n", &opts).is_none());
    let long: String = (0..600).map(|i| format!("k{i}: [{i}, x]\n")).collect();
    assert!(read(&long, &opts).is_none());
    assert!(super::super::parse_documents(&long, &opts).is_err());
}

/// Every YAML file of the repository and thousands of mutations of them: whatever the block
/// reader reads, it reads as the event parser does.
#[test]
fn agrees_with_the_event_parser_on_the_repository_and_mutations() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut dirs = vec![root.join("examples"), root.join("tests")];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = p.to_string_lossy();
            if p.is_dir() {
                dirs.push(p);
            } else if [".yaml", ".yml", ".yaml.gz"]
                .iter()
                .any(|x| name.ends_with(x))
            {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut texts = Vec::new();
    for p in &files {
        let bytes = std::fs::read(p).unwrap();
        let text = if p.extension().is_some_and(|x| x == "gz") {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut s)
                .unwrap();
            s
        } else {
            String::from_utf8(bytes).unwrap()
        };
        texts.push(text);
    }
    // The documents, as the manifest reader hands them over.
    let docs: Vec<&str> = texts
        .iter()
        .flat_map(|t| {
            crate::manifest::split::chunks(t)
                .into_iter()
                .map(move |c| &t[c.start..c.end])
        })
        .filter(|d| {
            d.lines()
                .any(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("---"))
        })
        .collect();
    assert!(docs.len() >= 200, "{} YAML documents", docs.len());
    let read_whole = docs.iter().filter(|d| agrees(d)).count();
    // The real documents it declines are Helm templates not yet rendered and anchors.
    for d in &docs {
        if let Some((line, text)) = declined_at(d) {
            assert!(
                text.contains("{{") || text.contains(" &"),
                "declined at line {line} ({text:?}) of {:?}",
                &d[..d.len().min(80)]
            );
        }
    }
    // Most real documents take the fast way (the rest hold folded scalars, anchors, …).
    eprintln!("{read_whole} of {} documents read", docs.len());
    assert!(
        read_whole * 10 >= docs.len() * 7,
        "{read_whole} of {} read",
        docs.len()
    );
    for t in &texts {
        agrees(t);
    }

    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n.max(1) as u64) as usize
    };
    let inserts = [
        ":",
        ": ",
        "#",
        " #",
        "-",
        "- ",
        "'",
        "\"",
        "{",
        "}",
        "[",
        "]",
        ",",
        " ",
        "  ",
        "\n",
        "|",
        "|-",
        ">",
        "&a ",
        "*a",
        "!",
        "?",
        "\\",
        "---\n",
        "~",
        "0",
        "\u{e9}",
        "\n- ",
        "-]",
        "-,",
        " -}",
        "#c\n",
        "\n  # c\n",
    ];
    let (mut tried, mut read_mutants) = (0, 0);
    for t in docs.iter().filter(|t| t.len() <= 16 * 1024) {
        for _ in 0..40 {
            let mut m = t.to_string();
            for _ in 0..1 + rand(3) {
                let lines: Vec<&str> = m.split_inclusive('\n').collect();
                if lines.is_empty() {
                    break;
                }
                let i = rand(lines.len());
                let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                match rand(7) {
                    0 => {
                        out.remove(i);
                    }
                    1 => out.insert(i, lines[i].to_string()),
                    2 => out[i] = format!("{}{}", " ".repeat(1 + rand(2)), lines[i]),
                    3 => out[i] = lines[i].strip_prefix(' ').unwrap_or(lines[i]).to_string(),
                    // A line broken in two, the rest indented anew (continuations).
                    4 => {
                        let l = &lines[i];
                        let mut at = rand(l.len() + 1);
                        while !l.is_char_boundary(at) {
                            at -= 1;
                        }
                        out[i] = format!("{}\n{}{}", &l[..at], " ".repeat(rand(9)), &l[at..]);
                    }
                    // Two lines joined.
                    5 if i + 1 < lines.len() => {
                        out[i] = format!("{} {}", lines[i].trim_end_matches('\n'), lines[i + 1]);
                        out.remove(i + 1);
                    }
                    _ => {
                        let l = &lines[i];
                        let mut at = rand(l.len() + 1);
                        while !l.is_char_boundary(at) {
                            at -= 1;
                        }
                        let ins = inserts[rand(inserts.len())];
                        out[i] = format!("{}{}{}", &l[..at], ins, &l[at..]);
                    }
                }
                m = out.concat();
            }
            tried += 1;
            read_mutants += agrees(&m) as usize;
        }
    }
    eprintln!("{read_mutants} of {tried} mutants read");
    assert!(tried >= 8000, "{tried} mutants");
    // The mutants it reads are where the comparison bites.
    assert!(
        read_mutants * 8 >= tried,
        "{read_mutants} of {tried} mutants read"
    );
}

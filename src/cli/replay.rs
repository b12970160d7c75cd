//! `fieldguard replay`: JSONL cases in, JSONL results out (the oracle's formats).

use crate::replay::{Replayer, is_synthetic};
use clap::Args;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Case files (JSONL); standard input if none.
    pub files: Vec<std::path::PathBuf>,
    /// Evaluate each case's "expect" block; print a summary to stderr and exit 1 on failure.
    #[arg(long)]
    pub check: bool,
    /// Instead of running cases, print this many random cases (for differential testing;
    /// built with `--features generator`).
    #[cfg(feature = "generator")]
    #[arg(long, value_name = "N")]
    pub generate: Option<usize>,
    /// Seed for --generate.
    #[cfg(feature = "generator")]
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

pub fn run(args: ReplayArgs) -> ExitCode {
    #[cfg(feature = "generator")]
    if let Some(n) = args.generate {
        let stdout = std::io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        for line in crate::replay::generate::generate(args.seed, n) {
            if writeln!(out, "{line}").is_err() {
                return ExitCode::from(2);
            }
        }
        let _ = out.flush();
        return ExitCode::SUCCESS;
    }
    let mut inputs: Vec<(String, Box<dyn Read>)> = Vec::new();
    if args.files.is_empty() {
        inputs.push(("<stdin>".into(), Box::new(std::io::stdin())));
    }
    for p in &args.files {
        match std::fs::File::open(p) {
            Ok(f) => inputs.push((p.display().to_string(), Box::new(f))),
            Err(e) => {
                eprintln!("error: {}: {e}", p.display());
                return ExitCode::from(2);
            }
        }
    }
    let mut replayer = Replayer::new();
    let stdout = std::io::stdout();
    // Result lines run to tens of kilobytes: a larger buffer writes them in fewer calls.
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let (mut passed, mut failed) = (0usize, 0usize);
    let mut line = Vec::new();
    for (name, input) in inputs {
        let mut input = BufReader::with_capacity(1 << 16, input);
        for n in 0.. {
            match next_line(&mut input, &mut line) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    eprintln!("error: {name}:{}: {e}", n + 1);
                    return ExitCode::from(2);
                }
            }
            let trimmed = line.trim_ascii();
            if trimmed.is_empty() || trimmed.starts_with(b"#") || trimmed.starts_with(b"//") {
                continue;
            }
            let res = replayer.run_line(trimmed);
            let text = res.to_json(&is_synthetic);
            if out
                .write_all(text.as_bytes())
                .and_then(|()| out.write_all(b"\n"))
                .is_err()
            {
                return ExitCode::from(2);
            }
            if args.check {
                let label = if res.name.is_empty() {
                    "<unnamed>"
                } else {
                    &res.name
                };
                match &res.result.check {
                    None => eprintln!("SKIP {label} (no expect)"),
                    Some(c) if c.passed => {
                        passed += 1;
                        eprintln!("PASS {label}");
                    }
                    Some(c) => {
                        failed += 1;
                        eprintln!("FAIL {label}");
                        for f in &c.failures {
                            eprintln!("     {f}");
                        }
                    }
                }
            }
        }
    }
    let _ = out.flush();
    if args.check {
        eprintln!("{passed} passed, {failed} failed");
        if failed > 0 {
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// Reads the next line, without its `\n`, into `line` (its allocation reused from line to
/// line): false at the end of the input. Like `BufRead::split`, a last line without a newline
/// counts and an empty input has no line.
fn next_line(input: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<bool> {
    line.clear();
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(!line.is_empty());
        }
        match memchr::memchr(b'\n', buf) {
            Some(i) => {
                line.extend_from_slice(&buf[..i]);
                input.consume(i + 1);
                return Ok(true);
            }
            None => {
                let n = buf.len();
                line.extend_from_slice(buf);
                input.consume(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::next_line;
    use std::io::BufRead;

    /// Lines as `BufRead::split` gives them, whatever the buffer size.
    #[test]
    fn lines_split_like_the_standard_reader() {
        let inputs: [&[u8]; 6] = [b"", b"a", b"a\n", b"a\n\nb", b"\n\n", b"long line\nx\n\ny"];
        for input in inputs {
            for cap in [1, 2, 3, 64] {
                let want: Vec<Vec<u8>> = std::io::BufReader::with_capacity(cap, input)
                    .split(b'\n')
                    .map(Result::unwrap)
                    .collect();
                let mut reader = std::io::BufReader::with_capacity(cap, input);
                let (mut got, mut line) = (Vec::new(), Vec::new());
                while next_line(&mut reader, &mut line).unwrap() {
                    got.push(line.clone());
                }
                assert_eq!(got, want, "{input:?} capacity {cap}");
            }
        }
    }
}

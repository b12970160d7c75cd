//! Kubernetes' URL library, `library.URLs` (`k8s.io/apiserver/pkg/cel/library/urls.go`,
//! Kubernetes 1.36): `url(string)` (a `kubernetes.URL`), `isURL(string)`, and on a URL
//! `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath`, `getQuery`.
//!
//! A string is a URL when Go's `url.ParseRequestURI` takes it (an absolute URL or an
//! absolute path); `url()` then holds what `url.Parse` reads of it (the fragment split off).
//! Both are reproduced here from Go 1.26's `net/url` and `net/netip` (which reads a bracketed
//! IPv6 host), byte for byte, since an escape like `%ff` may unescape to bytes that are not
//! UTF-8. Two URLs are equal when they print (`URL.String()`) the same.
//!
//! Where Go's answer depends on what fieldguard cannot see — whether the server runs with
//! `GODEBUG=urlstrictcolons=0` (a `http`/`https` host with two colons), a query of more than
//! Go's 10000 parameters, a host or query that unescapes to bytes that are not UTF-8 (which
//! a CEL string here cannot hold) — the call is an error, so the rule is not evaluated.

use crate::value::gofmt::quote;
use cel::ExecutionError;
use cel::common::types::{CelBool, CelList, CelMap, CelMapKey, CelString, Kind, Type};
use cel::common::value::{StaticVal, Val};
use std::any::Any;
use std::collections::HashMap;

/// `kubernetes.URL`.
static URL_TYPE: Type = Type::simple_type(Kind::Opaque, "kubernetes.URL");

/// The longest string parsed: far past any URL, short enough to bound the work.
const MAX_LEN: usize = 1 << 20;

/// Go's default limit on a query's parameters (`urlmaxqueryparams`).
const MAX_QUERY_PARAMS: usize = 10_000;

/// Why a string is not read as a URL.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum UrlError {
    /// Go refuses it, with this message (`parse "...": ...`).
    Go(String),
    /// Go refuses it, but its message is not certain (this is one reading).
    GoVague(String),
    /// Whether Go takes it is not certain here.
    Unsure(String),
}

impl UrlError {
    fn message(&self) -> &str {
        match self {
            UrlError::Go(m) | UrlError::GoVague(m) | UrlError::Unsure(m) => m,
        }
    }

    /// Wraps the message as `url.Error` does (`<op> "<url>": <err>`).
    fn wrap(self, raw: &[u8]) -> UrlError {
        let w = |m: String| format!("parse {}: {m}", quote_bytes(raw));
        match self {
            UrlError::Go(m) => UrlError::Go(w(m)),
            UrlError::GoVague(m) => UrlError::GoVague(w(m)),
            UrlError::Unsure(m) => UrlError::Unsure(m),
        }
    }
}

impl From<String> for UrlError {
    fn from(m: String) -> Self {
        UrlError::Go(m)
    }
}

/// Go's `strconv.Quote` of bytes: invalid UTF-8 as `\x..`.
fn quote_bytes(b: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in b.utf8_chunks() {
        let q = quote(chunk.valid());
        out.push_str(&q[1..q.len() - 1]);
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out.push('"');
    out
}

fn find(s: &[u8], c: u8) -> Option<usize> {
    s.iter().position(|&b| b == c)
}

fn rfind(s: &[u8], c: u8) -> Option<usize> {
    s.iter().rposition(|&b| b == c)
}

/// `net/url`'s encoding modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
    Fragment,
}

/// `net/url.shouldEscape`.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone)
        && matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        )
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::QueryComponent => return true,
            Mode::Fragment => return false,
            Mode::Host | Mode::Zone => {}
        },
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

/// `net/url.unhex`, of a hex digit.
fn unhex(c: u8) -> u8 {
    9 * (c >> 6) + (c & 15)
}

fn escape_error(s: &[u8]) -> String {
    format!("invalid URL escape {}", quote_bytes(s))
}

/// `net/url.unescape`.
fn unescape(s: &[u8], mode: Mode) -> Result<Vec<u8>, String> {
    let mut n = 0;
    let mut has_plus = false;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                n += 1;
                if i + 2 >= s.len()
                    || !s[i + 1].is_ascii_hexdigit()
                    || !s[i + 2].is_ascii_hexdigit()
                {
                    let e = &s[i..s.len().min(i + 3)];
                    return Err(escape_error(e));
                }
                let e = &s[i..i + 3];
                if mode == Mode::Host && unhex(s[i + 1]) < 8 && e != b"%25" {
                    return Err(escape_error(e));
                }
                if mode == Mode::Zone {
                    let v = (unhex(s[i + 1]) << 4) | unhex(s[i + 2]);
                    if e != b"%25" && v != b' ' && should_escape(v, Mode::Host) {
                        return Err(escape_error(e));
                    }
                }
                i += 3;
            }
            b'+' => {
                has_plus = mode == Mode::QueryComponent;
                i += 1;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(format!(
                        "invalid character {} in host name",
                        quote_bytes(&s[i..i + 1])
                    ));
                }
                i += 1;
            }
        }
    }
    if n == 0 && !has_plus {
        return Ok(s.to_vec());
    }
    let plus = if mode == Mode::QueryComponent {
        b' '
    } else {
        b'+'
    };
    let mut t = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                t.push((unhex(s[i + 1]) << 4) | unhex(s[i + 2]));
                i += 2;
            }
            b'+' => t.push(plus),
            c => t.push(c),
        }
        i += 1;
    }
    Ok(t)
}

/// `net/url.escape`.
fn escape(s: &[u8], mode: Mode) -> Vec<u8> {
    const UPPERHEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut t = Vec::with_capacity(s.len());
    for &c in s {
        if c == b' ' && mode == Mode::QueryComponent {
            t.push(b'+');
        } else if should_escape(c, mode) {
            t.extend_from_slice(&[
                b'%',
                UPPERHEX[usize::from(c >> 4)],
                UPPERHEX[usize::from(c & 15)],
            ]);
        } else {
            t.push(c);
        }
    }
    t
}

/// `net/url.validEncoded`.
fn valid_encoded(s: &[u8], mode: Mode) -> bool {
    s.iter().all(|&c| {
        matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
                | b'['
                | b']'
                | b'%'
        ) || !should_escape(c, mode)
    })
}

/// `net/url.validOptionalPort`.
fn valid_optional_port(port: &[u8]) -> bool {
    match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    }
}

/// `net/url.validUserinfo` (a non-ASCII character is refused).
fn valid_userinfo(s: &[u8]) -> bool {
    s.iter().all(|&c| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b':'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b'%'
                    | b'@'
            )
    })
}

/// `netip.parseAddrError`'s text.
fn addr_error(input: &[u8], msg: &str, at: &[u8]) -> String {
    let mut m = format!("ParseAddr({}): {msg}", quote_bytes(input));
    if !at.is_empty() {
        m.push_str(&format!(" (at {})", quote_bytes(at)));
    }
    m
}

/// `netip.parseIPv4Fields` of `input[off..end]` (validity only).
fn parse_ipv4_fields(input: &[u8], off: usize, end: usize) -> Result<(), String> {
    let s = &input[off..end];
    let (mut val, mut pos, mut dig_len) = (0u32, 0, 0);
    for (i, &c) in s.iter().enumerate() {
        if c.is_ascii_digit() {
            if dig_len == 1 && val == 0 {
                return Err(addr_error(
                    input,
                    "IPv4 field has octet with leading zero",
                    b"",
                ));
            }
            val = val * 10 + u32::from(c - b'0');
            dig_len += 1;
            if val > 255 {
                return Err(addr_error(input, "IPv4 field has value >255", b""));
            }
        } else if c == b'.' {
            if i == 0 || i == s.len() - 1 || s[i - 1] == b'.' {
                return Err(addr_error(
                    input,
                    "IPv4 field must have at least one digit",
                    &s[i..],
                ));
            }
            if pos == 3 {
                return Err(addr_error(input, "IPv4 address too long", b""));
            }
            pos += 1;
            val = 0;
            dig_len = 0;
        } else {
            return Err(addr_error(input, "unexpected character", &s[i..]));
        }
    }
    if pos < 3 {
        return Err(addr_error(input, "IPv4 address too short", b""));
    }
    Ok(())
}

/// `netip.parseIPv6` (validity only).
fn parse_ipv6(input: &[u8]) -> Result<(), String> {
    let mut s = input;
    let mut zone: &[u8] = b"";
    if let Some(i) = find(s, b'%') {
        zone = &s[i + 1..];
        s = &s[..i];
        if zone.is_empty() {
            return Err(addr_error(input, "zone must be a non-empty string", b""));
        }
    }
    let mut ellipsis: Option<usize> = None;
    if s.starts_with(b"::") {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok(());
        }
    }
    let mut i = 0;
    while i < 16 {
        let mut off = 0;
        let mut acc: u32 = 0;
        while off < s.len() {
            let c = s[off];
            if !c.is_ascii_hexdigit() {
                break;
            }
            acc = (acc << 4) + u32::from(unhex(c));
            if off > 3 {
                return Err(addr_error(
                    input,
                    "each group must have 4 or less digits",
                    s,
                ));
            }
            if acc > 0xffff {
                return Err(addr_error(input, "IPv6 field has value >=2^16", s));
            }
            off += 1;
        }
        if off == 0 {
            return Err(addr_error(
                input,
                "each colon-separated field must have at least one digit",
                s,
            ));
        }
        if off < s.len() && s[off] == b'.' {
            if ellipsis.is_none() && i != 12 {
                return Err(addr_error(
                    input,
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    s,
                ));
            }
            if i + 4 > 16 {
                return Err(addr_error(
                    input,
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    s,
                ));
            }
            let end = input.len() - if zone.is_empty() { 0 } else { zone.len() + 1 };
            parse_ipv4_fields(input, end - s.len(), end)?;
            s = b"";
            i += 4;
            break;
        }
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if s[0] != b':' {
            return Err(addr_error(input, "unexpected character, want colon", s));
        } else if s.len() == 1 {
            return Err(addr_error(
                input,
                "colon must be followed by more characters",
                s,
            ));
        }
        s = &s[1..];
        if s[0] == b':' {
            if ellipsis.is_some() {
                return Err(addr_error(input, "multiple :: in address", s));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(addr_error(input, "trailing garbage after address", s));
    }
    if i < 16 {
        if ellipsis.is_none() {
            return Err(addr_error(input, "address string too short", b""));
        }
    } else if ellipsis.is_some() {
        return Err(addr_error(
            input,
            "the :: must expand to at least one field of zeros",
            b"",
        ));
    }
    Ok(())
}

/// `netip.ParseAddr`: `Ok(true)` for an IPv4 address, `Ok(false)` for IPv6.
fn parse_addr(s: &[u8]) -> Result<bool, String> {
    for &c in s {
        match c {
            b'.' => return parse_ipv4_fields(s, 0, s.len()).map(|()| true),
            b':' => return parse_ipv6(s).map(|()| false),
            b'%' => return Err(addr_error(s, "missing IPv6 address", b"")),
            _ => {}
        }
    }
    Err(addr_error(s, "unable to parse IP", b""))
}

/// `url.Userinfo`.
#[derive(Clone, Debug, Default, PartialEq)]
struct User {
    username: Vec<u8>,
    password: Option<Vec<u8>>,
}

/// Go's `url.URL`, its strings as bytes.
#[derive(Clone, Debug, Default, PartialEq)]
struct GoUrl {
    scheme: Vec<u8>,
    opaque: Vec<u8>,
    user: Option<User>,
    host: Vec<u8>,
    path: Vec<u8>,
    raw_path: Vec<u8>,
    raw_query: Vec<u8>,
    fragment: Vec<u8>,
    raw_fragment: Vec<u8>,
    force_query: bool,
    omit_host: bool,
}

/// `net/url.getScheme`: the scheme and the rest.
fn get_scheme(raw: &[u8]) -> Result<(&[u8], &[u8]), String> {
    for (i, &c) in raw.iter().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' => {
                if i == 0 {
                    return Ok((b"", raw));
                }
            }
            b':' => {
                if i == 0 {
                    return Err("missing protocol scheme".into());
                }
                return Ok((&raw[..i], &raw[i + 1..]));
            }
            _ => return Ok((b"", raw)),
        }
    }
    Ok((b"", raw))
}

/// `net/url.parseHost`.
fn parse_host(scheme: &[u8], host: &[u8]) -> Result<Vec<u8>, UrlError> {
    match rfind(host, b'[') {
        Some(i) if i > 0 => Err(UrlError::Go("invalid IP-literal".into())),
        Some(_) => {
            let Some(close) = rfind(host, b']') else {
                return Err(UrlError::Go("missing ']' in host".into()));
            };
            let colon_port = &host[close + 1..];
            if !valid_optional_port(colon_port) {
                return Err(UrlError::Go(format!(
                    "invalid port {} after host",
                    quote_bytes(colon_port)
                )));
            }
            let colon_port = unescape(colon_port, Mode::Host)?;
            let hostname = &host[1..close];
            let zone = hostname.windows(3).position(|w| w == b"%25");
            let unescaped = match zone {
                Some(z) => {
                    let mut h = unescape(&hostname[..z], Mode::Host)?;
                    h.extend(unescape(&hostname[z..], Mode::Zone)?);
                    h
                }
                None => unescape(hostname, Mode::Host)?,
            };
            match parse_addr(&unescaped) {
                Err(e) => return Err(UrlError::Go(format!("invalid host: {e}"))),
                Ok(true) => return Err(UrlError::Go("invalid IP-literal".into())),
                Ok(false) => {}
            }
            Ok([b"[", &unescaped[..], b"]", &colon_port[..]].concat())
        }
        None => {
            if let Some(first) = find(host, b':') {
                let last = rfind(host, b':').unwrap_or(first);
                let mut i = first;
                if last != first {
                    if scheme == b"http" || scheme == b"https" {
                        // Go 1.26 reads the port from the first colon, so the second makes it
                        // invalid — unless the server runs with `urlstrictcolons=0`, which
                        // reads it from the last, as for other schemes.
                        let lax_port = &host[last..];
                        if valid_optional_port(lax_port) {
                            return Err(UrlError::Unsure(format!(
                                "a {} host with two colons, which Go reads by its GODEBUG",
                                String::from_utf8_lossy(scheme)
                            )));
                        }
                        return Err(UrlError::GoVague(format!(
                            "invalid port {} after host",
                            quote_bytes(&host[first..])
                        )));
                    }
                    i = last;
                }
                let colon_port = &host[i..];
                if !valid_optional_port(colon_port) {
                    return Err(UrlError::Go(format!(
                        "invalid port {} after host",
                        quote_bytes(colon_port)
                    )));
                }
            }
            Ok(unescape(host, Mode::Host)?)
        }
    }
}

/// `net/url.parseAuthority`.
fn parse_authority(scheme: &[u8], authority: &[u8]) -> Result<(Option<User>, Vec<u8>), UrlError> {
    let at = rfind(authority, b'@');
    let host = parse_host(
        scheme,
        match at {
            None => authority,
            Some(i) => &authority[i + 1..],
        },
    )?;
    let Some(i) = at else {
        return Ok((None, host));
    };
    let userinfo = &authority[..i];
    if !valid_userinfo(userinfo) {
        return Err(UrlError::Go("net/url: invalid userinfo".into()));
    }
    let user = match find(userinfo, b':') {
        None => User {
            username: unescape(userinfo, Mode::UserPassword)?,
            password: None,
        },
        Some(c) => User {
            username: unescape(&userinfo[..c], Mode::UserPassword)?,
            password: Some(unescape(&userinfo[c + 1..], Mode::UserPassword)?),
        },
    };
    Ok((Some(user), host))
}

impl GoUrl {
    /// `net/url.parse`.
    fn parse(raw: &[u8], via_request: bool) -> Result<GoUrl, UrlError> {
        if raw.iter().any(|&b| b < b' ' || b == 0x7f) {
            return Err(UrlError::Go(
                "net/url: invalid control character in URL".into(),
            ));
        }
        if raw.is_empty() && via_request {
            return Err(UrlError::Go("empty url".into()));
        }
        let mut url = GoUrl::default();
        if raw == b"*" {
            url.path = b"*".to_vec();
            return Ok(url);
        }
        let (scheme, mut rest) = get_scheme(raw)?;
        url.scheme = scheme.to_ascii_lowercase();
        if rest.ends_with(b"?") && rest.iter().filter(|&&b| b == b'?').count() == 1 {
            url.force_query = true;
            rest = &rest[..rest.len() - 1];
        } else if let Some(q) = find(rest, b'?') {
            url.raw_query = rest[q + 1..].to_vec();
            rest = &rest[..q];
        }
        if !rest.starts_with(b"/") {
            if !url.scheme.is_empty() {
                url.opaque = rest.to_vec();
                return Ok(url);
            }
            if via_request {
                return Err(UrlError::Go("invalid URI for request".into()));
            }
            let segment = &rest[..find(rest, b'/').unwrap_or(rest.len())];
            if segment.contains(&b':') {
                return Err(UrlError::Go(
                    "first path segment in URL cannot contain colon".into(),
                ));
            }
        }
        if (!url.scheme.is_empty() || !via_request && !rest.starts_with(b"///"))
            && rest.starts_with(b"//")
        {
            let mut authority = &rest[2..];
            rest = b"";
            if let Some(i) = find(authority, b'/') {
                rest = &authority[i..];
                authority = &authority[..i];
            }
            let (user, host) = parse_authority(&url.scheme, authority)?;
            url.user = user;
            url.host = host;
        } else if !url.scheme.is_empty() && rest.starts_with(b"/") {
            url.omit_host = true;
        }
        url.set_path(rest)?;
        Ok(url)
    }

    /// `url.ParseRequestURI`.
    fn parse_request_uri(raw: &[u8]) -> Result<GoUrl, UrlError> {
        GoUrl::parse(raw, true).map_err(|e| e.wrap(raw))
    }

    /// `url.Parse`: the fragment cut off first.
    fn parse_reference(raw: &[u8]) -> Result<GoUrl, UrlError> {
        let (u, frag) = match find(raw, b'#') {
            Some(i) => (&raw[..i], &raw[i + 1..]),
            None => (raw, &b""[..]),
        };
        let mut url = GoUrl::parse(u, false).map_err(|e| e.wrap(u))?;
        if !frag.is_empty() {
            url.set_fragment(frag)
                .map_err(|e| UrlError::Go(e).wrap(raw))?;
        }
        Ok(url)
    }

    fn set_path(&mut self, p: &[u8]) -> Result<(), String> {
        self.path = unescape(p, Mode::Path)?;
        self.raw_path = if escape(&self.path, Mode::Path) == p {
            Vec::new()
        } else {
            p.to_vec()
        };
        Ok(())
    }

    fn set_fragment(&mut self, f: &[u8]) -> Result<(), String> {
        self.fragment = unescape(f, Mode::Fragment)?;
        self.raw_fragment = if escape(&self.fragment, Mode::Fragment) == f {
            Vec::new()
        } else {
            f.to_vec()
        };
        Ok(())
    }

    /// `URL.EscapedPath`.
    fn escaped_path(&self) -> Vec<u8> {
        if !self.raw_path.is_empty()
            && valid_encoded(&self.raw_path, Mode::Path)
            && unescape(&self.raw_path, Mode::Path).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == b"*" {
            return b"*".to_vec();
        }
        escape(&self.path, Mode::Path)
    }

    /// `URL.EscapedFragment`.
    fn escaped_fragment(&self) -> Vec<u8> {
        if !self.raw_fragment.is_empty()
            && valid_encoded(&self.raw_fragment, Mode::Fragment)
            && unescape(&self.raw_fragment, Mode::Fragment).is_ok_and(|f| f == self.fragment)
        {
            return self.raw_fragment.clone();
        }
        escape(&self.fragment, Mode::Fragment)
    }

    /// `URL.String`.
    fn to_go_string(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        if !self.scheme.is_empty() {
            buf.extend_from_slice(&self.scheme);
            buf.push(b':');
        }
        if !self.opaque.is_empty() {
            buf.extend_from_slice(&self.opaque);
        } else {
            let authority = !self.scheme.is_empty() || !self.host.is_empty() || self.user.is_some();
            let omitted = self.omit_host && self.host.is_empty() && self.user.is_none();
            if authority && !omitted {
                if !self.host.is_empty() || !self.path.is_empty() || self.user.is_some() {
                    buf.extend_from_slice(b"//");
                }
                if let Some(u) = &self.user {
                    buf.extend(escape(&u.username, Mode::UserPassword));
                    if let Some(p) = &u.password {
                        buf.push(b':');
                        buf.extend(escape(p, Mode::UserPassword));
                    }
                    buf.push(b'@');
                }
                if !self.host.is_empty() {
                    buf.extend(escape(&self.host, Mode::Host));
                }
            }
            let path = self.escaped_path();
            if path.first().is_some_and(|&c| c != b'/') && !self.host.is_empty() {
                buf.push(b'/');
            }
            if buf.is_empty() {
                let segment = &path[..find(&path, b'/').unwrap_or(path.len())];
                if segment.contains(&b':') {
                    buf.extend_from_slice(b"./");
                }
            }
            buf.extend(path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            buf.push(b'?');
            buf.extend_from_slice(&self.raw_query);
        }
        if !self.fragment.is_empty() {
            buf.push(b'#');
            buf.extend(self.escaped_fragment());
        }
        buf
    }

    /// `splitHostPort` of the host: the hostname and the port.
    fn split_host_port(&self) -> (&[u8], &[u8]) {
        let mut host = &self.host[..];
        let mut port: &[u8] = b"";
        if let Some(colon) = rfind(host, b':')
            && valid_optional_port(&host[colon..])
        {
            port = &host[colon + 1..];
            host = &host[..colon];
        }
        if host.len() >= 2 && host.starts_with(b"[") && host.ends_with(b"]") {
            host = &host[1..host.len() - 1];
        }
        (host, port)
    }
}

/// Go's `url.ParseRequestURI(s)` as the format library reports it: `Ok(None)` when it
/// parses, `Ok(Some(message))` when Go refuses it, an error when the outcome or the message
/// is not certain here.
pub(super) fn request_uri_error(s: &str) -> Result<Option<String>, ExecutionError> {
    if s.len() > MAX_LEN {
        return Err(too_long("validate", s));
    }
    match GoUrl::parse_request_uri(s.as_bytes()) {
        Ok(_) => Ok(None),
        Err(UrlError::Go(m)) => Ok(Some(m)),
        Err(e) => Err(ExecutionError::function_error("validate", e.message())),
    }
}

fn too_long(function: &str, s: &str) -> ExecutionError {
    ExecutionError::function_error(
        function,
        format!("a URL of {} bytes is not parsed here", s.len()),
    )
}

/// A `kubernetes.URL`.
#[derive(Clone, Debug)]
pub(super) struct Url {
    url: GoUrl,
    /// `URL.String()`, what equality compares.
    printed: Vec<u8>,
}

impl Val for Url {
    fn get_type(&self) -> &Type {
        &URL_TYPE
    }

    fn cel_type() -> &'static Type {
        &URL_TYPE
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<Url>()
            .is_some_and(|o| self.printed == o.printed)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for Url {}

fn url(s: &CelString<'_>) -> Result<Url, ExecutionError> {
    let s = s.inner();
    if s.len() > MAX_LEN {
        return Err(too_long("url", s));
    }
    let fail = |e: UrlError| {
        ExecutionError::function_error(
            "url",
            format!(
                "URL parse error during conversion from string: {}",
                e.message()
            ),
        )
    };
    GoUrl::parse_request_uri(s.as_bytes()).map_err(fail)?;
    let url = GoUrl::parse_reference(s.as_bytes()).map_err(fail)?;
    let printed = url.to_go_string();
    Ok(Url { url, printed })
}

fn is_url(s: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    let s = s.inner();
    if s.len() > MAX_LEN {
        return Err(too_long("isURL", s));
    }
    match GoUrl::parse_request_uri(s.as_bytes()) {
        Ok(_) => Ok(CelBool::from(true)),
        Err(UrlError::Go(_) | UrlError::GoVague(_)) => Ok(CelBool::from(false)),
        Err(UrlError::Unsure(m)) => Err(ExecutionError::function_error("isURL", m)),
    }
}

/// A Go string as a CEL string, if it is UTF-8 (a CEL string here cannot hold other bytes).
fn text(function: &str, b: &[u8]) -> Result<String, ExecutionError> {
    String::from_utf8(b.to_vec()).map_err(|_| {
        ExecutionError::function_error(
            function,
            format!(
                "{} is not UTF-8, which a string here cannot hold",
                quote_bytes(b)
            ),
        )
    })
}

fn get_scheme_of(u: &Url) -> Result<CelString<'static>, ExecutionError> {
    text("getScheme", &u.url.scheme).map(CelString::from)
}

fn get_host(u: &Url) -> Result<CelString<'static>, ExecutionError> {
    text("getHost", &u.url.host).map(CelString::from)
}

fn get_hostname(u: &Url) -> Result<CelString<'static>, ExecutionError> {
    text("getHostname", u.url.split_host_port().0).map(CelString::from)
}

fn get_port(u: &Url) -> Result<CelString<'static>, ExecutionError> {
    text("getPort", u.url.split_host_port().1).map(CelString::from)
}

fn get_escaped_path(u: &Url) -> Result<CelString<'static>, ExecutionError> {
    text("getEscapedPath", &u.url.escaped_path()).map(CelString::from)
}

/// `URL.Query()`: `url.ParseQuery` of the raw query, its errors ignored.
fn get_query(u: &Url) -> Result<CelMap<'static>, ExecutionError> {
    let query = &u.url.raw_query[..];
    if query.iter().filter(|&&b| b == b'&').count() + 1 > MAX_QUERY_PARAMS {
        // Go answers an empty map — unless GODEBUG raises its limit.
        return Err(ExecutionError::function_error(
            "getQuery",
            format!("a query of more than {MAX_QUERY_PARAMS} parameters"),
        ));
    }
    let mut order: Vec<String> = Vec::new();
    let mut values: HashMap<String, Vec<String>> = HashMap::new();
    for pair in query.split(|&b| b == b'&') {
        if pair.is_empty() || pair.contains(&b';') {
            continue;
        }
        let (key, value) = match find(pair, b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &b""[..]),
        };
        let (Ok(key), Ok(value)) = (
            unescape(key, Mode::QueryComponent),
            unescape(value, Mode::QueryComponent),
        ) else {
            continue;
        };
        let key = text("getQuery", &key)?;
        let value = text("getQuery", &value)?;
        if !values.contains_key(&key) {
            order.push(key.clone());
        }
        values.entry(key).or_default().push(value);
    }
    let mut map: HashMap<CelMapKey<'static>, Box<dyn Val + 'static>> = HashMap::new();
    for key in order {
        let list: Vec<Box<dyn Val + 'static>> = values
            .remove(&key)
            .unwrap_or_default()
            .into_iter()
            .map(|v| Box::new(CelString::from(v)) as Box<dyn Val>)
            .collect();
        map.insert(CelMapKey::from(key), Box::new(CelList::from(list)));
    }
    Ok(CelMap::from(map))
}

/// Registers the library on `env`; an overload that fails to register stays undeclared (its
/// rules not evaluated).
pub(super) fn register(env: &mut cel::Env) {
    let _ = env.add_type(URL_TYPE.to_owned());
    let _ = cel::add_overload!(env, fn url: (CelString) -> Result<Url>, id = "string_to_url");
    let _ = cel::add_overload!(env, fn is_url: (CelString) -> Result<CelBool>,
        name = "isURL", id = "is_url_string");
    let _ = cel::add_member_overload!(env, fn get_scheme_of: (Url) -> Result<CelString>,
        name = "getScheme", id = "url_get_scheme");
    let _ = cel::add_member_overload!(env, fn get_host: (Url) -> Result<CelString>,
        id = "url_get_host");
    let _ = cel::add_member_overload!(env, fn get_hostname: (Url) -> Result<CelString>,
        id = "url_get_hostname");
    let _ = cel::add_member_overload!(env, fn get_port: (Url) -> Result<CelString>,
        id = "url_get_port");
    let _ = cel::add_member_overload!(env, fn get_escaped_path: (Url) -> Result<CelString>,
        id = "url_get_escaped_path");
    let _ = cel::add_member_overload!(env, fn get_query: (Url) -> Result<CelMap>,
        id = "url_get_query");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn eval(expr: &str) -> Result<cel::Value, ExecutionError> {
        let mut env = cel::Env::stdlib();
        register(&mut env);
        let env = Arc::new(env);
        let program = env.compile(expr).expect("compiles");
        program.execute(&cel::Context::with_env(env.clone()))
    }

    fn yes(expr: &str) {
        assert_eq!(eval(expr), Ok(cel::Value::Bool(true)), "{expr}");
    }

    fn request_uri(s: &str) -> Result<GoUrl, UrlError> {
        GoUrl::parse_request_uri(s.as_bytes())
    }

    #[test]
    fn is_url_follows_parse_request_uri() {
        for good in [
            "/path",
            "https://user:pass@example.com:80/path?query=val#fragment",
            "https:://kubernetes.io/",
            "*",
            "mailto:someone@example.com",
            "http://[::1]:8080/",
            "http://[fe80::1%25en0]/",
            "http://example.com:/",
            "foo://a:b:1/",
            "http://%C3%BC.com/",
            "http://ü.com/",
        ] {
            yes(&format!("isURL('{good}')"));
        }
        for bad in [
            "",
            "../relative-path",
            "relative",
            "https://a:b:c/",
            "http://[::1/",
            "http://x[::1]/",
            "http://[127.0.0.1]/",
            "http://[::1]x/",
            "http://[::1]:8a/",
            "http://[fe80::1%]/",
            "http://a b/",
            "http://%30.com/",
            "http://%41.com/",
            "http://ex%zzample/",
            "/%zz",
            "/a\u{7f}",
            ":foo",
            "http://us er@host/",
            "http://[:::1]/",
            "http://[1:2:3:4:5:6:7:8:9]/",
            "http://[::ffff:1.2.3]/",
            "http://[::ffff:1.2.3.04]/",
        ] {
            yes(&format!("!isURL('{bad}')"));
        }
        // Strict or lax colons: Go's GODEBUG decides, so no answer here.
        assert!(eval("isURL('http://a:1:2/')").is_err());
        // With both readings refusing, the answer is certain.
        yes("!isURL('http://a:b:c/')");
    }

    #[test]
    fn accessors() {
        yes("url('https://example.com:80/').getHost() == 'example.com:80'");
        yes("url('https://example.com:80/').getHostname() == 'example.com'");
        yes("url('https://example.com:80/').getPort() == '80'");
        yes("url('https://example.com/').getPort() == ''");
        yes("url('https://example.com/').getScheme() == 'https'");
        yes("url('HTTPS://example.com/').getScheme() == 'https'");
        yes("url('/path').getScheme() == '' && url('/path').getHost() == ''");
        yes("url('https://[::1]:80/').getHost() == '[::1]:80'");
        yes("url('https://[::1]/').getHostname() == '::1'");
        yes("url('https://127.0.0.1/').getHostname() == '127.0.0.1'");
        yes("url('https://example.com').getEscapedPath() == ''");
        yes("url('https://example.com/with space/').getEscapedPath() == '/with%20space/'");
        yes("url('https://example.com/a%2Fb').getEscapedPath() == '/a%2Fb'");
        yes("url('https://example.com/p#frag').getEscapedPath() == '/p'");
        yes("url('https:://kubernetes.io/').getHostname() == ''");
        yes("url('http://%C3%BC.com/').getHost() == 'ü.com'");
        // A host Go unescapes to bytes that are not UTF-8.
        assert!(eval("url('http://%ff.com/').getHost()").is_err());
    }

    #[test]
    fn queries() {
        yes("url('https://example.com/path').getQuery() == {}");
        yes("url('https://example.com/path?').getQuery() == {}");
        yes(
            "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
        );
        yes(
            "url('https://example.com/path?key with spaces=value with spaces').getQuery() == {'key with spaces': ['value with spaces']}",
        );
        yes(
            "url('https://example.com/?a=1+2&b=%41&c&;d=1&e=%zz&=v').getQuery() == {'a': ['1 2'], 'b': ['A'], 'c': [''], '': ['v']}",
        );
        // A value Go unescapes to bytes that are not UTF-8.
        assert!(eval("url('https://example.com/?a=%ff').getQuery()").is_err());
    }

    #[test]
    fn equality_compares_printed_urls() {
        yes("url('https://example.com/a') == url('https://example.com/a')");
        yes("url('https://example.com/a') != url('https://example.com/b')");
        yes("url('HTTPS://example.com/~') == url('https://example.com/~')");
        // Go keeps the path as written when it is escaped otherwise than it would escape it.
        yes("url('https://example.com/%7e') != url('https://example.com/~')");
        yes("type(url('/a')) == kubernetes.URL");
    }

    #[test]
    fn a_bad_url_is_an_error() {
        let err = eval("url('../x')").unwrap_err();
        assert!(
            err.to_string()
                .contains("URL parse error during conversion from string: parse \"../x\": invalid URI for request"),
            "{err}"
        );
        assert!(eval(&format!("isURL('/{}')", "a".repeat(MAX_LEN))).is_err());
    }

    #[test]
    fn go_messages() {
        let m = |s: &str| request_uri(s).unwrap_err().message().to_string();
        assert_eq!(m(""), "parse \"\": empty url");
        assert_eq!(m("x"), "parse \"x\": invalid URI for request");
        assert_eq!(
            m("http://a:b/"),
            "parse \"http://a:b/\": invalid port \":b\" after host"
        );
        assert_eq!(m("/%zz"), "parse \"/%zz\": invalid URL escape \"%zz\"");
        assert_eq!(
            m("/%€"),
            "parse \"/%€\": invalid URL escape \"%\\xe2\\x82\""
        );
        assert_eq!(
            m("http://a b/"),
            "parse \"http://a b/\": invalid character \" \" in host name"
        );
        assert_eq!(
            m("http://[::1::2]/"),
            "parse \"http://[::1::2]/\": invalid host: ParseAddr(\"::1::2\"): multiple :: in address (at \":2\")"
        );
        assert_eq!(m(":x"), "parse \":x\": missing protocol scheme");
    }

    #[test]
    fn printing_follows_go() {
        let p = |s: &str| {
            String::from_utf8(GoUrl::parse_reference(s.as_bytes()).unwrap().to_go_string()).unwrap()
        };
        assert_eq!(
            p("https://u:p@Example.com:80/a b?q=1#f g"),
            "https://u:p@Example.com:80/a%20b?q=1#f%20g"
        );
        assert_eq!(p("/a%2fb"), "/a%2fb");
        assert_eq!(p("mailto:x@y"), "mailto:x@y");
        assert_eq!(p("file:///etc"), "file:///etc");
        assert_eq!(p("http://h?"), "http://h?");
    }
}

//! Go's `net/url` (Go 1.26) on bytes: `url.ParseRequestURI` and `url.Parse` into a
//! [`GoUrl`] with Go's error messages, its escaping and unescaping, and `URL.String()`. The
//! parsing under the CEL URL library, free of CEL.

use super::go_bytes::{find, quote_bytes, rfind, unhex};
use super::go_netip::parse_addr;

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
    pub(super) fn message(&self) -> &str {
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

/// `net/url`'s encoding modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
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

fn escape_error(s: &[u8]) -> String {
    format!("invalid URL escape {}", quote_bytes(s))
}

/// `net/url.unescape`.
pub(super) fn unescape(s: &[u8], mode: Mode) -> Result<Vec<u8>, String> {
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

/// `url.Userinfo`.
#[derive(Clone, Debug, Default, PartialEq)]
struct User {
    username: Vec<u8>,
    password: Option<Vec<u8>>,
}

/// Go's `url.URL`, its strings as bytes.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct GoUrl {
    pub(super) scheme: Vec<u8>,
    opaque: Vec<u8>,
    user: Option<User>,
    pub(super) host: Vec<u8>,
    path: Vec<u8>,
    raw_path: Vec<u8>,
    pub(super) raw_query: Vec<u8>,
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
    pub(super) fn parse_request_uri(raw: &[u8]) -> Result<GoUrl, UrlError> {
        GoUrl::parse(raw, true).map_err(|e| e.wrap(raw))
    }

    /// `url.Parse`: the fragment cut off first.
    pub(super) fn parse_reference(raw: &[u8]) -> Result<GoUrl, UrlError> {
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
    pub(super) fn escaped_path(&self) -> Vec<u8> {
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
    pub(super) fn to_go_string(&self) -> Vec<u8> {
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
    pub(super) fn split_host_port(&self) -> (&[u8], &[u8]) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request_uri(s: &str) -> Result<GoUrl, UrlError> {
        GoUrl::parse_request_uri(s.as_bytes())
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

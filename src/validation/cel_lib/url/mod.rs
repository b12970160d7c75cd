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
//!
//! This file holds the CEL binding: the `kubernetes.URL` value, the functions and their
//! registration. Go's parsing is below it: [`go_url`] (`net/url`), [`go_netip`] (`net/netip`)
//! and [`go_bytes`] (the string helpers both use).

mod go_bytes;
mod go_netip;
mod go_url;

use cel::ExecutionError;
use cel::common::types::{CelBool, CelList, CelMap, CelMapKey, CelString, Kind, Type};
use cel::common::value::Val;
use go_bytes::{find, quote_bytes};
use go_url::{GoUrl, Mode, UrlError, unescape};
use std::collections::HashMap;

/// `kubernetes.URL`.
static URL_TYPE: Type = Type::simple_type(Kind::Opaque, "kubernetes.URL");

/// The longest string parsed: far past any URL, short enough to bound the work.
const MAX_LEN: usize = 1 << 20;

/// Go's default limit on a query's parameters (`urlmaxqueryparams`).
const MAX_QUERY_PARAMS: usize = 10_000;

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

super::library_val!(Url, URL_TYPE, |this, other| {
    other
        .downcast_ref::<Url>()
        .is_some_and(|o| this.printed == o.printed)
});

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
    use crate::validation::cel_lib::tests::{run as eval, yes};

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
}

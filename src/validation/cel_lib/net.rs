//! Kubernetes' IP and CIDR libraries (`k8s.io/apiserver/pkg/cel/library/{ip,cidr}.go`, the
//! value types of `pkg/cel/{ip,cidr}.go`), on Go's `net/netip` as they use it:
//!
//! - `ip(string)`, `isIP(string)`, `ip.isCanonical(string)`, `string(ip)`, and on an IP
//!   `family`, `isUnspecified`, `isLoopback`, `isLinkLocalMulticast`, `isLinkLocalUnicast`,
//!   `isGlobalUnicast`; values of type `net.IP`;
//! - `cidr(string)`, `isCIDR(string)`, `string(cidr)`, and on a CIDR `containsIP` (an IP or a
//!   string), `containsCIDR` (a CIDR or a string), `ip`, `prefixLength`, `masked`; values of
//!   type `net.CIDR`.
//!
//! Addresses are read as `netip.ParseAddr` reads them (strict dotted decimal, IPv6 with `::`
//! and an embedded IPv4, a zone after `%`), then refused as Kubernetes refuses them: with a
//! zone, or IPv4-mapped IPv6. A prefix is `netip.ParsePrefix` (no zone, bits in decimal
//! without a sign or leading zero) and keeps its address unmasked: `cidr('10.0.0.1/8')` is
//! not `cidr('10.0.0.0/8')`. Strings print as `netip.Addr.String` does (RFC 5952).
//!
//! Equality is Go's: of two IPs (two CIDRs) by address (and length); with any other value Go's
//! `Equal` is an error, `false` here and recorded (`super::quantity::undecided`).

use super::quantity::undecided;
use crate::value::gofmt::quote_bounded;
use cel::ExecutionError;
use cel::common::types::{CelBool, CelInt, CelString, Type};
use std::fmt::Write as _;
use std::sync::LazyLock;

/// `apiservercel.IPType`.
static IP_TYPE: LazyLock<Type> = LazyLock::new(|| Type::new_opaque_type("net.IP"));
/// `apiservercel.CIDRType`.
static CIDR_TYPE: LazyLock<Type> = LazyLock::new(|| Type::new_opaque_type("net.CIDR"));

/// How much of an input an error message quotes.
const QUOTED: usize = 256;

pub(super) fn register(env: &mut cel::Env) {
    // Registration fails only on a duplicate, which these names and signatures rule out.
    let _ = env.add_type(IP_TYPE.to_owned());
    let _ = env.add_type(CIDR_TYPE.to_owned());

    let _ = cel::add_overload!(env, fn ip: (CelString) -> Result<Ip>, id = "string_to_ip");
    let _ = cel::add_overload!(env, fn is_ip: (CelString) -> CelBool, name = "isIP", id = "is_ip");
    let _ = cel::add_overload!(env, fn ip_is_canonical: (CelString) -> Result<CelBool>,
        name = "ip.isCanonical", id = "ip_is_canonical");
    let _ = cel::add_overload!(env, fn ip_to_string: (Ip) -> CelString,
        name = "string", id = "ip_to_string");
    let _ = cel::add_member_overload!(env, fn family: (Ip) -> CelInt, id = "ip_family");
    let _ = cel::add_member_overload!(env, fn is_unspecified: (Ip) -> CelBool,
        id = "ip_is_unspecified");
    let _ = cel::add_member_overload!(env, fn is_loopback: (Ip) -> CelBool, id = "ip_is_loopback");
    let _ = cel::add_member_overload!(env, fn is_link_local_multicast: (Ip) -> CelBool,
        id = "ip_is_link_local_multicast");
    let _ = cel::add_member_overload!(env, fn is_link_local_unicast: (Ip) -> CelBool,
        id = "ip_is_link_local_unicast");
    let _ = cel::add_member_overload!(env, fn is_global_unicast: (Ip) -> CelBool,
        id = "ip_is_global_unicast");

    let _ = cel::add_overload!(env, fn cidr: (CelString) -> Result<Cidr>, id = "string_to_cidr");
    let _ = cel::add_overload!(env, fn is_cidr: (CelString) -> CelBool,
        name = "isCIDR", id = "is_cidr");
    let _ = cel::add_overload!(env, fn cidr_to_string: (Cidr) -> CelString,
        name = "string", id = "cidr_to_string");
    let _ = cel::add_member_overload!(env, fn contains_ip_string: (Cidr, CelString) -> Result<CelBool>,
        name = "containsIP", id = "cidr_contains_ip_string");
    let _ = cel::add_member_overload!(env, fn contains_ip: (Cidr, Ip) -> CelBool,
        name = "containsIP", id = "cidr_contains_ip_ip");
    let _ = cel::add_member_overload!(env, fn contains_cidr_string: (Cidr, CelString) -> Result<CelBool>,
        name = "containsCIDR", id = "cidr_contains_cidr_string");
    let _ = cel::add_member_overload!(env, fn contains_cidr: (Cidr, Cidr) -> CelBool,
        name = "containsCIDR", id = "cidr_contains_cidr");
    let _ = cel::add_member_overload!(env, fn cidr_ip: (Cidr) -> Ip, name = "ip", id = "cidr_ip");
    let _ = cel::add_member_overload!(env, fn prefix_length: (Cidr) -> CelInt,
        id = "cidr_prefix_length");
    let _ = cel::add_member_overload!(env, fn masked: (Cidr) -> Cidr, id = "cidr_masked");
}

/// A `netip.Addr` without a zone (Kubernetes refuses zones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Addr {
    V4([u8; 4]),
    V6([u8; 16]),
}

impl Addr {
    fn bit_len(self) -> u8 {
        match self {
            Addr::V4(_) => 32,
            Addr::V6(_) => 128,
        }
    }

    fn is_4in6(self) -> bool {
        matches!(self, Addr::V6(b) if b[..10].iter().all(|&x| x == 0) && b[10] == 0xff && b[11] == 0xff)
    }

    /// `Unmap`: an IPv4-mapped IPv6 address as the IPv4 one.
    fn unmap(self) -> Addr {
        match self {
            Addr::V6(b) if self.is_4in6() => Addr::V4([b[12], b[13], b[14], b[15]]),
            a => a,
        }
    }

    fn v6u16(b: &[u8; 16], i: usize) -> u16 {
        u16::from_be_bytes([b[2 * i], b[2 * i + 1]])
    }

    fn is_loopback(self) -> bool {
        match self.unmap() {
            Addr::V4(b) => b[0] == 127,
            Addr::V6(b) => b == V6_LOOPBACK,
        }
    }

    fn is_multicast(self) -> bool {
        match self.unmap() {
            Addr::V4(b) => b[0] & 0xf0 == 0xe0,
            Addr::V6(b) => b[0] == 0xff,
        }
    }

    fn is_link_local_unicast(self) -> bool {
        match self.unmap() {
            Addr::V4(b) => b[0] == 169 && b[1] == 254,
            Addr::V6(b) => Addr::v6u16(&b, 0) & 0xffc0 == 0xfe80,
        }
    }

    fn is_link_local_multicast(self) -> bool {
        match self.unmap() {
            Addr::V4(b) => b[0] == 224 && b[1] == 0 && b[2] == 0,
            Addr::V6(b) => Addr::v6u16(&b, 0) & 0xff0f == 0xff02,
        }
    }

    fn is_unspecified(self) -> bool {
        self == Addr::V4([0; 4]) || self == Addr::V6([0; 16])
    }

    fn is_global_unicast(self) -> bool {
        let ip = self.unmap();
        if ip == Addr::V4([0; 4]) || ip == Addr::V4([255; 4]) {
            return false;
        }
        ip != Addr::V6([0; 16])
            && !ip.is_loopback()
            && !ip.is_multicast()
            && !ip.is_link_local_unicast()
    }

    /// `Addr.String`.
    fn string(self) -> String {
        match self {
            Addr::V4(b) => format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3]),
            Addr::V6(b) if self.is_4in6() => {
                format!("::ffff:{}.{}.{}.{}", b[12], b[13], b[14], b[15])
            }
            Addr::V6(b) => {
                // The first longest run of at least two zero groups becomes "::".
                let (mut zero_start, mut zero_end) = (8usize, 8usize);
                for i in 0..8 {
                    let mut j = i;
                    while j < 8 && Addr::v6u16(&b, j) == 0 {
                        j += 1;
                    }
                    if j - i >= 2 && j - i > zero_end - zero_start {
                        (zero_start, zero_end) = (i, j);
                    }
                }
                let mut out = String::with_capacity(39);
                let mut i = 0;
                while i < 8 {
                    if i == zero_start {
                        out.push_str("::");
                        i = zero_end;
                        if i >= 8 {
                            break;
                        }
                    } else if i > 0 {
                        out.push(':');
                    }
                    let _ = write!(out, "{:x}", Addr::v6u16(&b, i));
                    i += 1;
                }
                out
            }
        }
    }

    /// The address with all but its first `bits` bits cleared.
    fn masked(self, bits: u8) -> Addr {
        let mask = |b: &mut [u8]| {
            for (i, x) in b.iter_mut().enumerate() {
                let kept = usize::from(bits).saturating_sub(8 * i).min(8);
                *x &= !(0xffu8.checked_shr(kept as u32).unwrap_or(0));
            }
        };
        match self {
            Addr::V4(mut b) => {
                mask(&mut b);
                Addr::V4(b)
            }
            Addr::V6(mut b) => {
                mask(&mut b);
                Addr::V6(b)
            }
        }
    }
}

/// `::1`.
const V6_LOOPBACK: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

/// `parseAddrError`.
fn addr_error(input: &[u8], msg: &str, at: Option<&[u8]>) -> String {
    let q = |b: &[u8]| quote_bounded(&String::from_utf8_lossy(b), QUOTED);
    match at {
        Some(at) if !at.is_empty() => format!("ParseAddr({}): {msg} (at {})", q(input), q(at)),
        _ => format!("ParseAddr({}): {msg}", q(input)),
    }
}

/// `parseIPv4Fields` of `input[off..end]` into `fields`.
fn parse_ipv4_fields(
    input: &[u8],
    off: usize,
    end: usize,
    fields: &mut [u8],
) -> Result<(), String> {
    let s = input.get(off..end).unwrap_or_default();
    let (mut val, mut pos, mut dig_len) = (0u32, 0usize, 0);
    for (i, &c) in s.iter().enumerate() {
        if c.is_ascii_digit() {
            if dig_len == 1 && val == 0 {
                return Err(addr_error(
                    input,
                    "IPv4 field has octet with leading zero",
                    None,
                ));
            }
            val = val * 10 + u32::from(c - b'0');
            dig_len += 1;
            if val > 255 {
                return Err(addr_error(input, "IPv4 field has value >255", None));
            }
        } else if c == b'.' {
            if i == 0 || i == s.len() - 1 || s[i - 1] == b'.' {
                return Err(addr_error(
                    input,
                    "IPv4 field must have at least one digit",
                    Some(&s[i..]),
                ));
            }
            if pos == 3 {
                return Err(addr_error(input, "IPv4 address too long", None));
            }
            if let Some(f) = fields.get_mut(pos) {
                *f = val as u8;
            }
            pos += 1;
            val = 0;
            dig_len = 0;
        } else {
            return Err(addr_error(input, "unexpected character", Some(&s[i..])));
        }
    }
    if pos < 3 {
        return Err(addr_error(input, "IPv4 address too short", None));
    }
    if let Some(f) = fields.get_mut(3) {
        *f = val as u8;
    }
    Ok(())
}

/// `parseIPv6`: the address and whether it has a zone.
fn parse_ipv6(input: &[u8]) -> Result<(Addr, bool), String> {
    let mut s = input;
    let mut zone: &[u8] = b"";
    if let Some(i) = s.iter().position(|&c| c == b'%') {
        (s, zone) = (&input[..i], &input[i + 1..]);
        if zone.is_empty() {
            return Err(addr_error(input, "zone must be a non-empty string", None));
        }
    }
    let has_zone = !zone.is_empty();
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if s.len() >= 2 && s[0] == b':' && s[1] == b':' {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok((Addr::V6(ip), has_zone));
        }
    }
    let mut i = 0usize;
    while i < 16 {
        let mut off = 0;
        let mut acc = 0u32;
        while off < s.len() {
            let d = match s[off] {
                c @ b'0'..=b'9' => c - b'0',
                c @ b'a'..=b'f' => c - b'a' + 10,
                c @ b'A'..=b'F' => c - b'A' + 10,
                _ => break,
            };
            acc = (acc << 4) + u32::from(d);
            if off > 3 {
                return Err(addr_error(
                    input,
                    "each group must have 4 or less digits",
                    Some(s),
                ));
            }
            if acc > 0xffff {
                return Err(addr_error(input, "IPv6 field has value >=2^16", Some(s)));
            }
            off += 1;
        }
        if off == 0 {
            return Err(addr_error(
                input,
                "each colon-separated field must have at least one digit",
                Some(s),
            ));
        }
        if off < s.len() && s[off] == b'.' {
            if ellipsis.is_none() && i != 12 {
                return Err(addr_error(
                    input,
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    Some(s),
                ));
            }
            if i + 4 > 16 {
                return Err(addr_error(
                    input,
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    Some(s),
                ));
            }
            let end = input.len() - if has_zone { zone.len() + 1 } else { 0 };
            parse_ipv4_fields(input, end - s.len(), end, &mut ip[i..i + 4])?;
            s = b"";
            i += 4;
            break;
        }
        ip[i] = (acc >> 8) as u8;
        ip[i + 1] = acc as u8;
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if s[0] != b':' {
            return Err(addr_error(
                input,
                "unexpected character, want colon",
                Some(s),
            ));
        } else if s.len() == 1 {
            return Err(addr_error(
                input,
                "colon must be followed by more characters",
                Some(s),
            ));
        }
        s = &s[1..];
        if s[0] == b':' {
            if ellipsis.is_some() {
                return Err(addr_error(input, "multiple :: in address", Some(s)));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(addr_error(input, "trailing garbage after address", Some(s)));
    }
    if i < 16 {
        let Some(e) = ellipsis else {
            return Err(addr_error(input, "address string too short", None));
        };
        let n = 16 - i;
        for j in (e..i).rev() {
            ip[j + n] = ip[j];
        }
        ip[e..e + n].fill(0);
    } else if ellipsis.is_some() {
        return Err(addr_error(
            input,
            "the :: must expand to at least one field of zeros",
            None,
        ));
    }
    Ok((Addr::V6(ip), has_zone))
}

/// `netip.ParseAddr`: the address and whether it has a zone.
fn parse_addr(s: &[u8]) -> Result<(Addr, bool), String> {
    for &c in s {
        match c {
            b'.' => {
                let mut f = [0u8; 4];
                parse_ipv4_fields(s, 0, s.len(), &mut f)?;
                return Ok((Addr::V4(f), false));
            }
            b':' => return parse_ipv6(s),
            b'%' => return Err(addr_error(s, "missing IPv6 address", None)),
            _ => {}
        }
    }
    Err(addr_error(s, "unable to parse IP", None))
}

fn quoted(s: &str) -> String {
    quote_bounded(s, QUOTED)
}

/// `parseIPAddr`.
fn parse_ip(raw: &str) -> Result<Addr, String> {
    let (addr, zone) = parse_addr(raw.as_bytes()).map_err(|e| {
        format!(
            "IP Address {} parse error during conversion from string: {e}",
            quoted(raw)
        )
    })?;
    if zone {
        return Err(format!(
            "IP address {} with zone value is not allowed",
            quoted(raw)
        ));
    }
    if addr.is_4in6() {
        return Err(format!(
            "IPv4-mapped IPv6 address {} is not allowed",
            quoted(raw)
        ));
    }
    Ok(addr)
}

/// `netip.ParsePrefix`.
fn parse_prefix(s: &str) -> Result<Cidr, String> {
    let b = s.as_bytes();
    let err = |msg: &str| format!("netip.ParsePrefix({}): {msg}", quoted(s));
    let Some(i) = b.iter().rposition(|&c| c == b'/') else {
        return Err(err("no '/'"));
    };
    let (addr, zone) = parse_addr(&b[..i]).map_err(|e| err(&e))?;
    if zone {
        return Err(err("IPv6 zones cannot be present in a prefix"));
    }
    let bits = &b[i + 1..];
    let bad = || {
        err(&format!(
            "bad bits after slash: {}",
            quote_bounded(&String::from_utf8_lossy(bits), QUOTED)
        ))
    };
    if bits.len() > 1 && !(b'1'..=b'9').contains(&bits[0]) {
        return Err(bad());
    }
    // `strconv.Atoi`, which the check above leaves digits only to accept.
    if bits.is_empty() || bits.len() > 19 || !bits.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    let n = bits.iter().fold(0u64, |v, &c| v * 10 + u64::from(c - b'0'));
    if n > i64::MAX as u64 {
        return Err(bad());
    }
    if n > u64::from(addr.bit_len()) {
        return Err(err("prefix length out of range"));
    }
    Ok(Cidr {
        addr,
        bits: n as u8,
    })
}

/// `parseCIDR`.
fn parse_cidr(raw: &str) -> Result<Cidr, String> {
    let c = parse_prefix(raw)
        .map_err(|e| format!("network address parse error during conversion from string: {e}"))?;
    if c.addr.is_4in6() {
        return Err(format!(
            "IPv4-mapped IPv6 address {} is not allowed",
            quoted(raw)
        ));
    }
    Ok(c)
}

/// A `net.IP`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ip(Addr);

super::library_val!(Ip, IP_TYPE, |this, other| {
    match other.downcast_ref::<Ip>() {
        Some(o) => this.0 == o.0,
        None => {
            undecided("an IP compared with another type, which Go reports as an error");
            false
        }
    }
});

/// A `net.CIDR`: a `netip.Prefix`, its address as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Cidr {
    addr: Addr,
    bits: u8,
}

impl Cidr {
    /// `Prefix.Contains`.
    fn contains(self, ip: Addr) -> bool {
        self.addr.bit_len() == ip.bit_len() && self.addr.masked(self.bits) == ip.masked(self.bits)
    }

    /// `Prefix.Overlaps`.
    fn overlaps(self, o: Cidr) -> bool {
        if self == o {
            return true;
        }
        if matches!(self.addr, Addr::V4(_)) != matches!(o.addr, Addr::V4(_)) {
            return false;
        }
        let min = self.bits.min(o.bits);
        min == 0 || self.addr.masked(min) == o.addr.masked(min)
    }
}

super::library_val!(Cidr, CIDR_TYPE, |this, other| {
    match other.downcast_ref::<Cidr>() {
        Some(o) => this == o,
        None => {
            undecided("a CIDR compared with another type, which Go reports as an error");
            false
        }
    }
});

fn ip(s: &CelString<'_>) -> Result<Ip, ExecutionError> {
    parse_ip(s.inner())
        .map(Ip)
        .map_err(|e| ExecutionError::function_error("ip", e))
}

fn is_ip(s: &CelString<'_>) -> CelBool {
    CelBool::from(parse_ip(s.inner()).is_ok())
}

fn ip_is_canonical(s: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    let addr =
        parse_ip(s.inner()).map_err(|e| ExecutionError::function_error("ip.isCanonical", e))?;
    Ok(CelBool::from(addr.string() == s.inner()))
}

fn ip_to_string(ip: &Ip) -> CelString<'static> {
    CelString::from(ip.0.string())
}

fn family(ip: &Ip) -> CelInt {
    CelInt::from(match ip.0 {
        Addr::V4(_) => 4,
        Addr::V6(_) => 6,
    })
}

fn is_unspecified(ip: &Ip) -> CelBool {
    CelBool::from(ip.0.is_unspecified())
}

fn is_loopback(ip: &Ip) -> CelBool {
    CelBool::from(ip.0.is_loopback())
}

fn is_link_local_multicast(ip: &Ip) -> CelBool {
    CelBool::from(ip.0.is_link_local_multicast())
}

fn is_link_local_unicast(ip: &Ip) -> CelBool {
    CelBool::from(ip.0.is_link_local_unicast())
}

fn is_global_unicast(ip: &Ip) -> CelBool {
    CelBool::from(ip.0.is_global_unicast())
}

fn cidr(s: &CelString<'_>) -> Result<Cidr, ExecutionError> {
    parse_cidr(s.inner()).map_err(|e| {
        ExecutionError::function_error(
            "cidr",
            format!("network address parse error during conversion from string: {e}"),
        )
    })
}

fn is_cidr(s: &CelString<'_>) -> CelBool {
    CelBool::from(parse_cidr(s.inner()).is_ok())
}

/// `Prefix.String`.
fn cidr_to_string(c: &Cidr) -> CelString<'static> {
    CelString::from(format!("{}/{}", c.addr.string(), c.bits))
}

/// An unparsable string is Go's "no such overload" (`cidrContainsIP` is handed the error
/// where it expects an IP).
fn contains_ip_string(c: &Cidr, s: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    match parse_ip(s.inner()) {
        Ok(ip) => Ok(CelBool::from(c.contains(ip))),
        Err(_) => Err(ExecutionError::function_error(
            "containsIP",
            "no such overload",
        )),
    }
}

fn contains_ip(c: &Cidr, ip: &Ip) -> CelBool {
    CelBool::from(c.contains(ip.0))
}

fn contains_cidr_string(c: &Cidr, s: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    let other = cidr(s)?;
    Ok(contains_cidr(c, &other))
}

fn contains_cidr(c: &Cidr, o: &Cidr) -> CelBool {
    CelBool::from(c.overlaps(*o) && c.bits <= o.bits)
}

fn cidr_ip(c: &Cidr) -> Ip {
    Ip(c.addr)
}

fn prefix_length(c: &Cidr) -> CelInt {
    CelInt::from(i64::from(c.bits))
}

fn masked(c: &Cidr) -> Cidr {
    Cidr {
        addr: c.addr.masked(c.bits),
        bits: c.bits,
    }
}

#[cfg(test)]
mod tests {
    use super::super::quantity::tests::{eval, fails, is, undecided};

    #[test]
    fn parses_as_netip_then_refuses_zones_and_mapped_addresses() {
        for ok in [
            "192.168.0.1",
            "0.0.0.0",
            "::",
            "::1",
            "2001:db8::68",
            "2001:DB8::68",
            "1:2:3:4:5:6:1.2.3.4",
            "::1.2.3.4",
            "::ffff:ffff:1.2.3.4",
        ] {
            is(&format!("isIP('{ok}')"), true);
        }
        for bad in [
            "",
            "1.2.3",
            "1.2.3.4.5",
            "01.2.3.4",
            "1.2.3.256",
            "1..2.3",
            "2001:db8:::68",
            "1:2:3:4:5:6:7:1.2.3.4",
            "1::2::3",
            "12345::",
            "1:2:3:4:5:6:7:8:9",
            "::ffff:1.2.3.4",
            "fe80::1%eth0",
            "fe80::1%",
            "%eth0",
            "1.2.3.4/32",
        ] {
            is(&format!("isIP('{bad}')"), false);
            fails(&format!("ip('{bad}')"));
        }
        for (cidr, ok) in [
            ("192.168.0.0/24", true),
            ("192.168.0.1/24", true),
            ("::/0", true),
            ("::ffff:ffff:1.2.3.4/80", true),
            ("10.0.0.0/08", false),
            ("10.0.0.0/+8", false),
            ("10.0.0.0/33", false),
            ("10.0.0.0/", false),
            ("10.0.0.0", false),
            ("::ffff:1.2.3.4/128", false),
            ("fe80::1%eth0/64", false),
            ("2001:db8::/129", false),
        ] {
            is(&format!("isCIDR('{cidr}')"), ok);
        }
        fails("cidr('192.168.0.0/')");
    }

    #[test]
    fn prints_as_netip() {
        is("string(ip('2001:db8:0:0:1:0:0:1'))", "2001:db8::1:0:0:1");
        is("string(ip('1:0:0:2:0:0:0:3'))", "1:0:0:2::3");
        is("string(ip('0:0:1:0:0:0:0:0'))", "0:0:1::");
        is("string(ip('::1.2.3.4'))", "::102:304");
        is("string(ip('2001:DB8::68'))", "2001:db8::68");
        is("ip.isCanonical('2001:db8::68')", true);
        is("ip.isCanonical('2001:DB8::68')", false);
        is("ip.isCanonical('2001:db8:0:0:1:0:0:1')", false);
        fails("ip.isCanonical('127.0.0.1.0')");
        is("string(cidr('2001:db8:1::/32').masked())", "2001:db8::/32");
        is("string(cidr('10.1.2.3/8').ip())", "10.1.2.3");
        is("string(cidr('192.168.0.0/24'))", "192.168.0.0/24");
    }

    #[test]
    fn classifies_addresses() {
        is("ip('192.168.0.1').family()", 4);
        is("cidr('::1/128').ip().family()", 6);
        is("ip('0.0.0.0').isUnspecified()", true);
        is("ip('::').isUnspecified()", true);
        is("ip('127.1.2.3').isLoopback()", true);
        is("ip('::1').isLoopback()", true);
        is("ip('224.0.0.1').isLinkLocalMulticast()", true);
        is("ip('224.0.1.1').isLinkLocalMulticast()", false);
        is("ip('ff02::1').isLinkLocalMulticast()", true);
        is("ip('169.254.169.254').isLinkLocalUnicast()", true);
        is("ip('febf::1').isLinkLocalUnicast()", true);
        is("ip('fec0::1').isLinkLocalUnicast()", false);
        is("ip('10.0.0.1').isGlobalUnicast()", true);
        is("ip('64:ff9b::102:304').isGlobalUnicast()", true);
        is("ip('255.255.255.255').isGlobalUnicast()", false);
        is("ip('fe80::1').isGlobalUnicast()", false);
        is("ip('ff00::1').isGlobalUnicast()", false);
    }

    #[test]
    fn cidrs_contain() {
        is("cidr('10.0.0.0/8').containsIP('10.255.0.1')", true);
        is("cidr('10.0.0.0/8').containsIP(ip('11.0.0.1'))", false);
        is("cidr('10.0.0.0/8').containsIP('::1')", false);
        is("cidr('::/0').containsIP('1.2.3.4')", false);
        is("cidr('0.0.0.0/0').containsIP('1.2.3.4')", true);
        is("cidr('2001:db8::/32').containsIP(ip('2001:db8::1'))", true);
        is("cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')", true);
        is(
            "cidr('10.1.0.0/16').containsCIDR(cidr('10.0.0.0/8'))",
            false,
        );
        is("cidr('10.0.0.0/8').containsCIDR('10.0.0.0/8')", true);
        is("cidr('10.0.0.0/8').containsCIDR('::/0')", false);
        is(
            "cidr('192.168.0.0/24').containsCIDR(cidr('192.169.0.1/32'))",
            false,
        );
        is("cidr('2001:db8::/32').prefixLength()", 32);
        // Go hands the parse error to an overload expecting an IP: "no such overload".
        fails("cidr('10.0.0.0/8').containsIP('bad')");
        fails("cidr('10.0.0.0/8').containsCIDR('bad')");
    }

    #[test]
    fn equality_and_types() {
        is("cidr('10.0.0.1/8') == cidr('10.0.0.0/8')", false);
        is("cidr('10.0.0.1/8').masked() == cidr('10.0.0.0/8')", true);
        is("cidr('192.168.0.0/24').ip() == ip('192.168.0.0')", true);
        is("ip('1.2.3.4') in [ip('1.2.3.4')]", true);
        is("type(ip('1.2.3.4')) == net.IP", true);
        is("type(cidr('1.2.3.4/8')) == net.CIDR", true);
        is("type(ip('1.2.3.4')) == net.CIDR", false);
        // Go's `Equal` fails on another type.
        undecided("dyn(ip('1.2.3.4')) == dyn('1.2.3.4')");
        undecided("dyn(cidr('1.2.3.4/8')) == dyn('1.2.3.4/8')");
        assert!(eval("ip('1.2.3.4') == ip('1.2.3.4')").is_ok());
    }
}

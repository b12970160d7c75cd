//! A request's deadline (`grpc-timeout`), enforced by the service itself: the caller gets
//! `DEADLINE_EXCEEDED` (the transport alone would answer `CANCELLED`), and the blocking work
//! the request started is told to stop — it checks its [`Deadline`] in its loops — as it is
//! when the caller goes away before the answer.
//!
//! The transport keeps its own timer on the same deadline, so the service's fires a
//! millisecond (one tick of the runtime's timer) earlier, counted from when the request
//! arrived ([`arrived`], an interceptor every service is wrapped in).

use crate::deadline::Deadline;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tonic::{Request, Status};

/// When a request arrived (set by [`arrived`]).
#[derive(Clone, Copy, Debug)]
pub struct Arrived(pub Instant);

/// The interceptor that records [`Arrived`].
#[allow(clippy::result_large_err)]
pub fn arrived(mut req: Request<()>) -> Result<Request<()>, Status> {
    req.extensions_mut().insert(Arrived(Instant::now()));
    Ok(req)
}

/// `grpc-timeout` (gRPC over HTTP/2: at most 8 digits and a unit `H M S m u n`).
pub fn parse_timeout(v: &str) -> Option<Duration> {
    if v.len() < 2 || v.len() > 9 {
        return None;
    }
    let (digits, unit) = v.split_at(v.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// One request's deadline and the flag that stops its work. Dropped (the answer sent, or the
/// caller gone), it stops the work too.
pub struct RequestDeadline {
    at: Option<Instant>,
    timeout: Option<Duration>,
    stop: Arc<AtomicBool>,
}

impl Drop for RequestDeadline {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl RequestDeadline {
    /// The deadline `req` carries (none without `grpc-timeout`).
    pub fn of<T>(req: &Request<T>) -> RequestDeadline {
        let timeout = req
            .metadata()
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_timeout);
        let arrived = req
            .extensions()
            .get::<Arrived>()
            .map_or_else(Instant::now, |a| a.0);
        let tick = Duration::from_millis(1);
        RequestDeadline {
            at: timeout.map(|t| arrived + t.saturating_sub(tick)),
            timeout,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// What the request's blocking work checks.
    pub fn work(&self) -> Deadline {
        let d = match self.at {
            Some(at) => Deadline::at(at),
            None => Deadline::default(),
        };
        d.or_cancelled(self.stop.clone())
    }

    /// The status of a request whose deadline passed.
    pub fn exceeded(&self) -> Status {
        let t = self.timeout.unwrap_or_default();
        Status::deadline_exceeded(format!(
            "the request's deadline ({t:?}) passed; its work was stopped"
        ))
    }

    /// Runs `f` until the deadline: its result, or `DEADLINE_EXCEEDED` (and the work told to
    /// stop).
    pub async fn run<R>(
        self,
        f: impl std::future::Future<Output = Result<R, Status>>,
    ) -> Result<R, Status> {
        let Some(at) = self.at else { return f.await };
        match tokio::time::timeout_at(tokio::time::Instant::from_std(at), f).await {
            Ok(r) => r,
            Err(_) => Err(self.exceeded()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_as_grpc_writes_them() {
        assert_eq!(parse_timeout("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_timeout("1n"), Some(Duration::from_nanos(1)));
        assert_eq!(parse_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_timeout("123456789m"), None);
        assert_eq!(parse_timeout("m"), None);
        assert_eq!(parse_timeout("10x"), None);
    }

    #[tokio::test]
    async fn the_deadline_answers_deadline_exceeded_and_stops_the_work() {
        let mut req = Request::new(());
        req.metadata_mut()
            .insert("grpc-timeout", "5m".parse().unwrap());
        let d = RequestDeadline::of(&req);
        let work = d.work();
        assert!(!work.expired());
        let r: Result<(), Status> = d.run(std::future::pending()).await;
        assert_eq!(r.unwrap_err().code(), tonic::Code::DeadlineExceeded);
        assert!(work.expired(), "the work was not told to stop");
    }
}

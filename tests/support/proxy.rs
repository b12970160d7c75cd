//! A TCP proxy on loopback that a test can cut, to put fieldguard out of reach of a server
//! (a real apiserver or a fake) while the test acts on the server directly:
//!
//! - [`Mode::Forward`]: bytes pass both ways;
//! - [`Mode::Refuse`]: every open connection is closed and new ones are closed as they arrive
//!   (a server that went away: the client sees the connection end and reconnects);
//! - [`Mode::Blackhole`]: open connections stay open but nothing passes any more, in either
//!   direction, and new connections are accepted and then ignored (a load balancer that lost
//!   its state: the client sees neither data nor an end).
//!
//! Changing the mode acts on connections at once: no sleeps, nothing to wait for.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Forward,
    Refuse,
    Blackhole,
}

pub struct Proxy {
    pub addr: SocketAddr,
    mode: watch::Sender<Mode>,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy to `upstream`, forwarding.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mode, _) = watch::channel(Mode::Forward);
        let accepted = Arc::new(AtomicUsize::new(0));
        let task = {
            let mode = mode.clone();
            let accepted = accepted.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let rx = mode.subscribe();
                    tokio::spawn(connection(client, upstream, rx));
                }
            })
        };
        Proxy {
            addr,
            mode,
            accepted,
            task,
        }
    }

    pub fn set(&self, m: Mode) {
        self.mode.send_if_modified(|cur| {
            let changed = *cur != m;
            *cur = m;
            changed
        });
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.set(Mode::Refuse);
        self.task.abort();
    }
}

/// Holds the connection until the mode says to close it.
async fn park(mut rx: watch::Receiver<Mode>) {
    while *rx.borrow_and_update() != Mode::Refuse {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

async fn connection(client: TcpStream, upstream: SocketAddr, mut rx: watch::Receiver<Mode>) {
    let mode = *rx.borrow_and_update();
    match mode {
        Mode::Refuse => return,
        Mode::Blackhole => return park(rx).await,
        Mode::Forward => {}
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let mut up = vec![0u8; 16 * 1024];
    let mut down = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            n = cr.read(&mut up) => match n {
                Ok(n) if n > 0 => if sw.write_all(&up[..n]).await.is_err() { return },
                _ => return,
            },
            n = sr.read(&mut down) => match n {
                Ok(n) if n > 0 => if cw.write_all(&down[..n]).await.is_err() { return },
                _ => return,
            },
            changed = rx.changed() => {
                if changed.is_err() {
                    return;
                }
                let mode = *rx.borrow_and_update();
                match mode {
                    Mode::Forward => {}
                    Mode::Refuse => return,
                    // Keep both halves open, pass nothing.
                    Mode::Blackhole => {
                        let _held = (cr, cw, sr, sw);
                        return park(rx).await;
                    }
                }
            }
        }
    }
}

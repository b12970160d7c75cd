//! gRPC over a bare HTTP/2 connection, for deadlines: a tonic client enforces a request's
//! `grpc-timeout` itself and races the server's answer (reporting its own CANCELLED); this
//! client has no timer, so what comes back is the server's.

/// A unary gRPC call over a bare HTTP/2 connection, with `grpc-timeout` and no client-side
/// timer: the server's grpc-status and grpc-message.
pub async fn unary(
    addr: std::net::SocketAddr,
    path: &str,
    message: &[u8],
    timeout: &str,
) -> (i32, String) {
    unary_from(None, addr, path, message, timeout).await
}

/// [`unary`] from the local address `source` (a loopback address other than 127.0.0.1 is
/// another caller to a server that tells callers apart by address).
pub async fn unary_from(
    source: Option<std::net::IpAddr>,
    addr: std::net::SocketAddr,
    path: &str,
    message: &[u8],
    timeout: &str,
) -> (i32, String) {
    let tcp = match source {
        None => tokio::net::TcpStream::connect(addr).await.unwrap(),
        Some(ip) => {
            let socket = match ip {
                std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
                std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
            }
            .unwrap();
            socket.bind(std::net::SocketAddr::new(ip, 0)).unwrap();
            socket.connect(addr).await.unwrap()
        }
    };
    let (mut client, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = http::Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-timeout", timeout)
        .body(())
        .unwrap();
    let (response, mut body) = client.send_request(req, false).unwrap();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(message);
    body.send_data(bytes::Bytes::from(framed), true).unwrap();
    let response = response.await.unwrap();
    let status = |h: &http::HeaderMap| {
        let code = h
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let msg = h
            .get("grpc-message")
            .and_then(|v| v.to_str().ok())
            .map(|m| {
                percent_encoding::percent_decode_str(m)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .unwrap_or_default();
        code.map(|c| (c, msg))
    };
    // Trailers-only answers carry the status in the headers.
    if let Some(s) = status(response.headers()) {
        return s;
    }
    let mut stream = response.into_body();
    // Each chunk read gives its window back: a large answer would otherwise stall at the
    // stream's flow-control window.
    while let Some(chunk) = stream.data().await {
        let Ok(chunk) = chunk else { break };
        let _ = stream.flow_control().release_capacity(chunk.len());
    }
    let trailers = stream.trailers().await.unwrap().unwrap_or_default();
    status(&trailers).expect("a grpc-status")
}

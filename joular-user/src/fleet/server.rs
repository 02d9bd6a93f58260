//! The HTTP endpoint Prometheus scrapes: `GET /metrics`, a link page on `/`, 404 elsewhere.
//! A minimal HTTP/1.1 responder (one request per connection, `Connection: close`) is all a scraper
//! needs, and keeps a web framework out of a daemon that runs on every host.
//!
//! Anyone who can reach the port is a client: connections are capped, each is given a couple of
//! seconds for its request, and idle ones make room for new ones (`connections`), so a flood of
//! idle or slow connections neither runs the process out of descriptors nor delays a scrape.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::oneshot;
use tokio::time::timeout;

use super::connections::{ConnectionLimiter, LogEvery};
use super::exposition::CONTENT_TYPE;
use super::metrics::MetricsRegistry;
use super::FleetError;

/// A request head larger than this is not a scraper's; what was read is answered anyway.
const MAX_REQUEST_HEAD_BYTES: usize = 8192;
/// Connections open at once. Prometheus opens one per scrape (a few, with several servers);
/// past this the connection waiting longest for its request is closed (see `connections`).
pub const MAX_OPEN_CONNECTIONS: usize = 64;
/// A client that has not sent its whole request this long after connecting is dropped: a
/// scraper sends it at once.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// A client that does not take the response in this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(3);
/// Pause after a failed accept (out of descriptors, typically), so that it is not retried in a
/// busy loop; the connections already open go on being answered meanwhile.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// A failing accept is logged at most this often.
const ACCEPT_ERROR_LOG_PERIOD: Duration = Duration::from_secs(10);
/// Connections the kernel completes and queues before they are accepted (capped by
/// `net.core.somaxconn`, 4,096 by default). std's and tokio's `bind` ask for 128: a burst of
/// connections that arrives faster than the accept loop runs (a flood, or this thread
/// descheduled for a few ms while the profiler loads its programs) then overflows the queue,
/// the kernel drops the next SYN, and that client (a scrape, as likely as not) waits for its
/// retransmission, 1 s later. Measured before the change: 1,000 connects in a burst, one of
/// them 1 s late in 2 of 3 runs. A queued connection costs a few hundred bytes of kernel
/// memory and no descriptor.
const LISTEN_BACKLOG: u32 = 4096;

/// Sent, without waiting, to a connection refused because every open one is being answered.
const BUSY_RESPONSE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

const INDEX_HTML: &str = "<html><head><title>joular-ebpf</title></head>\
<body><h1>joular-ebpf</h1><p><a href=\"/metrics\">Metrics</a></p></body></html>\n";

type Limiter = Mutex<ConnectionLimiter<oneshot::Sender<()>>>;

/// A bound endpoint. Binding apart from running lets the caller fail before loading eBPF when the
/// address is taken, and learn the port when it asked for port 0.
#[derive(Debug)]
pub struct MetricsServer {
    listener: TcpListener,
    addr: SocketAddr,
}

impl MetricsServer {
    pub async fn bind(listen: SocketAddr) -> Result<Self, FleetError> {
        let bind_error = |source| FleetError::Bind { addr: listen, source };
        let socket = match listen {
            SocketAddr::V4(_) => TcpSocket::new_v4(),
            SocketAddr::V6(_) => TcpSocket::new_v6(),
        }
        .map_err(bind_error)?;
        // As `TcpListener::bind` does: a restarted daemon rebinds at once, while its old
        // connections wait out TIME_WAIT.
        socket.set_reuseaddr(true).map_err(bind_error)?;
        socket.bind(listen).map_err(bind_error)?;
        let listener = socket.listen(LISTEN_BACKLOG).map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        Ok(Self { listener, addr })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves scrapes until `shutdown` completes. Each scrape renders under the registry's lock, so it
    /// sees whole cycles only. At most [`MAX_OPEN_CONNECTIONS`] are open at once, each for at most
    /// [`HEAD_TIMEOUT`] plus the time to take its response.
    pub async fn run(self, registry: Arc<Mutex<MetricsRegistry>>, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let limiter: Arc<Limiter> = Arc::new(Mutex::new(ConnectionLimiter::new(MAX_OPEN_CONNECTIONS)));
        let mut accept_errors = LogEvery::new(ACCEPT_ERROR_LOG_PERIOD);
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let (close_early, closed_early) = oneshot::channel();
                        let admitted = match lock(&limiter).admit(close_early) {
                            Ok(admitted) => admitted,
                            Err(_) => {
                                // Closed now, with a word if the socket takes it at once.
                                let _ = stream.try_write(BUSY_RESPONSE);
                                continue;
                            }
                        };
                        let (registry, slot) = (Arc::clone(&registry), Slot { limiter: Arc::clone(&limiter), id: admitted.id });
                        tokio::spawn(async move {
                            if let Err(e) = handle(stream, &registry, &slot, closed_early).await {
                                log::debug!("metrics request from {peer}: {e}");
                            }
                        });
                        if let Some(oldest) = admitted.displaced {
                            let _ = oldest.send(());
                            // Lets its task close it before the next accept: a flood of
                            // connections then holds no more descriptors than the cap.
                            tokio::task::yield_now().await;
                        }
                    }
                    Err(e) => {
                        if let Some(left_out) = accept_errors.due(Instant::now()) {
                            let more = if left_out > 0 { format!(" ({left_out} more since the last message)") } else { String::new() };
                            log::warn!("metrics endpoint {}: accept: {e}{more}", self.addr);
                        }
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                },
            }
        }
    }
}

/// Binds `listen` and serves until `shutdown` completes.
pub async fn serve(
    listen: SocketAddr,
    registry: Arc<Mutex<MetricsRegistry>>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), FleetError> {
    MetricsServer::bind(listen).await?.run(registry, shutdown).await;
    Ok(())
}

/// A connection's place among the open ones, given back when its task ends however it ends.
struct Slot {
    limiter: Arc<Limiter>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.limiter).close(self.id);
    }
}

fn lock(limiter: &Limiter) -> MutexGuard<'_, ConnectionLimiter<oneshot::Sender<()>>> {
    // Nothing panics while holding it; if something did, the counts are still whole.
    limiter.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn handle(
    mut stream: TcpStream,
    registry: &Mutex<MetricsRegistry>,
    slot: &Slot,
    closed_early: oneshot::Receiver<()>,
) -> io::Result<()> {
    let timed_out = |_| io::Error::new(io::ErrorKind::TimedOut, "client too slow");
    let head = tokio::select! {
        head = timeout(HEAD_TIMEOUT, read_head(&mut stream)) => head.map_err(timed_out)??,
        _ = closed_early => return Err(io::Error::other("closed to make room for a newer connection")),
    };
    if !lock(&slot.limiter).start_answering(slot.id) {
        return Err(io::Error::other("closed to make room for a newer connection"));
    }
    let response = respond(&head, || {
        // A panic elsewhere while holding the lock leaves whole counters behind: still worth serving.
        registry.lock().unwrap_or_else(PoisonError::into_inner).render()
    });
    timeout(WRITE_TIMEOUT, async {
        stream.write_all(&response).await?;
        stream.shutdown().await
    })
    .await
    .map_err(timed_out)?
}

async fn read_head(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_HEAD_BYTES {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(head)
}

/// The whole response to a request head. `render` runs only for a `/metrics` request.
fn respond(head: &[u8], render: impl FnOnce() -> String) -> Vec<u8> {
    let request_line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let request_line = String::from_utf8_lossy(request_line);
    let mut parts = request_line.trim_end().split(' ');
    let (method, target) = match (parts.next(), parts.next(), parts.next()) {
        (Some(method), Some(target), Some(version)) if version.starts_with("HTTP/1.") => (method, target),
        _ => return response("400 Bad Request", "text/plain", "bad request\n".to_owned(), true),
    };
    let with_body = method == "GET";
    if !with_body && method != "HEAD" {
        return response("405 Method Not Allowed", "text/plain", "GET or HEAD\n".to_owned(), true);
    }
    match target.split('?').next().unwrap_or_default() {
        "/metrics" => response("200 OK", CONTENT_TYPE, render(), with_body),
        "/" => response("200 OK", "text/html; charset=utf-8", INDEX_HTML.to_owned(), with_body),
        _ => response("404 Not Found", "text/plain", "not found; try /metrics\n".to_owned(), with_body),
    }
}

fn response(status: &str, content_type: &str, body: String, with_body: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if with_body {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::metrics::RegistryConfig;

    fn text(head: &str) -> String {
        String::from_utf8(respond(head.as_bytes(), || "x_total 1\n".to_owned())).unwrap()
    }

    #[test]
    fn metrics_are_served_as_text_format_0_0_4() {
        let r = text("GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("\r\nContent-Type: text/plain; version=0.0.4"), "{r}");
        assert!(r.contains("\r\nContent-Length: 10\r\n"), "{r}");
        assert!(r.ends_with("\r\n\r\nx_total 1\n"), "{r}");
        assert!(text("GET /metrics?name[]=x HTTP/1.0\r\n\r\n").ends_with("x_total 1\n"));
    }

    #[test]
    fn head_has_the_length_but_no_body() {
        let r = text("HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(r.contains("Content-Length: 10\r\n") && r.ends_with("\r\n\r\n"), "{r}");
    }

    #[test]
    fn root_links_to_metrics_and_the_rest_is_refused() {
        let root = text("GET / HTTP/1.1\r\n\r\n");
        assert!(root.starts_with("HTTP/1.1 200 OK") && root.contains("href=\"/metrics\""), "{root}");
        assert!(!root.contains("x_total"));
        assert!(text("GET /metricsx HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
        assert!(text("POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
        assert!(text("GET /metrics\r\n\r\n").starts_with("HTTP/1.1 400 "));
        assert!(text("").starts_with("HTTP/1.1 400 "));
    }

    async fn scrape(addr: SocketAddr) -> String {
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
        let mut reply = String::new();
        timeout(WRITE_TIMEOUT, client.read_to_string(&mut reply)).await.unwrap().unwrap();
        reply
    }

    #[tokio::test]
    async fn idle_connections_are_capped_and_never_delay_a_scrape() {
        let registry = Arc::new(Mutex::new(MetricsRegistry::new(RegistryConfig::default())));
        let server = MetricsServer::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = server.local_addr();
        tokio::spawn(server.run(registry, std::future::pending()));
        let mut idle = Vec::new();
        for _ in 0..(4 * MAX_OPEN_CONNECTIONS) {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        let started = Instant::now();
        let reply = scrape(addr).await;
        assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
        assert!(started.elapsed() < Duration::from_millis(500), "scrape took {:?}", started.elapsed());
        // All but the newest were closed to make room, at once: they read end of file.
        let mut closed = 0;
        for conn in &mut idle[..MAX_OPEN_CONNECTIONS] {
            let mut byte = [0u8; 1];
            if let Ok(Ok(0)) = timeout(Duration::from_millis(500), conn.read(&mut byte)).await {
                closed += 1;
            }
        }
        assert_eq!(closed, MAX_OPEN_CONNECTIONS);
        // The newest, idle, are dropped after HEAD_TIMEOUT, and a slow request with them.
        let mut slow = TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET /met").await.unwrap();
        let newest = idle.last_mut().unwrap();
        let mut byte = [0u8; 1];
        let read = timeout(HEAD_TIMEOUT + Duration::from_secs(1), newest.read(&mut byte)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "an idle connection was kept past {HEAD_TIMEOUT:?}: {read:?}");
        let read = timeout(HEAD_TIMEOUT + Duration::from_secs(1), slow.read(&mut byte)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "a slow request was kept past {HEAD_TIMEOUT:?}: {read:?}");
    }

    #[tokio::test]
    async fn a_burst_of_connections_waits_in_the_listen_queue_without_a_lost_syn() {
        // Bound, never accepting: every connection the kernel completes waits in the queue.
        // With the 128 `TcpListener::bind` asks for, the 130th SYN is dropped and its
        // connect waits for the retransmission, 1 s later.
        let server = MetricsServer::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = server.local_addr();
        let mut queued = Vec::new();
        for i in 0..300 {
            match timeout(Duration::from_millis(500), TcpStream::connect(addr)).await {
                Ok(Ok(conn)) => queued.push(conn),
                other => panic!("connection {i} was not queued within 500 ms: {other:?}"),
            }
        }
        assert_eq!(queued.len(), 300);
    }

    #[tokio::test]
    async fn serves_the_registry_over_loopback_until_shutdown() {
        let registry = Arc::new(Mutex::new(MetricsRegistry::new(RegistryConfig::default())));
        let server = MetricsServer::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = server.local_addr();
        assert_ne!(addr.port(), 0);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(server.run(registry, async {
            let _ = stopped.await;
        }));

        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut reply = String::new();
        timeout(WRITE_TIMEOUT, client.read_to_string(&mut reply)).await.unwrap().unwrap();
        assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
        assert!(reply.contains("\njoular_cycles_total 0\n"), "{reply}");

        let taken = MetricsServer::bind(addr).await.unwrap_err();
        assert!(matches!(taken, FleetError::Bind { .. }), "{taken:?}");

        stop.send(()).unwrap();
        timeout(WRITE_TIMEOUT, running).await.unwrap().unwrap();
        assert!(TcpStream::connect(addr).await.is_err(), "still listening after shutdown");
    }
}

//! A fault-injecting TCP proxy on the replicas' peer links, so partitions, one-way cuts, delay
//! and loss work on loopback without privileges.
//!
//! Every replica advertises a proxy port as its peer address; the proxy forwards to the real
//! listener. To act per directed link it must know which replica opened a connection: on
//! accept it looks the client socket up in `/proc/net/tcp` and finds the replica process that
//! owns it (the replicas' pids are kept current by the harness). Connections from anyone else
//! (the harness itself) pass untouched.
//!
//! Per directed link `from → to` a [`LinkState`] says whether bytes flow, and with what delay
//! and loss. When both directions between two replicas are blocked, their connections are
//! closed and new ones refused (a partition: the peers see broken connections). When only one
//! direction is blocked, bytes in that direction stall while the other flows (a one-way cut).
//! Loss on a TCP stream shows as retransmission delay, so a "lost" chunk is delivered after an
//! extra [`LOSS_PENALTY`], in order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::workload::XorShift;

/// Extra delay of a chunk that the loss emulation "drops" (about a TCP retransmission timeout).
pub const LOSS_PENALTY: Duration = Duration::from_millis(200);
/// Chunks queued per direction before the reader waits (backpressure).
const QUEUE_CHUNKS: usize = 256;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The listening port is taken.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// The condition of one directed link.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkState {
    /// No bytes flow in this direction.
    pub blocked: bool,
    /// Added one-way latency.
    pub delay: Duration,
    /// Probability that a chunk is "lost" (delivered [`LOSS_PENALTY`] late).
    pub loss: f64,
}

/// The state of every directed link between replicas, shared by the proxies and the fault
/// injector; changes wake every connection to re-check.
#[derive(Debug)]
pub struct Links {
    state: Mutex<HashMap<(usize, usize), LinkState>>,
    changed: watch::Sender<u64>,
    /// Current pid of each replica (`None` while it is down), to identify connections.
    pids: Mutex<Vec<Option<u32>>>,
}

impl Links {
    /// Healthy links between `n` replicas.
    pub fn new(n: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(HashMap::new()),
            changed: watch::channel(0).0,
            pids: Mutex::new(vec![None; n]),
        })
    }

    /// The state of `from → to`.
    pub fn get(&self, from: usize, to: usize) -> LinkState {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.get(&(from, to)).copied().unwrap_or_default()
    }

    /// Sets `from → to` and wakes every connection.
    pub fn set(&self, from: usize, to: usize, link: LinkState) {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((from, to), link);
        self.changed.send_modify(|v| *v += 1);
    }

    /// Heals every link.
    pub fn heal_all(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.changed.send_modify(|v| *v += 1);
    }

    /// Whether `a` and `b` are cut from each other in both directions.
    fn partitioned(&self, a: usize, b: usize) -> bool {
        self.get(a, b).blocked && self.get(b, a).blocked
    }

    /// Records the pid of replica `i` (`None`: not running).
    pub fn set_pid(&self, i: usize, pid: Option<u32>) {
        if let Some(slot) = self.pids.lock().unwrap_or_else(|p| p.into_inner()).get_mut(i) {
            *slot = pid;
        }
    }

    fn pids(&self) -> Vec<Option<u32>> {
        self.pids.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Runs the proxy in front of replica `to`: accepts on `listen` and forwards to `target`,
/// until the returned task is aborted.
pub async fn start(
    links: Arc<Links>,
    to: usize,
    listen: &str,
    target: String,
    seed: u64,
) -> Result<tokio::task::JoinHandle<()>, ProxyError> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| ProxyError::Bind {
            addr: listen.to_string(),
            source,
        })?;
    Ok(tokio::spawn(async move {
        let mut conns = JoinSet::new();
        let mut n = 0u64;
        loop {
            let Ok((client, peer)) = listener.accept().await else {
                continue;
            };
            while conns.try_join_next().is_some() {}
            let local_port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
            let from = owner(&links.pids(), peer.port(), local_port);
            n += 1;
            let conn_seed = seed ^ (n << 16) ^ to as u64;
            conns.spawn(serve(links.clone(), client, target.clone(), from, to, conn_seed));
        }
    }))
}

/// Forwards one connection until either side closes or the link is partitioned.
async fn serve(
    links: Arc<Links>,
    client: TcpStream,
    target: String,
    from: Option<usize>,
    to: usize,
    seed: u64,
) {
    if from.is_some_and(|f| links.partitioned(f, to)) {
        return;
    }
    let Ok(server) = TcpStream::connect(&target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let mut tasks = JoinSet::new();
    // Client → server carries from → to; the answers carry to → from.
    tasks.spawn(pump(links.clone(), cr, sw, from.map(|f| (f, to)), seed));
    tasks.spawn(pump(
        links.clone(),
        sr,
        cw,
        from.map(|f| (to, f)),
        seed.rotate_left(7),
    ));
    let mut changed = links.changed.subscribe();
    loop {
        tokio::select! {
            _ = tasks.join_next() => return,
            r = changed.changed() => {
                if r.is_err() || from.is_some_and(|f| links.partitioned(f, to)) {
                    return;
                }
            }
        }
    }
}

/// Copies one direction, applying the link's delay, loss and blocking.
async fn pump<R, W>(links: Arc<Links>, mut r: R, mut w: W, link: Option<(usize, usize)>, seed: u64)
where
    R: AsyncReadExt + Unpin + Send + 'static,
    W: AsyncWriteExt + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<(tokio::time::Instant, Vec<u8>)>(QUEUE_CHUNKS);
    let reader_links = links.clone();
    let reader = tokio::spawn(async move {
        let mut rng = XorShift::new(seed);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let state = link.map(|(f, t)| reader_links.get(f, t)).unwrap_or_default();
            let mut due = tokio::time::Instant::now() + state.delay;
            if state.loss > 0.0 && (rng.below(1_000_000) as f64) < state.loss * 1_000_000.0 {
                due += LOSS_PENALTY;
            }
            if tx.send((due, buf[..n].to_vec())).await.is_err() {
                return;
            }
        }
    });
    let mut changed = links.changed.subscribe();
    let mut last_due = tokio::time::Instant::now();
    while let Some((due, bytes)) = rx.recv().await {
        // In order: a chunk never overtakes an earlier, later-due one.
        last_due = last_due.max(due);
        tokio::time::sleep_until(last_due).await;
        while link.is_some_and(|(f, t)| links.get(f, t).blocked) {
            if changed.changed().await.is_err() {
                break;
            }
        }
        if w.write_all(&bytes).await.is_err() {
            break;
        }
    }
    reader.abort();
}

/// The replica whose process owns the loopback socket `127.0.0.1:port` connected to our
/// `local_port`, found through `/proc/net/tcp` and the replicas' file descriptors.
fn owner(pids: &[Option<u32>], port: u16, local_port: u16) -> Option<usize> {
    let inode = socket_inode(port, local_port)?;
    let needle = format!("socket:[{inode}]");
    pids.iter().enumerate().find_map(|(i, pid)| {
        let dir = std::fs::read_dir(format!("/proc/{}/fd", (*pid)?)).ok()?;
        dir.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == needle.as_str()))
            .then_some(i)
    })
}

/// The inode of the TCP socket with local port `port` and remote port `remote_port`.
fn socket_inode(port: u16, remote_port: u16) -> Option<u64> {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|path| {
        let text = std::fs::read_to_string(path).ok()?;
        find_inode(&text, port, remote_port)
    })
}

/// Parses `/proc/net/tcp` text for the socket `port → remote_port`.
fn find_inode(text: &str, port: u16, remote_port: u16) -> Option<u64> {
    let port_of = |addr: &str| {
        addr.rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
    };
    text.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (local, remote, inode) = (f.get(1)?, f.get(2)?, f.get(9)?);
        (port_of(local)? == port && port_of(remote)? == remote_port)
            .then(|| inode.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tcp_lines_are_matched_by_both_ports() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4242 1 0 20 4 30 10 -1\n\
   1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0 20 4 30 10 -1\n";
        assert_eq!(find_inode(text, 0xC350, 0x1F90), Some(4343));
        assert_eq!(find_inode(text, 0x1F90, 0xC350), Some(4242));
        assert_eq!(find_inode(text, 1, 2), None);
    }

    #[tokio::test]
    async fn own_connections_are_identified_and_blocked_links_stall() {
        let links = Links::new(2);
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let mut b = [0u8; 16];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 || s.write_all(&b[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let listen = probe.local_addr().unwrap().to_string();
        drop(probe);
        let proxy = start(links.clone(), 1, &listen, echo_addr, 1).await.unwrap();
        // This test process plays replica 0.
        links.set_pid(0, Some(std::process::id()));
        let mut c = TcpStream::connect(&listen).await.unwrap();
        c.write_all(b"hi").await.unwrap();
        let mut b = [0u8; 2];
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"hi");
        links.set(
            0,
            1,
            LinkState {
                blocked: true,
                ..Default::default()
            },
        );
        c.write_all(b"yo").await.unwrap();
        let stalled = tokio::time::timeout(Duration::from_millis(300), c.read_exact(&mut b)).await;
        assert!(stalled.is_err(), "a blocked direction must not deliver");
        links.heal_all();
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"yo");
        links.set(
            0,
            1,
            LinkState {
                blocked: true,
                ..Default::default()
            },
        );
        links.set(
            1,
            0,
            LinkState {
                blocked: true,
                ..Default::default()
            },
        );
        let n = tokio::time::timeout(Duration::from_secs(2), c.read(&mut b))
            .await
            .unwrap()
            .unwrap_or(0);
        assert_eq!(n, 0, "a partition closes the connection");
        proxy.abort();
    }
}

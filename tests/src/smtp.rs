//! A minimal SMTP sink on loopback: it speaks enough of RFC 5321 for a
//! client to deliver (EHLO, MAIL, RCPT, DATA, QUIT) and keeps each message.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// One message the sink accepted.
#[derive(Clone, Debug, Default)]
pub struct Mail {
    /// `MAIL FROM` address.
    pub from: String,
    /// `RCPT TO` addresses.
    pub to: Vec<String>,
    /// The message as sent (headers and body).
    pub data: String,
}

/// The sink; stops with the test's runtime.
pub struct SmtpSink {
    /// `smtp://127.0.0.1:PORT`.
    pub url: String,
    received: Arc<Mutex<Vec<Mail>>>,
}

fn address(line: &str) -> String {
    line.split_once(':')
        .map(|(_, rest)| {
            rest.trim()
                .trim_start_matches('<')
                .split('>')
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .unwrap_or_default()
}

impl SmtpSink {
    /// Starts a sink on `127.0.0.1:0`.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind SMTP sink");
        let port = listener.local_addr().expect("SMTP address").port();
        let received: Arc<Mutex<Vec<Mail>>> = Arc::default();
        let store = received.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let store = store.clone();
                tokio::spawn(async move {
                    let (read, mut write) = socket.into_split();
                    let mut lines = BufReader::new(read).lines();
                    let _ = write.write_all(b"220 sink ESMTP\r\n").await;
                    let mut mail = Mail::default();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let verb = line.get(..4).unwrap_or_default().to_ascii_uppercase();
                        let reply: &[u8] = match verb.as_str() {
                            "EHLO" | "HELO" => b"250 sink\r\n",
                            "MAIL" => {
                                mail = Mail {
                                    from: address(&line),
                                    ..Mail::default()
                                };
                                b"250 OK\r\n"
                            }
                            "RCPT" => {
                                mail.to.push(address(&line));
                                b"250 OK\r\n"
                            }
                            "DATA" => {
                                let _ = write.write_all(b"354 go ahead\r\n").await;
                                while let Ok(Some(data)) = lines.next_line().await {
                                    if data == "." {
                                        break;
                                    }
                                    mail.data.push_str(data.strip_prefix('.').unwrap_or(&data));
                                    mail.data.push('\n');
                                }
                                store.lock().expect("sink").push(std::mem::take(&mut mail));
                                b"250 queued\r\n"
                            }
                            "QUIT" => {
                                let _ = write.write_all(b"221 bye\r\n").await;
                                break;
                            }
                            _ => b"250 OK\r\n",
                        };
                        if write.write_all(reply).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Self {
            url: format!("smtp://127.0.0.1:{port}"),
            received,
        }
    }

    /// The messages accepted so far.
    pub fn received(&self) -> Vec<Mail> {
        self.received.lock().expect("sink").clone()
    }
}

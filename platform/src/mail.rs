//! E-mail to users (an agency owner's endpoint disabled after failed
//! deliveries, a link to choose a password) through the configured SMTP
//! relay. Without one, notifications are only recorded.

use lettre::message::Mailbox;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

/// Sends mail through one SMTP relay.
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry the relay's credentials: never print it.
        f.debug_struct("Mailer")
            .field("from", &self.from)
            .finish_non_exhaustive()
    }
}

impl Mailer {
    /// A mailer for `url` (`smtp://[user:password@]host[:port]` with STARTTLS
    /// when offered, `smtps://…` for TLS from the start; `?tls=required` to
    /// insist on STARTTLS) sending as `from`.
    pub fn new(url: &str, from: &str) -> anyhow::Result<Self> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|err| anyhow::anyhow!("SMTP URL: {err}"))?
            .build();
        let from = from
            .parse::<Mailbox>()
            .map_err(|err| anyhow::anyhow!("mail sender {from:?}: {err}"))?;
        Ok(Self { transport, from })
    }

    /// Sends a plain-text message to `to`.
    pub async fn send(&self, to: &str, subject: &str, body: &str) -> Result<(), String> {
        let to = to
            .parse::<Mailbox>()
            .map_err(|err| format!("recipient {to:?}: {err}"))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .body(body.to_owned())
            .map_err(|err| format!("building the message: {err}"))?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|err| format!("SMTP: {err}"))
    }
}

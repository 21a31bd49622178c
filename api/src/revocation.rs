//! Revocation across processes. Every API process caches authenticated keys
//! for 30 seconds; a revocation forgets the key at once in the process that
//! made it and, in every other process, as soon as it hears of it: from the
//! database (`spawn_database_follower`: PostgreSQL's notification, or the
//! SQLite file's new audit rows), which reaches every process sharing the
//! data whatever made the change (`api admin revoke-key`, a rotation
//! expiring in a worker), and through Redis pub/sub where the deployment
//! shares a Redis.

use std::time::Duration;

use futures::StreamExt;
use storage::api_keys::KeyEnded;
use storage::ids::ApiKeyId;
use tokio::sync::watch;

use crate::state::AppState;

/// The channel revoked key ids are published on.
pub const CHANNEL: &str = "listing-api:key-revoked";

/// Tells every process sharing `redis_url` that `key` was revoked.
pub async fn publish(redis_url: &str, key: &ApiKeyId) -> Result<(), redis::RedisError> {
    let client = redis::Client::open(redis_url)?;
    let mut connection = client.get_multiplexed_async_connection().await?;
    redis::cmd("PUBLISH")
        .arg(CHANNEL)
        .arg(key.as_str())
        .query_async::<i64>(&mut connection)
        .await
        .map(|_| ())
}

/// Makes a revocation take effect: forgotten here at once and, when the
/// deployment shares Redis, announced to every other process. A failed
/// announcement is logged; other processes then drop the key within the
/// cache's 30-second TTL.
pub async fn announce(state: &AppState, key: &ApiKeyId) {
    state.key_cache().forget(key);
    if let Some(url) = state.revocation_redis_url()
        && let Err(err) = publish(url, key).await
    {
        tracing::warn!(%err, key_id = %key, "could not announce a revocation; replicas drop the key within 30 seconds");
    }
}

/// Forgets, in this process, every key revoked anywhere; reconnects after a
/// lost connection.
///
/// A revocation published while this process is not subscribed is lost, so
/// the whole key cache is cleared whenever the subscription ends, whether the
/// message stream failed or simply ended (redis 1.x ends it quietly when the
/// connection drops), and again once a new subscription is in place, since a
/// request served in between may have cached a key revoked meanwhile. The
/// receiver counts subscriptions made: once it says one, every announcement
/// from then on is heard (until the count moves again).
pub fn spawn_listener(
    redis_url: String,
    state: AppState,
) -> (tokio::task::JoinHandle<()>, watch::Receiver<u64>) {
    let (subscribed, subscriptions) = watch::channel(0_u64);
    let task = tokio::spawn(async move {
        loop {
            match listen(&redis_url, &state, &subscribed).await {
                Ok(()) => tracing::warn!("revocation listener's subscription ended; reconnecting"),
                Err(err) => tracing::warn!(%err, "revocation listener lost Redis; reconnecting"),
            }
            state.key_cache().clear();
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    });
    (task, subscriptions)
}

/// Subscribes and forgets every announced key until the subscription ends.
async fn listen(
    redis_url: &str,
    state: &AppState,
    subscribed: &watch::Sender<u64>,
) -> Result<(), redis::RedisError> {
    let client = redis::Client::open(redis_url)?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(CHANNEL).await?;
    // Announcements made before this point never reach us: start afresh.
    state.key_cache().clear();
    subscribed.send_modify(|count| *count += 1);
    let mut messages = pubsub.on_message();
    while let Some(message) = messages.next().await {
        let Ok(payload) = message.get_payload::<String>() else {
            continue;
        };
        if let Some(key) = ApiKeyId::parse(&payload) {
            state.key_cache().forget(&key);
            tracing::info!(key_id = %key, "revoked key forgotten");
        }
    }
    Ok(())
}

/// How often the SQLite follower looks at the file: a revocation made by
/// another process is honoured within this.
pub const SQLITE_FOLLOW_INTERVAL: Duration = Duration::from_millis(50);

/// Forgets, in this process, every key any process sharing the database
/// ends (revokes, or expires at the end of a rotation); follows again after
/// a lost connection. Whenever following (re)starts, every cached key is
/// forgotten, since a key may have ended while nobody listened. The
/// receiver counts those catch-ups: once it says one, the follower hears
/// every key ended from then on.
pub fn spawn_database_follower(
    state: AppState,
) -> (tokio::task::JoinHandle<()>, watch::Receiver<u64>) {
    let (caught_up, catch_ups) = watch::channel(0_u64);
    let task = tokio::spawn(async move {
        loop {
            let cache = state.key_cache();
            let followed = state
                .store()
                .api_keys()
                .follow_ended(SQLITE_FOLLOW_INTERVAL, |ended| match ended {
                    KeyEnded::Key(key) => {
                        cache.forget(&key);
                        tracing::info!(key_id = %key, "ended key forgotten");
                    }
                    KeyEnded::CatchUp => {
                        cache.clear();
                        caught_up.send_modify(|count| *count += 1);
                    }
                })
                .await;
            match followed {
                Ok(()) => {
                    tracing::warn!("the database's news of ended keys stopped; following again")
                }
                Err(err) => {
                    tracing::warn!(%err, "lost the database's news of ended keys; following again");
                }
            }
            state.key_cache().clear();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    (task, catch_ups)
}

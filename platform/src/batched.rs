//! Calls that concurrent jobs make of the database one at a time, answered
//! together. Every statement is a round trip to the database (on SQLite, to
//! its connection's thread and back), so sixty-four deliveries each reading
//! their target and recording their attempt cost sixty-four times the round
//! trips of one read and one write of all of them. A caller hands its
//! request to one task, which takes every request waiting (up to a limit),
//! answers them with one call and hands each caller its answer. Under no
//! load a batch is one request and costs what a direct call would; under
//! load batches grow by themselves, with no timer.

use std::future::Future;

use tokio::sync::{mpsc, oneshot};

/// What a caller gets: its answer, or why the batch failed.
pub type Answer<T> = Result<T, String>;

type Waiting<Request, Response> = (Request, oneshot::Sender<Answer<Response>>);

/// A task answering requests in batches.
pub struct Batched<Request, Response> {
    sender: mpsc::UnboundedSender<Waiting<Request, Response>>,
}

impl<Request, Response> Clone for Batched<Request, Response> {
    fn clone(&self) -> Self {
        Self {
            sender: self.sender.clone(),
        }
    }
}

impl<Request, Response> std::fmt::Debug for Batched<Request, Response> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batched").finish_non_exhaustive()
    }
}

impl<Request, Response> Batched<Request, Response>
where
    Request: Send + 'static,
    Response: Send + 'static,
{
    /// Starts the task on the current runtime. `answer` gets up to `limit`
    /// requests and returns one answer per request, in their order.
    pub fn start<F, Fut>(limit: usize, answer: F) -> Self
    where
        F: Fn(Vec<Request>) -> Fut + Send + 'static,
        Fut: Future<Output = Vec<Answer<Response>>> + Send,
    {
        let (sender, mut receiver) = mpsc::unbounded_channel::<Waiting<Request, Response>>();
        tokio::spawn(async move {
            let mut waiting = Vec::with_capacity(limit);
            while receiver.recv_many(&mut waiting, limit).await > 0 {
                let (requests, replies): (Vec<_>, Vec<_>) = waiting.drain(..).unzip();
                let count = requests.len();
                let answers = answer(requests).await;
                if answers.len() == count {
                    for (reply, answer) in replies.into_iter().zip(answers) {
                        // A caller that stopped waiting wants nothing.
                        let _ = reply.send(answer);
                    }
                } else {
                    let err = format!("{} answers to {count} requests", answers.len());
                    for reply in replies {
                        let _ = reply.send(Err(err.clone()));
                    }
                }
            }
        });
        Self { sender }
    }

    /// Hands `request` to the task and waits for its answer.
    pub async fn call(&self, request: Request) -> Answer<Response> {
        let (reply, answer) = oneshot::channel();
        self.sender
            .send((request, reply))
            .map_err(|_| "the batching task has stopped".to_owned())?;
        answer
            .await
            .map_err(|_| "the batching task stopped before answering".to_owned())?
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn concurrent_calls_share_batches_and_each_gets_its_own_answer() {
        let batches = Arc::new(AtomicUsize::new(0));
        let counted = batches.clone();
        let doubled = Batched::start(16, move |numbers: Vec<u32>| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move { numbers.into_iter().map(|n| Ok(n * 2)).collect() }
        });
        let calls: Vec<_> = (0..64)
            .map(|n| {
                let doubled = doubled.clone();
                tokio::spawn(async move { (n, doubled.call(n).await) })
            })
            .collect();
        for call in calls {
            let (n, answer) = call.await.unwrap();
            assert_eq!(answer, Ok(n * 2));
        }
        // All 64 were waiting when the task first ran (one thread): four
        // batches of the limit, not 64 calls.
        assert_eq!(batches.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn each_caller_gets_its_own_failure_and_a_short_batch_fails_all() {
        let odd_refused = Batched::start(8, |numbers: Vec<u32>| async move {
            numbers
                .into_iter()
                .map(|n| {
                    if n % 2 == 1 {
                        Err(format!("{n} is odd"))
                    } else {
                        Ok(n)
                    }
                })
                .collect()
        });
        let (one, two) = tokio::join!(odd_refused.call(1), odd_refused.call(2));
        assert_eq!(one, Err("1 is odd".to_owned()));
        assert_eq!(two, Ok(2));
        let short = Batched::start(8, |_: Vec<u32>| async { Vec::<Answer<u32>>::new() });
        assert_eq!(
            short.call(1).await,
            Err("0 answers to 1 requests".to_owned())
        );
    }
}

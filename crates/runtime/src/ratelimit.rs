//! A client-side token bucket (QPS + burst) as a tower layer for `kube::Client`, for clusters
//! where an operator must not flood a shared API server. Off unless asked for.
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

#[derive(Debug)]
struct Bucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl Bucket {
    /// Takes a token, or says how long until one is available.
    fn try_take(&self) -> Result<(), Duration> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(s.1).as_secs_f64() * self.qps;
        s.0 = (s.0 + refill).min(self.burst);
        s.1 = now;
        if s.0 >= 1.0 {
            s.0 -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - s.0) / self.qps))
        }
    }
}

#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    bucket: Arc<Bucket>,
}

impl RateLimitLayer {
    /// `qps` requests per second on average, bursts of up to `burst`.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        RateLimitLayer {
            bucket: Arc::new(Bucket {
                qps: qps.max(0.001),
                burst,
                state: Mutex::new((burst, Instant::now())),
            }),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            sleep: None,
            has_token: false,
        }
    }
}

pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<Bucket>,
    sleep: Option<Pin<Box<Sleep>>>,
    has_token: bool,
}

impl<S, Req> Service<Req> for RateLimit<S>
where
    S: Service<Req>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.has_token {
            if let Some(sleep) = self.sleep.as_mut() {
                match sleep.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) => self.sleep = None,
                }
            }
            match self.bucket.try_take() {
                Ok(()) => self.has_token = true,
                Err(wait) => self.sleep = Some(Box::pin(tokio::time::sleep(wait))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        self.has_token = false;
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_burst_then_paces() {
        let layer = RateLimitLayer::new(10.0, 3);
        let mut svc = layer.layer(tower::service_fn(|_: ()| async {
            Ok::<_, std::convert::Infallible>(())
        }));
        let start = Instant::now();
        for _ in 0..3 {
            futures::future::poll_fn(|cx| svc.poll_ready(cx))
                .await
                .expect("ready");
            svc.call(()).await.expect("call");
        }
        assert!(
            start.elapsed() < Duration::from_millis(1),
            "burst is immediate"
        );
        for _ in 0..5 {
            futures::future::poll_fn(|cx| svc.poll_ready(cx))
                .await
                .expect("ready");
            svc.call(()).await.expect("call");
        }
        // 5 more tokens at 10/s take ~0.5 s of (paused, virtual) time.
        let e = start.elapsed();
        assert!(
            e >= Duration::from_millis(450) && e <= Duration::from_millis(600),
            "{e:?}"
        );
    }
}

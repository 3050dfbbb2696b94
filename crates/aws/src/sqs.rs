//! The interruption queue on SQS (Karpenter `pkg/providers/sqs`): the [`InterruptionQueue`] seam over
//! aws-sdk-sqs. The controller's interruption task reads it; `stowage_decide::interruption` parses and
//! decides.
//!
//! | call | parameters |
//! |---|---|
//! | `GetQueueUrl` | `QueueName` = the setting `interruptionQueue` (once; again after the queue was not found). A value that is already a URL is used as is |
//! | `ReceiveMessage` | `MaxNumberOfMessages` 10, `WaitTimeSeconds` 20 (long poll), `VisibilityTimeout` 20 s, `MessageSystemAttributeNames` SentTimestamp |
//! | `DeleteMessage` | the receipt handle of a handled message |
//!
//! Calls go through the provider's bounded retries ([`crate::retry`]); the SDK's own retries are off.

use std::sync::Mutex;

use aws_sdk_sqs::types::MessageSystemAttributeName;
use stowage_decide::cloud::{CloudError, InterruptionQueue, QueueFuture, QueueMessage};

use super::errors::AwsError;
use super::retry::{RetryPolicy, call_with_retries};

/// Karpenter's receive parameters.
pub const MAX_MESSAGES: i32 = 10;
pub const WAIT_SECONDS: i32 = 20;
pub const VISIBILITY_SECONDS: i32 = 20;

/// The error codes SQS answers for a queue that does not exist (JSON and query protocols).
const NO_QUEUE: [&str; 2] = ["QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"];

/// An SQS queue named by the setting `interruptionQueue`.
pub struct SqsQueue {
    client: aws_sdk_sqs::Client,
    queue: String,
    url: Mutex<Option<String>>,
    retry: RetryPolicy,
    wait_seconds: i32,
}

impl SqsQueue {
    /// `queue` is the queue's name (or its URL). The SDK's retries are replaced by `retry`.
    pub fn new(sdk: &aws_config::SdkConfig, queue: impl Into<String>, retry: RetryPolicy) -> Result<Self, CloudError> {
        let queue = queue.into();
        if queue.trim().is_empty() {
            return Err(CloudError::Fatal("interruptionQueue: the queue name is empty".into()));
        }
        let conf = aws_sdk_sqs::config::Builder::from(sdk).retry_config(aws_sdk_sqs::config::retry::RetryConfig::standard().with_max_attempts(1)).build();
        let url = (queue.starts_with("https://") || queue.starts_with("http://")).then(|| queue.clone());
        Ok(SqsQueue { client: aws_sdk_sqs::Client::from_conf(conf), queue, url: Mutex::new(url), retry, wait_seconds: WAIT_SECONDS })
    }

    /// A shorter long-poll wait (tests; SQS allows 0-20 s).
    pub fn with_wait_seconds(mut self, seconds: i32) -> Self {
        self.wait_seconds = seconds.clamp(0, WAIT_SECONDS);
        self
    }

    fn cached(&self) -> Option<String> {
        self.url.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, url: Option<String>) {
        *self.url.lock().unwrap_or_else(|p| p.into_inner()) = url;
    }

    /// The queue's URL, asked once.
    pub async fn url(&self) -> Result<String, CloudError> {
        if let Some(u) = self.cached() {
            return Ok(u);
        }
        let out = call_with_retries(&self.retry, "GetQueueUrl", || self.client.get_queue_url().queue_name(&self.queue).send()).await.map_err(|e| self.error(e))?;
        let url = out.queue_url.filter(|u| !u.is_empty()).ok_or_else(|| CloudError::Fatal(format!("GetQueueUrl for {}: the answer has no URL", self.queue)))?;
        self.set(Some(url.clone()));
        Ok(url)
    }

    /// Names the queue; a missing queue is forgotten so that its URL is asked again next time.
    fn error(&self, e: AwsError) -> CloudError {
        if e.code.as_deref().is_some_and(|c| NO_QUEUE.contains(&c)) {
            if !self.queue.starts_with("http") {
                self.set(None);
            }
            return CloudError::Fatal(format!("interruption queue {:?} does not exist or is not readable: {e}", self.queue));
        }
        CloudError::from(e)
    }

    async fn receive_now(&self) -> Result<Vec<QueueMessage>, CloudError> {
        let url = self.url().await?;
        let out = call_with_retries(&self.retry, "ReceiveMessage", || {
            self.client
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(MAX_MESSAGES)
                .wait_time_seconds(self.wait_seconds)
                .visibility_timeout(VISIBILITY_SECONDS)
                .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
                .send()
        })
        .await
        .map_err(|e| self.error(e))?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| {
                let receipt = m.receipt_handle.filter(|r| !r.is_empty())?;
                Some(QueueMessage { id: m.message_id.unwrap_or_default(), receipt, body: m.body.unwrap_or_default() })
            })
            .collect())
    }

    async fn delete_now(&self, receipt: &str) -> Result<(), CloudError> {
        let url = self.url().await?;
        call_with_retries(&self.retry, "DeleteMessage", || self.client.delete_message().queue_url(&url).receipt_handle(receipt).send()).await.map_err(|e| self.error(e))?;
        Ok(())
    }
}

impl InterruptionQueue for SqsQueue {
    fn name(&self) -> &str {
        &self.queue
    }

    fn receive(&self) -> QueueFuture<'_, Vec<QueueMessage>> {
        Box::pin(self.receive_now())
    }

    fn delete<'a>(&'a self, receipt: &'a str) -> QueueFuture<'a, ()> {
        Box::pin(self.delete_now(receipt))
    }
}

-- How an endpoint's deliveries are signed: `spec` (X-Webhook-Signature) or
-- `standard_webhooks` (webhook-id, webhook-timestamp, webhook-signature).
alter table webhook_endpoints add column signature_scheme text not null default 'spec';

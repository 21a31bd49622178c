-- A rotated signing secret stays valid for an overlap: deliveries carry a
-- signature for it as well until it expires.
alter table webhook_endpoints add column previous_secret_sealed text;
alter table webhook_endpoints add column previous_secret_expires_at integer;

-- Ordered endpoints: with ordering 'listing', deliveries of events about the
-- same listing (order_key, its listing number) are made in commit order
-- (event_seq); a later one waits (waiting_for_order) while an earlier one
-- is pending or retrying, and is woken when that one ends.
alter table webhook_endpoints add column ordering text not null default 'none';
alter table webhook_deliveries add column order_key text;
alter table webhook_deliveries add column event_seq bigint;
alter table webhook_deliveries add column waiting_for_order boolean not null default false;
create index webhook_deliveries_in_order on webhook_deliveries (endpoint_id, order_key, event_seq)
    where order_key is not null;

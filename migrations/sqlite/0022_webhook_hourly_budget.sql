-- Each endpoint's hourly delivery budget is its own setting (the
-- specification's 1000 by default; null: no budget). It is spent evenly
-- (GCRA: budget_tat is the theoretical arrival time, in microseconds), and a
-- delivery held back by it records until when (held_until), so an endpoint's
-- backlog can be counted and released.
alter table webhook_endpoints add column hourly_budget integer default 1000;
alter table webhook_endpoints add column budget_tat integer;
alter table webhook_deliveries add column held_until integer;
create index webhook_deliveries_held on webhook_deliveries (endpoint_id, held_until)
    where held_until is not null;

-- Operators may raise or lower an agency's budgets (agency_listing_reads and
-- friends) for that agency alone: {budget_name: requests_per_minute}.
alter table agencies add column rate_limit_overrides jsonb not null default '{}';

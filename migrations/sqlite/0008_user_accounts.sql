-- The account fields of users created through the API.
alter table users add column first_name text;
alter table users add column last_name text;
alter table users add column brokerage_name text;
alter table users add column office_name text;
alter table users add column is_verified integer not null default 0 check (is_verified in (0, 1));
alter table users add column timezone text not null default 'America/Los_Angeles';
alter table users add column login_count integer not null default 0;

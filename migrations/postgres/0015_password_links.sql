-- One-time links that let a user choose a password: e-mailed when an account
-- is created without one, and on request (a forgotten password). Only a keyed
-- hash of the token is stored; a link works once, within the hour.
create table password_tokens (
    token_hash text primary key,
    user_id    text not null references users (id),
    purpose    text not null check (purpose in ('first_password', 'reset')),
    created_at bigint not null,
    expires_at bigint not null,
    used_at    bigint
);

create index password_tokens_by_user on password_tokens (user_id);
create index password_tokens_by_expiry on password_tokens (expires_at);

-- The token of a password e-mail, sealed, so the mailer can fill in the link
-- when it sends; cleared once the link is spent or has expired.
alter table notifications add column secret_sealed text;

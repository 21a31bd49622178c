//! The rules a webhook endpoint's fields obey, shared by the registration
//! and `PATCH` routes and by `api admin webhook-endpoints update`, so an
//! operator cannot store what the API would refuse.

use std::fmt;

use platform::webhooks::AddressPolicy;
use storage::rules::event_catalog;
use storage::webhooks::{
    DeliveryOrdering, EndpointChanges, EndpointEnvironment, MAX_HOURLY_BUDGET, SignatureScheme,
};
use storage::{Environment, Tenant};

use crate::error::ApiError;

/// Longest accepted label, in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// Longest accepted URL, in bytes.
pub const MAX_URL_CHARS: usize = 2048;

/// A field refused, and why. The API shows it as `validation.failed` with
/// `details.fields`; the admin command as `validation.failed` with
/// `"field: reason"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field's wire name (`url`, `event_types`, `name`, `environment`).
    pub field: &'static str,
    /// Why it was refused.
    pub reason: String,
}

impl FieldError {
    fn new(field: &'static str, reason: impl Into<String>) -> Self {
        Self {
            field,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

impl From<FieldError> for ApiError {
    fn from(err: FieldError) -> Self {
        ApiError::field(err.field, err.reason)
    }
}

/// A label: trimmed; blank means none.
pub fn name(name: Option<String>) -> Result<Option<String>, FieldError> {
    match name.map(|n| n.trim().to_owned()) {
        Some(n) if n.chars().count() > MAX_NAME_CHARS => Err(FieldError::new(
            "name",
            format!("must be at most {MAX_NAME_CHARS} characters"),
        )),
        Some(n) if n.is_empty() => Ok(None),
        other => Ok(other),
    }
}

/// Checks a URL: HTTPS, no credentials or fragment, a host whose every
/// resolved address `policy` allows. Returns it normalised.
pub async fn url(policy: AddressPolicy, url: &str) -> Result<String, FieldError> {
    let reason = |reason: String| FieldError::new("url", reason);
    if url.chars().count() > MAX_URL_CHARS {
        return Err(reason(format!(
            "must be at most {MAX_URL_CHARS} characters"
        )));
    }
    let parsed =
        url::Url::parse(url.trim()).map_err(|err| reason(format!("is not a URL: {err}")))?;
    if parsed.scheme() != "https" {
        return Err(reason("must be an https URL".into()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(reason("must not carry credentials".into()));
    }
    if parsed.fragment().is_some() {
        return Err(reason("must not have a fragment".into()));
    }
    let Some(host) = parsed.host_str() else {
        return Err(reason("must name a host".into()));
    };
    let port = parsed.port_or_known_default().unwrap_or(443);
    policy.resolve(host, port).await.map_err(reason)?;
    Ok(parsed.to_string())
}

/// Event types, canonicalised through their aliases and deduplicated;
/// `None` is every type. Test-only and planned types cannot be subscribed to.
pub fn event_types(types: Option<Vec<String>>) -> Result<Option<Vec<String>>, FieldError> {
    let Some(types) = types else {
        return Ok(None);
    };
    if types.is_empty() {
        return Err(FieldError::new(
            "event_types",
            "must name at least one type; omit it to receive every type",
        ));
    }
    let mut canonical: Vec<String> = Vec::with_capacity(types.len());
    for name in &types {
        let Some(entry) = event_catalog::resolve(name) else {
            return Err(FieldError::new(
                "event_types",
                format!("{name:?} is not an event type (see GET /webhooks/events)"),
            ));
        };
        if entry.test_only {
            return Err(FieldError::new(
                "event_types",
                format!("{name} is sent only by test fires"),
            ));
        }
        if !entry.emitted {
            return Err(FieldError::new(
                "event_types",
                format!(
                    "{name} is planned, not emitted yet: it cannot be subscribed to until it is (see GET /webhooks/events)"
                ),
            ));
        }
        if !canonical.iter().any(|c| c == entry.event_type) {
            canonical.push(entry.event_type.to_owned());
        }
    }
    Ok(Some(canonical))
}

/// An environment (`live`, `sandbox`, `both` or the specification's labels).
/// A sandbox tenant's endpoints hear sandbox events only.
pub fn environment(
    tenant: &Tenant,
    text: Option<&str>,
) -> Result<Option<EndpointEnvironment>, FieldError> {
    let Some(text) = text else {
        return Ok(None);
    };
    let environment = EndpointEnvironment::parse(text).ok_or_else(|| {
        FieldError::new(
            "environment",
            "must be live, sandbox or both (\"Live events only\", \"Sandbox events only\", \"Both\")",
        )
    })?;
    if tenant.environment == Environment::Sandbox && environment != EndpointEnvironment::Sandbox {
        return Err(FieldError::new(
            "environment",
            "a sandbox key registers endpoints for sandbox events only",
        ));
    }
    Ok(Some(environment))
}

/// A signature scheme: `spec` (the specification's `X-Webhook-Signature`)
/// or `standard_webhooks`.
pub fn signature_scheme(text: Option<&str>) -> Result<Option<SignatureScheme>, FieldError> {
    text.map(|text| {
        SignatureScheme::parse(text).ok_or_else(|| {
            FieldError::new(
                "signature_scheme",
                "must be spec (X-Webhook-Signature) or standard_webhooks (webhook-id, webhook-timestamp, webhook-signature)",
            )
        })
    })
    .transpose()
}

/// An ordering: `none` or `listing`.
pub fn ordering(text: Option<&str>) -> Result<Option<DeliveryOrdering>, FieldError> {
    text.map(|text| {
        DeliveryOrdering::parse(text).ok_or_else(|| {
            FieldError::new(
                "ordering",
                "must be none (deliveries go as soon as each can) or listing (events about one listing in commit order)",
            )
        })
    })
    .transpose()
}

/// A whole number from a JSON number (`3600` and `3600.0` alike), if it is one.
pub fn whole_number(number: &serde_json::Number) -> Option<i64> {
    number.as_i64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 1e15)
            .map(|f| f as i64)
    })
}

/// An hourly budget: deliveries per hour, 1 to 1,000,000; `null` turns it off.
pub fn hourly_budget(number: Option<&serde_json::Number>) -> Result<Option<i32>, FieldError> {
    let Some(number) = number else {
        return Ok(None);
    };
    whole_number(number)
        .filter(|budget| (1..=i64::from(MAX_HOURLY_BUDGET)).contains(budget))
        .and_then(|budget| i32::try_from(budget).ok())
        .map(Some)
        .ok_or_else(|| {
            FieldError::new(
                "hourly_budget",
                format!(
                    "is a whole number of deliveries per hour from 1 to {MAX_HOURLY_BUDGET}, or null for no budget"
                ),
            )
        })
}

/// The environment of an endpoint registered without one: the tenant's own.
pub fn default_environment(tenant: &Tenant) -> EndpointEnvironment {
    match tenant.environment {
        Environment::Live => EndpointEnvironment::Live,
        Environment::Sandbox => EndpointEnvironment::Sandbox,
    }
}

/// A change to an endpoint as asked for, before any check. `None` leaves a
/// field alone; `Some(None)` clears the name or subscribes to every type.
#[derive(Clone, Debug, Default)]
pub struct EndpointEdit {
    /// New URL.
    pub url: Option<String>,
    /// New subscription.
    pub event_types: Option<Option<Vec<String>>>,
    /// New label.
    pub name: Option<Option<String>>,
    /// New environment, as written.
    pub environment: Option<String>,
    /// New signature scheme, as written.
    pub signature_scheme: Option<String>,
    /// New hourly budget (`Some(None)`: no budget).
    pub hourly_budget: Option<Option<serde_json::Number>>,
    /// New ordering, as written.
    pub ordering: Option<String>,
}

impl EndpointEdit {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.url.is_none()
            && self.event_types.is_none()
            && self.name.is_none()
            && self.environment.is_none()
            && self.signature_scheme.is_none()
            && self.hourly_budget.is_none()
            && self.ordering.is_none()
    }

    /// Checks every field given (the URL last: it resolves the host) and
    /// returns the changes to store.
    pub async fn check(
        self,
        policy: AddressPolicy,
        tenant: &Tenant,
    ) -> Result<EndpointChanges, FieldError> {
        let name = self.name.map(name).transpose()?;
        let event_types = self.event_types.map(event_types).transpose()?;
        let environment = environment(tenant, self.environment.as_deref())?;
        let signature_scheme = signature_scheme(self.signature_scheme.as_deref())?;
        let hourly_budget = self
            .hourly_budget
            .map(|budget| hourly_budget(budget.as_ref()))
            .transpose()?;
        let ordering = ordering(self.ordering.as_deref())?;
        let url = match self.url {
            None => None,
            Some(text) => Some(url(policy, &text).await?),
        };
        Ok(EndpointChanges {
            name,
            url,
            event_types,
            environment,
            signature_scheme,
            hourly_budget,
            ordering,
        })
    }
}

#[cfg(test)]
mod tests {
    use storage::ids::AgencyId;

    use super::*;

    fn tenant(environment: Environment) -> Tenant {
        let agency = AgencyId::parse("agc_01JD3Q8W5T7X2Z9Y4V6R1N0M8K").expect("an agency id");
        Tenant::new(agency, environment)
    }

    #[test]
    fn aliases_become_canonical_names_once() {
        let types = event_types(Some(vec![
            "listing.section_modified".into(),
            "listing.section_updated".into(),
        ]));
        assert_eq!(types, Ok(Some(vec!["listing.section_updated".to_owned()])));
    }

    #[test]
    fn unknown_and_test_only_types_are_refused() {
        for name in [
            "listing.exploded",
            "webhook.test_fire",
            "invoice.overdue",
            "subscription.created",
        ] {
            let err = event_types(Some(vec![name.into()])).expect_err(name);
            assert_eq!(err.field, "event_types");
        }
        assert!(event_types(Some(vec![])).is_err());
    }

    #[test]
    fn names_are_trimmed_blank_clears_and_long_is_refused() {
        assert_eq!(name(Some("  crm ".into())), Ok(Some("crm".to_owned())));
        assert_eq!(name(Some("   ".into())), Ok(None));
        assert!(name(Some("x".repeat(MAX_NAME_CHARS + 1))).is_err());
    }

    #[test]
    fn a_sandbox_tenant_keeps_to_sandbox_events() {
        let sandbox = tenant(Environment::Sandbox);
        assert!(environment(&sandbox, Some("both")).is_err());
        assert_eq!(
            environment(&sandbox, Some("Sandbox events only")),
            Ok(Some(EndpointEnvironment::Sandbox))
        );
        assert_eq!(
            environment(&tenant(Environment::Live), Some("Live events only")),
            Ok(Some(EndpointEnvironment::Live))
        );
    }

    #[test]
    fn signature_schemes_are_named_or_refused() {
        assert_eq!(signature_scheme(None), Ok(None));
        assert_eq!(
            signature_scheme(Some("Standard-Webhooks")),
            Ok(Some(SignatureScheme::StandardWebhooks))
        );
        assert_eq!(
            signature_scheme(Some("spec")),
            Ok(Some(SignatureScheme::Spec))
        );
        let err = signature_scheme(Some("svix")).expect_err("unknown scheme");
        assert_eq!(err.field, "signature_scheme");
    }

    #[test]
    fn hourly_budgets_are_whole_and_in_range_or_off() {
        let number = |text: &str| serde_json::from_str::<serde_json::Number>(text).unwrap();
        assert_eq!(hourly_budget(None), Ok(None));
        assert_eq!(hourly_budget(Some(&number("5000"))), Ok(Some(5000)));
        assert_eq!(hourly_budget(Some(&number("5000.0"))), Ok(Some(5000)));
        assert_eq!(hourly_budget(Some(&number("1000000"))), Ok(Some(1_000_000)));
        for refused in ["0", "-1", "1000001", "2.5", "1e12"] {
            let err = hourly_budget(Some(&number(refused))).expect_err(refused);
            assert_eq!(err.field, "hourly_budget");
        }
    }

    #[tokio::test]
    async fn only_public_https_urls_pass_the_strict_policy() {
        let strict = AddressPolicy {
            allow_private_networks: false,
        };
        let open = AddressPolicy {
            allow_private_networks: true,
        };
        for refused in [
            "http://example.com/hooks",
            "https://user:pw@example.com/",
            "https://example.com/#x",
            "https://127.0.0.1/hooks",
            "https://[::1]/hooks",
        ] {
            assert!(url(strict, refused).await.is_err(), "{refused}");
        }
        assert_eq!(
            url(open, "https://127.0.0.1:9/hooks").await,
            Ok("https://127.0.0.1:9/hooks".to_owned())
        );
        assert!(url(open, "http://127.0.0.1/hooks").await.is_err());
    }
}

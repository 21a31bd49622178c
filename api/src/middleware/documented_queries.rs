//! The query parameters the OpenAPI document declares for each operation,
//! read from the document once at start, and the check of a request's query
//! against them ([`super::query_params`] and the guard apply it).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use axum::http::Method;
use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::{OpenApi, RefOr};

use crate::error::ApiError;

/// The query parameters each documented operation declares, by method and
/// full route template (`/api/v1/listings`).
#[derive(Clone, Debug, Default)]
pub struct DocumentedQueries(Arc<HashMap<(Method, String), BTreeSet<String>>>);

impl DocumentedQueries {
    /// Reads them from the document; `prefix` is what the document's paths
    /// are mounted under.
    pub fn from_document(doc: &OpenApi, prefix: &str) -> Self {
        let mut operations = HashMap::new();
        for (path, item) in &doc.paths.paths {
            let shared = names(item.parameters.as_deref());
            let methods = [
                (Method::GET, &item.get),
                (Method::PUT, &item.put),
                (Method::POST, &item.post),
                (Method::DELETE, &item.delete),
                (Method::PATCH, &item.patch),
                (Method::HEAD, &item.head),
                (Method::OPTIONS, &item.options),
            ];
            for (method, operation) in methods {
                if let Some(operation) = operation {
                    let mut declared = shared.clone();
                    declared.extend(operation_names(operation));
                    let route = if path.starts_with(prefix) {
                        path.clone()
                    } else {
                        format!("{prefix}{path}")
                    };
                    operations.insert((method, route), declared);
                }
            }
        }
        Self(Arc::new(operations))
    }

    /// Refuses a parameter of `query` the operation does not declare.
    /// Operations outside the document (aliases, denied routes) are left to
    /// their handlers.
    pub fn check(&self, method: &Method, route: &str, query: Option<&str>) -> Result<(), ApiError> {
        let Some(query) = query.filter(|query| !query.is_empty()) else {
            return Ok(());
        };
        // HEAD is served by GET, unless the document declares it.
        let declared = self.0.get(&(method.clone(), route.to_owned())).or_else(|| {
            (method == Method::HEAD)
                .then(|| self.0.get(&(Method::GET, route.to_owned())))
                .flatten()
        });
        let Some(declared) = declared else {
            return Ok(());
        };
        for (name, _) in form_urlencoded::parse(query.as_bytes()) {
            if !declared.contains(name.as_ref()) {
                return Err(ApiError::field(
                    name.into_owned(),
                    "is not a known parameter",
                ));
            }
        }
        Ok(())
    }

    /// Whether the document declared anything (tests).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn names(parameters: Option<&[RefOr<utoipa::openapi::path::Parameter>]>) -> BTreeSet<String> {
    parameters
        .unwrap_or_default()
        .iter()
        .filter_map(|parameter| match parameter {
            RefOr::T(parameter) if parameter.parameter_in == ParameterIn::Query => {
                Some(parameter.name.clone())
            }
            _ => None,
        })
        .collect()
}

fn operation_names(operation: &Operation) -> BTreeSet<String> {
    names(operation.parameters.as_deref())
}

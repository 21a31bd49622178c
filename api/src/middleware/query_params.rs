//! Query parameters are treated alike on every route: a parameter the
//! OpenAPI document does not declare for the operation is refused with 422
//! `validation.failed` naming it ("is not a known parameter"), whether or
//! not the handler would have read it. The document is the contract; the
//! check is built from it, so the two cannot drift apart.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::{OpenApi, RefOr};
use utoipa_axum::router::UtoipaMethodRouter;

use crate::error::ApiError;
use crate::state::AppState;

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
        // HEAD is served by GET.
        let method = if method == Method::HEAD {
            &Method::GET
        } else {
            method
        };
        let Some(declared) = self.0.get(&(method.clone(), route.to_owned())) else {
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

/// Puts the check in front of a documented route without the guard.
pub fn known_params_only(
    state: &AppState,
    (schemas, paths, method_router): UtoipaMethodRouter<AppState>,
) -> UtoipaMethodRouter<AppState> {
    (
        schemas,
        paths,
        method_router.route_layer(from_fn_with_state(state.clone(), enforce)),
    )
}

/// Middleware for routes without the guard (which checks after it has
/// authenticated the caller): refuses undeclared query parameters.
pub async fn enforce(State(documented): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|matched| matched.as_str().to_owned());
    if let Some(route) = route
        && let Err(err) =
            documented
                .documented_queries()
                .check(request.method(), &route, request.uri().query())
    {
        return err.into_response();
    }
    next.run(request).await
}

//! The issuer's signing keys: a JWK Set (RFC 7517) fetched from a [`KeySource`], kept, and
//! fetched again when it is old or a token names a key it lacks, never more often than the
//! refetch interval allows.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use portcullis_core::BoxFuture;
use serde_json::Value;

use super::error::OAuthError;
use super::metadata::split_url;

/// Where the issuer's public keys come from: a JWK Set document (RFC 7517), as JSON.
/// [`JwksUrl`] fetches it over HTTPS; implement it to supply keys another way (a file, a
/// secret store, keys set by the test that issues the tokens).
pub trait KeySource: Send + Sync + 'static {
    /// The issuer's JWK Set now, as the JSON document's bytes.
    fn fetch(&self) -> BoxFuture<'_, Result<Vec<u8>, KeySourceError>>;
}

/// Why a [`KeySource`] could not give the keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySourceError(String);

impl KeySourceError {
    /// An error that says `reason`.
    pub fn new(reason: impl fmt::Display) -> Self {
        KeySourceError(reason.to_string())
    }
}

impl fmt::Display for KeySourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the issuer's keys could not be fetched: {}", self.0)
    }
}

impl std::error::Error for KeySourceError {}

/// A [`KeySource`] that GETs the JWK Set at a URL: `https://` with the system's root
/// certificates (rustls), or `http://` on a loopback host for local use. A response other
/// than `200`, larger than 1 MiB or slower than 10 seconds is an error.
pub struct JwksUrl {
    url: Uri,
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
}

/// The largest JWK Set read.
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// How long a fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

impl JwksUrl {
    /// Fetches from `url`; [`OAuthError::JwksUrl`] unless it is `https://` (or `http://` on a
    /// loopback host), [`OAuthError::Tls`] if the system's root certificates cannot be read.
    pub fn new(url: impl Into<String>) -> Result<Self, OAuthError> {
        let url = url.into();
        let invalid = || OAuthError::JwksUrl(url.clone());
        split_url(&url).ok_or_else(invalid)?;
        let uri: Uri = url.parse().map_err(|_| invalid())?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        // A loopback `http://` URL needs no roots, so that local use works without any.
        let connector = if uri.scheme_str() == Some("https") {
            builder
                .with_provider_and_native_roots(provider)
                .map_err(|error| OAuthError::Tls(error.to_string()))?
                .https_only()
        } else {
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|error| OAuthError::Tls(error.to_string()))?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            builder.with_tls_config(config).https_or_http()
        };
        let client = Client::builder(TokioExecutor::new()).build(connector.enable_http1().build());
        Ok(JwksUrl { url: uri, client })
    }

    async fn get(&self) -> Result<Vec<u8>, KeySourceError> {
        let request = Request::get(self.url.clone())
            .header(header::ACCEPT, "application/json")
            .body(Empty::new())
            .map_err(KeySourceError::new)?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(KeySourceError::new)?;
        if response.status() != StatusCode::OK {
            return Err(KeySourceError::new(format!(
                "{} answered {}",
                self.url,
                response.status()
            )));
        }
        let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
            .collect()
            .await
            .map_err(KeySourceError::new)?;
        Ok(body.to_bytes().to_vec())
    }
}

impl KeySource for JwksUrl {
    fn fetch(&self) -> BoxFuture<'_, Result<Vec<u8>, KeySourceError>> {
        Box::pin(async move {
            tokio::time::timeout(FETCH_TIMEOUT, self.get())
                .await
                .unwrap_or_else(|_| Err(KeySourceError::new(format!("{} timed out", self.url))))
        })
    }
}

/// One of the issuer's public keys, and the algorithms a token signed with it may name.
pub(crate) struct IssuerKey {
    pub(crate) key: DecodingKey,
    pub(crate) algorithms: Vec<Algorithm>,
}

/// What a look-up of a key id found.
pub(crate) enum Lookup {
    Found(Arc<IssuerKey>),
    /// The issuer publishes no such key (as of the last fetch).
    Unknown,
    /// No keys were ever fetched: the source failed.
    Unavailable(KeySourceError),
}

/// The issuer's keys as last fetched.
pub(crate) struct KeyCache {
    source: Box<dyn KeySource>,
    refresh_every: Duration,
    refetch_interval: Duration,
    state: RwLock<State>,
    /// Held while fetching, so that requests that all find the keys old, or all name one new
    /// key, cause one fetch.
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    keys: HashMap<String, Arc<IssuerKey>>,
    /// When the keys were last fetched successfully.
    fetched: Option<Instant>,
    /// When a fetch was last tried, successful or not.
    tried: Option<Instant>,
    /// Why the last fetch failed, if it did.
    failure: Option<KeySourceError>,
}

impl KeyCache {
    pub(crate) fn new(
        source: Box<dyn KeySource>,
        refresh_every: Duration,
        refetch_interval: Duration,
    ) -> Self {
        KeyCache {
            source,
            refresh_every,
            refetch_interval,
            state: RwLock::default(),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The key `kid`. The keys are fetched again first if they are older than the refresh
    /// period, or if they lack `kid`; either at most once per refetch interval.
    pub(crate) async fn key(&self, kid: &str) -> Lookup {
        if let Some(found) = self.cached(kid, Instant::now()) {
            return found;
        }
        self.refetch().await;
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        match (state.keys.get(kid), &state.failure, state.fetched) {
            (Some(key), _, _) => Lookup::Found(key.clone()),
            (None, Some(failure), None) => Lookup::Unavailable(failure.clone()),
            (None, _, _) => Lookup::Unknown,
        }
    }

    /// The answer from the keys as they are, unless a fetch is due and allowed.
    fn cached(&self, kid: &str, now: Instant) -> Option<Lookup> {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        let fresh = state
            .fetched
            .is_some_and(|fetched| now.duration_since(fetched) < self.refresh_every);
        let known = state.keys.get(kid);
        if fresh && let Some(key) = known {
            return Some(Lookup::Found(key.clone()));
        }
        let may_fetch = state
            .tried
            .is_none_or(|tried| now.duration_since(tried) >= self.refetch_interval);
        if may_fetch {
            return None;
        }
        Some(match (known, &state.failure, state.fetched) {
            (Some(key), _, _) => Lookup::Found(key.clone()),
            (None, Some(failure), None) => Lookup::Unavailable(failure.clone()),
            (None, _, _) => Lookup::Unknown,
        })
    }

    /// Fetches the keys, unless another request did while this one waited for its turn, or
    /// the refetch interval has not passed.
    async fn refetch(&self) {
        let _turn = self.fetching.lock().await;
        let tried = self
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .tried;
        if tried.is_some_and(|tried| tried.elapsed() < self.refetch_interval) {
            return;
        }
        let fetched = self
            .source
            .fetch()
            .await
            .and_then(|document| parse(&document));
        let now = Instant::now();
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        state.tried = Some(now);
        match fetched {
            Ok(keys) => {
                state.keys = keys;
                state.fetched = Some(now);
                state.failure = None;
            }
            Err(error) => {
                // The keys fetched before stay: an issuer briefly unreachable does not lock
                // every caller out.
                tracing::warn!(%error, "the issuer's keys could not be fetched");
                state.failure = Some(error);
            }
        }
    }
}

/// The signing keys of a JWK Set, by key id. A key without an id, meant for encryption,
/// symmetric (`oct`), or of a type or curve this server does not verify, is left out.
fn parse(document: &[u8]) -> Result<HashMap<String, Arc<IssuerKey>>, KeySourceError> {
    let set: Value = serde_json::from_slice(document)
        .map_err(|error| KeySourceError::new(format!("the JWK Set is not JSON: {error}")))?;
    let Some(keys) = set.get("keys").and_then(Value::as_array) else {
        return Err(KeySourceError::new("the JWK Set has no `keys` array"));
    };
    Ok(keys
        .iter()
        .filter_map(|key| serde_json::from_value::<Jwk>(key.clone()).ok())
        .filter_map(|jwk| {
            let kid = jwk.common.key_id.clone()?;
            Some((kid, Arc::new(signing_key(&jwk)?)))
        })
        .collect())
}

/// The key of `jwk` and its algorithms, if it is an asymmetric signing key.
fn signing_key(jwk: &Jwk) -> Option<IssuerKey> {
    if matches!(&jwk.common.public_key_use, Some(usage) if *usage != PublicKeyUse::Signature) {
        return None;
    }
    let family: &[Algorithm] = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => &[
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(params) => match params.curve {
            EllipticCurve::P256 => &[Algorithm::ES256],
            EllipticCurve::P384 => &[Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(params) if params.curve == EllipticCurve::Ed25519 => {
            &[Algorithm::EdDSA]
        }
        _ => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        None => family.to_vec(),
        Some(named) => {
            let named = Algorithm::try_from(named).ok()?;
            family.contains(&named).then(|| vec![named])?
        }
    };
    Some(IssuerKey {
        key: DecodingKey::from_jwk(jwk).ok()?,
        algorithms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_asymmetric_signing_keys_with_an_id_are_kept() {
        let x = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
        let document = serde_json::json!({"keys": [
            {"kty": "OKP", "crv": "Ed25519", "x": x, "kid": "ed"},
            {"kty": "OKP", "crv": "Ed25519", "x": x, "kid": "ed-named", "alg": "EdDSA"},
            {"kty": "OKP", "crv": "Ed25519", "x": x},
            {"kty": "OKP", "crv": "Ed25519", "x": x, "kid": "for-encryption", "use": "enc"},
            {"kty": "OKP", "crv": "Ed25519", "x": x, "kid": "named-otherwise", "alg": "RS256"},
            {"kty": "oct", "k": "c2VjcmV0", "kid": "symmetric"},
            {"kty": "EC", "crv": "secp256k1", "x": x, "y": x, "kid": "curve"},
            {"kty": "unheard-of", "kid": "odd"},
        ]});
        let keys = parse(document.to_string().as_bytes()).unwrap();
        let mut kids: Vec<_> = keys.keys().map(String::as_str).collect();
        kids.sort_unstable();
        assert_eq!(kids, ["ed", "ed-named"]);
        assert_eq!(keys["ed"].algorithms, [Algorithm::EdDSA]);
    }

    #[test]
    fn a_document_without_keys_is_an_error() {
        for document in [&b"<html>"[..], br#"{"keys": 3}"#, b"{}"] {
            assert!(parse(document).is_err());
        }
        assert!(parse(br#"{"keys": []}"#).unwrap().is_empty());
    }
}

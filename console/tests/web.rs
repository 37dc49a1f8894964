//! The console's routes on a real SQLite store, a worker of the application beside it, and the
//! red-team kit's software passkeys: what a reviewer may see and decide, what a request from
//! another origin or without the session's token changes (nothing), and a decision signed in
//! the console that a worker runs once.

use std::net::SocketAddr;
use std::sync::Mutex;

use axum::Router;
use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use portcullis::encoding::unbase64url;
use portcullis::export::Profile;
use portcullis::prelude::*;
use portcullis::testing::passkey::{Claims, SoftwarePasskey};
use portcullis::{Keyring, PendingCall, Reviewer, Ticket};
use portcullis_console::{ClientAddress, ConsoleConfig};
use portcullis_stores::Store;
use serde_json::{Value, json};
use tempfile::TempDir;
use tower::ServiceExt;

const ORIGIN: &str = "http://localhost:8080";

static PAID: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn payouts_to(supplier: &str) -> Vec<String> {
    PAID.lock()
        .unwrap()
        .iter()
        .filter(|paid| paid.starts_with(supplier))
        .cloned()
        .collect()
}

/// Pay a supplier from the company's account.
#[tool(
    risk = "critical",
    irreversible = "payouts settle at once",
    approver = "finance"
)]
fn pay_supplier(
    supplier: String,
    #[validate(range(min = 1, max = 500_000))] amount_cents: u64,
    #[sensitive] iban: String,
) -> Result<String, ToolError> {
    PAID.lock()
        .unwrap()
        .push(format!("{supplier}:{amount_cents}:{}", iban.len()));
    Ok(format!("paid {amount_cents} to {supplier}"))
}

/// rita of finance, carl the clerk: each a passkey on the console's origin.
struct Harness {
    dir: TempDir,
    store: Store,
    worker: Registry,
    console: Router,
    rita: SoftwarePasskey,
    carl: SoftwarePasskey,
}

impl Harness {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("state.db").display().to_string();
        let store = Store::open(&location).await.unwrap();
        let rita = SoftwarePasskey::new("localhost", ORIGIN);
        let carl = SoftwarePasskey::new("localhost", ORIGIN);
        let keyring = Keyring::new()
            .passkey(
                Reviewer::new("rita").with_roles(["finance"]),
                rita.credential(),
            )
            .passkey(
                Reviewer::new("carl").with_roles(["clerk"]),
                carl.credential(),
            );
        let worker = Registry::builder()
            .tool(PaySupplier)
            .profile(Profile::Mcp)
            .approval_store(store.clone())
            .keyring(keyring.clone())
            .repeat_store(store.clone())
            .audit(store.clone())
            .build()
            .unwrap();
        let exported = worker
            .export(
                &CallContext::new("export").with_roles(["finance"]),
                Profile::Mcp,
            )
            .unwrap();
        let console = portcullis_console::router(ConsoleConfig {
            store: Store::open(&location).await.unwrap(),
            keyring,
            keyring_file: None,
            origin: ORIGIN.to_owned(),
            tools: serde_json::from_value(exported).unwrap(),
            audit_key: None,
        })
        .unwrap()
        .layer(MockConnectInfo(ClientAddress(SocketAddr::from((
            [127, 0, 0, 1],
            40000,
        )))));
        Harness {
            dir,
            store,
            worker,
            console,
            rita,
            carl,
        }
    }

    /// A payout to `supplier` the agent asks for, waiting for finance.
    async fn payout(&self, supplier: &str) -> Ticket {
        let ctx = CallContext::new("agent").with_task_id("console");
        let call = ToolCall::new(
            format!("pay-{supplier}"),
            "pay_supplier",
            json!({"supplier": supplier, "amount_cents": 90_000, "iban": "DE89370400440532013000"}),
        );
        let outcome = self.worker.dispatch(&ctx, &call).await;
        outcome.ticket().expect("a payout waits").clone()
    }

    /// Changes the stored call of `ticket` as whoever can write the database would.
    fn tamper_call(&self, ticket: &Ticket, change: impl FnOnce(&mut PendingCall)) {
        let database = rusqlite::Connection::open(self.dir.path().join("state.db")).unwrap();
        let text: String = database
            .query_row(
                "SELECT call FROM pending_calls WHERE ticket_id = ?1",
                [&ticket.id],
                |row| row.get(0),
            )
            .unwrap();
        let mut pending: PendingCall = serde_json::from_str(&text).unwrap();
        change(&mut pending);
        database
            .execute(
                "UPDATE pending_calls SET call = ?1 WHERE ticket_id = ?2",
                [serde_json::to_string(&pending).unwrap(), ticket.id.clone()],
            )
            .unwrap();
    }

    async fn send(&self, request: Request<Body>) -> Answer {
        let response = self.console.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Answer {
            status,
            headers,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    async fn get(&self, path: &str, session: Option<&Session>) -> Answer {
        let mut request = Request::get(path);
        if let Some(session) = session {
            request = request.header(header::COOKIE, &session.cookie);
        }
        self.send(request.body(Body::empty()).unwrap()).await
    }

    /// A POST as the console's page sends it: from its origin, with the session's token.
    async fn post(&self, path: &str, session: Option<&Session>, body: &Value) -> Answer {
        self.post_with(path, session, body, &[("origin", ORIGIN)])
            .await
    }

    async fn post_with(
        &self,
        path: &str,
        session: Option<&Session>,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut request = Request::post(path).header(header::CONTENT_TYPE, "application/json");
        if let Some(session) = session {
            request = request
                .header(header::COOKIE, &session.cookie)
                .header("x-csrf-token", &session.csrf);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request.body(Body::from(body.to_string())).unwrap())
            .await
    }

    /// Signs `reviewer` in with `passkey`: the session's cookie and CSRF token.
    async fn sign_in(&self, reviewer: &str, passkey: &SoftwarePasskey) -> Session {
        let started = self
            .post("/api/signin/start", None, &json!({"reviewer": reviewer}))
            .await;
        assert_eq!(started.status, StatusCode::OK, "{}", started.text);
        let started = started.json();
        let answer = answer(passkey, &started, &Claims::default());
        let mut finish = answer;
        finish["signin"] = started["signin"].clone();
        let finished = self.post("/api/signin/finish", None, &finish).await;
        assert_eq!(finished.status, StatusCode::OK, "{}", finished.text);
        let set_cookie = finished.headers[header::SET_COOKIE].to_str().unwrap();
        assert!(
            set_cookie.ends_with("; Path=/; HttpOnly; SameSite=Strict; Max-Age=28800"),
            "{set_cookie}"
        );
        let cookie = set_cookie.split(';').next().unwrap().to_owned();
        let queue = self
            .get(
                "/queue",
                Some(&Session {
                    cookie: cookie.clone(),
                    csrf: String::new(),
                }),
            )
            .await;
        let csrf = queue
            .text
            .split(r#"<meta name="csrf-token" content=""#)
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("a signed-in page carries the CSRF token")
            .to_owned();
        Session { cookie, csrf }
    }

    /// Asks to sign `decision` on `ticket`, signs the challenge with `passkey`, records it.
    async fn decide(
        &self,
        session: &Session,
        passkey: &SoftwarePasskey,
        ticket: &str,
        decision: Value,
    ) -> Answer {
        let challenge = self
            .post(
                &format!("/api/tickets/{ticket}/challenge"),
                Some(session),
                &decision,
            )
            .await;
        if challenge.status != StatusCode::OK {
            return challenge;
        }
        let answer = answer(passkey, &challenge.json(), &Claims::default());
        self.post(
            &format!("/api/tickets/{ticket}/decide"),
            Some(session),
            &answer,
        )
        .await
    }
}

struct Session {
    cookie: String,
    csrf: String,
}

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|_| panic!("not JSON: {}", self.text))
    }

    /// The refusal's code.
    fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or_default().to_owned()
    }
}

/// What the page sends after `navigator.credentials.get` over the console's challenge.
fn answer(passkey: &SoftwarePasskey, challenge: &Value, claims: &Claims) -> Value {
    let bytes = unbase64url(challenge["challenge"].as_str().unwrap()).unwrap();
    let (signature, assertion) = passkey.assert(&bytes, claims);
    json!({
        "credential_id": passkey.credential_id(),
        "authenticator_data": assertion.authenticator_data,
        "client_data_json": assertion.client_data_json,
        "signature": signature,
    })
}

#[tokio::test]
async fn pages_carry_a_strict_policy_and_need_a_passkey_session() {
    let harness = Harness::new().await;
    let page = harness.get("/queue", None).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(page.headers[header::LOCATION], "/signin");
    let signin = harness.get("/signin", None).await;
    assert_eq!(
        signin.headers[header::CONTENT_SECURITY_POLICY],
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
         connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    );
    assert_eq!(signin.headers[header::X_FRAME_OPTIONS], "DENY");
    assert_eq!(signin.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert!(!signin.text.contains("<script>"), "no inline script");
    assert!(
        signin
            .text
            .contains(r#"<script src="/assets/console.js" defer></script>"#)
    );
    let script = harness.get("/assets/console.js", None).await;
    assert_eq!(script.status, StatusCode::OK);
    assert_eq!(
        harness.get("/assets/other.js", None).await.status,
        StatusCode::NOT_FOUND
    );

    // A session cookie the console never made, or no passkey answer, signs nobody in.
    let forged = Session {
        cookie: "portcullis_session=session_00".to_owned(),
        csrf: String::new(),
    };
    assert_eq!(
        harness.get("/queue", Some(&forged)).await.status,
        StatusCode::SEE_OTHER
    );
    let started = harness
        .post("/api/signin/start", None, &json!({"reviewer": "rita"}))
        .await
        .json();
    let wrong = answer(&harness.carl, &started, &Claims::default());
    let mut finish = wrong;
    finish["signin"] = started["signin"].clone();
    let refused = harness.post("/api/signin/finish", None, &finish).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert_eq!(refused.code(), "sign_in_failed");
    // The challenge was answered once; it does not take a second answer.
    let again = harness.post("/api/signin/finish", None, &finish).await;
    assert_eq!(again.code(), "sign_in_expired");
}

#[tokio::test]
async fn sign_in_failures_are_limited_per_reviewer() {
    let harness = Harness::new().await;
    for _ in 0..5 {
        let started = harness
            .post("/api/signin/start", None, &json!({"reviewer": "rita"}))
            .await
            .json();
        let mut finish = answer(&harness.carl, &started, &Claims::default());
        finish["signin"] = started["signin"].clone();
        let refused = harness.post("/api/signin/finish", None, &finish).await;
        assert_eq!(refused.code(), "sign_in_failed");
    }
    let long = harness
        .post(
            "/api/signin/start",
            None,
            &json!({"reviewer": "r".repeat(201)}),
        )
        .await;
    assert_eq!(long.code(), "reviewer_id_too_long");
    let limited = harness
        .post("/api/signin/start", None, &json!({"reviewer": "rita"}))
        .await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limited.code(), "sign_in_rate_limited");
    // carl is not limited by rita's failures.
    harness.sign_in("carl", &harness.carl).await;
}

#[tokio::test]
async fn a_request_from_another_origin_or_without_the_token_changes_nothing() {
    let harness = Harness::new().await;
    let ticket = harness.payout("origin-checked").await;
    let rita = harness.sign_in("rita", &harness.rita).await;
    let path = format!("/api/tickets/{}/challenge", ticket.id);
    let approve = json!({"decision": "approve"});
    for headers in [
        vec![("origin", "http://evil.example")],
        vec![],
        vec![("origin", "null")],
        vec![("origin", ORIGIN), ("sec-fetch-site", "cross-site")],
        vec![("origin", ORIGIN), ("sec-fetch-site", "same-site")],
    ] {
        let refused = harness
            .post_with(&path, Some(&rita), &approve, &headers)
            .await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{headers:?}");
        assert_eq!(refused.code(), "cross_origin_request", "{headers:?}");
    }
    for token in ["", "csrf_00"] {
        let without = Session {
            cookie: rita.cookie.clone(),
            csrf: token.to_owned(),
        };
        let refused = harness.post(&path, Some(&without), &approve).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert_eq!(refused.code(), "csrf_token_invalid");
    }
    // A sign-in posted from another origin is refused too.
    let refused = harness
        .post_with(
            "/api/signin/start",
            None,
            &json!({"reviewer": "rita"}),
            &[("origin", "http://evil.example")],
        )
        .await;
    assert_eq!(refused.code(), "cross_origin_request");
    assert!(harness.worker.run_decided().await.unwrap().is_empty());
    assert!(payouts_to("origin-checked").is_empty());
}

#[tokio::test]
async fn a_reviewer_without_the_role_neither_sees_nor_decides_the_ticket() {
    let harness = Harness::new().await;
    let ticket = harness.payout("clerk-kept-out").await;
    let carl = harness.sign_in("carl", &harness.carl).await;
    let queue = harness.get("/queue", Some(&carl)).await;
    assert!(!queue.text.contains(&ticket.id), "{}", queue.text);
    assert!(
        queue
            .text
            .contains("No call waits for a decision you may take.")
    );
    let page = harness
        .get(&format!("/tickets/{}", ticket.id), Some(&carl))
        .await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(!page.text.contains("clerk-kept-out"));
    let refused = harness
        .decide(
            &carl,
            &harness.carl,
            &ticket.id,
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.code(), "reviewer_not_allowed");
    let forged = harness
        .post(
            &format!("/api/tickets/{}/decide", ticket.id),
            Some(&carl),
            &answer(
                &harness.carl,
                &json!({"challenge": "AAAA"}),
                &Claims::default(),
            ),
        )
        .await;
    assert_eq!(forged.code(), "decision_not_started");
    assert!(harness.worker.run_decided().await.unwrap().is_empty());

    // rita sees it, with the IBAN masked.
    let rita = harness.sign_in("rita", &harness.rita).await;
    let queue = harness.get("/queue", Some(&rita)).await;
    assert!(queue.text.contains(&format!("/tickets/{}", ticket.id)));
    let page = harness
        .get(&format!("/tickets/{}", ticket.id), Some(&rita))
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("sensitive, not shown"));
    assert!(!page.text.contains("DE89370400440532013000"));
    assert!(
        page.text
            .contains("Cannot be undone: payouts settle at once")
    );
    assert!(page.text.contains(&ticket.contract_hash));
}

#[tokio::test]
async fn a_decision_signed_in_the_console_runs_once_in_a_worker() {
    let harness = Harness::new().await;
    let ticket = harness.payout("approved-in-console").await;
    let rita = harness.sign_in("rita", &harness.rita).await;
    let decided = harness
        .decide(
            &rita,
            &harness.rita,
            &ticket.id,
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.text);
    assert_eq!(decided.json()["decided"], "approved");
    let ran = harness.worker.run_decided().await.unwrap();
    assert_eq!(ran.len(), 1);
    assert_eq!(
        ran[0].1.output(),
        Some(&json!("paid 90000 to approved-in-console"))
    );
    assert!(harness.worker.run_decided().await.unwrap().is_empty());
    assert_eq!(payouts_to("approved-in-console").len(), 1);
    let records = harness.store.audit_records(0, None).await.unwrap();
    let resolution = records.last().unwrap().resolution.clone().unwrap();
    assert_eq!(
        resolution,
        format!(
            "approved by rita, signed with passkey {}",
            harness.rita.credential_id()
        )
    );
    // The audit page verifies the chain and shows how the payout was decided.
    let audit = harness.get("/audit?tool=pay_supplier", Some(&rita)).await;
    assert!(
        audit
            .text
            .contains(r#"<p class="chain chain-ok" id="chain">The chain verifies: 3 records"#),
        "{}",
        audit.text
    );
    assert!(audit.text.contains("approved by rita, signed with passkey"));
    let other_tool = harness.get("/audit?tool=refund", Some(&rita)).await;
    assert!(!other_tool.text.contains("approved by rita"));
    assert_eq!(
        harness.get("/runs", Some(&rita)).await.status,
        StatusCode::OK
    );
    // Decided: the ticket is gone from the queue, and a second decision is refused.
    let again = harness
        .decide(
            &rita,
            &harness.rita,
            &ticket.id,
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(again.code(), "ticket_not_pending");
}

#[tokio::test]
async fn an_edit_out_of_range_is_refused_with_its_code_and_path_and_a_good_one_runs() {
    let harness = Harness::new().await;
    let ticket = harness.payout("edited-in-console").await;
    let rita = harness.sign_in("rita", &harness.rita).await;
    let refused = harness
        .decide(
            &rita,
            &harness.rita,
            &ticket.id,
            json!({"decision": "edit", "arguments": {"amount_cents": 900_000}}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    let refusal = refused.json();
    assert_eq!(refusal["code"], "constraint_violation");
    assert_eq!(refusal["path"], "/amount_cents");
    // The IBAN is masked on the page: a reviewer cannot send the payout elsewhere by an edit.
    let redirected = harness
        .decide(
            &rita,
            &harness.rita,
            &ticket.id,
            json!({"decision": "edit", "arguments": {"iban": "GB33BUKB20201555555555"}}),
        )
        .await;
    assert_eq!(redirected.code(), "argument_not_editable");
    assert_eq!(redirected.json()["path"], "/iban");
    assert!(harness.worker.run_decided().await.unwrap().is_empty());

    let edited = harness
        .decide(
            &rita,
            &harness.rita,
            &ticket.id,
            json!({"decision": "edit", "arguments": {"amount_cents": 45_000}}),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.text);
    let ran = harness.worker.run_decided().await.unwrap();
    assert_eq!(
        ran[0].1.output(),
        Some(&json!("paid 45000 to edited-in-console"))
    );
    // The IBAN the page never showed stayed as the call sent it.
    assert_eq!(
        payouts_to("edited-in-console"),
        vec!["edited-in-console:45000:22".to_owned()]
    );
}

/// Whoever writes the store leaves the ticket's redacted copy of the arguments as it was and
/// changes the call itself (with a call digest that matches): the page shows the amount the
/// call would run with, which is what the reviewer's passkey signs.
#[tokio::test]
async fn the_page_shows_the_arguments_the_call_runs_with_not_the_tickets_copy() {
    let harness = Harness::new().await;
    let ticket = harness.payout("copy-kept").await;
    harness.tamper_call(&ticket, |pending| {
        pending.canonical["amount_cents"] = json!(480_000);
        pending.ticket.call_digest = pending.digest();
    });
    let rita = harness.sign_in("rita", &harness.rita).await;
    let page = harness
        .get(&format!("/tickets/{}", ticket.id), Some(&rita))
        .await;
    assert!(page.text.contains("<code>480000</code>"), "{}", page.text);
    assert!(!page.text.contains("<code>90000</code>"));
    assert!(page.text.contains("sensitive, not shown"));
    assert!(!page.text.contains("DE89370400440532013000"));
}

/// The stored call changed and its digest left as it was: the console offers nothing to sign.
#[tokio::test]
async fn a_call_changed_in_the_store_is_not_offered_for_signing() {
    let harness = Harness::new().await;
    let ticket = harness.payout("changed-call").await;
    harness.tamper_call(&ticket, |pending| {
        pending.canonical["amount_cents"] = json!(480_000);
    });
    let rita = harness.sign_in("rita", &harness.rita).await;
    let refused = harness
        .post(
            &format!("/api/tickets/{}/challenge", ticket.id),
            Some(&rita),
            &json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(refused.code(), "call_changed");
}

/// Passkeys are bound to a host name, over https (or http on localhost): a console that could
/// not keep them so is not made.
#[tokio::test]
async fn an_origin_passkeys_cannot_be_bound_to_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("state.db").display().to_string();
    for (origin, why) in [
        ("http://127.0.0.1:8080", "has no host name"),
        ("http://review.example.com", "must be https"),
        ("review.example.com", "is not a URL"),
    ] {
        let made = portcullis_console::router(ConsoleConfig {
            store: Store::open(&location).await.unwrap(),
            keyring: Keyring::new(),
            keyring_file: None,
            origin: origin.to_owned(),
            tools: Vec::new(),
            audit_key: None,
        });
        let Err(error) = made else {
            panic!("{origin} was taken");
        };
        assert!(error.to_string().contains(why), "{origin}: {error}");
    }
}

#[tokio::test]
async fn a_rejection_reaches_the_caller_with_its_message() {
    let harness = Harness::new().await;
    let ticket = harness.payout("rejected-in-console").await;
    let rita = harness.sign_in("rita", &harness.rita).await;
    let empty = harness
        .decide(
            &rita,
            &harness.rita,
            &ticket.id,
            json!({"decision": "reject", "message": "  "}),
        )
        .await;
    assert_eq!(empty.code(), "message_required");
    let rejected = harness
        .decide(
            &rita,
            &harness.rita,
            &ticket.id,
            json!({"decision": "reject", "message": "this supplier was paid on Monday"}),
        )
        .await;
    assert_eq!(rejected.status, StatusCode::OK, "{}", rejected.text);
    let ran = harness.worker.run_decided().await.unwrap();
    let rejection = ran[0].1.rejection().unwrap();
    assert_eq!(rejection.code(), RejectionCode::ApprovalRejected);
    assert!(
        rejection
            .message()
            .contains("this supplier was paid on Monday")
    );
    assert!(payouts_to("rejected-in-console").is_empty());
}

/// The browser's answer is checked as a worker checks it before anything is recorded: an
/// assertion over another challenge, or by a passkey that says the reviewer was not verified,
/// is refused and the ticket still waits.
#[tokio::test]
async fn an_assertion_a_worker_would_refuse_is_not_recorded() {
    let harness = Harness::new().await;
    let ticket = harness.payout("checked-before-recorded").await;
    let rita = harness.sign_in("rita", &harness.rita).await;
    let path = format!("/api/tickets/{}/challenge", ticket.id);
    for claims in [
        Claims {
            flags: 0x01,
            ..Claims::default()
        },
        Claims {
            origin: Some("http://localhost:9999".to_owned()),
            ..Claims::default()
        },
    ] {
        let challenge = harness
            .post(&path, Some(&rita), &json!({"decision": "approve"}))
            .await
            .json();
        let answer = answer(&harness.rita, &challenge, &claims);
        let refused = harness
            .post(
                &format!("/api/tickets/{}/decide", ticket.id),
                Some(&rita),
                &answer,
            )
            .await;
        assert_eq!(
            refused.code(),
            "decision_signature_invalid",
            "{}",
            refused.text
        );
    }
    // The challenge of the approval, answered with an assertion over other bytes.
    harness
        .post(&path, Some(&rita), &json!({"decision": "approve"}))
        .await;
    let other = json!({"challenge": portcullis::encoding::base64url(&[7; 32])});
    let answer = answer(&harness.rita, &other, &Claims::default());
    let refused = harness
        .post(
            &format!("/api/tickets/{}/decide", ticket.id),
            Some(&rita),
            &answer,
        )
        .await;
    assert_eq!(refused.code(), "decision_signature_invalid");
    assert!(harness.worker.run_decided().await.unwrap().is_empty());
    let waiting = harness.worker.pending_tickets().await.unwrap();
    assert!(waiting.iter().any(|waiting| waiting.id == ticket.id));
}

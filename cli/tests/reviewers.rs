//! `portcullis reviewers`: an invitation enrols one passkey, which decides nothing until the
//! operator confirms it into the keyring with the fingerprint the reviewer read them.

mod common;

use std::process::Output;

use common::{code, directory, portcullis, stderr, stdout};
use portcullis::{Keyring, PasskeyCredential, PasskeyPublicKey, Reviewer};
use portcullis_stores::SqliteStore;

fn credential() -> PasskeyCredential {
    PasskeyCredential {
        credential_id: "cred-rita".to_owned(),
        public_key: PasskeyPublicKey::from_text(
            "es256:046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5",
        )
        .unwrap(),
        rp_id: "localhost".to_owned(),
        origin: "http://localhost:8080".to_owned(),
        sign_count: 0,
    }
}

#[tokio::test]
async fn an_enrolled_passkey_counts_once_the_operator_confirms_its_fingerprint() {
    let dir = directory("reviewers");
    let database = dir.path().join("state.db");
    let store = SqliteStore::open(&database).unwrap();
    let db = database.to_str().unwrap();
    let keyring_path = dir.path().join("keyring.json");
    let keyring = keyring_path.to_str().unwrap();

    let invited = portcullis(&[
        "--store",
        db,
        "reviewers",
        "invite",
        "rita",
        "--role",
        "finance",
        "--tenant",
        "acme",
        "--console",
        "http://localhost:8080/",
    ]);
    assert_eq!(code(&invited), 0, "{}", stderr(&invited));
    let printed = stdout(&invited);
    let link = printed.lines().nth(1).unwrap();
    let token = link
        .strip_prefix("http://localhost:8080/enrol#")
        .unwrap_or_else(|| panic!("{printed}"));
    let invite = store.invite(token).unwrap().unwrap();
    assert!(printed.starts_with(&format!(
        "invitation {} for rita (finance), enrols one passkey within 24h",
        invite.id
    )));
    assert_eq!(
        invite.reviewer,
        Reviewer::new("rita")
            .with_roles(["finance"])
            .with_tenant("acme")
    );
    let listed = portcullis(&["--store", db, "reviewers", "list"]);
    assert!(
        stdout(&listed).contains("waiting, 23h"),
        "{}",
        stdout(&listed)
    );

    // Nothing is enrolled yet: nothing to confirm.
    let early = confirm(db, &invite.id, "0000", keyring);
    assert_eq!(code(&early), 2);
    assert!(stderr(&early).contains("no passkey is enrolled with invitation"));

    store.enrol(token, &credential(), now_ms()).unwrap();
    let fingerprint = portcullis_stores::fingerprint(&credential());
    let listed = portcullis(&["--store", db, "reviewers", "list"]);
    assert!(
        stdout(&listed).contains(&format!("enrolled, fingerprint {fingerprint}")),
        "{}",
        stdout(&listed)
    );

    // The fingerprint the reviewer read is not the stored passkey's: nothing is confirmed.
    let misread = confirm(db, &invite.id, "aaaa-bbbb-cccc-dddd", keyring);
    assert_eq!(code(&misread), 2);
    assert!(
        stderr(&misread).contains("the fingerprint given is not the enrolled passkey's"),
        "{}",
        stderr(&misread)
    );
    assert!(!keyring_path.exists());

    // Whoever writes the store turns the invitation into one for an admin: the operator, who
    // says whom they invited, confirms nothing.
    let connection = rusqlite::Connection::open(&database).unwrap();
    let original: String = connection
        .query_row("SELECT reviewer FROM reviewer_invites", [], |row| {
            row.get(0)
        })
        .unwrap();
    connection
        .execute(
            "UPDATE reviewer_invites SET reviewer = ?1",
            [r#"{"id":"rita","roles":["finance","admin"],"tenant":"acme"}"#],
        )
        .unwrap();
    let escalated = confirm(db, &invite.id, &fingerprint, keyring);
    assert_eq!(code(&escalated), 2);
    assert!(
        stderr(&escalated).contains(&format!(
            "invitation {} in the store is for rita (finance, admin, tenant acme), not rita (finance, tenant acme)",
            invite.id
        )),
        "{}",
        stderr(&escalated)
    );
    // A second row under the same id, written to be found first: confirm refuses to choose.
    connection
        .execute("UPDATE reviewer_invites SET reviewer = ?1", [&original])
        .unwrap();
    connection
        .execute(
            "INSERT INTO reviewer_invites SELECT substr(token_hash, 1, 16) || 'ff', reviewer, created_ms + 1, expires_ms, credential, enrolled_ms FROM reviewer_invites",
            [],
        )
        .unwrap();
    let twice = confirm(db, &invite.id, &fingerprint, keyring);
    assert_eq!(code(&twice), 2);
    assert!(
        stderr(&twice).contains("2 invitations have the id"),
        "{}",
        stderr(&twice)
    );
    assert!(!keyring_path.exists());
    connection
        .execute(
            "DELETE FROM reviewer_invites WHERE length(token_hash) = 18",
            [],
        )
        .unwrap();

    let confirmed = confirm(
        db,
        &invite.id,
        &fingerprint.to_uppercase().replace('-', " "),
        keyring,
    );
    assert_eq!(code(&confirmed), 0, "{}", stderr(&confirmed));
    assert!(
        stdout(&confirmed)
            .starts_with("rita (finance, tenant acme) decides with passkey cred-rita;"),
        "{}",
        stdout(&confirmed)
    );
    let written = Keyring::load(&keyring_path).unwrap();
    let expected = Keyring::new().passkey(
        Reviewer::new("rita")
            .with_roles(["finance"])
            .with_tenant("acme"),
        credential(),
    );
    assert_eq!(written, expected);
    assert!(store.invites().unwrap().is_empty(), "the invitation went");

    let withdrawn = portcullis(&["--store", db, "reviewers", "withdraw", &invite.id]);
    assert_eq!(code(&withdrawn), 2);
    assert!(stderr(&withdrawn).contains("no invitation"));
}

/// The operator confirms invitation `invite` of rita (finance, tenant acme) with `fingerprint`.
fn confirm(db: &str, invite: &str, fingerprint: &str, keyring: &str) -> Output {
    portcullis(&[
        "--store",
        db,
        "reviewers",
        "confirm",
        invite,
        "--fingerprint",
        fingerprint,
        "--reviewer",
        "rita",
        "--role",
        "finance",
        "--tenant",
        "acme",
        "--keyring",
        keyring,
    ])
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

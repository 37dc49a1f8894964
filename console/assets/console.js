// The portcullis console's one script: the passkey ceremonies (enrol, sign in) and the
// decisions, each signed by the reviewer's passkey. The pages carry no inline script; this file
// is served by the console itself.
"use strict";

/** The bytes of base64url text. */
function bytes(text) {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const padded = base64 + "=".repeat((4 - (base64.length % 4)) % 4);
  return Uint8Array.from(atob(padded), (character) => character.charCodeAt(0));
}

/** Bytes as base64url text, as WebAuthn's JSON writes them. */
function base64url(buffer) {
  let binary = "";
  for (const byte of new Uint8Array(buffer)) {
    binary += String.fromCharCode(byte);
  }
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

/** POSTs `body` as JSON to the console; a refusal is thrown with its code and path. */
async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json", "x-csrf-token": csrfToken() },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const refusal = new Error(answer.message || response.statusText);
    refusal.code = answer.code || "http_" + response.status;
    refusal.path = answer.path;
    throw refusal;
  }
  return answer;
}

function say(text, kind) {
  const message = document.getElementById("message");
  if (message) {
    message.textContent = text;
    message.className = kind || "";
  }
}

function sayRefused(refusal) {
  const where = refusal.path ? " at " + refusal.path : "";
  const code = refusal.code || (refusal.name === "NotAllowedError" ? "passkey_cancelled" : "error");
  say("Refused (" + code + where + "): " + refusal.message, "refusal");
}

/** An assertion of one of `credentials` over `challenge`, as the console reads it. */
async function assert(options) {
  const credential = await navigator.credentials.get({
    publicKey: {
      challenge: bytes(options.challenge),
      rpId: options.rp_id,
      allowCredentials: options.credentials.map((id) => ({ type: "public-key", id: bytes(id) })),
      userVerification: "required",
      timeout: 120000,
    },
  });
  return {
    credential_id: base64url(credential.rawId),
    authenticator_data: base64url(credential.response.authenticatorData),
    client_data_json: base64url(credential.response.clientDataJSON),
    signature: base64url(credential.response.signature),
  };
}

function signIn(form) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const started = await post("/api/signin/start", { reviewer: form.reviewer.value });
      const answer = await assert(started);
      await post("/api/signin/finish", Object.assign({ signin: started.signin }, answer));
      window.location.assign("/queue");
    } catch (refusal) {
      sayRefused(refusal);
    }
  });
}

function enrol(button) {
  button.addEventListener("click", async () => {
    const token = window.location.hash.slice(1);
    try {
      const started = await post("/api/enrol/start", { token: token });
      const options = started.options.publicKey;
      options.challenge = bytes(options.challenge);
      options.user.id = bytes(options.user.id);
      options.excludeCredentials = (options.excludeCredentials || []).map((excluded) =>
        Object.assign({}, excluded, { id: bytes(excluded.id) }),
      );
      const created = await navigator.credentials.create({ publicKey: options });
      const credential = {
        id: created.id,
        rawId: base64url(created.rawId),
        type: created.type,
        response: {
          attestationObject: base64url(created.response.attestationObject),
          clientDataJSON: base64url(created.response.clientDataJSON),
        },
        extensions: created.getClientExtensionResults(),
      };
      const enrolled = await post("/api/enrol/finish", {
        enrolment: started.enrolment,
        credential: credential,
      });
      document.getElementById("enrol").hidden = true;
      document.getElementById("fingerprint").textContent = enrolled.fingerprint;
      document.getElementById("enrolled").hidden = false;
      say("Enrolled as " + started.reviewer + " (" + started.roles.join(", ") + ").", "done");
    } catch (refusal) {
      sayRefused(refusal);
    }
  });
}

/** Whether the reviewer changed `field` from what the page showed. */
function changed(field) {
  if (field.type === "checkbox") {
    return field.checked !== field.defaultChecked;
  }
  if (field.tagName === "SELECT") {
    const chosen = field.selectedOptions[0];
    return chosen !== undefined && !chosen.defaultSelected && chosen.value !== "";
  }
  return field.value !== field.defaultValue;
}

/** The arguments the reviewer changed, each as its schema's type reads it; the others stay as
 * the call sent them. */
function editedArguments(form) {
  const edited = {};
  for (const field of form.querySelectorAll("[data-type]")) {
    if (!changed(field)) {
      continue;
    }
    const kind = field.dataset.type;
    if (kind === "boolean") {
      edited[field.name] = field.checked;
    } else if (kind === "number") {
      edited[field.name] = field.value === "" ? null : Number(field.value);
    } else if (kind === "json") {
      edited[field.name] = JSON.parse(field.value);
    } else {
      edited[field.name] = field.value;
    }
  }
  return edited;
}

function decide(ticket) {
  const id = ticket.dataset.ticket;
  const decisions = {
    approve: () => ({ decision: "approve" }),
    edit: (form) => ({ decision: "edit", arguments: editedArguments(form) }),
    reject: (form) => ({ decision: "reject", message: form.message.value }),
  };
  const done = { approved: "Approved", edited: "Approved as edited", rejected: "Rejected" };
  for (const [name, asked] of Object.entries(decisions)) {
    const form = document.getElementById(name);
    if (!form) {
      continue;
    }
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      // The browser's check of the bounds the schema states, for help (the form is marked
      // novalidate so that the message shows here); the gates check again.
      if (!form.checkValidity()) {
        const invalid = form.querySelector("input:invalid, select:invalid, textarea:invalid");
        say("Check " + invalid.name + ": " + invalid.validationMessage, "refusal");
        return;
      }
      try {
        const challenge = await post("/api/tickets/" + id + "/challenge", asked(form));
        const answer = await assert(challenge);
        const decided = await post("/api/tickets/" + id + "/decide", answer);
        for (const other of ticket.querySelectorAll("form")) {
          other.hidden = true;
        }
        say(done[decided.decided] + ": signed with your passkey; a worker carries it out.", "done");
      } catch (refusal) {
        sayRefused(refusal);
      }
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const signInForm = document.getElementById("signin");
  if (signInForm) {
    signIn(signInForm);
  }
  const create = document.getElementById("create-passkey");
  if (create) {
    enrol(create);
  }
  const ticket = document.getElementById("ticket");
  if (ticket) {
    decide(ticket);
  }
  const signOut = document.getElementById("signout");
  if (signOut) {
    signOut.addEventListener("click", async () => {
      await post("/api/signout", {}).catch(() => {});
      window.location.assign("/signin");
    });
  }
});

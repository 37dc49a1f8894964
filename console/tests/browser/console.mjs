// The console in a real browser: Debian's Chromium, driven by playwright-core, with Chromium's
// virtual authenticator (the DevTools WebAuthn domain) as each reviewer's passkey. The operator's
// steps run the `portcullis` binary. Started by cli/tests/console_browser.rs, which made the
// store, the waiting payouts and the console, and checks afterwards what a worker runs.
//
// Environment: CONSOLE (the console's origin), PORTCULLIS (the binary), STORE, KEYRING, CHROMIUM
// (the browser), TICKETS (JSON: approve, edit, reject, kept), SCREENSHOT (where the ticket page's
// picture goes). Prints one line per check; exits non-zero at the first that fails.

import { execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { chromium } from "playwright-core";

const { CONSOLE, PORTCULLIS, STORE, KEYRING, CHROMIUM, SCREENSHOT } = process.env;
const tickets = JSON.parse(process.env.TICKETS);

function check(holds, what) {
  if (!holds) {
    throw new Error("failed: " + what);
  }
  console.log("ok: " + what);
}

/** Runs the operator's command line. */
function operator(...args) {
  return execFileSync(PORTCULLIS, ["--store", STORE, ...args], { encoding: "utf8" });
}

/** A page of its own (a reviewer's browser) with a passkey authenticator on it. */
async function reviewerPage(browser) {
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  const devtools = await context.newCDPSession(page);
  await devtools.send("WebAuthn.enable", { enableUI: false });
  await devtools.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return page;
}

/** Invites `reviewer` with `role`, enrols a passkey in `page`, and has the operator confirm it. */
async function enrol(page, reviewer, role) {
  const invited = operator("reviewers", "invite", reviewer, "--role", role, "--console", CONSOLE);
  const [first, link] = invited.trim().split("\n");
  const invite = first.split(" ")[1];
  await page.goto(link);
  await page.click("#create-passkey");
  await page.waitForSelector("#enrolled:not([hidden])");
  const fingerprint = (await page.textContent("#fingerprint")).trim();
  check(/^[0-9a-f]{4}(-[0-9a-f]{4}){7}$/.test(fingerprint), `${reviewer} reads a fingerprint`);
  // The link enrols once.
  await page.goto("about:blank");
  await page.goto(link);
  await page.click("#create-passkey");
  await page.waitForSelector("#message.refusal");
  check(
    (await page.textContent("#message")).includes("invite_used"),
    `${reviewer}'s invitation does not enrol a second passkey`,
  );
  const confirmed = operator(
    "reviewers", "confirm", invite, "--fingerprint", fingerprint,
    "--reviewer", reviewer, "--role", role, "--keyring", KEYRING,
  );
  check(
    confirmed.startsWith(`${reviewer} (${role}) decides with passkey`),
    `the operator confirms ${reviewer}: ${confirmed}`,
  );
}

async function signIn(page, reviewer) {
  await page.goto(CONSOLE + "/signin");
  await page.fill("#reviewer", reviewer);
  await page.click("#signin button");
  await page.waitForURL(CONSOLE + "/queue");
  check(true, `${reviewer} signs in with the passkey`);
}

/** Waits for the ticket page's status line and returns it. */
async function status(page, kind) {
  await page.waitForSelector(`#message.${kind}`);
  return (await page.textContent("#message")).trim();
}

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const evil = createServer((request, response) => {
  // A page of another origin that posts a form to the console as soon as it loads.
  response.setHeader("content-type", "text/html");
  response.end(`<!doctype html><form id="f" method="POST" enctype="text/plain"
    action="${CONSOLE}/api/tickets/${tickets.kept}/challenge">
    <input name='{"decision":"approve","padding":"' value='"}'></form>
    <script>document.getElementById("f").submit()</script>`);
});
try {
  const rita = await reviewerPage(browser);
  const carl = await reviewerPage(browser);
  await enrol(rita, "rita", "finance");
  await enrol(carl, "carl", "clerk");

  await signIn(rita, "rita");
  for (const id of Object.values(tickets)) {
    check((await rita.locator(`a[href="/tickets/${id}"]`).count()) === 1, `rita's queue lists ${id}`);
  }

  // Approve the critical payout.
  await rita.goto(`${CONSOLE}/tickets/${tickets.approve}`);
  check((await rita.textContent("h1")).includes("critical risk"), "the ticket shows its risk");
  check(
    (await rita.textContent(".irreversible")).includes("payouts settle at once"),
    "the ticket says the payout cannot be undone",
  );
  check(
    (await rita.textContent(".arguments")).includes("sensitive, not shown"),
    "the IBAN is masked",
  );
  await rita.screenshot({ path: SCREENSHOT, fullPage: true });
  await rita.click("#approve button");
  check((await status(rita, "done")).startsWith("Approved"), "rita approves with her passkey");

  // Edit: a value out of range is refused with the message shown, then a good one passes.
  await rita.goto(`${CONSOLE}/tickets/${tickets.edit}`);
  await rita.fill("#edit-amount_cents", "900000");
  await rita.click("#edit button");
  const help = await status(rita, "refusal");
  check(
    help.startsWith("Check amount_cents"),
    "the page's own check stops an amount over the maximum: " + help,
  );
  // Past the page's check (as a hand-made request would be), the gates' check refuses it.
  await rita.evaluate(() => {
    document.getElementById("edit-amount_cents").removeAttribute("max");
  });
  await rita.click("#edit button");
  await rita.waitForFunction(() =>
    document.getElementById("message").textContent.includes("constraint_violation"),
  );
  const refused = (await rita.textContent("#message")).trim();
  check(
    refused.startsWith("Refused (constraint_violation at /amount_cents)"),
    "the gates refuse the edit with its code and path: " + refused,
  );
  await rita.fill("#edit-amount_cents", "45000");
  await rita.click("#edit button");
  check((await status(rita, "done")).startsWith("Approved as edited"), "rita approves her edit");

  // Reject with a message for the model.
  await rita.goto(`${CONSOLE}/tickets/${tickets.reject}`);
  await rita.fill("#reject-message", "this supplier was paid on Monday");
  await rita.click("#reject button");
  check((await status(rita, "done")).startsWith("Rejected"), "rita rejects with a message");

  // carl, a clerk, neither sees the payout nor can decide it.
  await signIn(carl, "carl");
  check((await carl.locator(`a[href="/tickets/${tickets.kept}"]`).count()) === 0, "carl's queue is empty");
  const page = await carl.goto(`${CONSOLE}/tickets/${tickets.kept}`);
  check(page.status() === 404, "carl's ticket page says there is no such ticket");
  const forged = await carl.evaluate(async (id) => {
    const token = document.querySelector('meta[name="csrf-token"]').content;
    const response = await fetch(`/api/tickets/${id}/challenge`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-csrf-token": token },
      body: JSON.stringify({ decision: "approve" }),
    });
    return { status: response.status, body: await response.json() };
  }, tickets.kept);
  check(
    forged.status === 403 && forged.body.code === "reviewer_not_allowed",
    "carl's forged POST is refused: " + JSON.stringify(forged),
  );

  // A form posted from another origin, in rita's signed-in browser, is refused.
  await new Promise((listening) => evil.listen(0, "127.0.0.1", listening));
  await rita.goto(`http://127.0.0.1:${evil.address().port}/`);
  await rita.waitForURL(`${CONSOLE}/api/tickets/${tickets.kept}/challenge`);
  const answer = await rita.textContent("body");
  check(answer.includes("cross_origin_request"), "a form from another origin is refused: " + answer);
} finally {
  evil.close();
  await browser.close();
}

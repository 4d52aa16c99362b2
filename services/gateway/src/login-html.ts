/**
 * The HTML of the login approval page. Self-contained (no scripts, no external assets: it must
 * work on an offline machine), every interpolated value escaped, and served with a Content
 * Security Policy that allows nothing but its own inline style and posting back to itself.
 */
import { createHash } from 'node:crypto';
import type { Response } from 'express';

/** Escapes text for HTML element content and quoted attribute values. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"'`]/g, (c) => `&#${c.charCodeAt(0)};`);
}

const STYLE = `
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;background:#f4f5f7;color:#1d2330;margin:0}
main{max-width:32rem;margin:4rem auto;background:#fff;border:1px solid #d8dbe2;border-radius:8px;padding:2rem}
h1{font-size:1.3rem;margin-top:0}
label{display:block;font-weight:600;margin:1rem 0 .4rem}
input[type=password]{width:100%;box-sizing:border-box;padding:.55rem;font:inherit;border:1px solid #b9bec9;border-radius:4px}
button{margin-top:1rem;padding:.55rem 1.2rem;font:inherit;font-weight:600;border:0;border-radius:4px;background:#2456d6;color:#fff;cursor:pointer}
.error{background:#fdecec;border:1px solid #e8a5a5;color:#8a1f1f;padding:.6rem;border-radius:4px}
.ok{background:#e9f7ee;border:1px solid #9fd4b0;color:#1c5c33;padding:.6rem;border-radius:4px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem;margin:1rem 0}
dt{color:#5b6272}dd{margin:0;word-break:break-word}
code{background:#f0f1f4;padding:.1rem .3rem;border-radius:3px}
small{color:#5b6272}
`;
const STYLE_HASH = createHash('sha256').update(STYLE).digest('base64');

/** Headers for every login page: no caching, no framing, no referrer, nothing but our style. */
export function setPageHeaders(res: Response): void {
  res.setHeader('Content-Security-Policy', `default-src 'none'; style-src 'sha256-${STYLE_HASH}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`);
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('Cache-Control', 'no-store');
}

/** Sends a whole page. `body` must already be safe HTML; build it with {@link escapeHtml}. */
export function sendPage(res: Response, status: number, title: string, body: string): void {
  setPageHeaders(res);
  res
    .status(status)
    .type('html')
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">` +
        `<meta name="robots" content="noindex"><title>${escapeHtml(title)} · Berth</title><style>${STYLE}</style></head>` +
        `<body><main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>`,
    );
}

export interface ApprovalFormView {
  clientName: string;
  expiresAt: Date;
  host: string;
  csrfToken: string;
  error?: string;
}

/** The approval form. It posts to its own URL (no action attribute: nothing from the request is reflected). */
export function approvalForm(view: ApprovalFormView): string {
  return (
    (view.error ? `<p class="error" role="alert">${escapeHtml(view.error)}</p>` : '') +
    `<p>A program asks to sign in to Berth at <code>${escapeHtml(view.host)}</code>. Approve only if you just ran ` +
    `<code>berth login</code> yourself.</p>` +
    `<dl><dt>Client</dt><dd>${escapeHtml(view.clientName || 'unnamed client')}</dd>` +
    `<dt>Link expires</dt><dd>${escapeHtml(view.expiresAt.toISOString())}</dd></dl>` +
    `<form method="post" autocomplete="off">` +
    `<input type="hidden" name="csrf_token" value="${escapeHtml(view.csrfToken)}">` +
    `<label for="api_key">API key of your tenant</label>` +
    `<input type="password" id="api_key" name="api_key" required autofocus maxlength="200" spellcheck="false">` +
    `<button type="submit">Approve login</button></form>` +
    `<p><small>The program receives a bearer token that acts with this key's tenant and role; it stops working when the key is revoked. The key itself is not shared.</small></p>`
  );
}

export function message(kind: 'error' | 'ok', text: string, hint?: string): string {
  return `<p class="${kind}">${escapeHtml(text)}</p>${hint ? `<p>${escapeHtml(hint)}</p>` : ''}`;
}

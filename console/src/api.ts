/**
 * Calls of the gateway's public API, on the console's own origin. The session cookie (HttpOnly,
 * set by `POST /v1/auth/session`) authenticates them; the CSRF token that came with the session is
 * kept in memory only and sent with every unsafe call. The API key is never kept anywhere.
 */

/** An answer of the API that is not a success, with its `detail` as the message. */
export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The CSRF token of the current session (memory only: a reload gets it back from `GET /v1/auth/session`). */
let csrfToken: string | undefined;

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The CSRF header of the current session, for calls made by other clients (Studio's SDK client). */
export function csrfHeaders(): Record<string, string> {
  return csrfToken ? { 'X-CSRF-Token': csrfToken } : {};
}

/** The text of a `{"detail": …}` answer: a string, or the messages of a 422's entries. */
export function detailText(body: unknown): string | undefined {
  const detail = (body as { detail?: unknown } | undefined)?.detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) return detail.map((entry: { msg?: unknown }) => String(entry.msg)).join('; ');
  return undefined;
}

export interface CallOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  body?: unknown;
  /** Statuses besides 2xx whose JSON body is the answer (e.g. 503 of `/readyz`). */
  accept?: number[];
  signal?: AbortSignal;
}

/** Calls `path` on the gateway and returns its JSON body (undefined for 204). */
export async function call<T>(path: string, options: CallOptions = {}): Promise<T> {
  const method = options.method ?? 'GET';
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (options.body !== undefined) headers['Content-Type'] = 'application/json';
  if (!SAFE_METHODS.has(method) && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  const res = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  if (res.status === 204) return undefined as T;
  const body: unknown = await res.json().catch(() => undefined);
  if (!res.ok && !options.accept?.includes(res.status)) throw new ApiError(res.status, detailText(body) ?? `${res.status} ${res.statusText}`);
  return body as T;
}

/** The session of `/v1/auth/session`: who the console acts as. */
export interface Session {
  tenant_id: string;
  key_name: string;
  csrf_token: string;
  expires_at: string;
}

/** The current session, or null when there is none (401). */
export async function currentSession(signal?: AbortSignal): Promise<Session | null> {
  try {
    const session = await call<Session>('/v1/auth/session', signal ? { signal } : {});
    csrfToken = session.csrf_token;
    return session;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      csrfToken = undefined;
      return null;
    }
    throw error;
  }
}

/** Exchanges an API key for a session cookie; the key is sent once and not kept. */
export async function signIn(apiKey: string): Promise<Session> {
  const session = await call<Session>('/v1/auth/session', { method: 'POST', body: { api_key: apiKey } });
  csrfToken = session.csrf_token;
  return session;
}

export async function signOut(): Promise<void> {
  try {
    await call('/v1/auth/session', { method: 'DELETE' });
  } finally {
    csrfToken = undefined;
  }
}

/**
 * Cookies the gateway reads: the console session (`berth_session`) and the approval page's CSRF
 * cookie. Parsed by hand: two names, no need for a parser dependency.
 */
type Headers = Record<string, string | string[] | undefined>;

/** The console session cookie: HttpOnly, SameSite=Strict, Path=/ (see routes/console-session.ts). */
export const SESSION_COOKIE = 'berth_session';

/** The value of cookie `name` in a request's Cookie header, if sent. */
export function cookieValue(headers: Headers, name: string): string | undefined {
  const header = headers.cookie;
  for (const part of (Array.isArray(header) ? header.join(';') : (header ?? '')).split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) return rest.join('=');
  }
  return undefined;
}

/**
 * The Cookie header without cookie `name` (undefined when nothing is left): what the gateway
 * passes on to an agent server, which must never see the console session.
 */
export function withoutCookie(header: string | string[] | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  const kept = (Array.isArray(header) ? header.join(';') : header)
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part && part.split('=')[0] !== name);
  return kept.length ? kept.join('; ') : undefined;
}

/** Set-Cookie values without those setting cookie `name`: an agent server may not plant a console session. */
export function withoutSetCookie(values: string | string[] | undefined, name: string): string[] | undefined {
  if (values === undefined) return undefined;
  const kept = (Array.isArray(values) ? values : [values]).filter((value) => value.split(';')[0]!.split('=')[0]!.trim() !== name);
  return kept.length ? kept : undefined;
}

/**
 * Whether a browser request comes from the gateway's own pages: what a console session (a cookie,
 * which the browser attaches by itself) needs besides SameSite=Strict. SameSite stops other
 * *sites*; this also stops other origins of the same site (another port, a sibling host).
 */
type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * False when the browser says the request was made by a page of another origin: `Sec-Fetch-Site`
 * other than `same-origin` (or `none`, the user's own navigation), or an `Origin` that is neither
 * the public URL's nor the host the request was sent to. (`Host` is the browser's to set here, not
 * the page's, and a page at another host never holds this host's cookie.) A request without
 * either header is not from a browser page, or is a same-origin GET.
 */
export function fromGatewayPages(headers: Headers, publicUrl: string | undefined): boolean {
  const site = header(headers, 'sec-fetch-site');
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
  const origin = header(headers, 'origin');
  if (origin === undefined) return true;
  if (!URL.canParse(origin)) return false; // includes the opaque "null" of sandboxed pages
  const url = new URL(origin);
  if (publicUrl !== undefined && url.origin === new URL(publicUrl).origin) return true;
  return url.host === header(headers, 'host');
}

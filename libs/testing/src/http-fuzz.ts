/**
 * Request fuzzing (fast-check) shared by the fuzz suites of every Berth HTTP server: random methods,
 * paths of a route table (from a server's /openapi.json) with random parameters, random query
 * strings, JSON and non-JSON bodies, content types and encodings, credentials and other headers,
 * sent exactly as generated. `fuzzRequests` runs a property that no answer is a 5xx (a 503 with
 * Retry-After, a dependency that is down, is a refusal, not a failure) and counts the statuses.
 */
import http from 'node:http';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';

export interface FuzzRoute {
  method: string;
  /** Template, e.g. `/threads/{thread_id}/state`. */
  path: string;
  query: string[];
}

export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer | undefined;
}

export interface FuzzAnswer {
  status: number;
  text: string;
  /** Its Retry-After header: a 503 with one is a dependency that is down, said the way clients expect. */
  retryAfter: string | undefined;
}

/** Routes of a server's OpenAPI document, but those whose path matches `skip`. */
export async function routesOf(baseUrl: string, skip?: RegExp): Promise<FuzzRoute[]> {
  const doc = (await (await fetch(`${baseUrl}/openapi.json`)).json()) as {
    paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>>;
  };
  return Object.entries(doc.paths)
    .filter(([path]) => !skip?.test(path))
    .flatMap(([path, operations]) =>
      Object.entries(operations).map(([method, op]) => ({
        method: method.toUpperCase(),
        path,
        query: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
      })),
    );
}

/** Sends exactly what was generated (fetch refuses bodies on GET and normalizes paths). */
export function sendRaw(baseUrl: string, r: FuzzRequest): Promise<FuzzAnswer> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: r.method,
        path: url.pathname.replace(/\/$/, '') + r.path,
        // Node frames bodies of GET/HEAD/DELETE only with an explicit length.
        headers: r.body ? { ...r.headers, 'content-length': String(r.body.length) } : r.headers,
        timeout: 15_000,
      },
      (res) => {
        // An event stream (a followed log, a watched deployment) may run for as long as its
        // subject lives: its status is its answer.
        if (String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
          resolve({ status: res.statusCode ?? 0, text: '', retryAfter: res.headers['retry-after'] });
          req.destroy();
          return;
        }
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), retryAfter: res.headers['retry-after'] }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer to ${r.method} ${r.path}`)));
    req.on('error', reject);
    req.end(r.body);
  });
}

/** Percent-encodes anything; lone surrogates become the WTF-8 bytes that do not decode as UTF-8. */
export const pct = (s: string) =>
  s
    .replace(/\p{Surrogate}/gu, '\uFFFD')
    .split('\uFFFD')
    .map(encodeURIComponent)
    .join('%ED%A0%80');

/** Text values that have broken servers before: NULs, bad encodings, huge, numeric, empty. */
export const nastyText = fc.oneof(
  fc.constantFrom('', '%00', 'a%00b', '%ED%A0%80', '%ZZ', '%', '..', '%2F', '%2e%2e', '-1', '0', '1e309', 'null', 'true', 'x'.repeat(2000)),
  fc.string({ unit: 'binary', maxLength: 20 }).map(pct),
);

const nested = (depth: number) => `${'['.repeat(depth)}${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}${']'.repeat(depth)}`;

/** JSON bodies: any JSON, objects of the given keys with these (or any) values, deep nesting, broken JSON. */
export function jsonBodies(keys: fc.Arbitrary<string>, values: fc.Arbitrary<unknown>): fc.Arbitrary<string> {
  return fc.oneof(
    fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
    fc.dictionary(keys, fc.oneof(fc.jsonValue({ maxDepth: 3 }), values), { maxKeys: 5 }).map((v) => JSON.stringify(v)),
    fc.integer({ min: 60, max: 6000 }).map(nested),
    fc.constantFrom('{"values":"x"}', '{"name":"\\u0000"}', '{"metadata":{"\\ud800":1}}', '{', '{"a":1,}', '[]', 'null', '"x"', '1', '{"__proto__":{"x":1}}'),
  );
}

export const contentTypes = fc.constantFrom(
  undefined,
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=latin1',
  'application/json; charset=utf-16',
  'application/json; charset=bogus',
  'application/vnd.api+json',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/gzip',
  '*/*',
  'garbage',
);

/** A content-encoding header and whether the body really is encoded that way. */
export const encodings = fc.record({
  name: fc.constantFrom(undefined, 'identity', 'gzip', 'deflate', 'br', 'GZIP', 'gzip, gzip', 'compress', 'zstd', 'x-unknown'),
  applied: fc.boolean(),
});

function encode(body: Buffer, name: string | undefined): Buffer {
  switch (name?.toLowerCase()) {
    case 'gzip':
      return gzipSync(body);
    case 'deflate':
      return deflateSync(body);
    case 'br':
      return brotliCompressSync(body);
    default:
      return body;
  }
}

export interface RequestShape {
  /** Values of `{path parameters}`: ids and names that exist, random UUIDs, `nasty` text. */
  params: fc.Arbitrary<string>;
  /** JSON bodies (see jsonBodies). */
  json: fc.Arbitrary<string>;
  /** Other bodies, e.g. multipart. */
  extraBodies?: fc.Arbitrary<{ body: Buffer; contentType: string }>;
  /** Whether a request carries the credentials. @default fc.boolean() */
  authenticated?: fc.Arbitrary<boolean>;
  /** @default content types good, odd and broken */
  contentTypes?: fc.Arbitrary<string | undefined>;
  /** @default content encodings good, odd and broken, applied or not */
  encodings?: fc.Arbitrary<{ name: string | undefined; applied: boolean }>;
  /** Query parameters (name, value; percent-encoded). @default up to four of the route's own names or any, with nasty values */
  query?: fc.Arbitrary<[string, string][]>;
}

export function requests(routes: FuzzRoute[], credentials: () => Record<string, string>, shape: RequestShape): fc.Arbitrary<FuzzRequest> {
  const bodies = fc.oneof(
    { weight: 1, arbitrary: fc.constant(undefined) },
    { weight: 5, arbitrary: shape.json.map((s) => ({ body: Buffer.from(s), contentType: undefined })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((b) => ({ body: Buffer.from(b), contentType: undefined })) },
    ...(shape.extraBodies ? [{ weight: 2, arbitrary: shape.extraBodies as fc.Arbitrary<{ body: Buffer; contentType: string | undefined }> }] : []),
  );
  return fc
    .record({
      route: fc.constantFrom(...routes),
      otherMethod: fc.oneof(
        { weight: 4, arbitrary: fc.constant(null) },
        { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD') },
      ),
      param: shape.params,
      query: shape.query ?? fc.array(fc.tuple(fc.oneof(fc.constant('limit'), fc.string({ maxLength: 8 }).map(pct), nastyText), nastyText), { maxLength: 4 }),
      routeQuery: fc.boolean(),
      body: bodies,
      contentType: shape.contentTypes ?? contentTypes,
      encoding: shape.encodings ?? encodings,
      authenticated: shape.authenticated ?? fc.boolean(),
      extra: fc.dictionary(
        fc.constantFrom('x-request-id', 'x-tenant-id', 'authorization', 'accept', 'x-api-key', 'last-event-id'),
        fc.string({ unit: 'grapheme-ascii', maxLength: 40 }),
        { maxKeys: 2 },
      ),
    })
    .map((g) => {
      const path = g.route.path.replace(/\{[^}]+\}/g, () => g.param);
      const names = g.routeQuery ? g.route.query : [];
      const query = g.query.map(([k, v], i) => `${names[i] ?? k}=${v}`).join('&');
      const headers: Record<string, string> = { ...(g.authenticated ? credentials() : {}) };
      // Header values must be printable for node's client; odd ones are what servers get anyway.
      for (const [k, v] of Object.entries(g.extra)) headers[k] = v.replace(/[^\x20-\x7e]/g, '');
      const contentType = g.body?.contentType ?? g.contentType;
      if (contentType !== undefined) headers['content-type'] = contentType;
      if (g.encoding.name !== undefined) headers['content-encoding'] = g.encoding.name;
      const body = g.body && g.encoding.applied ? encode(g.body.body, g.encoding.name) : g.body?.body;
      return { method: g.otherMethod ?? g.route.method, path: query ? `${path}?${query}` : path, headers, body };
    });
}

/**
 * Runs the property: no answer is a 5xx but a 503 with Retry-After and those `allowed` says are
 * expected. Returns how many answers had each status.
 */
export async function fuzzRequests(
  baseUrl: string,
  arbitrary: fc.Arbitrary<FuzzRequest>,
  options: { seed: number; numRuns: number; allowed?: (r: FuzzRequest, res: FuzzAnswer) => boolean },
): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(arbitrary, async (r) => {
      const res = await sendRaw(baseUrl, r);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      const refusal = (res.status === 503 && res.retryAfter !== undefined) || options.allowed?.(r, res);
      if (res.status >= 500 && !refusal) throw new Error(`${r.method} ${r.path} answered ${res.status}: ${res.text.slice(0, 300)}`);
    }),
    { seed: options.seed, numRuns: options.numRuns, endOnFailure: true },
  );
  return statuses;
}

/**
 * Whether some requests succeeded and some were refused as invalid: a fuzzer is no use if
 * everything bounces off authentication or routing (tests expect both true).
 */
export function handledStatuses(statuses: Map<number, number>): { succeeded: boolean; invalid: boolean } {
  const count = (test: (status: number) => boolean) => [...statuses].filter(([s]) => test(s)).reduce((n, [, c]) => n + c, 0);
  return { succeeded: count((s) => s < 300) > 0, invalid: count((s) => s === 422) > 0 };
}

/**
 * Request fuzzing for any Berth HTTP server (fast-check, fixed seeds): random methods, the paths of
 * the server's route table (its `/openapi.json`) with random parameters, random query strings, JSON
 * and non-JSON bodies, content types and encodings, credentials and other headers. No answer may
 * be a 5xx (unless the caller says that one is a refusal, not a failure), and the statuses seen are
 * returned so a test can check that requests got past authentication and routing.
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

/** The routes of a server's OpenAPI document (`{baseUrl}/openapi.json`), but those `skip` matches. */
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
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), retryAfter: res.headers['retry-after'] }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer to ${r.method} ${r.path}`)));
    req.on('error', reject);
    req.end(r.body);
  });
}

/** Percent-encodes anything; lone surrogates become the WTF-8 bytes that do not decode as UTF-8. */
const pct = (s: string) => s.replace(/\p{Surrogate}/gu, '\uFFFD').split('\uFFFD').map(encodeURIComponent).join('%ED%A0%80');

/** Text values that have broken servers before: NULs, bad encodings, huge, numeric, empty. */
export const nastyText = fc.oneof(
  fc.constantFrom('', '%00', 'a%00b', '%ED%A0%80', '%ZZ', '%', '..', '%2F', '%2e%2e', '-1', '0', '1e309', 'null', 'true', 'x'.repeat(2000)),
  fc.string({ unit: 'binary', maxLength: 20 }).map(pct),
);

const jsonKeys = fc.constantFrom(
  'assistant_id', 'graph_id', 'input', 'metadata', 'values', 'limit', 'offset', 'name', 'thread_id', 'config', 'context', 'before',
  'checkpoint', 'checkpoint_id', 'as_node', 'expires_in', 'source', 'status', 'ids', 'command', 'stream_mode', 'version', 'if_exists', 'role',
  // Sandboxes, deployments, exports.
  'image', 'resources', 'memory', 'cpu', 'storage', 'template_name', 'snapshot_id', 'vcpus', 'mem_bytes', 'fs_capacity_bytes', 'timeout',
  'path', 'env', 'cwd', 'shell', 'secrets', 'source_config', 'destination_type', 'config', 'credentials', 'session_id', 'start_time', 'end_time',
);
const nested = (depth: number) => `${'['.repeat(depth)}${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}${']'.repeat(depth)}`;

const jsonBodies = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc
    .dictionary(
      jsonKeys,
      fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.constantFrom('echo', 'agent', '\u0000', '\ud800', -1, 1e308, '999Ei', '1e400m', '-5Gi', 'NaN')),
      { maxKeys: 5 },
    )
    .map((v) => JSON.stringify(v)),
  fc.integer({ min: 60, max: 6000 }).map(nested),
  fc.constantFrom('{"values":"x"}', '{"name":"\\u0000"}', '{"metadata":{"\\ud800":1}}', '{', '{"a":1,}', '[]', 'null', '"x"', '1', '{"__proto__":{"x":1}}'),
);

const bodies = fc.oneof(
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 5, arbitrary: jsonBodies.map((s) => Buffer.from(s)) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)) },
);

const contentTypes = fc.constantFrom(
  undefined, 'application/json', 'application/json; charset=utf-8', 'application/json; charset=latin1', 'application/json; charset=utf-16',
  'application/json; charset=bogus', 'application/vnd.api+json', 'text/plain', 'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x', 'application/gzip', 'application/octet-stream', '*/*', 'garbage',
);

/** A content-encoding header and whether the body really is encoded that way. */
const encodings = fc.record({
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

export interface FuzzOptions {
  baseUrl: string;
  routes: FuzzRoute[];
  /** Headers of an authenticated request (half of them are sent without). */
  credentials: () => Record<string, string>;
  /** Values for path parameters besides random UUIDs and nasty text: ids that exist, names of graphs. */
  params?: readonly string[];
  seed: number;
  numRuns: number;
  /**
   * A 5xx this returns true for is a refusal the test expects, not a failure. A 503 with
   * Retry-After (a dependency that is down or not ready) always is.
   */
  expected5xx?: (request: FuzzRequest, answer: FuzzAnswer) => boolean;
}

function requests(options: FuzzOptions): fc.Arbitrary<FuzzRequest> {
  const known = options.params?.length ? [fc.constantFrom(...options.params)] : [];
  return fc
    .record({
      route: fc.constantFrom(...options.routes),
      otherMethod: fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD') }),
      param: fc.oneof(...known, fc.uuid(), nastyText),
      query: fc.array(fc.tuple(fc.oneof(fc.constant('limit'), fc.string({ maxLength: 8 }).map(pct), nastyText), nastyText), { maxLength: 4 }),
      routeQuery: fc.boolean(),
      body: bodies,
      contentType: contentTypes,
      encoding: encodings,
      authenticated: fc.boolean(),
      extra: fc.dictionary(fc.constantFrom('x-request-id', 'x-tenant-id', 'authorization', 'accept', 'x-api-key', 'last-event-id'), fc.string({ unit: 'grapheme-ascii', maxLength: 40 }), { maxKeys: 2 }),
    })
    .map((g) => {
      const path = g.route.path.replace(/\{[^}]+\}/g, () => g.param);
      const names = g.routeQuery ? g.route.query : [];
      const query = g.query.map(([k, v], i) => `${names[i] ?? k}=${v}`).join('&');
      const headers: Record<string, string> = { ...(g.authenticated ? options.credentials() : {}) };
      // Header values must be printable for node's client; odd ones are what servers get anyway.
      for (const [k, v] of Object.entries(g.extra)) headers[k] = v.replace(/[^\x20-\x7e]/g, '');
      if (g.contentType !== undefined) headers['content-type'] = g.contentType;
      if (g.encoding.name !== undefined) headers['content-encoding'] = g.encoding.name;
      const body = g.body && g.encoding.applied ? encode(g.body, g.encoding.name) : g.body;
      return { method: g.otherMethod ?? g.route.method, path: query ? `${path}?${query}` : path, headers, body };
    });
}

/** Runs the property (it throws on the first unexpected 5xx); returns how many answers had each status. */
export async function fuzzRoutes(options: FuzzOptions): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(requests(options), async (r) => {
      const res = await sendRaw(options.baseUrl, r);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      const refusal = (res.status === 503 && res.retryAfter !== undefined) || options.expected5xx?.(r, res);
      if (res.status >= 500 && !refusal) throw new Error(`${r.method} ${r.path} answered ${res.status}: ${res.text.slice(0, 300)}`);
    }),
    { seed: options.seed, numRuns: options.numRuns, endOnFailure: true },
  );
  return statuses;
}

/** How many answers had a status `test` accepts. */
export function countStatuses(statuses: Map<number, number>, test: (status: number) => boolean): number {
  return [...statuses].filter(([status]) => test(status)).reduce((n, [, count]) => n + count, 0);
}

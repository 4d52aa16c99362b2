import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ConflictError, NotFoundError, PermissionDeniedError, UnauthenticatedError } from '@berth/errors';
import { PassThrough } from 'node:stream';
import { createLogger } from '@berth/log';
import { until } from '@berth/testing';
import { z } from 'zod';
import { Api } from './api.js';
import { createApp, listen, type RunningServer } from './app.js';
import { docsRouter } from './docs.js';
import { openApiDocument } from './openapi.js';
import { SseWriter } from './sse.js';

// Response schemas strip what they do not declare.
const Item = z.object({ id: z.string(), name: z.string(), tags: z.array(z.string()) });
const items = new Map<string, z.infer<typeof Item>>();

// Two kinds of credential: an API key `k` and a token `t`; each route says which it takes.
const api = new Api<{ user: string }, 'key' | 'token'>({
  authenticate: async (req, accepts) => {
    const kind = req.headers['x-api-key'] === 'k' ? 'key' : req.headers['x-token'] === 't' ? 'token' : undefined;
    if (!kind) throw new UnauthenticatedError('Missing or invalid API key');
    if (!accepts.includes(kind)) throw new PermissionDeniedError(`This route does not take a ${kind}`);
    return { user: kind === 'key' ? 'u1' : 'u2' };
  },
});
api
  .route({
    method: 'post',
    path: '/items',
    access: ['key'],
    summary: 'Create an item',
    body: z.strictObject({
      id: z.string().min(1),
      name: z.string(),
      tags: z.array(z.string()).default([]),
      nested: z.strictObject({ n: z.number().int() }).optional(),
    }),
    status: 201,
    response: Item,
    errors: [409],
    handler: ({ body }) => {
      if (items.has(body.id)) throw new ConflictError(`Item ${body.id} already exists`);
      const item = { id: body.id, name: body.name, tags: body.tags };
      items.set(item.id, item);
      // An undeclared field must not reach the client.
      return { ...item, secret: 'hidden' } as z.input<typeof Item>;
    },
  })
  .route({
    method: 'get',
    path: '/items/{item_id}',
    access: ['key'],
    summary: 'Get an item',
    params: z.strictObject({ item_id: z.string() }),
    query: z.strictObject({ verbose: z.enum(['true', 'false']).optional() }),
    response: Item,
    errors: [404],
    handler: ({ params }) => {
      const item = items.get(params.item_id);
      if (!item) throw new NotFoundError(`Item ${params.item_id} not found`);
      return item;
    },
  })
  .route({
    method: 'delete',
    path: '/items/{item_id}',
    access: ['key'],
    summary: 'Delete an item',
    params: z.strictObject({ item_id: z.string() }),
    handler: ({ params }) => {
      items.delete(params.item_id);
    },
  })
  .route({
    method: 'get',
    path: '/whoami',
    access: ['key', 'token'],
    summary: 'Who is calling',
    response: z.strictObject({ user: z.string() }),
    handler: ({ auth }) => ({ user: auth.user }),
  })
  .route({
    method: 'get',
    path: '/healthz',
    access: 'public',
    summary: 'Health',
    response: z.strictObject({ ok: z.boolean() }),
    handler: () => ({ ok: true }),
  })
  .route({
    method: 'post',
    path: '/notes',
    access: 'public',
    summary: 'Echo a note (public: no credential needed)',
    body: z.strictObject({ text: z.string().optional() }),
    response: z.strictObject({ text: z.string().optional() }),
    handler: ({ body }) => body,
  })
  .route({
    method: 'post',
    path: '/raw',
    access: 'public',
    summary: 'Count the bytes of a body the handler reads itself',
    consumes: ['application/octet-stream'],
    response: z.strictObject({ bytes: z.number() }),
    handler: async ({ req }) => {
      let bytes = 0;
      for await (const chunk of req) bytes += (chunk as Buffer).length;
      return { bytes };
    },
  })
  .route({
    method: 'get',
    path: '/events',
    access: 'public',
    summary: 'Stream events',
    events: 'A metadata event, then values',
    handler: ({ res }) => {
      const sse = new SseWriter(res);
      sse.send({ event: 'metadata', data: { run_id: 'r1' }, id: '1' });
      sse.send({ event: 'values', data: { text: 'line\nbreak' } });
      sse.end();
    },
  });

let server: RunningServer;
const call = (path: string, init: RequestInit & { json?: unknown } = {}) =>
  fetch(`${server.url}${path}`, {
    ...init,
    headers: { 'x-api-key': 'k', ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}), ...(init.headers as object) },
    body: init.json !== undefined ? JSON.stringify(init.json) : init.body,
  });

/** The request log's lines. */
const logLines: Record<string, unknown>[] = [];

beforeAll(async () => {
  const doc = () => openApiDocument([api], { title: 'Test', version: '1', securitySchemes: { ApiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key' } } });
  const destination = new PassThrough();
  destination.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n')) if (line) logLines.push(JSON.parse(line) as Record<string, unknown>);
  });
  server = await listen(createApp({ logger: createLogger({ name: 'test', destination }), routes: [docsRouter(doc, 'Test'), api.router()] }), '127.0.0.1', 0);
});
afterAll(() => server.close());

describe('Api request validation', () => {
  it('creates with defaults and answers with the declared fields only', async () => {
    const res = await call('/items', { method: 'POST', json: { id: 'a', name: 'first' } });
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ id: 'a', name: 'first', tags: [] });
  });

  it('refuses unknown fields, missing fields and wrong types with one 422 listing each', async () => {
    const res = await call('/items', { method: 'POST', json: { name: 5, extra: true, nested: { n: 1.5, more: 1 } } });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { detail: { loc: unknown[]; type: string; msg: string }[] };
    expect(body.detail).toEqual(
      expect.arrayContaining([
        { loc: ['body', 'id'], msg: 'Field required', type: 'missing' },
        expect.objectContaining({ loc: ['body', 'name'], type: 'string_type' }),
        { loc: ['body', 'extra'], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' },
        { loc: ['body', 'nested', 'more'], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' },
        expect.objectContaining({ loc: ['body', 'nested', 'n'], type: 'int_type' }),
      ]),
    );
    expect(body.detail).toHaveLength(5);
  });

  it('answers malformed JSON with a 422 json_invalid entry', async () => {
    const res = await call('/items', { method: 'POST', body: '{"id": ', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { detail: { loc: unknown[]; type: string }[] };
    expect(body.detail[0]).toMatchObject({ loc: ['body'], type: 'json_invalid' });
  });

  it('treats a missing body as a missing body, not as an empty object, when fields are required', async () => {
    const res = await call('/items', { method: 'POST' });
    expect(res.status).toBe(422);
    expect(((await res.json()) as { detail: unknown[] }).detail).toEqual([{ loc: ['body'], msg: 'Field required', type: 'missing' }]);
  });

  it('refuses unknown query parameters', async () => {
    await call('/items', { method: 'POST', json: { id: 'q', name: 'q' } });
    expect((await call('/items/q?verbose=true')).status).toBe(200);
    const res = await call('/items/q?verbos=true');
    expect(res.status).toBe(422);
    expect(((await res.json()) as { detail: unknown[] }).detail).toEqual([
      { loc: ['query', 'verbos'], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' },
    ]);
  });
});

describe('Api access', () => {
  it('gives authenticate the credentials the route declares: another kind is refused, a declared one passes', async () => {
    const token = { 'x-api-key': '', 'x-token': 't' };
    const refused = await call('/items/a', { headers: token });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual({ detail: 'This route does not take a token' });
    const whoami = await call('/whoami', { headers: token });
    expect(whoami.status).toBe(200);
    expect(await whoami.json()).toEqual({ user: 'u2' });
    expect((await call('/healthz', { headers: { 'x-api-key': 'wrong' } })).status).toBe(200);
  });

  it('refuses at registration a route that does not say who may call it, or takes credentials nobody checks', () => {
    const route = { method: 'get', path: '/x', summary: 'x', handler: () => undefined } as const;
    // @ts-expect-error access is required
    expect(() => new Api<unknown, 'key'>({ authenticate: async () => ({}) }).route(route)).toThrow(
      "GET /x: say who may call it (access: 'public', or the kinds of credential it takes)",
    );
    // @ts-expect-error an empty list names nobody
    expect(() => new Api<unknown, 'key'>({ authenticate: async () => ({}) }).route({ ...route, access: [] })).toThrow('GET /x: say who may call it');
    expect(() => new Api<unknown, 'key'>().route({ ...route, access: ['key'] })).toThrow('GET /x: takes credentials, but this Api authenticates nobody');
  });
});

describe('request log', () => {
  it('records the template of the route that served a request beside its URL', async () => {
    await call('/items', { method: 'POST', json: { id: 'logged', name: 'x' } });
    await call('/items/logged?verbose=true', { headers: { 'x-request-id': 'log-template-1' } });
    await call('/nowhere', { headers: { 'x-request-id': 'log-template-2' } });
    // A line is written when the response closes, which may come just after the client has it.
    const line = (id: string) => until(`the log line of ${id}`, () => logLines.find((l) => (l['req'] as { id: string }).id === id)?.['req'], 5000, 10);
    expect(await line('log-template-1')).toEqual({ id: 'log-template-1', method: 'GET', url: '/items/logged?verbose=true', route: '/items/{item_id}' });
    expect(await line('log-template-2')).toEqual({ id: 'log-template-2', method: 'GET', url: '/nowhere' });
  });
});

describe('Api errors', () => {
  it('maps domain errors to 404/409 with a detail string', async () => {
    const missing = await call('/items/nope');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ detail: 'Item nope not found' });
    await call('/items', { method: 'POST', json: { id: 'dup', name: 'x' } });
    const again = await call('/items', { method: 'POST', json: { id: 'dup', name: 'x' } });
    expect(again.status).toBe(409);
    expect(await again.json()).toEqual({ detail: 'Item dup already exists' });
  });

  it('answers 401 before validating anything when authentication fails', async () => {
    const res = await call('/items', { method: 'POST', json: { bad: 1 }, headers: { 'x-api-key': 'wrong' } });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ detail: 'Missing or invalid API key' });
  });

  it('answers unknown paths with JSON 404 and known paths with another method with 405', async () => {
    const unknown = await call('/nowhere');
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ detail: 'Not Found' });
    const wrongMethod = await call('/whoami', { method: 'PUT' });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('GET');
  });

  it('returns 204 without a body for routes without a response schema', async () => {
    const res = await call('/items/a', { method: 'DELETE' });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
  });

  it('echoes a sane X-Request-Id and makes one up otherwise', async () => {
    expect((await call('/healthz', { headers: { 'x-request-id': 'abc-123' } })).headers.get('x-request-id')).toBe('abc-123');
    expect((await call('/healthz', { headers: { 'x-request-id': 'bad id with spaces' } })).headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('SSE', () => {
  it('writes one compact data line per event, with ids when given', async () => {
    const res = await call('/events');
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(await res.text()).toBe('id: 1\nevent: metadata\ndata: {"run_id":"r1"}\n\nevent: values\ndata: {"text":"line\\nbreak"}\n\n');
  });
});

describe('OpenAPI', () => {
  it('documents every route from its schemas, with security on authenticated ones', async () => {
    const doc = (await (await call('/openapi.json')).json()) as {
      paths: Record<
        string,
        Record<
          string,
          {
            requestBody?: { content: Record<string, { schema: { required: string[]; additionalProperties: boolean } }> };
            parameters: { name: string; in: string }[];
            responses: Record<string, unknown>;
            security?: unknown;
          }
        >
      >;
    };
    const create = doc.paths['/items']!.post!;
    expect(create.requestBody!.content['application/json']!.schema).toMatchObject({ required: ['id', 'name'], additionalProperties: false });
    expect(Object.keys(create.responses).sort()).toEqual(['201', '401', '403', '409', '422']);
    expect(create.security).toEqual([{ ApiKey: [] }]);
    const get = doc.paths['/items/{item_id}']!.get!;
    expect(get.parameters).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'item_id', in: 'path' }), expect.objectContaining({ name: 'verbose', in: 'query' })]),
    );
    expect(doc.paths['/healthz']!.get!.security).toBeUndefined();
    expect(doc.paths['/events']!.get!.responses).toEqual({
      '200': { description: 'A metadata event, then values', content: { 'text/event-stream': { schema: { type: 'string' } } } },
    });
    const page = await call('/docs');
    expect(await page.text()).toContain('swagger-ui-bundle.js');
    expect((await call('/docs/assets/swagger-ui-bundle.js')).status).toBe(200);
  });

  it('documents the other success statuses a handler may choose', () => {
    const doc = openApiDocument(
      [
        new Api().route({
          method: 'post',
          path: '/jobs/{id}/cancel',
          access: 'public',
          summary: 'Cancel',
          status: 202,
          otherStatuses: { 204: 'with wait=true' },
          handler: () => undefined,
        }),
      ],
      { title: 'T', version: '1' },
    ) as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
    expect(doc.paths['/jobs/{id}/cancel']!.post!.responses).toEqual({ '202': { description: 'Success' }, '204': { description: 'Success, with wait=true' } });
  });

  it('keeps named schemas (zod .meta({ id }), recursive ones too) in components, referenced from the operations', () => {
    const Node = z
      .strictObject({
        name: z.string(),
        get children(): z.ZodArray<typeof Node> {
          return z.array(Node);
        },
      })
      .meta({ id: 'TestNode' });
    const doc = openApiDocument(
      [
        new Api()
          .route({ method: 'get', path: '/tree', access: 'public', summary: 'Tree', response: Node, handler: () => ({ name: 'root', children: [] }) })
          .route({ method: 'get', path: '/trees', access: 'public', summary: 'Trees', response: z.array(Node), handler: () => [] }),
      ],
      { title: 'T', version: '1' },
    ) as {
      paths: Record<string, Record<string, { responses: Record<string, { content: Record<string, { schema: unknown }> }> }>>;
      components: { schemas: Record<string, unknown> };
    };
    const schemaOf = (path: string) => doc.paths[path]!.get!.responses['200']!.content['application/json']!.schema;
    expect(schemaOf('/tree')).toEqual({ $ref: '#/components/schemas/TestNode' });
    expect(schemaOf('/trees')).toEqual({ type: 'array', items: { $ref: '#/components/schemas/TestNode' } });
    expect(doc.components.schemas.TestNode).toMatchObject({
      type: 'object',
      properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#/components/schemas/TestNode' } } },
    });
  });

  it('rejects a non-strict top-level body schema at registration', () => {
    expect(() =>
      new Api().route({ method: 'post', path: '/x', access: 'public', summary: 'x', body: z.object({ a: z.string() }), handler: () => undefined }),
    ).toThrow(/strict object schema/);
  });
});

describe('bodies sent without Content-Type: application/json', () => {
  const body = JSON.stringify({ text: 'hello' });
  /** No content type at all: fetch sets none for bytes. */
  const untyped = (text: string) => new TextEncoder().encode(text);

  it('are read as JSON from a request with a credential header', async () => {
    for (const headers of [{ 'x-api-key': 'k' }, { authorization: 'Bearer t' }] as Record<string, string>[]) {
      for (const init of [{ body }, { body: untyped(body) }, { body, headers: { 'content-type': 'application/x-www-form-urlencoded' } }] as {
        body: string | Uint8Array;
        headers?: Record<string, string>;
      }[]) {
        const res = await fetch(`${server.url}/notes`, { method: 'POST', body: init.body, headers: { ...headers, ...init.headers } });
        expect(await res.json()).toEqual({ text: 'hello' });
      }
    }
    // The same checks as JSON: an unknown field is a 422, malformed JSON too.
    const unknown = await call('/items', { method: 'POST', body: JSON.stringify({ id: 'x', name: 'n', extra: 1 }) });
    expect(unknown.status).toBe(422);
    expect(await unknown.json()).toEqual({ detail: [{ loc: ['body', 'extra'], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' }] });
    const malformed = await call('/items', { method: 'POST', body: untyped('{"id": ') });
    expect(await malformed.json()).toMatchObject({ detail: [{ loc: ['body'], type: 'json_invalid' }] });
  });

  it('are refused with 415 naming application/json from a request without one', async () => {
    for (const init of [{ body }, { body: untyped(body) }]) {
      const res = await fetch(`${server.url}/notes`, { method: 'POST', body: init.body });
      expect(res.status).toBe(415);
      expect(await res.json()).toEqual({ detail: expect.stringContaining('application/json') });
    }
    // Even where the route takes no body, and before authentication.
    const res = await fetch(`${server.url}/items/a`, { method: 'DELETE', body });
    expect(res.status).toBe(415);
  });

  it('are left to routes that read their own body, and an empty body is no body', async () => {
    const raw = await fetch(`${server.url}/raw`, { method: 'POST', body: untyped('12345') });
    expect(await raw.json()).toEqual({ bytes: 5 });
    const empty = await fetch(`${server.url}/notes`, { method: 'POST', body: '' });
    expect(await empty.json()).toEqual({});
  });
});

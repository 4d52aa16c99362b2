/**
 * The project's own HTTP routes (`http.app`), a Hono app:
 * - middleware on every request, built-in routes included: `x-shop-mw: on` on the answer;
 *   `?closed` answers 503 `{status: "closed"}` instead of the route;
 * - `GET /shop/items/:id` → `{item, tag}` (`tag` from header `x-tag`, echoed as `x-tag-out`);
 * - `POST /shop/orders` → `{received: <body>}` (201);
 * - `GET /threads/special` → `{special: true}` (a path the built-in API has no route for);
 * - `GET /shop/teapot` throws `HTTPException(418)`; `GET /shop/crash` throws an Error;
 * - `GET /shop/ticks` streams `tick 0`…`tick 4` lines 30 ms apart;
 * - `GET /shop/cookies` sets two cookies;
 * - `POST /shop/hooks` keeps the body and `webhook-id` header it gets (a run's relative webhook), `GET /shop/hooks/last` answers them;
 * - `GET /shop/whoami` → `c.get('auth')` (`{user, scopes}` under custom auth, else null);
 * - `GET /shop/loopback` runs `echo` through `new Client()` (no apiUrl) → `{reply}`;
 * - its `notFound` is never used: unknown paths are the server's 404.
 */
import { Client } from '@langchain/langgraph-sdk';
import { Hono } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { streamText } from 'hono/streaming';

let lastHook: { id: string | null; body: unknown } | null = null;

/** What the server sets for custom routes under custom auth, as the LangGraph JS server does. */
type Variables = { auth?: { user: { identity: string }; scopes: string[] } };

export const app = new Hono<{ Variables: Variables }>()
  .use(async (c, next) => {
    if (c.req.query('closed') !== undefined) return c.json({ status: 'closed' }, 503);
    await next();
    c.header('x-shop-mw', 'on');
  })
  .get('/shop/items/:id', (c) => c.json({ item: c.req.param('id'), tag: c.req.header('x-tag') ?? null }, 200, { 'x-tag-out': c.req.header('x-tag') ?? '' }))
  .post('/shop/orders', async (c) => c.json({ received: await c.req.json() }, 201))
  .get('/threads/special', (c) => c.json({ special: true }))
  .get('/shop/teapot', () => {
    throw new HTTPException(418, { message: 'short and stout' });
  })
  .get('/shop/crash', () => {
    throw new Error('the shop broke');
  })
  .get('/shop/ticks', (c) =>
    streamText(c, async (stream) => {
      for (let i = 0; i < 5; i += 1) {
        await stream.writeln(`tick ${i}`);
        await stream.sleep(30);
      }
    }),
  )
  .get('/shop/cookies', (c) => {
    c.header('set-cookie', 'a=1; Path=/', { append: true });
    c.header('set-cookie', 'b=2; Path=/', { append: true });
    return c.text('two cookies');
  })
  .post('/shop/hooks', async (c) => {
    lastHook = { id: c.req.header('webhook-id') ?? null, body: await c.req.json() };
    return c.json({ ok: true });
  })
  .get('/shop/hooks/last', (c) => c.json(lastHook))
  .get('/shop/whoami', (c) => c.json(c.get('auth') ?? null))
  .get('/shop/loopback', async (c) => {
    const result = (await new Client().runs.wait(null, 'echo', { input: { messages: [{ role: 'user', content: 'via loopback' }] } })) as {
      messages: { content: string }[];
    };
    return c.json({ reply: result.messages.at(-1)?.content });
  })
  .notFound((c) => c.json({ status: 'shop-not-found' }));
